package outbound

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/settings"
)

// MessageBytesEstimate is what one queued message is taken to hold in
// memory (its item, queue entries and strings), for the queue_memory_mib
// budget: 2.2 KiB per queued message measured on a flood of short texts,
// rounded up.
const MessageBytesEstimate = 2304

// P0ReservePercent is the share of each bound that only P0 may use: P1
// and P2 are refused once the rest is taken, so urgent messages still
// get in while an account is flooded with bulk ones.
const P0ReservePercent = 10

// Refusal reasons, the reason label of wamux_messages_shed_total.
const (
	refusedDepth   = "refused_depth"   // queue_max_depth
	refusedBacklog = "refused_backlog" // queue_max_backlog at the account's rate
	refusedMemory  = "refused_memory"  // queue_memory_mib, all accounts together
)

// admission bounds what Submit lets into the queues. A message counts
// from the moment it is admitted (reserved) until its worker has it; from
// then on it counts in the worker's backlog.
type admission struct {
	mu       sync.Mutex
	reserved map[string]int // per account: admitted, not yet in the worker's inbox
	total    int            // sum of reserved
}

func newAdmission() *admission { return &admission{reserved: map[string]int{}} }

// bounds are one account's limits at one moment.
type bounds struct {
	depth  int     // queued messages the account may hold (count and backlog)
	global int     // queued messages all accounts may hold (memory budget)
	rate   float64 // the account's drain rate, messages per second
	reason string  // which bound depth comes from
}

// limitOf returns the share of limit a priority may use: all of it for
// P0, the part outside the P0 reserve for the others.
func limitOf(limit int, p wamux.Priority) int {
	if p == wamux.P0 {
		return limit
	}
	return limit - limit*P0ReservePercent/100
}

// accountBounds computes an account's bounds from the settings and its
// rate: the backlog bound is the backlog its rate drains in
// queue_max_backlog.
func accountBounds(s settings.Values, rate float64) bounds {
	b := bounds{depth: s.QueueMaxDepth, reason: refusedDepth, rate: rate}
	if byAge := int(math.Floor(rate * s.QueueMaxBacklog.Seconds())); byAge < b.depth {
		b.depth, b.reason = max(byAge, 1), refusedBacklog
	}
	b.global = int(int64(s.QueueMemoryMiB) << 20 / MessageBytesEstimate)
	return b
}

// retryAfter is how long the account takes at its rate to drain excess
// messages, at least one second.
func retryAfter(excess int, rate float64) time.Duration {
	if rate <= 0 {
		rate = 1
	}
	d := time.Duration(math.Ceil(float64(excess)/rate)) * time.Second
	return max(d, time.Second)
}

