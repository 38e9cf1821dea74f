package events

import (
	"sort"
	"time"

	"github.com/wamux/wamux/store"
)

// pendingCap bounds the deliveries a deliverer keeps in memory; past it
// the store's due list is read again, as after a start.
const pendingCap = 20_000

// pending is a subscription's pending deliveries held in memory while they
// are known to be all of them: from the moment the store had none pending
// for the subscription, every delivery fanOut enqueues is also added here,
// so that dispatch picks due ones without reading the store. The store
// stays the record: a delivery is removed here only once settled there.
type pending struct {
	complete bool
	order    []*store.Delivery // by event id; settled ones linger until compacted
	byID     map[int64]*store.Delivery
}

// reset forgets what is held: the store's due list is read until it is
// found empty again.
func (p *pending) reset() {
	p.complete, p.order, p.byID = false, nil, nil
}

// start marks the store empty of this subscription's deliveries.
func (p *pending) start() {
	p.complete, p.order, p.byID = true, nil, map[int64]*store.Delivery{}
}

// add holds deliveries just enqueued (with their events); false when that
// would pass pendingCap, and then nothing is held any more.
func (p *pending) add(ds []store.Delivery) bool {
	if !p.complete {
		return false
	}
	if len(p.byID)+len(ds) > pendingCap {
		p.reset()
		return false
	}
	for i := range ds {
		if _, ok := p.byID[ds[i].EventID]; ok {
			continue
		}
		dl := ds[i]
		p.byID[dl.EventID] = &dl
		n := len(p.order)
		if n == 0 || p.order[n-1].EventID < dl.EventID {
			p.order = append(p.order, &dl)
			continue
		}
		// A feed in commit order may list a lower id after a higher one
		// (PostgreSQL): keep the event order the due list has.
		at := sort.Search(n, func(j int) bool { return p.order[j].EventID > dl.EventID })
		p.order = append(p.order, nil)
		copy(p.order[at+1:], p.order[at:])
		p.order[at] = &dl
	}
	return true
}

// settled applies what SettleDeliveries stored.
func (p *pending) settled(done []int64, retry []store.Delivery) {
	if !p.complete {
		return
	}
	for _, id := range done {
		delete(p.byID, id)
	}
	for _, r := range retry {
		if dl, ok := p.byID[r.EventID]; ok {
			ev := dl.Event
			*dl = r
			dl.Event = ev
		}
	}
	if len(p.order) > 64 && len(p.order) > 2*len(p.byID) {
		live := p.order[:0]
		for _, dl := range p.order {
			if _, ok := p.byID[dl.EventID]; ok {
				live = append(live, dl)
			}
		}
		clear(p.order[len(live):])
		p.order = live
	}
}

// due returns up to limit deliveries due at now, in event order, each the
// first pending one of its order key, skipping those skip says are taken:
// what DueDeliveries reads from the store.
func (p *pending) due(now time.Time, limit int, skip func(store.Delivery) bool) []store.Delivery {
	// Settled deliveries at the front are dropped at once.
	head := 0
	for head < len(p.order) && p.byID[p.order[head].EventID] == nil {
		head++
	}
	clear(p.order[:head])
	p.order = p.order[head:]
	var out []store.Delivery
	first := map[string]bool{}
	for _, dl := range p.order {
		if p.byID[dl.EventID] == nil || first[dl.OrderKey] {
			continue
		}
		first[dl.OrderKey] = true
		if dl.NextAt.After(now) || skip(*dl) {
			continue
		}
		out = append(out, *dl)
		if len(out) == limit {
			break
		}
	}
	return out
}
