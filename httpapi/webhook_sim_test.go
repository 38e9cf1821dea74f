package httpapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// TestWebhookFromSimulator is end to end: messages sent to the Cloud API
// simulator come back as signed status webhooks — batched, duplicated and
// reordered — through the real handler and pipeline, and every message
// ends read (the simulator reads them all), each status stored once.
func TestWebhookFromSimulator(t *testing.T) {
	b := newReceiptBundle(t)
	s, err := sim.New(sim.Config{
		Numbers: []sim.Number{{PhoneNumberID: phoneID, AccessToken: testToken}},
		Limits:  sim.Limits{Rate: 1000, PairBurst: 1000},
		Webhooks: sim.Webhooks{URL: b.srv.URL + "/webhook", AppSecret: appSecret, ReadProbability: 1,
			Delay: sim.Range{Max: 2 * time.Millisecond}, BatchSize: 4, RetryBase: time.Millisecond, RetryMax: 10 * time.Millisecond},
		Faults: sim.Faults{WebhookDuplicate: 0.5, WebhookReorder: 0.5},
	})
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(s)
	t.Cleanup(func() { simSrv.Close(); s.Close() })

	client, err := cloudapi.New(cloudapi.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	dest := cloudapi.Destination{BaseURL: simSrv.URL, PhoneNumberID: phoneID, AccessToken: testToken}
	const n = 40
	var wamids []string
	for i := range n {
		res := client.Send(context.Background(), dest, wamux.Message{ID: fmt.Sprintf("msg-%d", i), To: fmt.Sprintf("+4917%04d", i),
			Type: "text", Payload: []byte(`{"body":"hi"}`)})
		if res.Outcome != cloudapi.Accepted {
			t.Fatalf("send %d: %v %s", i, res.Outcome, res.Reason)
		}
		wamids = append(wamids, res.WAMID)
	}
	testwait.ForNil(t, 20*time.Second, func() error {
		if w := s.Stats().Webhooks; w.Pending > 0 || w.Delivered < 3*n {
			return fmt.Errorf("simulator webhooks did not finish: %+v", w)
		}
		return nil
	})
	b.flush(t)

	keys := make([]store.StateKey, n)
	for i, w := range wamids {
		keys[i] = store.StateKey{AccountID: "acc1", MessageID: w}
	}
	states, err := b.store.GetStates(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if s := states[k]; s.Type != wamux.ReceiptRead {
			t.Errorf("%s ended %q, want read", k.MessageID, s.Type)
		}
	}
	st := b.pipe.Stats()
	// Each of a message's three statuses can change its state at most
	// once; whatever was appended was processed.
	if st.Processed != st.Appended || st.Applied > 3*n || st.Applied < n {
		t.Errorf("stats do not add up: %+v", st)
	}
	if w := s.Stats().Webhooks; w.Delivered > 3*n && st.DedupLRU+st.DedupBatch+st.DedupBloom+st.DedupStore == 0 {
		t.Errorf("the simulator sent %d statuses for %d, yet no duplicate was found: %+v", w.Delivered, 3*n, st)
	}
	dead, err := b.store.ListDeadLetters(context.Background(), 10)
	if err != nil || len(dead) != 0 {
		t.Errorf("dead letters = %+v, %v; want none", dead, err)
	}
}
