package outbound

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/ownership"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
)

// backoff is exponential with full jitter: a random delay in
// [0, min(cap, base·2^(n-1))], so many clients retrying after one outage
// spread out instead of arriving together.
func backoff(base, ceiling time.Duration, n int) time.Duration {
	d := ceiling
	// Shift only while it cannot pass the ceiling: a wrapped-around
	// base<<(n-1) could land anywhere below it.
	if n >= 1 && n-1 < 63 && base > 0 && base <= ceiling>>(n-1) {
		d = base << (n - 1)
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}

// markedSending reports whether the store has the message in status
// sending: a write marking it so committed although its caller got an
// error. A failed read answers false (the attempt is counted again).
func (w *worker) markedSending(msgID string) bool {
	ctx, cancel := bg()
	defer cancel()
	m, err := w.d.store.GetMessage(ctx, msgID)
	return err == nil && m.Status == wamux.StatusSending
}

// send makes one provider attempt for the head message of a recipient. The
// message is recorded as sending before the call, so a crash during the
// call leaves evidence that its outcome is unknown.
func (w *worker) send(it *item) (action, time.Duration) {
	if act, delay, ok := w.markSending(it); !ok {
		return act, delay
	}
	if it.state == itemResend && !it.resendCounted {
		// Once per unknown outcome: a resend refused (requeue) and
		// decided again is the same resend.
		w.d.metrics.resends.WithLabelValues(w.id, "resent").Inc()
		it.resendCounted = true
	}
	w.awaitDeparture()
	acct := w.snapshotAccount()
	began := w.d.clock.Now()
	res := w.d.provider.Send(w.d.sendCtx, cloudapi.DestinationOf(acct), it.msg)
	w.latency.observe(w.d.clock.Now().Sub(began))
	if res.Outcome != cloudapi.Accepted {
		// An acceptance is counted once its wamid is stored or refused
		// (accepted).
		w.d.metrics.sends.WithLabelValues(w.id, res.Outcome.String()).Inc()
	}
	return w.onResult(it, acct, res)
}

// awaitDeparture holds a request, once it is stored as sending, until its
// time on the account's departure schedule: the bucket granted it when it
// was dispatched, and the write since takes varying time, so requests
// would otherwise leave bunched. The schedule runs at the account's
// effective rate with its burst as slack (ratelimit.Departures: in a
// cluster one schedule for every node the account passes through). A
// failed booking lets the request leave at once: the bucket granted it.
// A stopping
// dispatcher still lets it leave at its time, not at once: the stop's
// requests leaving together would pass the provider's limit. The wait is
// then also bounded by the same duration on the wall clock, so a test
// clock that no longer moves cannot hold a stop.
func (w *worker) awaitDeparture() {
	lim := w.d.limiter.Limit(w.id)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	wait, err := w.d.depart.Reserve(ctx, w.id, lim.EffectiveRate, lim.Burst)
	cancel()
	if err != nil {
		w.d.log.Warn("book a departure", "account_id", w.id, "err", err)
	}
	if err != nil || wait <= 0 {
		return
	}
	due := make(chan struct{})
	stop := w.d.timers.AfterFunc(wait, func() { close(due) })
	defer stop()
	select {
	case <-due:
	case <-w.d.ctx.Done():
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-due:
		case <-t.C:
		}
	}
}

