package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/agent"
)

// An account agent reports the receipts it observes; the agent spools them
// durably and delivers them to the gateway in the background.
func Example() {
	// A stand-in for the gateway's POST /v1/receipts:batch.
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Receipts []json.RawMessage `json:"receipts"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		_ = json.NewEncoder(w).Encode(map[string]int{"accepted": len(req.Receipts), "duplicates": 0})
	}))
	defer gw.Close()
	spool, err := os.MkdirTemp("", "wamux-agent-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(spool)

	a, err := agent.New(agent.Config{
		GatewayURL: gw.URL,
		APIKey:     "example-key",
		AccountID:  "acct-1",
		SpoolDir:   spool, // keep it across restarts: unacked receipts are re-sent from it
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	at := time.UnixMilli(1_764_000_000_000)
	for _, r := range []agent.Receipt{
		{MessageID: "wamid.A", Type: wamux.ReceiptSent, EventTime: at},
		{MessageID: "wamid.A", Type: wamux.ReceiptDelivered, EventTime: at.Add(time.Second)},
		{MessageID: "wamid.A", Type: wamux.ReceiptDelivered, EventTime: at.Add(time.Second)}, // a repeat: dropped
	} {
		// nil means durable on local disk: safe to acknowledge upstream.
		if err := a.Report(ctx, r); err != nil {
			log.Fatal(err)
		}
	}

	// Close delivers what is spooled within the deadline; the rest waits in
	// the spool for the next start.
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.Close(closeCtx); err != nil {
		log.Fatal(err)
	}
	st := a.Stats()
	fmt.Printf("reported %d, dropped repeats %d, acked %d\n", st.Reported, st.DroppedRepeats, st.Acked)
	// Output: reported 2, dropped repeats 1, acked 2
}
