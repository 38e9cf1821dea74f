package httpapi_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver, to count stored messages

	"github.com/wamux/wamux/bench"
	"github.com/wamux/wamux/sim"
)

// submitSeeds are bodies of POST /v1/messages: valid ones of each kind and
// near misses. The batch endpoint is seeded with them wrapped in
// {"messages":[…]}.
var submitSeeds = []string{
	`{"biz_type":"order","account_id":"acc","client_seq":1,"to":"15551230000","type":"text","text":{"body":"hi"}}`,
	`{"msg_id":"m-1","biz_type":"order","to":"15551230001","priority":"P0","type":"text","text":{"body":"routed","preview_url":true}}`,
	`{"biz_type":"promo","account_id":"acc2","to":"15551230002","priority":"P2","type":"template","template":{"name":"hello","language":{"code":"en_US"},"components":[{"type":"body","parameters":[{"type":"text","text":"x"}]}]}}`,
	`{"msg_id":"m-1","biz_type":"order","to":"15551230001","type":"text","text":{"body":"other content"}}`,
	`{"biz_type":"b","client_seq":1,"to":"15551230000","type":"text","text":{"body":"x"}}`,
	`{"biz_type":"b","account_id":"ghost","to":"15551230000","type":"text","text":{"body":"x"}}`,
	`{"biz_type":"b","account_id":"acc","client_seq":9007199254740992,"to":"15551230000","type":"text","text":{"body":"x"}}`,
	`{"biz_type":"b","account_id":"acc","to":"15551230000","type":"text","text":{"body":"\ud800"}}`,
	`{"biz_type":"b","account_id":"acc","to":"15551230000","type":"template","template":{"name":"n","language":{"code":"en"},"components":[[[[[]]]]]}}`,
	`{"biz_type":"b","to":"15551230000","type":"text","text":{"body":"x"},"text":{"body":"y"}}`,
	`{"biz_type":"b","to":"15551230000","type":"text","text":null}`,
	`[]`,
	``,
}

