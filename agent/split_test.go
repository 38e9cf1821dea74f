package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux"
)

// A proxy in front of the gateway may cap request bodies below the
// gateway's 8 MiB (nginx's client_max_body_size is 1 MiB by default). Its
// 413 says the request is too large, not that a receipt is bad: the batch
// is split until each part passes, and only a receipt too large to pass
// alone is dead-lettered.
func TestTooLargeBatchIsSplit(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	const limit = 1 << 10
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			gwError(w, http.StatusRequestEntityTooLarge, wamux.ETooLarge, "proxy: body too large")
			return
		}
		g.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)

	dir := t.TempDir()
	a := newTestAgent(t, g, dir, func(c *Config) {
		c.GatewayURL = proxy.URL
		c.MaxBatch = 200
		c.FlushEvents = 200
		c.FlushInterval = time.Hour // one batch of everything, sent by Close
	})
	// About 180 bytes each on the wire: 100 of them are 17 times the limit,
	// and the one with a 1,000-byte id does not pass even alone.
	rs := testReceipts(strings.Repeat("x", 120), 100)
	huge := Receipt{MessageID: "wamid." + strings.Repeat("h", 1000), Type: wamux.ReceiptRead, EventTime: time.UnixMilli(1_764_000_000_000)}
	all := append(rs[:50:50], huge)
	all = append(all, rs[50:]...)
	if err := a.ReportBatch(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	closeAgent(t, a)

	g.wantStored(t, rs)
	if st := a.Stats(); st.Acked != 100 || st.DeadLettered != 1 {
		t.Errorf("Stats = %+v, want 100 acked and 1 dead-lettered", st)
	}
	var dead []string
	for _, d := range readDeadLetters(t, dir) {
		if d.Status != http.StatusRequestEntityTooLarge {
			t.Errorf("dead letter with status %d, want 413", d.Status)
		}
		for _, r := range d.Receipts {
			dead = append(dead, r.MessageID[:min(len(r.MessageID), 12)])
		}
	}
	if len(dead) != 1 || dead[0] != huge.MessageID[:12] {
		t.Errorf("dead-lettered %d receipts %v, want only the oversized one", len(dead), dead[:min(len(dead), 5)])
	}
}
