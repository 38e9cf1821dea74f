package sequence

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// Config configures a Sequencer.
type Config struct {
	// Clock defaults to the wall clock.
	Clock wamux.Clock
	// GapTimeout defaults to DefaultGapTimeout. Zero is only reachable
	// through SetGapTimeout, which allows it: every gap is skipped on the
	// next Expire.
	GapTimeout time.Duration
	// MaxSkipped defaults to DefaultMaxSkipped.
	MaxSkipped int
}

// Sequencer holds one Buffer per account. It is safe for concurrent use.
// One mutex guards all buffers: every operation is a few map and heap steps,
// cheaper than the contention a finer scheme would save.
//
// After a restart, call Restore for each account before offering it
// anything: an account the Sequencer has never seen starts at NextSeq 1, as
// a fresh account does in the store.
type Sequencer[T any] struct {
	clock      wamux.Clock
	maxSkipped int

	mu         sync.Mutex
	gapTimeout time.Duration
	buffers    map[string]*Buffer[T]
}

// AccountExpired is what Expire did for one account.
type AccountExpired[T any] struct {
	AccountID string
	Expired[T]
}

// New builds a Sequencer.
func New[T any](cfg Config) (*Sequencer[T], error) {
	if cfg.Clock == nil {
		cfg.Clock = wamux.SystemClock{}
	}
	if cfg.GapTimeout == 0 {
		cfg.GapTimeout = DefaultGapTimeout
	}
	if cfg.GapTimeout < 0 {
		return nil, fmt.Errorf("new sequencer: %v: %w", cfg.GapTimeout, ErrInvalidTimeout)
	}
	if cfg.MaxSkipped <= 0 {
		cfg.MaxSkipped = DefaultMaxSkipped
	}
	return &Sequencer[T]{
		clock:      cfg.Clock,
		maxSkipped: cfg.MaxSkipped,
		gapTimeout: cfg.GapTimeout,
		buffers:    make(map[string]*Buffer[T]),
	}, nil
}

// buffer returns the account's buffer, creating a fresh one. The caller
// holds s.mu.
func (s *Sequencer[T]) buffer(accountID string) *Buffer[T] {
	b, ok := s.buffers[accountID]
	if !ok {
		b = NewBuffer[T](accountID, s.maxSkipped)
		s.buffers[accountID] = b
	}
	return b
}

// Offer hands the account's buffer one item; see Buffer.Offer.
func (s *Sequencer[T]) Offer(accountID string, seq int64, item T) (Result[T], error) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buffer(accountID).Offer(now, seq, item)
}

// Expire skips the gaps whose timeout ran out, in every account, and
// returns what each affected account released and skipped.
func (s *Sequencer[T]) Expire() []AccountExpired[T] {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []AccountExpired[T]
	for id, b := range s.buffers {
		if ex := b.Expire(now, s.gapTimeout); len(ex.Released) > 0 || len(ex.Skipped) > 0 {
			out = append(out, AccountExpired[T]{AccountID: id, Expired: ex})
		}
	}
	slices.SortFunc(out, func(a, b AccountExpired[T]) int { return strings.Compare(a.AccountID, b.AccountID) })
	return out
}

// Restore replaces the account's buffer with one rebuilt from its stored
// state and waiting items; see RestoreBuffer.
func (s *Sequencer[T]) Restore(state store.SeqState, pending []Pending[T]) (Restored[T], error) {
	b, r, err := RestoreBuffer(state, pending, s.maxSkipped)
	if err != nil {
		return Restored[T]{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buffers[state.AccountID] = b
	return r, nil
}

// State returns the account's sequence state for the store.
func (s *Sequencer[T]) State(accountID string) store.SeqState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buffer(accountID).State()
}

// Waiting is the number of the account's items waiting for a predecessor.
func (s *Sequencer[T]) Waiting(accountID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.buffers[accountID]; ok {
		return b.Len()
	}
	return 0
}

// NextDeadline is the earliest time an Expire could release anything.
func (s *Sequencer[T]) NextDeadline() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	found := false
	for _, b := range s.buffers {
		if d, ok := b.NextDeadline(s.gapTimeout); ok && (!found || d.Before(first)) {
			first, found = d, true
		}
	}
	return first, found
}

// GapTimeout returns the current gap timeout.
func (s *Sequencer[T]) GapTimeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gapTimeout
}

// SetGapTimeout changes the gap timeout at runtime. It applies to items
// already waiting too, measured from when each started waiting.
func (s *Sequencer[T]) SetGapTimeout(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("set gap timeout %v: %w", d, ErrInvalidTimeout)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gapTimeout = d
	return nil
}
