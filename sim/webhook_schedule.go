package sim

import (
	"container/heap"
	"encoding/json"
	"time"
	"unicode/utf16"
	"unicode/utf8"

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
	w := hookBody{Object: cloudapi.ObjectWhatsApp}
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
				w.Entry = append(w.Entry, hookEntry{ID: nb.waba})
			}
			w.Entry[e].Changes = append(w.Entry[e].Changes, hookChange{
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
	return &batch{body: escapeNonASCII(body), n: len(sts)}
}

// hookBody is the envelope in Meta's key order: a change's "value" comes
// before its "field" (reference §4.4), so a receiver that re-serialises
// the body before checking the signature fails as it would with Meta.
type hookBody struct {
	Object string      `json:"object"`
	Entry  []hookEntry `json:"entry"`
}

type hookEntry struct {
	ID      string       `json:"id"`
	Changes []hookChange `json:"changes"`
}

type hookChange struct {
	Value cloudapi.Value `json:"value"`
	Field string         `json:"field"`
}

// escapeNonASCII writes every non-ASCII character as a \u escape, as Meta
// signs and sends "an escaped unicode version of the payload" (reference
// §5). In JSON from encoding/json non-ASCII bytes occur only in strings.
func escapeNonASCII(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] < utf8.RuneSelf {
		i++
	}
	if i == len(b) {
		return b
	}
	out := append(make([]byte, 0, len(b)+32), b[:i]...)
	const hexDigits = "0123456789abcdef"
	esc := func(r rune) {
		out = append(out, '\\', 'u', hexDigits[r>>12&15], hexDigits[r>>8&15], hexDigits[r>>4&15], hexDigits[r&15])
	}
	for _, r := range string(b[i:]) {
		switch {
		case r < utf8.RuneSelf:
			out = append(out, byte(r))
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			esc(r1)
			esc(r2)
		default:
			esc(r)
		}
	}
	return out
}
