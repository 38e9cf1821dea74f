package receipts_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
)

// tinyBloom answers "maybe" for every key once one key was added in the
// window: every hit goes to the store to be confirmed.
var tinyBloom = receipts.BloomConfig{ExpectedPerHour: 1, FalsePositiveRate: 0.999}

// callbackCopy is Meta's webhook copy of r: the same key, carrying our
// msg_id as biz_opaque_callback_data.
func callbackCopy(r wamux.Receipt, msgID string) wamux.Receipt {
	r.CallbackData = msgID
	return r
}

func ingestFrom(t *testing.T, p *receipts.Pipeline, source string, rs ...wamux.Receipt) receipts.IngestResult {
	t.Helper()
	res, err := p.Ingest(context.Background(), source, rs)
	if err != nil {
		t.Fatalf("ingest from %s: %v", source, err)
	}
	return res
}

// forgetInL1 pushes acc's earlier receipts out of an L1 of one id per
// account, with new receipts of messages no outbound message has; they
// also fill a tinyBloom filter, which then says "maybe" to every key.
func forgetInL1(t *testing.T, p *receipts.Pipeline, acc string) {
	t.Helper()
	rs := make([]wamux.Receipt, 64)
	for i := range rs {
		fillers++
		rs[i] = rcpt(acc, fmt.Sprint("w-filler-", fillers), wamux.ReceiptSent, 1)
	}
	ingestFrom(t, p, "webhook", rs...)
	flush(t, p)
}

// fillers numbers forgetInL1's receipts, so none repeats another.
var fillers int

// m1's send timed out (unknown, no wamid). The account's agent reports wA
// delivered without callback data: no message has wA, so it resolves
// nothing. Then Meta's webhook reports the same status (same message,
// account and type) with biz_opaque_callback_data = m1. That copy is not a
// repeat of the agent's as far as resolution goes: it is the only one that
// names m1, and the merge resolves m1 with it. Whichever layer remembers
// the agent's copy (L1, the Bloom filter with or without false positives,
// the batch both land in, the store after a restart) must let it through,
// or the compensator resends a message that was delivered.
func TestWebhookCopyOfAgentStatusResolvesUnknown(t *testing.T) {
	cases := []struct {
		name string
		cfg  receipts.Config
		// between runs after the agent's copy was processed; it returns
		// the pipeline that gets the webhook's copy.
		between func(t *testing.T, st store.Store, p *receipts.Pipeline) *receipts.Pipeline
		// sameBatch ingests both copies before the first is processed,
		// sameCall in one call.
		sameBatch, sameCall bool
		// maybe: the filter says "maybe" to the webhook's copy, and the
		// store must deny it; otherwise the filter knows it is new.
		maybe bool
	}{
		{name: "L1", cfg: receipts.Config{}},
		{name: "Bloom", cfg: receipts.Config{LRU: receipts.LRUConfig{PerAccount: 1}},
			between: func(t *testing.T, _ store.Store, p *receipts.Pipeline) *receipts.Pipeline {
				forgetInL1(t, p, "acc1")
				return p
			}},
		{name: "BloomMaybe", cfg: receipts.Config{LRU: receipts.LRUConfig{PerAccount: 1}, Bloom: tinyBloom}, maybe: true,
			between: func(t *testing.T, _ store.Store, p *receipts.Pipeline) *receipts.Pipeline {
				forgetInL1(t, p, "acc1")
				return p
			}},
		{name: "Restart", cfg: receipts.Config{}, maybe: true,
			between: func(t *testing.T, st store.Store, p *receipts.Pipeline) *receipts.Pipeline {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := p.Stop(ctx); err != nil {
					t.Fatalf("stop: %v", err)
				}
				next := startPipeline(t, receipts.Config{Store: st, Bloom: tinyBloom})
				forgetInL1(t, next, "acc1") // the tiny filter now says "maybe" to all
				return next
			}},
		{name: "SameBatch", cfg: receipts.Config{BatchMin: 2, BatchWait: time.Minute}, sameBatch: true},
		{name: "SameCall", cfg: receipts.Config{}, sameCall: true},
	}
	for _, b := range backends() {
		for _, c := range cases {
			t.Run(b.name+"/"+c.name, func(t *testing.T) {
				st := b.open(t)
				storeMsg(t, st, "m1", "acc1", wamux.StatusUnknown, "")
				cfg := c.cfg
				cfg.Store = st
				p := startPipeline(t, cfg)
				agent := rcpt("acc1", "wA", wamux.ReceiptDelivered, 2)
				webhook := callbackCopy(agent, "m1")
				if c.sameCall {
					if res := ingestFrom(t, p, "webhook", agent, webhook); res.Accepted != 2 {
						t.Fatalf("both copies in one call: %+v, want both accepted", res)
					}
				} else if res := ingestFrom(t, p, "agent", agent); res.Accepted != 1 {
					t.Fatalf("agent's copy: %+v, want accepted", res)
				}
				if !c.sameBatch && !c.sameCall {
					flush(t, p)
					if m := getMsg(t, st, "m1"); m.Status != wamux.StatusUnknown {
						t.Fatalf("m1 = %s after the agent's copy alone, want still unknown", m.Status)
					}
				}
				if c.between != nil {
					p = c.between(t, st, p)
				}
				fp := p.Stats().BloomFalsePositives
				if !c.sameCall {
					if res := ingestFrom(t, p, "webhook", webhook); res.Accepted != 1 {
						t.Fatalf("webhook's copy: %+v, want accepted: it is the only copy naming m1", res)
					}
				}
				flush(t, p)
				if got := p.Stats().BloomFalsePositives - fp; c.maybe && got != 1 {
					t.Errorf("stats %+v: the webhook's copy was no Bloom false positive, so the test did not ask the store", p.Stats())
				} else if !c.maybe && got != 0 {
					t.Errorf("stats %+v: the filter took the webhook's copy for the agent's and asked the store", p.Stats())
				}
				if m := getMsg(t, st, "m1"); m.Status != wamux.StatusDelivered || m.WAMID != "wA" {
					t.Fatalf("m1 = %s wamid %q, want delivered wamid wA (stats %+v): the webhook's copy naming m1 was dropped as a repeat of the agent's",
						m.Status, m.WAMID, p.Stats())
				}
				// From now on either copy is a plain repeat.
				before := p.Stats()
				if res := ingestFrom(t, p, "webhook", webhook); res.Duplicates != 1 {
					t.Fatalf("webhook's copy redelivered: %+v, want a duplicate", res)
				}
				if res := ingestFrom(t, p, "agent", agent); res.Duplicates != 1 {
					t.Fatalf("agent's copy repeated: %+v, want a duplicate", res)
				}
				if got := p.Stats().DedupLRU - before.DedupLRU; got != 2 {
					t.Fatalf("L1 dropped %d of the 2 repeats", got)
				}
			})
		}
	}
}