// admitBatch decides which messages of a routed batch may be stored:
// refused ones get an EQueueFull error in results and leave b.toInsert,
// unless their msg_id is already stored (a retry of a stored message is
// answered as a duplicate or conflict by the insert, never refused). The
// admitted are reserved until release is called with the returned counts.
func (d *Dispatcher) admitBatch(ctx context.Context, b *routedBatch, results []SubmitResult) (map[string]int, error) {
	if len(b.toInsert) == 0 {
		return nil, nil
	}
	s := d.settings.Current()
	rates := map[string]float64{}
	for _, m := range b.toInsert {
		if _, ok := rates[m.AccountID]; ok {
			continue
		}
		a, err := d.account(ctx, m.AccountID)
		if err != nil {
			return nil, err
		}
		rates[m.AccountID], _ = limitFor(a)
	}
	backlogs, globalQueued := d.backlogs()
	d.admit.mu.Lock()
	taken := map[string]int{}
	global := globalQueued + d.admit.total
	var refused []int // positions in b.toInsert
	errs := map[int]error{}
	for j, m := range b.toInsert {
		rate := rates[m.AccountID]
		bd := accountBounds(s, rate)
		queued := backlogs[m.AccountID] + d.admit.reserved[m.AccountID] + taken[m.AccountID]
		if lim := limitOf(bd.depth, m.Priority); queued+1 > lim {
			refused = append(refused, j)
			errs[j] = queueFull(m.AccountID, bd.reason, queued+1-lim, rate)
			continue
		}
		if lim := limitOf(bd.global, m.Priority); global+1 > lim {
			refused = append(refused, j)
			errs[j] = queueFull(m.AccountID, refusedMemory, global+1-lim, rate)
			continue
		}
		taken[m.AccountID]++
		global++
	}
	for acc, n := range taken {
		d.admit.reserved[acc] += n
		d.admit.total += n
	}
	d.admit.mu.Unlock()
	if len(refused) == 0 {
		return taken, nil
	}
	stored, err := d.storedIDs(ctx, b.toInsert, refused)
	if err != nil {
		d.releaseAdmitted(taken)
		return nil, err
	}
	drop := map[int]bool{}
	for _, j := range refused {
		if stored[b.toInsert[j].ID] {
			continue // the insert answers it: duplicate or conflict
		}
		drop[j] = true
		results[b.idx[j]].Err = errs[j]
		d.metrics.shed.WithLabelValues(b.toInsert[j].AccountID, errs[j].(*refusal).reason).Inc()
	}
	keep, idx := b.toInsert[:0], b.idx[:0]
	for j, m := range b.toInsert {
		if !drop[j] {
			keep, idx = append(keep, m), append(idx, b.idx[j])
		}
	}
	b.toInsert, b.idx = keep, idx
	return taken, nil
}

// refusal is an EQueueFull error that remembers its reason for the metric.
type refusal struct {
	err    *wamux.Error
	reason string
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func queueFull(account, reason string, excess int, rate float64) error {
	wait := retryAfter(excess, rate)
	var what string
	switch reason {
	case refusedDepth:
		what = "queue_max_depth"
	case refusedBacklog:
		what = "queue_max_backlog at its rate"
	default:
		what = "the gateway's queue_memory_mib"
	}
	e := wamux.Errorf(wamux.EQueueFull, "account %s has queued as much as %s allows; retry after %s", account, what, wait)
	e.RetryAfter = wait
	return &refusal{err: e, reason: reason}
}

// releaseAdmitted ends the reservation of admitted messages: they are in
// their worker's inbox, or were not stored.
func (d *Dispatcher) releaseAdmitted(taken map[string]int) {
	if len(taken) == 0 {
		return
	}
	d.admit.mu.Lock()
	defer d.admit.mu.Unlock()
	for acc, n := range taken {
		if d.admit.reserved[acc] -= n; d.admit.reserved[acc] <= 0 {
			delete(d.admit.reserved, acc)
		}
		d.admit.total -= n
	}
}

// backlogs returns each account's queued messages, in memory and in the
// store, and the sum of those held in memory.
func (d *Dispatcher) backlogs() (map[string]int, int) {
	d.mu.Lock()
	ws := make([]*worker, 0, len(d.workers))
	for _, w := range d.workers {
		ws = append(ws, w)
	}
	d.mu.Unlock()
	out := make(map[string]int, len(ws))
	total := 0
	for _, w := range ws {
		n, resident := w.queued()
		out[w.id] = n
		total += resident
	}
	return out, total
}

// storedIDs reports which of the messages at positions js have a msg_id
// that is already stored.
func (d *Dispatcher) storedIDs(ctx context.Context, msgs []wamux.Message, js []int) (map[string]bool, error) {
	ids := make([]string, 0, len(js))
	for _, j := range js {
		ids = append(ids, msgs[j].ID)
	}
	found, err := d.store.FindMessages(ctx, nil, ids)
	if err != nil {
		return nil, fmt.Errorf("outbound: look up refused msg_id: %w", err)
	}
	out := make(map[string]bool, len(found))
	for _, m := range found {
		out[m.ID] = true
	}
	return out, nil
}