// FuzzSubmit drives the whole gateway (SQLite store, dispatcher, the
// simulator behind it) with bodies of POST /v1/messages and
// POST /v1/messages:batch. Whatever the body: no 5xx; every refusal is
// the JSON error envelope; a 4xx stores nothing; an answer stores exactly
// the messages it reports as new, and each one it reports accepted reads
// back with the account it was accepted for.
func FuzzSubmit(f *testing.F) {
	for _, s := range submitSeeds {
		f.Add(false, []byte(s))
		f.Add(true, []byte(`{"messages":[`+s+`]}`))
	}
	f.Add(true, []byte(`{"messages":[`+submitSeeds[0]+`,`+submitSeeds[0]+`,`+submitSeeds[1]+`,42,`+submitSeeds[5]+`]}`))
	f.Add(true, []byte(`{"messages":[]}`))
	f.Add(true, []byte(`{"messages":{}}`))

	h, db := fuzzGateway(f)
	count := func(t *testing.T) int {
		t.Helper()
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM messages`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	f.Fuzz(func(t *testing.T, batch bool, body []byte) {
		path := "/v1/messages"
		if batch {
			path = "/v1/messages:batch"
		}
		before := count(t)
		res := fuzzCall(t, h, "POST", path, body)
		stored := count(t) - before

		if res.status >= 500 {
			t.Fatalf("POST %s %q: %d %s", path, body, res.status, res.body)
		}
		if res.status >= 400 {
			errorOf(t, res)
			if stored != 0 {
				t.Fatalf("POST %s %q answered %d and stored %d messages", path, body, res.status, stored)
			}
			return
		}
		var results []submitResult
		if batch {
			var out struct {
				Results []submitResult `json:"results"`
			}
			if err := json.Unmarshal(res.body, &out); err != nil || res.status != 200 || len(out.Results) == 0 {
				t.Fatalf("batch %q: %d %s", body, res.status, res.body)
			}
			results = out.Results
		} else {
			var one submitResult
			if err := json.Unmarshal(res.body, &one); err != nil || (res.status == 200) != one.Duplicate || (res.status != 200 && res.status != 202) {
				t.Fatalf("submit %q: %d %s", body, res.status, res.body)
			}
			results = []submitResult{one}
		}
		fresh := 0
		for i, r := range results {
			if r.Error != nil {
				if r.Error.Code == "" || r.Error.Message == "" || r.Error.Code == "internal" || r.Error.Code == "unavailable" || r.MsgID != "" {
					t.Fatalf("%q: result %d is %+v", body, i, r)
				}
				continue
			}
			if r.MsgID == "" || r.AccountID == "" || r.Status == "" {
				t.Fatalf("%q: result %d lacks msg_id, account_id or status: %+v", body, i, r)
			}
			if !r.Duplicate {
				fresh++
			}
			got := fuzzCall(t, h, "GET", "/v1/messages/"+url.PathEscape(r.MsgID), nil)
			var m struct {
				MsgID     string `json:"msg_id"`
				AccountID string `json:"account_id"`
			}
			if got.status != 200 || json.Unmarshal(got.body, &m) != nil || m.MsgID != r.MsgID || m.AccountID != r.AccountID {
				t.Fatalf("%q: accepted %+v, reads back %d %s", body, r, got.status, got.body)
			}
		}
		if stored != fresh {
			t.Fatalf("%q: %d new messages answered, %d stored", body, fresh, stored)
		}
	})
}

// fuzzGateway starts the gateway with the simulator and accounts acc and
// acc2, and opens its SQLite file read-only for counting what it stored.
// Per-key request limits are off: the fuzzer is one fast client.
func fuzzGateway(f *testing.F) (*bench.Harness, *sql.DB) {
	dir := f.TempDir()
	h, err := bench.Start(context.Background(), bench.HarnessConfig{DataDir: dir,
		Settings: map[string]any{"pair_interval": "1ms", "pair_burst": 100, "key_rate": 1_000_000, "key_burst": 1_000_000}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Close() })
	for i, id := range []string{"acc", "acc2"} {
		if err := h.AddAccount(context.Background(), id, "90010"+string(rune('0'+i)), 1000, 100, sim.Limits{Rate: 10_000}); err != nil {
			f.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "wamux.db")+"?mode=ro")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	return h, db
}

type submitResult struct {
	MsgID     string `json:"msg_id"`
	Status    string `json:"status"`
	AccountID string `json:"account_id"`
	Duplicate bool   `json:"duplicate"`
	Error     *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// FuzzReceiptsBatch drives the whole gateway with bodies of
// POST /v1/receipts:batch, as an account agent sends them. Whatever the
// body: no 5xx; every refusal is the JSON error envelope and offers no
// receipt to the pipeline; a 200 accounts for every receipt of the batch,
// as accepted or duplicate.
func FuzzReceiptsBatch(f *testing.F) {
	for _, s := range []string{
		`{"account_id":"acc","receipts":[{"message_id":"wamid.A","type":"sent","event_time":1750030073000},{"message_id":"wamid.A","type":"delivered","event_time":1750030074000,"version":2}]}`,
		`{"account_id":"acc2","receipts":[{"message_id":"wamid.B","type":"failed","event_time":1750030073000,"version":7},{"message_id":"wamid.B","type":"failed","event_time":1750030073000}]}`,
		`{"account_id":"acc","receipts":[{"message_id":" wamid.C ","type":"read","event_time":1,"version":3}]}`,
		`{"account_id":"ghost","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000}]}`,
		`{"account_id":"acc","receipts":[{"message_id":"w","type":"sent","event_time":253402300800000}]}`,
		`{"account_id":"acc","receipts":[{"message_id":"\ud800","type":"sent","event_time":1750030073000}]}`,
		`{"account_id":"acc","receipts":[{"message_id":"w","type":"played","event_time":1750030073000}]}`,
		`{"account_id":"acc","receipts":[{"message_id":"w","type":"sent","event_time":"1750030073000"}]}`,
		`{"account_id":"acc","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000,"version":2}]}`,
		`{"account_id":"acc","receipts":[]}`,
		`{"account_id":"../x","receipts":[{"message_id":"w","type":"sent","event_time":1}]}`,
		`{"receipts":[{"message_id":"w","type":"sent","event_time":1}],"extra":1}`,
	} {
		f.Add([]byte(s))
	}
	h, _ := fuzzGateway(f)
	offered := func(t *testing.T) float64 {
		t.Helper()
		mfs, err := h.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "wamux_receipts_received_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "source" && l.GetValue() == "agent" {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		before := offered(t)
		res := fuzzCall(t, h, "POST", "/v1/receipts:batch", body)
		if res.status >= 500 {
			t.Fatalf("%q: %d %s", body, res.status, res.body)
		}
		if res.status >= 400 {
			errorOf(t, res)
			if n := offered(t) - before; n != 0 {
				t.Fatalf("%q answered %d and offered %v receipts", body, res.status, n)
			}
			return
		}
		var in struct {
			Receipts []json.RawMessage `json:"receipts"`
		}
		var out struct {
			Accepted   *int `json:"accepted"`
			Duplicates *int `json:"duplicates"`
		}
		if res.status != 200 || json.Unmarshal(body, &in) != nil || json.Unmarshal(res.body, &out) != nil ||
			out.Accepted == nil || out.Duplicates == nil || *out.Accepted < 0 || *out.Duplicates < 0 ||
			*out.Accepted+*out.Duplicates != len(in.Receipts) {
			t.Fatalf("%q: %d %s", body, res.status, res.body)
		}
	})
}

func fuzzCall(t *testing.T, h *bench.Harness, method, path string, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(method, h.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.APIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := fuzzClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s %q: %v", method, path, body, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s %q: %v", method, path, body, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: raw}
}

// fuzzClient gives up on an answer that takes longer than any store call
// may: a request left hanging is a failure the fuzzer reports.
var fuzzClient = &http.Client{Timeout: 30 * time.Second}