// A redelivered webhook receipt carrying callback data is a repeat of the
// first delivery, which carried the same: L1 drops it, and once L1 has
// forgotten it the Bloom filter does, confirmed by the store, with or
// without false positives. An agent's copy without callback data after it
// is a repeat too.
func TestCallbackRedeliveryStillDeduplicated(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name+"/L1", func(t *testing.T) {
			st := b.open(t)
			p := startPipeline(t, receipts.Config{Store: st})
			webhook := callbackCopy(rcpt("acc1", "wA", wamux.ReceiptDelivered, 2), "m1")
			ingestFrom(t, p, "webhook", webhook)
			if res := ingestFrom(t, p, "webhook", webhook, webhook); res.Duplicates != 2 || res.Accepted != 0 {
				t.Fatalf("redelivery: %+v, want 2 duplicates", res)
			}
			flush(t, p)
			if s := p.Stats(); s.DedupLRU != 1 || s.DedupBatch != 1 || s.Processed != 1 {
				t.Fatalf("stats %+v, want one L1 and one in-call duplicate, one receipt processed", s)
			}
		})
		for _, bloom := range []struct {
			name string
			cfg  receipts.BloomConfig
		}{{"Bloom", receipts.BloomConfig{}}, {"BloomMaybe", tinyBloom}} {
			t.Run(b.name+"/"+bloom.name, func(t *testing.T) {
				st := b.open(t)
				p := startPipeline(t, receipts.Config{Store: st, LRU: receipts.LRUConfig{PerAccount: 1}, Bloom: bloom.cfg})
				agent := rcpt("acc1", "wA", wamux.ReceiptDelivered, 2)
				webhook := callbackCopy(agent, "m1")
				ingestFrom(t, p, "webhook", webhook)
				flush(t, p)
				forgetInL1(t, p, "acc1")
				ingestFrom(t, p, "webhook", webhook)
				flush(t, p)
				forgetInL1(t, p, "acc1")
				ingestFrom(t, p, "agent", agent)
				flush(t, p)
				s := p.Stats()
				if s.DedupBloom != 2 || s.DedupStore != 0 || s.DedupLRU != 0 {
					t.Fatalf("stats %+v, want both repeats dropped by a confirmed Bloom hit", s)
				}
			})
		}
	}
}

// The webhook's copy naming m1 shares a batch with the agent's copy and
// with a true repeat of it (the agent's again, which L1 of one id per
// account has forgotten by then): the repeat is dropped, the webhook's
// copy is not, and m1 is resolved.
func TestCallbackCopyAmongRepeatsInOneBatch(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			storeMsg(t, st, "m1", "acc1", wamux.StatusUnknown, "")
			p := startPipeline(t, receipts.Config{Store: st, BatchMin: 4, BatchWait: time.Minute,
				LRU: receipts.LRUConfig{PerAccount: 1}})
			agent := rcpt("acc1", "wA", wamux.ReceiptDelivered, 2)
			ingestFrom(t, p, "agent", agent)
			ingestFrom(t, p, "webhook", callbackCopy(agent, "m1"))
			ingestFrom(t, p, "webhook", rcpt("acc1", "w-other", wamux.ReceiptSent, 1))
			ingestFrom(t, p, "agent", agent)
			flush(t, p)
			if m := getMsg(t, st, "m1"); m.Status != wamux.StatusDelivered || m.WAMID != "wA" {
				t.Fatalf("m1 = %s wamid %q, want delivered wamid wA (stats %+v)", m.Status, m.WAMID, p.Stats())
			}
			if s := p.Stats(); s.DedupBatch != 1 || s.Processed != 4 {
				t.Fatalf("stats %+v, want the agent's repeat dropped in the batch, 4 receipts processed", s)
			}
		})
	}
}
