package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestDemoSummary runs `wamux demo --duration 5s --json` as a user would
// and checks the promises of its summary, the events its subscriber got
// included.
func TestDemoSummary(t *testing.T) {
	var out, errOut strings.Builder
	code := run(context.Background(), []string{"demo", "--listen", "127.0.0.1:0", "--duration", "5s", "--json",
		"--data-dir", t.TempDir()}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	var sum struct {
		Submitted            int64 `json:"submitted"`
		Accepted             int64 `json:"accepted"`
		DuplicatesAtProvider int64 `json:"duplicates_at_provider"`
		OrderViolations      int64 `json:"order_violations"`
		OverLimit            int64 `json:"over_limit"`
		Events               struct {
			Received   int64            `json:"received"`
			Distinct   int64            `json:"distinct"`
			ByType     map[string]int64 `json:"by_type"`
			Missing    int64            `json:"missing"`
			OutOfOrder int64            `json:"out_of_order"`
			Checked    int64            `json:"checked"`
			BadSigs    int64            `json:"bad_signatures"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(out.String()), &sum); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out.String())
	}
	if sum.Submitted == 0 || sum.Accepted == 0 {
		t.Fatalf("no traffic: %+v", sum)
	}
	if sum.DuplicatesAtProvider != 0 || sum.OrderViolations != 0 || sum.OverLimit != 0 {
		t.Fatalf("summary %+v: want zero duplicates, order violations and over-limit requests", sum)
	}
	// Every message submitted has, as its last message.status event, the
	// status the gateway ends it in; the receiver checked every signature.
	ev := sum.Events
	if ev.Received == 0 || ev.Distinct == 0 || ev.ByType["message.status"] == 0 || ev.Checked == 0 {
		t.Fatalf("events %+v: want message.status events received and messages checked", ev)
	}
	if ev.Missing != 0 || ev.OutOfOrder != 0 || ev.BadSigs != 0 {
		t.Fatalf("events %+v: want none missing, out of order or badly signed", ev)
	}
	if !strings.Contains(errOut.String(), "dashboard at http://127.0.0.1:") {
		t.Fatalf("the dashboard URL was not printed:\n%s", errOut.String())
	}
}
