package receipts_test

import (
	"fmt"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/receipts"
)

// TestProgressIsPerPartition: Appended and Processed count only the
// receipts of the partition that processes the account asked about. A
// count over every partition would let the compensator of one account
// conclude that its statuses were processed because other accounts'
// receipts were.
func TestProgressIsPerPartition(t *testing.T) {
	st := openSQLite(t)
	p := startPipeline(t, receipts.Config{Store: st, Partitions: 4})
	const n = 6
	var rs []wamux.Receipt
	for i := range n {
		rs = append(rs, rcpt("acc-a", fmt.Sprintf("w%d", i), wamux.ReceiptSent, i+1))
	}
	ingest(t, p, rs...)
	flush(t, p)
	if a, pr := p.Appended("acc-a"), p.Processed("acc-a"); a != n || pr != n {
		t.Fatalf("acc-a: appended %d processed %d, want %d and %d", a, pr, n, n)
	}
	others := 0
	for i := range 32 {
		id := fmt.Sprintf("acc-%d", i)
		a, pr := p.Appended(id), p.Processed(id)
		switch {
		case a == 0 && pr == 0:
			others++
		case a == n && pr == n: // shares acc-a's partition
		default:
			t.Fatalf("%s: appended %d processed %d, want 0/0 or %d/%d", id, a, pr, n, n)
		}
	}
	if others == 0 {
		t.Fatal("every account reports acc-a's receipts: progress is not per partition")
	}
	if s := p.Stats(); s.Appended != n || s.Processed != n {
		t.Fatalf("totals: appended %d processed %d, want %d", s.Appended, s.Processed, n)
	}
}