// markSending stores the message as sending and counts the attempt; ok
// is false when the provider must not be called now, with what to do
// instead.
func (w *worker) markSending(it *item) (act action, delay time.Duration, ok bool) {
	from := []wamux.Status{wamux.StatusQueued, wamux.StatusWaitingSeq}
	if it.state == itemResend {
		from = []wamux.Status{wamux.StatusUnknown}
	}
	attempt := 1
	if it.maybeSending {
		// The last try of this write failed but may have committed; the
		// provider was not called after it, so sending is ours to retry.
		// Committed, it counted this attempt already.
		from = append(from, wamux.StatusSending)
		if w.markedSending(it.msg.ID) {
			attempt = 0
		}
	}
	if !w.held() {
		// Revoked since the launch: the next holder sends it.
		return actRetry, 0, false
	}
	ctx, cancel := bg()
	updated, err := w.update(ctx, store.MessageUpdate{MsgID: it.msg.ID, From: from, Status: wamux.StatusSending, AttemptsDelta: attempt})
	cancel()
	if errors.Is(err, store.ErrFenced) {
		return actRetry, 0, false
	}
	if err != nil {
		w.d.log.Error("store sending status", "account_id", w.id, "msg_id", it.msg.ID, "err", err)
		it.maybeSending = true
		return actRetry, time.Second, false
	}
	it.maybeSending = false
	if !updated {
		// Someone else moved it on (a status resolved it, an operator
		// dropped it): nothing to send.
		return actDone, 0, false
	}
	return 0, 0, true
}

// onResult records what the provider answered and says what becomes of
// the recipient.
func (w *worker) onResult(it *item, acct wamux.Account, res cloudapi.Result) (action, time.Duration) {
	s := w.d.settings.Current()
	now := w.d.clock.Now()
	switch res.Outcome {
	case cloudapi.Accepted:
		w.accepted(it, res, now)
		return actDone, 0
	case cloudapi.Permanent:
		reason := res.Reason
		w.finish(it, wamux.StatusFailed, "", &reason)
		return actDone, 0
	case cloudapi.Retry:
		return w.retryLater(it, res, s)
	case cloudapi.SlowDown:
		return w.throttled(it, acct, res, s, now)
	case cloudapi.PairLimit:
		return w.pairLimited(it, res, s)
	case cloudapi.Cooldown:
		return w.cooledDown(it, res, s, now)
	case cloudapi.Disable:
		w.disable(res.Reason)
		w.requeue(it, res.Reason, -1)
		return actRetry, 0
	default: // cloudapi.Unknown
		return w.unknownOutcome(it, res, s)
	}
}

// accepted records a message the provider took.
func (w *worker) accepted(it *item, res cloudapi.Result, now time.Time) {
	d := w.d
	// Counted before the status is written: whoever sees the message
	// accepted sees it counted too.
	d.metrics.acceptLatency.WithLabelValues(it.msg.Priority.String()).Observe(now.Sub(it.msg.CreatedAt).Seconds())
	if res.Paced() {
		// Accepted all the same, and resolved by its statuses as any
		// message; but they come only when Meta ends the hold, or never
		// when it drops the message, which only this shows.
		d.metrics.paced.WithLabelValues(w.id).Inc()
		d.log.Info("send paced by the provider: held for quality assessment, its statuses may come late or never",
			"account_id", w.id, "msg_id", it.msg.ID, "wamid", res.WAMID)
	}
	result := res.Outcome.String()
	if w.finish(it, wamux.StatusAccepted, res.WAMID, nil) {
		result = "wamid_conflict"
	}
	d.metrics.sends.WithLabelValues(w.id, result).Inc()
}

// retryLater counts a retryable failure against max_attempts and backs
// off, or fails the message once the attempts are used up.
func (w *worker) retryLater(it *item, res cloudapi.Result, s settings.Values) (action, time.Duration) {
	it.retries++
	if it.retries >= s.MaxAttempts {
		why := fmt.Sprintf("gave up after %d attempts: %s", it.retries, res.Reason)
		w.finish(it, wamux.StatusFailed, "", &why)
		return actDone, 0
	}
	w.d.metrics.retries.WithLabelValues(w.id, "retry").Inc()
	w.requeue(it, res.Reason, 0)
	return actRetry, max(res.Delay, backoff(s.BackoffBase, s.BackoffCap, it.retries))
}

