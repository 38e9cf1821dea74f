package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/wamux/wamux"
)

// Agent spools receipts durably and delivers them to the gateway in the
// background. It is safe for concurrent use.
type Agent struct {
	cfg     Config
	url     string
	spool   *spool
	repeats *repeats
	stats   counters

	unflushed atomic.Int64  // durable receipts the sender has not read yet
	kick      chan struct{} // FlushEvents reached: flush now
	drain     chan struct{} // closed by Close: flush everything, then stop
	cancel    context.CancelFunc
	done      chan struct{} // closed when the sender has stopped
	drained   atomic.Bool   // the sender stopped with nothing left to send

	closeOnce sync.Once
	closeErr  error
}

// New validates cfg, opens (or recovers) the spool in cfg.SpoolDir and
// starts delivering. Receipts left unacknowledged by an earlier agent —
// one that crashed or whose Close ran out of time — are sent first. When
// those belong to another account than cfg.AccountID, New fails with
// ErrSpoolAccount and sends nothing.
func New(cfg Config) (*Agent, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rep, err := newRepeats(cfg.LRUSize)
	if err != nil {
		return nil, fmt.Errorf("agent: repeat filter: %w", err)
	}
	a := &Agent{
		cfg:     cfg,
		url:     endpoint(cfg.GatewayURL),
		repeats: rep,
		kick:    make(chan struct{}, 1),
		drain:   make(chan struct{}),
		done:    make(chan struct{}),
	}
	var replayed uint64
	a.spool, err = openSpool(cfg.SpoolDir, cfg.AccountID, cfg.SegmentBytes, cfg.Logger, func(r record) {
		replayed++
		// A spooled receipt reported again after a restart is a repeat too.
		a.repeats.markDone(repeatKey{messageID: r.MessageID, typ: wamux.ReceiptType(r.Type)})
	}, func(n int) {
		if a.unflushed.Add(int64(n)) >= int64(a.cfg.FlushEvents) {
			a.kickSender()
		}
	})
	if err != nil {
		return nil, err
	}
	a.stats.replayed.Store(replayed)
	a.unflushed.Add(int64(replayed))
	if replayed > 0 {
		cfg.Logger.Info("agent: re-sending receipts left in the spool", "account_id", cfg.AccountID, "receipts", replayed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go a.run(ctx)
	if replayed > 0 {
		a.kickSender()
	}
	return a, nil
}

// Report returns nil once r is durable in the local spool, or when r
// repeats a (message_id, type) reported recently and is dropped. Delivery
// to the gateway happens later, in the background. An error means r was
// not accepted (invalid, closed, spool write failed, ctx ended); if ctx
// ended the receipt may still be delivered, which the gateway's dedup
// makes harmless.
func (a *Agent) Report(ctx context.Context, r Receipt) error {
	if err := r.validate(a.cfg.Clock.Now()); err != nil {
		return err
	}
	k := repeatKey{messageID: r.MessageID, typ: r.Type}
	for {
		c, fresh := a.repeats.claim(k)
		if !fresh {
			// Another Report of the same key may still be writing; the
			// repeat is only dropped once that one has succeeded.
			select {
			case <-c.done:
			case <-ctx.Done():
				return fmt.Errorf("agent: report: %w", ctx.Err())
			}
			if c.err != nil {
				continue
			}
			a.stats.droppedRepeats.Add(1)
			return nil
		}
		err := a.spool.append(ctx, newRecord(r))
		a.repeats.done(k, c, err)
		if err != nil {
			return err
		}
		a.stats.reported.Add(1)
		return nil
	}
}

func (a *Agent) kickSender() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Close stops accepting reports and delivers what is spooled until
// everything is acknowledged or ctx ends; what is left stays in the spool
// for the next agent on SpoolDir, and Close then says so in its error.
// Later calls return the first call's result.
func (a *Agent) Close(ctx context.Context) error {
	a.closeOnce.Do(func() { a.closeErr = a.close(ctx) })
	return a.closeErr
}

func (a *Agent) close(ctx context.Context) error {
	a.spool.closeIntake()
	close(a.drain)
	select {
	case <-a.done:
	case <-ctx.Done():
		a.cancel()
		<-a.done
	}
	a.cancel()
	err := a.spool.close()
	// The sender may stop on ctx before it looks at the spool, so ask the
	// spool itself whether anything is left.
	if !a.drained.Load() && a.spool.pending() {
		cause := ctx.Err()
		if cause == nil {
			cause = errors.New("delivery stopped")
		}
		err = errors.Join(fmt.Errorf("agent: close: unacknowledged receipts stay in the spool: %w", cause), err)
	}
	return err
}
