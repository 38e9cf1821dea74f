package local

import (
	"context"
	"fmt"
	"slices"

	"github.com/wamux/wamux/stream"
)

// member is one Consume call in the group.
type member struct {
	h   stream.Handler
	ctx context.Context // Consume's; batches run under it
	// failed receives the first error of a worker (a Batch or a read).
	failed  chan error
	workers map[int32]*worker
}

// worker delivers one partition's records to its member.
type worker struct {
	stop chan struct{} // closed to revoke: return after the batch in flight
	done chan struct{} // closed when the worker returned
}

func (m *member) fail(err error) {
	select {
	case m.failed <- err:
	default:
	}
}

// Consume implements stream.Log.
func (l *Log) Consume(ctx context.Context, h stream.Handler) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return stream.ErrClosed
	}
	l.consumers.Add(1)
	l.mu.Unlock()
	defer l.consumers.Done()

	m := &member{h: h, ctx: ctx, failed: make(chan error, 1), workers: map[int32]*worker{}}
	l.rebalanceMu.Lock()
	l.members = append(l.members, m)
	l.rebalance()
	l.rebalanceMu.Unlock()

	var err error
	select {
	case <-ctx.Done():
	case <-l.closing:
	case err = <-m.failed:
	}

	l.rebalanceMu.Lock()
	l.members = slices.DeleteFunc(l.members, func(o *member) bool { return o == m })
	l.rebalance()
	l.rebalanceMu.Unlock()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("stream/local: consume: %w", err)
	}
	return nil
}

// rebalance deals partition p to member p mod len(members), revoking
// every partition that moves from its holder before assigning it to its
// next one. It runs under rebalanceMu.
func (l *Log) rebalance() {
	target := make([]*member, l.cfg.Partitions)
	if len(l.members) > 0 {
		for p := range target {
			target[p] = l.members[p%len(l.members)]
		}
	}
	l.ownMu.RLock()
	owner := slices.Clone(l.owner)
	l.ownMu.RUnlock()

	var holders []*member
	revoke := map[*member][]int32{}
	assign := map[*member][]int32{}
	for p, o := range owner {
		if o == target[p] {
			continue
		}
		if o != nil {
			if revoke[o] == nil {
				holders = append(holders, o)
			}
			revoke[o] = append(revoke[o], int32(p))
		}
		if target[p] != nil {
			assign[target[p]] = append(assign[target[p]], int32(p))
		}
	}
	for _, o := range holders {
		l.revoke(o, revoke[o])
	}
	for _, m := range l.members {
		if ps := assign[m]; len(ps) > 0 {
			l.assign(m, ps)
		}
	}
}

// revoke stops m's workers of ps, waits for their batches in flight,
// tells m's handler and only then releases the partitions.
func (l *Log) revoke(m *member, ps []int32) {
	for _, p := range ps {
		close(m.workers[p].stop)
	}
	for _, p := range ps {
		<-m.workers[p].done
		delete(m.workers, p)
	}
	m.h.Revoked(context.WithoutCancel(m.ctx), ps)
	l.ownMu.Lock()
	for _, p := range ps {
		l.owner[p] = nil
	}
	l.ownMu.Unlock()
}

// assign gives ps to m and starts their workers after each partition's
// committed offset.
func (l *Log) assign(m *member, ps []int32) {
	l.ownMu.Lock()
	for _, p := range ps {
		l.owner[p] = m
	}
	l.ownMu.Unlock()
	m.h.Assigned(m.ctx, ps)
	l.mu.Lock()
	from := make([]int64, len(ps))
	for i, p := range ps {
		from[i] = l.committed[p] + 1
	}
	l.mu.Unlock()
	for i, p := range ps {
		w := &worker{stop: make(chan struct{}), done: make(chan struct{})}
		m.workers[p] = w
		go l.work(m, w, p, from[i])
	}
}

// work delivers partition p's records from offset pos on, one batch at a
// time, until stopped.
func (l *Log) work(m *member, w *worker, p int32, pos int64) {
	defer close(w.done)
	for {
		l.mu.Lock()
		end, wake := l.end[p], l.wake[p]
		l.mu.Unlock()
		if pos >= end || m.ctx.Err() != nil {
			select {
			case <-wake:
				continue
			case <-w.stop:
				return
			}
		}
		select {
		case <-w.stop:
			return
		default:
		}
		rs, err := l.read(m.ctx, p, pos, int(min(end-pos, int64(l.cfg.MaxBatch))))
		if err == nil && (len(rs) == 0 || rs[0].Offset != pos) {
			err = fmt.Errorf("partition %d: records from offset %d missing", p, pos)
		}
		if err == nil {
			err = m.h.Batch(m.ctx, p, rs)
		}
		if err != nil {
			m.fail(err)
			<-w.stop
			return
		}
		pos = rs[len(rs)-1].Offset + 1
	}
}