// throttled slows the account down after a rate-limit answer; a long
// wait (code 4, 80007, a Retry-After) pauses the whole account, and a
// code 4 every account of the app.
func (w *worker) throttled(it *item, acct wamux.Account, res cloudapi.Result, s settings.Values, now time.Time) (action, time.Duration) {
	d := w.d
	d.metrics.throttled.WithLabelValues(w.id, throttleCodeLabel(res.Code)).Inc()
	d.metrics.retries.WithLabelValues(w.id, "throttled").Inc()
	lim, started := d.limiter.Throttle(w.id)
	if res.Delay > cloudapi.ThroughputDelay {
		started = d.limiter.CoolDown(w.id, now.Add(res.Delay)) || started
		lim = d.limiter.Limit(w.id)
		if res.Code == cloudapi.AppRateLimitCode {
			d.coolDownApp(acct, now.Add(res.Delay))
		}
	}
	d.throttles.note(d.log, now, s.CooldownMin, w.id, res, "effective_rate", lim.EffectiveRate, "state", lim.State)
	if lim.State == wamux.AccountCooldown {
		w.coolDown(lim.CooldownUntil, started, res.Reason)
	}
	w.requeue(it, res.Reason, -1)
	return actRetry, max(res.Delay, s.BackoffBase)
}

// pairLimited holds back the recipient after a 131056 answer.
func (w *worker) pairLimited(it *item, res cloudapi.Result, s settings.Values) (action, time.Duration) {
	d := w.d
	d.metrics.throttled.WithLabelValues(w.id, throttleCodeLabel(res.Code)).Inc()
	d.metrics.retries.WithLabelValues(w.id, "pair_limit").Inc()
	if err := d.pairs.OnPairLimited(context.Background(), w.id, it.msg.To); err != nil {
		d.log.Error("record pair limit", "account_id", w.id, "err", err)
	}
	d.throttles.note(d.log, d.clock.Now(), s.CooldownMin, w.id, res)
	w.requeue(it, res.Reason, -1)
	// Meta's advice for 131056: wait 4^X seconds, X the hits so far.
	delay := max(res.Delay, s.PairInterval, cloudapi.PairBackoff(it.pairHits))
	it.pairHits++
	return actRetry, delay
}

// cooledDown pauses the account for at least cooldown_min.
func (w *worker) cooledDown(it *item, res cloudapi.Result, s settings.Values, now time.Time) (action, time.Duration) {
	d := w.d
	started := d.limiter.CoolDown(w.id, now.Add(max(res.Delay, s.CooldownMin)))
	// A longer cooldown already running is kept, and stored.
	until := d.limiter.Limit(w.id).CooldownUntil
	w.coolDown(until, started, res.Reason)
	d.metrics.retries.WithLabelValues(w.id, "cooldown").Inc()
	w.requeue(it, res.Reason, -1)
	return actRetry, until.Sub(now)
}

// unknownOutcome stores the message as unknown; the compensator looks
// for a status after the quiet period.
func (w *worker) unknownOutcome(it *item, res cloudapi.Result, s settings.Values) (action, time.Duration) {
	if res.Overloaded {
		w.slowDown(res)
	}
	it.retries++
	why := "outcome unknown: " + res.Reason
	if _, err := w.record(store.MessageUpdate{MsgID: it.msg.ID, From: []wamux.Status{wamux.StatusSending},
		Status: wamux.StatusUnknown, LastError: &why}); err != nil {
		w.d.log.Error("store unknown status", "account_id", w.id, "msg_id", it.msg.ID, "err", err)
	}
	it.outcomeUnknown()
	return actRetry, s.QuietPeriod
}

// slowDown lowers the account's rate after an answer saying the provider
// is overloaded (a 503 without a recognised code) whose outcome is
// unknown: the message itself waits for compensation, but the account
// must not keep sending at full speed into the overload.
func (w *worker) slowDown(res cloudapi.Result) {
	d := w.d
	d.metrics.throttled.WithLabelValues(w.id, throttleCodeLabel(res.Code)).Inc()
	if lim, started := d.limiter.Throttle(w.id); lim.State == wamux.AccountCooldown {
		w.coolDown(lim.CooldownUntil, started, res.Reason)
	}
}

