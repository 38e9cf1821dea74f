package receipts

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/store"
)

// statusFor is the message status a changed state moves its message to,
// and the last error to record (wamux.MessageStatusFor); title is the
// failure's title when the receipt that set the state carried one.
func statusFor(state store.MessageState, title string) (wamux.Status, string) {
	return wamux.MessageStatusFor(state.Type, state.ErrorCode, title, cloudapi.PermanentCode)
}

// adoptable lists the statuses of a message without a wamid that a status
// naming it in its callback data resolves: a send still unanswered or
// ambiguous, and, for delivered or read (proof of arrival, which beats
// failed), a message given up as failed without a wamid (compensation or
// retries exhausted, although an earlier attempt had been accepted).
func adoptable(target wamux.Status) []wamux.Status {
	pending := []wamux.Status{wamux.StatusSending, wamux.StatusUnknown}
	if target == wamux.StatusDelivered || target == wamux.StatusRead {
		return append(pending, wamux.StatusFailed)
	}
	return pending
}

// resolution is one provider message whose merged state a batch changed.
type resolution struct {
	state   store.MessageState
	receipt wamux.Receipt // the receipt that set state
	// callback is the biz_opaque_callback_data one of its receipts
	// carried: our msg_id, when we sent it.
	callback string
}

// resolveConcurrency bounds the message updates in flight per batch; they
// share the store's group commit.
const resolveConcurrency = 16

// resolve moves the outbound messages behind changed states forward. A
// message is found by wamid (of the state's account only) or, when its
// wamid is not known yet, by the callback data naming a message without a
// wamid that is still sending or unknown, or failed when the status is
// delivered or read (it adopts the wamid: this is how an ambiguous send
// learns it was accepted and is not resent, and how a send given up on
// learns it arrived). A state with no message yet is left in the store
// for the dispatcher to read when it records the wamid.
func (p *Pipeline) resolve(ctx context.Context, rs []*resolution) error {
	if len(rs) == 0 {
		return nil
	}
	found, err := p.findMessages(ctx, rs)
	if err != nil {
		return err
	}
	var updates []store.MessageUpdate
	var srcs []*resolution
	for _, r := range rs {
		u, result := found.updateFor(r)
		if result != "" {
			p.m.resolved.WithLabelValues(result).Inc()
		}
		if u.MsgID == "" {
			continue
		}
		updates = append(updates, u)
		srcs = append(srcs, r)
	}
	return p.applyUpdates(ctx, updates, srcs)
}

// foundMessages are the outbound messages a batch's states may name.
type foundMessages struct {
	byWAMID map[string]wamux.Message
	byID    map[string]wamux.Message
}

// findMessages looks up the messages rs name, by wamid or by callback
// data, in one call.
func (p *Pipeline) findMessages(ctx context.Context, rs []*resolution) (foundMessages, error) {
	wamids := make([]string, 0, len(rs))
	var cbs []string
	for _, r := range rs {
		wamids = append(wamids, r.state.MessageID)
		if r.callback != "" {
			cbs = append(cbs, r.callback)
		}
	}
	var msgs []wamux.Message
	if err := p.retry(ctx, "find messages", func(ctx context.Context) error {
		var err error
		msgs, err = p.st.FindMessages(ctx, wamids, cbs)
		return err
	}); err != nil {
		return foundMessages{}, err
	}
	f := foundMessages{byWAMID: make(map[string]wamux.Message, len(msgs)), byID: make(map[string]wamux.Message, len(msgs))}
	for _, m := range msgs {
		if m.WAMID != "" {
			f.byWAMID[m.WAMID] = m
		}
		f.byID[m.ID] = m
	}
	return f, nil
}

// updateFor is the update r makes to its message, and the resolved
// metric's result when it makes none ("unmatched", "stale"; "" when its
// state maps to no message status). The update's MsgID is empty when
// there is none.
func (f foundMessages) updateFor(r *resolution) (store.MessageUpdate, string) {
	target, reason := statusFor(r.state, r.receipt.ErrorTitle)
	if target == "" {
		return store.MessageUpdate{}, ""
	}
	m, ok := f.byWAMID[r.state.MessageID]
	if ok && m.AccountID != r.state.AccountID {
		// A wamid names a message of one account: another account's
		// receipt for it must not move it (the dispatcher reads states by
		// account too).
		ok = false
	}
	if !ok {
		if c, pending, adopt := f.adoption(r, target); adopt {
			// The update may replace only what was seen, a message
			// without a wamid: if the send's response records one
			// meanwhile, it is kept, and that side applies the stored
			// state itself.
			return store.MessageUpdate{MsgID: c.ID, From: pending, Status: target, WAMID: r.state.MessageID,
				LastError: wamux.LastErrorFor(target, reason)}, ""
		}
		return store.MessageUpdate{}, "unmatched"
	}
	from := wamux.ForwardFrom(target)
	if !slices.Contains(from, m.Status) {
		return store.MessageUpdate{}, "stale"
	}
	return store.MessageUpdate{MsgID: m.ID, From: from, Status: target, LastError: wamux.LastErrorFor(target, reason)}, ""
}

// adoption is the message without a wamid that r's callback data names,
// of r's account and in a status target resolves (adoptable), with those
// statuses; adopt is false when there is none.
func (f foundMessages) adoption(r *resolution, target wamux.Status) (m wamux.Message, from []wamux.Status, adopt bool) {
	if r.callback == "" {
		return wamux.Message{}, nil, false
	}
	c, found := f.byID[r.callback]
	if !found || c.WAMID != "" || c.AccountID != r.state.AccountID {
		return wamux.Message{}, nil, false
	}
	pending := adoptable(target)
	if !slices.Contains(pending, c.Status) {
		return wamux.Message{}, nil, false
	}
	return c, pending, true
}

// applyUpdates runs the compare-and-set updates concurrently so that they
// share commits. A wamid already held by another message is poison: it is
// dead-lettered, not retried.
func (p *Pipeline) applyUpdates(ctx context.Context, updates []store.MessageUpdate, srcs []*resolution) error {
	if len(updates) == 0 {
		return nil
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		dead  []store.DeadLetter
	)
	sem := make(chan struct{}, resolveConcurrency)
	for i := range updates {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			u := updates[i]
			var ok bool
			err := p.retry(ctx, "update message", func(ctx context.Context) error {
				var err error
				ok, err = p.st.UpdateMessage(ctx, u)
				return err
			})
			result := "stale"
			switch code := wamux.ErrorCode(err); {
			case err == nil && ok && u.WAMID != "":
				result = "adopted"
			case err == nil && ok:
				result = "advanced"
			case err == nil, code == wamux.ENotFound:
			case code == wamux.EConflict:
				payload, _ := json.Marshal(map[string]any{"msg_id": u.MsgID, "wamid": srcs[i].state.MessageID, "status": u.Status})
				mu.Lock()
				dead = append(dead, store.DeadLetter{Source: srcs[i].receipt.Source, AccountID: srcs[i].state.AccountID,
					Reason: "wamid_conflict: the status's wamid belongs to another message", Payload: payload})
				mu.Unlock()
				result = "conflict"
			default:
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("receipts: update message: %w", err)
				}
				mu.Unlock()
				result = "error"
			}
			p.m.resolved.WithLabelValues(result).Inc()
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if len(dead) > 0 {
		return p.deadLetter(ctx, "wamid_conflict", dead)
	}
	return nil
}
