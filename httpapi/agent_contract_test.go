package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/agent"
)

// TestAgentReceiptsAtTheLimitsAreAccepted: every receipt the agent takes
// (Report's checks) and every account id it starts with is one the
// receipts batch accepts. A receipt the agent spools but the gateway
// refuses is dead-lettered, so the two rules are checked against each
// other here, with the real handler and pipeline, at their edges.
func TestAgentReceiptsAtTheLimitsAreAccepted(t *testing.T) {
	b := newReceiptBundle(t)
	id := "A" + strings.Repeat("z9_.-", 12) + "abc" // 64 bytes, the longest id
	if len(id) != wamux.MaxAccountIDLen {
		t.Fatalf("id has %d bytes", len(id))
	}
	body := `{"id":"` + id + `","phone_number_id":"1234567","access_token":"EAAGtoken"}`
	if r := b.json(t, http.MethodPost, "/v1/accounts", body); r.status != http.StatusCreated {
		t.Fatalf("create account = %d %s", r.status, r.body)
	}
	a, err := agent.New(agent.Config{GatewayURL: b.srv.URL, APIKey: testKey, AccountID: id, SpoolDir: t.TempDir(),
		BackoffBase: time.Millisecond, BackoffCap: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The latest event_time the agent takes: the gateway receives it
	// later, so by its clock it lies less far ahead.
	first, last := time.UnixMilli(1000), time.Now().Add(wamux.MaxEventTimeAhead)
	ctx := context.Background()
	for _, r := range []agent.Receipt{
		{MessageID: "wamid.1", Type: wamux.ReceiptSent, EventTime: first},
		{MessageID: " wamid.2 ", Type: wamux.ReceiptDelivered, EventTime: last, Version: 2},
		{MessageID: strings.Repeat("é", agent.MaxMessageIDLen/2), Type: wamux.ReceiptRead, EventTime: first, Version: 3},
		{MessageID: "wamid.3", Type: wamux.ReceiptFailed, EventTime: first, Version: 7},
	} {
		if err := a.Report(ctx, r); err != nil {
			t.Fatalf("Report(%q): %v", r.MessageID, err)
		}
	}
	closeCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := a.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Acked != 4 || st.Accepted != 4 || st.DeadLettered != 0 {
		t.Fatalf("agent stats %+v: want all 4 receipts accepted, none dead-lettered", st)
	}
}