// compensate decides an unknown outcome after the quiet period: a status
// carrying our msg_id (biz_opaque_callback_data) has resolved it, or it is
// resent with the same msg_id.
func (w *worker) compensate(it *item) (action, time.Duration) {
	d := w.d
	s := d.settings.Current()
	if rp := d.receiptProgress(); rp != nil {
		now := d.clock.Now()
		if it.compSince.IsZero() {
			it.compSince, it.compMark = now, rp.Appended(w.id)
		}
		// Statuses received before now are still being processed: look
		// again shortly, for at most another quiet period.
		if rp.Processed(w.id) < it.compMark && now.Sub(it.compSince) < s.QuietPeriod {
			return actRetry, 200 * time.Millisecond
		}
	}
	ctx, cancel := bg()
	m, err := d.store.GetMessage(ctx, it.msg.ID)
	cancel()
	if err != nil {
		d.log.Error("compensation: read message", "account_id", w.id, "msg_id", it.msg.ID, "err", err)
		return actRetry, time.Second
	}
	if m.Status != wamux.StatusUnknown {
		d.metrics.resends.WithLabelValues(w.id, "resolved").Inc()
		return actDone, 0
	}
	if rp := d.receiptProgress(); rp != nil && rp.MergePaused() {
		// Statuses received now wait unmerged in the receipt log
		// (apply_state off), for as long as the pause lasts: one for
		// this message may be among them, and resending would send it
		// twice. The backlog wait starts again once merging is back.
		it.compSince, it.compMark = time.Time{}, 0
		return actRetry, time.Second
	}
	if it.retries >= s.MaxAttempts {
		why := fmt.Sprintf("outcome still unknown after %d attempts", it.retries)
		if _, err := w.record(store.MessageUpdate{MsgID: it.msg.ID, From: []wamux.Status{wamux.StatusUnknown},
			Status: wamux.StatusFailed, LastError: &why}); err != nil {
			d.log.Error("store failed status", "account_id", w.id, "msg_id", it.msg.ID, "err", err)
		}
		return actDone, 0
	}
	it.decideResend()
	return actRetry, 0
}

// finish records a final outcome of an attempt. conflict reports that
// the store refused wamid as another message's, and the attempt was
// recorded by wamidConflict instead.
func (w *worker) finish(it *item, st wamux.Status, wamid string, lastErr *string) (conflict bool) {
	ok, err := w.record(store.MessageUpdate{MsgID: it.msg.ID, From: []wamux.Status{wamux.StatusSending},
		Status: st, WAMID: wamid, LastError: lastErr})
	if err != nil {
		if wamid != "" && wamux.ErrorCode(err) == wamux.EConflict {
			w.wamidConflict(it, wamid)
			return true
		}
		w.d.log.Error("store send outcome", "account_id", w.id, "msg_id", it.msg.ID, "status", st, "err", err)
		return false
	}
	ctx, cancel := bg()
	defer cancel()
	if wamid == "" {
		return false
	}
	if !ok {
		// A status webhook overtook the response and moved the message
		// on; it keeps its status but must still learn its wamid.
		m, err := w.d.store.GetMessage(ctx, it.msg.ID)
		if err == nil && m.WAMID == "" {
			_, err = w.update(ctx, store.MessageUpdate{MsgID: m.ID, From: []wamux.Status{m.Status}, Status: m.Status, WAMID: wamid})
		}
		if err != nil {
			w.d.log.Error("store wamid", "account_id", w.id, "msg_id", it.msg.ID, "err", err)
		}
		return false
	}
	w.applyEarlyStatus(ctx, it.msg.ID, wamid)
	return false
}

