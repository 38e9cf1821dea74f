package sim

import (
	"container/heap"
	"encoding/json"
	"time"

	"github.com/wamux/wamux/provider/cloudapi"
)

func (h *webhooker) schedule() {
	defer h.wg.Done()
	var q itemHeap
	var open []*hookStatus // the batch being filled
	var openSince time.Time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		h.mu.Lock()
		in := h.inbox
		h.inbox = nil
		if h.clear {
			h.clear = false
			held := len(open)
			for _, it := range q {
				held += it.size()
			}
			for _, it := range in {
				held += it.size()
			}
			h.pending -= held
			q, open, in = nil, nil, nil
		}
		h.mu.Unlock()
		for _, it := range in {
			heap.Push(&q, it)
		}

		now := time.Now()
		for len(q) > 0 && !q[0].due.After(now) {
			it := heap.Pop(&q).(item)
			if it.b != nil {
				if !h.send(it.b) {
					return
				}
				continue
			}
			if len(open) == 0 {
				openSince = now
			}
			open = append(open, it.st)
			if len(open) >= h.cfg.BatchSize {
				if !h.send(h.build(open)) {
					return
				}
				open = nil
			}
		}
		if len(open) > 0 && !now.Before(openSince.Add(h.cfg.BatchWait)) {
			if !h.send(h.build(open)) {
				return
			}
			open = nil
		}

		wait := time.Hour
		if len(q) > 0 {
			wait = q[0].due.Sub(now)
		}
		if len(open) > 0 {
			wait = min(wait, openSince.Add(h.cfg.BatchWait).Sub(now))
		}
		timer.Reset(max(wait, 0))
		select {
		case <-h.done:
			return
		case <-h.wake:
		case <-timer.C:
		}
	}
}

func (h *webhooker) send(b *batch) bool {
	select {
	case h.out <- b:
		return true
	case <-h.done:
		return false
	}
}

// build groups statuses by WABA (entry) and number (change), the shape
// Meta uses, so receivers must iterate every level.
func (h *webhooker) build(sts []*hookStatus) *batch {
	w := cloudapi.Webhook{Object: cloudapi.ObjectWhatsApp}
	entryOf := map[string]int{}
	changeOf := map[string][2]int{}
	for _, st := range sts {
		nb := st.number
		pos, ok := changeOf[nb.id]
		if !ok {
			e, ok := entryOf[nb.waba]
			if !ok {
				e = len(w.Entry)
				entryOf[nb.waba] = e
				w.Entry = append(w.Entry, cloudapi.Entry{ID: nb.waba})
			}
			w.Entry[e].Changes = append(w.Entry[e].Changes, cloudapi.Change{
				Field: "messages",
				Value: cloudapi.Value{
					MessagingProduct: "whatsapp",
					Metadata:         cloudapi.Metadata{DisplayPhoneNumber: nb.display, PhoneNumberID: nb.id},
				},
			})
			pos = [2]int{e, len(w.Entry[e].Changes) - 1}
			changeOf[nb.id] = pos
		}
		v := &w.Entry[pos[0]].Changes[pos[1]].Value
		v.Statuses = append(v.Statuses, st.status)
	}
	body, err := json.Marshal(w)
	if err != nil {
		// Our own types always marshal; keep the count right regardless.
		h.log.Error("sim: marshal webhook", "err", err)
	}
	return &batch{body: body, n: len(sts)}
}
