package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/store/sqlite"
)

// TestAccountsShowTheirOwnerInACluster: with partitions, each account
// names the node holding its partition's lease (the last acquisition),
// in the account API and the dashboard; an account whose partition no
// node ever acquired has no owner. On one node no account has one.
func TestAccountsShowTheirOwnerInACluster(t *testing.T) {
	const partitions = 4
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	serve := func(parts int) *bundle {
		api, err := httpapi.New(httpapi.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Registry: prometheus.NewRegistry(), APIKeys: []string{testKey}, Partitions: parts})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(api)
		t.Cleanup(srv.Close)
		return &bundle{srv: srv, store: st}
	}
	b := serve(partitions)
	// Two accounts in different partitions.
	ids := []string{"acc-a"}
	for i := 0; len(ids) < 2; i++ {
		id := "acc-" + string(rune('b'+i))
		if wamux.PartitionOf(id, partitions) != wamux.PartitionOf(ids[0], partitions) {
			ids = append(ids, id)
		}
	}
	for i, id := range ids {
		body := `{"id":"` + id + `","phone_number_id":"10` + string(rune('0'+i)) + `","access_token":"EAAGtoken-owner-test"}`
		if r := b.json(t, "POST", "/v1/accounts", body); r.status != 201 {
			t.Fatalf("create %s: %d %s", id, r.status, r.body)
		}
	}
	held := wamux.PartitionOf(ids[0], partitions)
	for _, node := range []string{"node-1", "node-2"} {
		if _, err := st.AcquirePartition(context.Background(), held, node); err != nil {
			t.Fatal(err)
		}
	}

	type owner struct {
		Node      string `json:"node"`
		Partition int    `json:"partition"`
		Epoch     int64  `json:"epoch"`
	}
	var list struct {
		Accounts []struct {
			ID    string `json:"id"`
			Owner *owner `json:"owner"`
		} `json:"accounts"`
	}
	r := b.json(t, "GET", "/v1/accounts", "")
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	got := map[string]*owner{}
	for _, a := range list.Accounts {
		got[a.ID] = a.Owner
	}
	want := owner{Node: "node-2", Partition: held, Epoch: 2}
	if o := got[ids[0]]; o == nil || *o != want {
		t.Fatalf("owner of %s = %+v, want %+v (the partition's last holder)", ids[0], o, want)
	}
	if o := got[ids[1]]; o != nil {
		t.Fatalf("owner of %s, whose partition no node acquired = %+v, want none", ids[1], o)
	}
	var one struct {
		Owner *owner `json:"owner"`
	}
	r = b.json(t, "GET", "/v1/accounts/"+ids[0], "")
	if err := json.Unmarshal(r.body, &one); err != nil || one.Owner == nil || *one.Owner != want {
		t.Fatalf("GET %s: %d %s; want owner %+v", ids[0], r.status, r.body, want)
	}
	var ui struct {
		Accounts []struct {
			ID    string `json:"id"`
			Owner string `json:"owner"`
		} `json:"accounts"`
	}
	r = b.json(t, "GET", "/ui/state", "")
	if err := json.Unmarshal(r.body, &ui); err != nil || r.status != 200 {
		t.Fatalf("dashboard state: %d %s", r.status, r.body)
	}
	for _, a := range ui.Accounts {
		if w := map[string]string{ids[0]: "node-2"}[a.ID]; a.Owner != w {
			t.Fatalf("dashboard owner of %s = %q, want %q", a.ID, a.Owner, w)
		}
	}

	// One node: the same store, no owner.
	r = serve(0).json(t, "GET", "/v1/accounts/"+ids[0], "")
	one.Owner = nil
	if err := json.Unmarshal(r.body, &one); err != nil || one.Owner != nil {
		t.Fatalf("one node: GET %s: %d %s; want no owner", ids[0], r.status, r.body)
	}
}