// wamidConflict records a send the provider accepted under a wamid the
// store holds for another message (a provider handing out a wamid again,
// as a restarted simulator does). The provider has the message, so it is
// stored accepted, never to be resent, but without the wamid, which the
// store keeps to one message: statuses under it reach the message that
// holds it. last_error and an Error log line name the wamid.
func (w *worker) wamidConflict(it *item, wamid string) {
	var holderID string // for the log only: unknown when the read fails
	ctx, cancel := bg()
	if m, err := w.d.store.GetMessageByWAMID(ctx, wamid); err == nil {
		holderID = m.ID
	}
	cancel()
	w.d.log.Error("provider accepted a send under a wamid another message holds; stored accepted without it, not resent",
		"account_id", w.id, "msg_id", it.msg.ID, "wamid", wamid, "holder_msg_id", holderID)
	why := fmt.Sprintf("the provider accepted it under wamid %s, which another message already holds; "+
		"it is not resent, and the statuses under that wamid go to the other message", wamid)
	if _, err := w.record(store.MessageUpdate{MsgID: it.msg.ID, From: []wamux.Status{wamux.StatusSending},
		Status: wamux.StatusAccepted, LastError: &why}); err != nil {
		w.d.log.Error("store send outcome", "account_id", w.id, "msg_id", it.msg.ID, "status", wamux.StatusAccepted, "err", err)
	}
}

// applyEarlyStatus brings a just-accepted message up to a status that
// arrived before the send's response (an agent's receipt names only the
// wamid, which was not known yet): the receipt pipeline stored the merged
// state under the wamid, and it is applied here.
func (w *worker) applyEarlyStatus(ctx context.Context, msgID, wamid string) {
	key := store.StateKey{AccountID: w.id, MessageID: wamid}
	states, err := w.d.store.GetStates(ctx, []store.StateKey{key})
	if err != nil {
		w.d.log.Error("read early status", "account_id", w.id, "msg_id", msgID, "err", err)
		return
	}
	state, ok := states[key]
	if !ok {
		return
	}
	target, reason := wamux.MessageStatusFor(state.Type, state.ErrorCode, "", cloudapi.PermanentCode)
	if target == "" || target == wamux.StatusAccepted {
		return
	}
	u := store.MessageUpdate{MsgID: msgID, From: wamux.ForwardFrom(target), Status: target,
		LastError: wamux.LastErrorFor(target, reason)}
	if _, err := w.update(ctx, u); err != nil {
		w.d.log.Error("apply early status", "account_id", w.id, "msg_id", msgID, "err", err)
	}
}

// requeue puts a message that was not sent back to queued. A throttle
// gives back the attempt the sending write counted (attemptsDelta -1):
// the stored attempts are those that count against max_attempts, which
// restore reads back.
//
// A refused resend goes back to unknown, not queued: the refusal proves
// only that the resend was not sent, and the first send's outcome is as
// unknown as before. A status adopts a message only while it is sending
// or unknown, and an unknown one is neither moved to another account nor
// shed; the compensator decides it again.
func (w *worker) requeue(it *item, reason string, attemptsDelta int) {
	if it.state == itemResend {
		it.resendRefused()
	}
	back := it.state.stored()
	if _, err := w.record(store.MessageUpdate{MsgID: it.msg.ID, From: []wamux.Status{wamux.StatusSending},
		Status: back, LastError: &reason, AttemptsDelta: attemptsDelta}); err != nil {
		w.d.log.Error("store requeue", "account_id", w.id, "msg_id", it.msg.ID, "err", err)
	}
}

// Waits between the tries of an outcome write (record).
const (
	recordRetryBase = 50 * time.Millisecond
	recordRetryMax  = 5 * time.Second
)

