package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// TestClusterNodeRidesOutRedisLoss: a cluster node whose redis-server
// dies mid-run goes on taking submissions and webhooks, limits its
// accounts on its own and dedups receipts through the store, saying so in
// wamux_ratelimit_degraded; when a redis-server answers again on the same
// address (empty: it kept nothing) the node's next sends return it to the
// shared state.
// Through all of it every message reaches the provider exactly once and
// every status the provider reported is merged.
func TestClusterNodeRidesOutRedisLoss(t *testing.T) {
	const secret = "redis-loss-secret"
	rs := redistest.StartServer(t)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	cfg := clusterConfig(t, kc.ListenAddrs()[0])
	cfg.Redis, cfg.AppSecret = rs.Addr(), secret
	a := newApp(cfg)
	a.ClusterTimeout = 3 * time.Second
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stopApp(t, a)
	s, err := sim.New(sim.Config{Seed: 5, Webhooks: sim.Webhooks{URL: "http://" + a.Addr() + "/webhook", AppSecret: secret,
		ReadProbability: 1, RetryBase: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond, MaxAttempts: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	simURL, err := s.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	accounts := []string{"r1", "r2", "r3"}
	for i, id := range accounts {
		pnid := fmt.Sprintf("5570%02d", i)
		if err := s.AddNumber(sim.Number{PhoneNumberID: pnid, AccessToken: "tok-" + pnid,
			Limits: sim.Limits{Rate: 50, PairInterval: time.Millisecond, PairBurst: 1000}}); err != nil {
			t.Fatal(err)
		}
		call(t, a, "POST", "/v1/accounts", fmt.Sprintf(
			`{"id":%q,"phone_number_id":%q,"access_token":"tok-%s","base_url":%q,"rate_per_sec":40,"burst":5}`, id, pnid, pnid, simURL))
	}
	var ids []string
	seq := map[string]int{}
	submit := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			acc := accounts[i%len(accounts)]
			seq[acc]++
			out := call(t, a, "POST", "/v1/messages", fmt.Sprintf(
				`{"biz_type":"t","account_id":%q,"client_seq":%d,"to":"1557%06d","type":"text","text":{"body":"m"}}`,
				acc, seq[acc], len(ids)))
			var r struct {
				MsgID string `json:"msg_id"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil || r.MsgID == "" {
				t.Fatalf("submit: %s", out)
			}
			ids = append(ids, r.MsgID)
		}
	}
	allRead := func(what string) {
		t.Helper()
		testwait.ForNil(t, 60*time.Second, func() error {
			for _, id := range ids {
				var m struct {
					Status string `json:"status"`
				}
				if err := json.Unmarshal([]byte(call(t, a, "GET", "/v1/messages/"+id, "")), &m); err != nil {
					return err
				}
				if m.Status != "read" {
					return fmt.Errorf("%s: message %s is %s, want read", what, id, m.Status)
				}
			}
			return nil
		})
	}
	degraded := func(want float64) error {
		_, body := get(t, a, "/metrics")
		for _, what := range []string{"limiter", "pairs", "departures"} {
			if got := gauge(body, `wamux_ratelimit_degraded{what="`+what+`"}`); got != want {
				return fmt.Errorf("wamux_ratelimit_degraded{what=%q} = %v, want %v", what, got, want)
			}
		}
		return nil
	}

	submit(30)
	allRead("before the loss")
	if err := degraded(0); err != nil {
		t.Fatal(err)
	}

	rs.Stop()
	submit(30)
	testwait.ForNil(t, 30*time.Second, func() error { return degraded(1) })
	allRead("while Redis is away")

	// The shared state is asked again on the sends' own calls (once a
	// second at most while degraded): traffic brings the node back.
	rs.Start()
	testwait.ForNil(t, 30*time.Second, func() error {
		submit(3)
		return degraded(0)
	})
	submit(30)
	allRead("after Redis came back")

	sent := map[string]int{}
	for _, m := range s.Messages("", "") {
		sent[m.CallbackData]++
	}
	for _, id := range ids {
		if sent[id] != 1 {
			t.Fatalf("message %s reached the provider %d times, want once", id, sent[id])
		}
	}
	if st := s.Stats(); st.Totals.Accepted != int64(len(ids)) || st.Totals.OverLimit != 0 {
		t.Fatalf("provider accepted %d of %d messages with %d over the limit; want all once, none over",
			st.Totals.Accepted, len(ids), st.Totals.OverLimit)
	}
}

// gauge reads one sample of the text exposition; -1 when absent.
func gauge(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v
			}
		}
	}
	return -1
}
