package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// TestStatusesResolveMessages is the whole receipt side in one process:
// messages submitted to the gateway are sent to the simulator, whose signed
// status webhooks (duplicated and reordered) come back through /webhook
// and the pipeline, and every message ends read, with its wamid, through
// GET /v1/messages — however its statuses arrived.
func TestStatusesResolveMessages(t *testing.T) {
	ctx := context.Background()
	h, err := Start(ctx, HarnessConfig{Sim: sim.Config{Webhooks: sim.Webhooks{ReadProbability: 1,
		Delay: sim.Range{Max: 5 * time.Millisecond}, BatchSize: 3, RetryBase: time.Millisecond, RetryMax: 10 * time.Millisecond},
		Faults: sim.Faults{WebhookDuplicate: 0.3, WebhookReorder: 0.5}}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.AddAccount(ctx, "acc1", "1550001", 200, 200, sim.Limits{Rate: 1000, PairBurst: 1000}); err != nil {
		t.Fatal(err)
	}
	const n = 30
	ids := make([]string, n)
	for i := range n {
		var out struct {
			MsgID string `json:"msg_id"`
		}
		if err := h.Do(ctx, "POST", "/v1/messages", map[string]any{"biz_type": "otp", "account_id": "acc1",
			"to": fmt.Sprintf("4917%05d", i), "type": "text", "text": map[string]string{"body": "hi"}}, &out); err != nil {
			t.Fatal(err)
		}
		ids[i] = out.MsgID
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		testwait.ForNil(t, time.Until(deadline), func() error {
			var m struct {
				Status string `json:"status"`
				WAMID  string `json:"wamid"`
			}
			if err := h.Do(ctx, "GET", "/v1/messages/"+id, nil, &m); err != nil {
				t.Fatal(err)
			}
			if m.Status == "read" && m.WAMID != "" {
				return nil
			}
			return fmt.Errorf("message %s is %q (wamid %q), want read; simulator %+v, pipeline %+v",
				id, m.Status, m.WAMID, h.Sim.Stats().Webhooks, h.App.Receipts().Stats())
		})
	}
}