// record stores the outcome of a provider call (accepted, failed, unknown,
// back to queued), trying again while the store fails. Giving up would
// leave the message in sending with nothing in this process to move it
// on: never sent again, never failed, never compensated until a restart.
// The tries end only when the store refuses the update for good (a domain
// error) or when the dispatcher abandons its calls (Stop's bound ran out):
// the message then stays sending, which the next Start makes unknown.
func (w *worker) record(u store.MessageUpdate) (bool, error) {
	delay := recordRetryBase
	for {
		ctx, cancel := bg()
		ok, err := w.update(ctx, u)
		cancel()
		if err == nil {
			return ok, nil
		}
		if errors.Is(err, store.ErrFenced) {
			return false, fmt.Errorf("store %s outcome: %w", u.Status, err)
		}
		if c := wamux.ErrorCode(err); c != wamux.EInternal && c != wamux.EUnavailable {
			return false, err
		}
		w.d.log.Warn("store send outcome failed; retrying", "account_id", w.id, "msg_id", u.MsgID, "status", u.Status, "err", err)
		t := time.NewTimer(rand.N(delay) + 1)
		select {
		case <-t.C:
		case <-w.d.sendCtx.Done():
			t.Stop()
			return false, fmt.Errorf("store %s outcome, abandoned at stop: %w", u.Status, err)
		}
		delay = min(2*delay, recordRetryMax)
	}
}

// coolDown records an account cooldown so it survives a restart; started
// says the answer at hand started it (wamux_account_cooldowns_total), not
// an answer to a request in flight while it runs; reason goes with the
// account.state event.
func (w *worker) coolDown(until time.Time, started bool, reason string) {
	if started {
		w.d.metrics.cooldowns.WithLabelValues(w.id).Inc()
		w.d.log.Warn("account cooling down", "account_id", w.id, "until", until)
	}
	if err := w.storeCooldown(reason); err != nil {
		w.d.log.Error("store cooldown", "account_id", w.id, "err", err)
	}
}

// storeCooldown writes, under cooldownMu, the cooldown the limiter holds
// when the write starts, not the one the caller saw: an operator may have
// ended it (Dispatcher.endCooldown) or made it longer
// (Dispatcher.AccountChanged) in between. A cooldown no longer running is
// not written.
func (w *worker) storeCooldown(reason string) error {
	w.cooldownMu.Lock()
	defer w.cooldownMu.Unlock()
	lim := w.d.limiter.Limit(w.id)
	if lim.State != wamux.AccountCooldown {
		return nil
	}
	ctx, cancel := bg()
	defer cancel()
	_, err := w.updateAccount(ctx, store.AccountPatch{CooldownUntil: &lim.CooldownUntil, StateReason: &reason})
	return err
}

// coolDownApp pauses, until the given time, the other accounts of the app
// whose call limit from's send hit (code 4). An access token belongs to one
// Meta app, so the accounts sending with the same token to the same API
// host are that app's; sending on would only earn each its own code 4 and
// keep the app over its limit. Accounts of the app with other tokens
// cannot be told apart and learn it from their own code 4.
func (d *Dispatcher) coolDownApp(from wamux.Account, until time.Time) {
	ctx, cancel := bg()
	err := d.appPause.pause(ctx, accountApp(from), until)
	cancel()
	if err != nil {
		d.log.Error("share the app pause with the other nodes", "account_id", from.ID, "err", err)
	}
	d.mu.Lock()
	var peers []*worker
	for id, a := range d.accounts {
		if id == from.ID || a.AccessToken != from.AccessToken || apiHost(a) != apiHost(from) {
			continue
		}
		if w, ok := d.workers[id]; ok {
			peers = append(peers, w)
		}
	}
	d.mu.Unlock()
	for _, w := range peers {
		started := d.limiter.CoolDown(w.id, until)
		w.coolDown(d.limiter.Limit(w.id).CooldownUntil, started, "account "+from.ID+" of the same app reached the app's call limit")
		// An idle peer's loop would not run before its next message:
		// woken, it shows the pause in wamux_account_state now and
		// times the gauge's return to active at its end.
		w.kick()
	}
}

// apiHost is the API root an account sends to, with the default filled in.
func apiHost(a wamux.Account) string {
	if a.BaseURL == "" {
		return wamux.DefaultBaseURL
	}
	return strings.TrimRight(a.BaseURL, "/")
}

