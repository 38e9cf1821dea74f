package agent

import (
	"cmp"
	"context"
	"fmt"
)

// ReportBatch reports rs as Report does, but lets the spool make them all
// durable with as few fsyncs as possible: a caller that reads receipts in
// bulk gets far more than one fsync's worth of receipts per second without
// running many goroutines. It returns nil once every receipt of rs is
// durable or dropped as a repeat.
//
// An invalid receipt fails the whole call before anything is spooled. On
// any other error some receipts may be durable already; calling again with
// the same rs is safe, since those now count as repeats.
func (a *Agent) ReportBatch(ctx context.Context, rs []Receipt) error {
	now := a.cfg.Clock.Now()
	for i := range rs {
		if err := rs[i].validate(now); err != nil {
			return fmt.Errorf("agent: receipt %d: %w", i, err)
		}
	}
	type own struct {
		k    repeatKey
		c    *claim
		done <-chan error
	}
	var (
		mine    []own
		others  []*claim // repeats, possibly still being written by someone
		failure error
	)
	for _, r := range rs {
		k := repeatKey{messageID: r.MessageID, typ: r.Type}
		c, fresh := a.repeats.claim(k)
		if !fresh {
			others = append(others, c)
			continue
		}
		done, err := a.spool.enqueue(ctx, newRecord(r))
		if err != nil {
			a.repeats.done(k, c, err)
			failure = err
			break
		}
		mine = append(mine, own{k, c, done})
	}
	// Our own claims are settled first: a repeat inside rs waits on one of
	// them.
	for _, m := range mine {
		err := wait(ctx, m.done)
		a.repeats.done(m.k, m.c, err)
		if err != nil {
			failure = cmp.Or(failure, err)
			continue
		}
		a.stats.reported.Add(1)
	}
	if failure != nil {
		return failure
	}
	for _, c := range others {
		select {
		case <-c.done:
		case <-ctx.Done():
			return fmt.Errorf("agent: report: %w", ctx.Err())
		}
		if c.err != nil {
			return fmt.Errorf("agent: report: an earlier report of the same receipt failed, call again: %w", c.err)
		}
		a.stats.droppedRepeats.Add(1)
	}
	return nil
}
