package outbound

import (
	"context"
	"fmt"
	"math"
	"sort"
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
	loads, resident, waiting := d.loads()
	d.admit.mu.Lock()
	pass := &admitPass{settings: s, rates: rates, loads: loads, reserved: d.admit.reserved,
		global: resident + d.admit.total, globalWaiting: waiting, taken: map[string]int{}, next: map[string]int64{}}
	var refused []int // positions in b.toInsert
	errs := map[int]error{}
	for _, j := range admitOrder(b.toInsert) {
		if err := pass.admit(b.toInsert[j]); err != nil {
			refused = append(refused, j)
			errs[j] = err
		}
	}
	taken := pass.taken
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

// admitPass is one batch's admission decisions, made under admission.mu.
type admitPass struct {
	settings      settings.Values
	rates         map[string]float64
	loads         map[string]accountLoad
	reserved      map[string]int // admission.reserved
	global        int            // messages in memory, reserved and taken, all accounts
	globalWaiting int            // of global, those waiting in reorder buffers
	taken         map[string]int // per account: admitted by this pass
	// next is, per account, the highest seq a gap filler of this pass
	// may have: NextSeq, then one more for each gap filler taken at it.
	next map[string]int64
}

// admit takes m, or returns the refusal that keeps it out. A gap filler
// (see admitOrder) meets the bounds without the messages waiting in
// reorder buffers, so that however many wait, the seq they wait for gets
// in once the queue proper has drained below the bound; every other
// message meets them with those counted.
func (p *admitPass) admit(m wamux.Message) error {
	acc := m.AccountID
	rate := p.rates[acc]
	bd := accountBounds(p.settings, rate)
	ld := p.loads[acc]
	filler := false
	if p.settings.Ordering && m.ClientSeq > 0 {
		if _, ok := p.next[acc]; !ok {
			p.next[acc] = ld.nextSeq
		}
		filler = m.ClientSeq <= p.next[acc]
	}
	queued, inMemory := ld.queued+p.reserved[acc]+p.taken[acc], p.global
	if filler {
		inMemory -= p.globalWaiting
	} else {
		queued += ld.waiting
	}
	if lim := limitOf(bd.depth, m.Priority); queued+1 > lim {
		return queueFull(acc, bd.reason, queued+1-lim, rate)
	}
	if lim := limitOf(bd.global, m.Priority); inMemory+1 > lim {
		return queueFull(acc, refusedMemory, inMemory+1-lim, rate)
	}
	if filler && m.ClientSeq == p.next[acc] {
		p.next[acc]++
	}
	p.taken[acc]++
	p.global++
	return nil
}

// admitOrder is the order admitBatch decides a batch in: messages without
// a client_seq first, in batch order, then the others by client_seq.
//
// A gap filler is a message whose client_seq is at most the account's
// NextSeq as last published, or the next seq after a gap filler admitted
// before it in the same batch: it never waits in the reorder buffer, as
// it is released on arrival, or is held or a duplicate (NextSeq only
// grows, and every admitted seq below it reaches the buffer first, in its
// intake or in the store). Deciding seqs in ascending order lets one batch
// carry a whole run of them past a full buffer; a refused one ends the
// run, so what follows it counts as waiting. The one run member that can
// still fail to be stored, a msg_id taken by other content (409), leaves
// the rest of its run waiting: at most one batch beyond the bound, since
// a run only continues through seqs in its own batch.
func admitOrder(msgs []wamux.Message) []int {
	order := make([]int, len(msgs))
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(a, b int) bool { return msgs[order[a]].ClientSeq < msgs[order[b]].ClientSeq })
	return order
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

// accountLoad is one account's messages as admission counts them.
type accountLoad struct {
	queued   int   // on their way to the provider: queued (in memory and in the store), in intake, released
	waiting  int   // in the reorder buffer, behind a gap
	resident int   // of queued and waiting, those held in memory
	nextSeq  int64 // the reorder buffer's NextSeq at the worker's last round
}

// loads returns each account's load, the sum of the messages held in
// memory and, of those, the ones waiting in reorder buffers.
func (d *Dispatcher) loads() (map[string]accountLoad, int, int) {
	d.mu.Lock()
	ws := make([]*worker, 0, len(d.workers))
	for _, w := range d.workers {
		ws = append(ws, w)
	}
	d.mu.Unlock()
	out := make(map[string]accountLoad, len(ws))
	resident, waiting := 0, 0
	for _, w := range ws {
		ld := w.admissionLoad()
		out[w.id] = ld
		resident += ld.resident
		waiting += ld.waiting
	}
	return out, resident, waiting
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