// disable stops an account the provider refuses (ban, lock, bad token)
// until an operator re-enables it; its routed recipients move to the
// rest of the pool with their queued messages (evacuate), each once
// nothing of it is in flight or of unknown outcome here.
func (w *worker) disable(reason string) {
	w.d.log.Error("account disabled by the provider; fix it and PATCH state=active", "account_id", w.id, "reason", reason)
	st := wamux.AccountDisabled
	ctx, cancel := bg()
	defer cancel()
	a, err := w.updateAccount(ctx, store.AccountPatch{State: &st, StateReason: &reason})
	if errors.Is(err, store.ErrFenced) {
		// Another node holds the account now and learns the refusal
		// from its own sends.
		return
	}
	if err != nil {
		w.d.log.Error("store disabled account", "account_id", w.id, "err", err)
		a = w.snapshotAccount()
		a.State = st
	}
	w.d.mu.Lock()
	w.d.accounts[w.id] = a
	w.d.mu.Unlock()
	w.setAccount(a)
}

// held reports whether this worker takes new work: always without an
// Ownership; with one, until its lease is revoked or refused.
func (w *worker) held() bool {
	return !w.revoked.Load()
}

// errAbandoned is the error of a write the worker no longer makes: the
// drain after its lease's revoke ran out of time.
var errAbandoned = fmt.Errorf("outbound: the account's lease was revoked and its drain abandoned: %w", store.ErrFenced)

// fence puts the worker's lease on u and returns it; ok is false when
// nothing may be written under it any more (the drain after its revoke
// was abandoned). A revoked lease still fences the writes of the
// attempts it drains: the store refuses them once another node acquired
// the partition.
func (w *worker) fence(u *store.MessageUpdate) (lease ownership.Lease, ok bool) {
	if w.abandoned.Load() {
		return w.lease, false
	}
	u.Fence = w.leaseFence
	return w.lease, true
}

// fenceAll is fence for every update of a batch.
func (w *worker) fenceAll(us []store.MessageUpdate) bool {
	if w.abandoned.Load() {
		return false
	}
	for i := range us {
		us[i].Fence = w.leaseFence
	}
	return true
}

// update writes a message update of the account under the worker's
// fence; a refusal (ErrFenced) stops the worker (fenced).
func (w *worker) update(ctx context.Context, u store.MessageUpdate) (bool, error) {
	lease, ok := w.fence(&u)
	if !ok {
		return false, errAbandoned
	}
	updated, err := w.d.store.UpdateMessage(ctx, u)
	if errors.Is(err, store.ErrFenced) {
		w.fenced(lease, u.MsgID, err)
	}
	return updated, err
}

// updateAccount writes the send pipeline's change of the account (a
// cooldown, disabling it) under the worker's fence; a refusal (ErrFenced)
// stops the worker (fenced).
func (w *worker) updateAccount(ctx context.Context, p store.AccountPatch) (wamux.Account, error) {
	if w.abandoned.Load() {
		return wamux.Account{}, errAbandoned
	}
	lease := w.lease
	p.Fence = w.leaseFence
	a, err := w.d.store.UpdateAccount(ctx, w.id, p)
	if errors.Is(err, store.ErrFenced) {
		w.fenced(lease, "", err)
	}
	return a, err
}

// fenced handles the store's refusal of a write under lease: another
// node acquired the account's partition, so this worker takes no new
// work and the lease is dropped (Ownership.Fenced), which stops every
// worker of the partition; the messages are the new holder's to send.
func (w *worker) fenced(lease ownership.Lease, msgID string, err error) {
	if w.revoked.Swap(true) {
		return
	}
	w.d.log.Warn("another node holds the account's partition; this node stops sending for it",
		"account_id", w.id, "msg_id", msgID, "partition", lease.Partition, "epoch", lease.Epoch, "err", err)
	w.d.own.Fenced(lease)
	w.kick()
}
