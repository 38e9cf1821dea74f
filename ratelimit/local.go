package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wamux/wamux"
)

// LocalConfig configures the in-process limiter.
type LocalConfig struct {
	// Clock defaults to wamux.SystemClock.
	Clock wamux.Clock
	// DefaultRate and DefaultBurst apply to accounts never given a limit;
	// zero means the package defaults.
	DefaultRate  float64
	DefaultBurst int
}

// Local is the in-process Limiter: one bucket per account behind one mutex.
// A bucket operation is a few nanoseconds of arithmetic, so one lock for all
// accounts costs less than the bookkeeping of finer locks would.
type Local struct {
	clock        wamux.Clock
	defaultRate  float64
	defaultBurst int

	mu       sync.Mutex
	accounts map[string]*gcra
}

var _ Limiter = (*Local)(nil)

// NewLocal builds an in-process limiter.
func NewLocal(cfg LocalConfig) (*Local, error) {
	if cfg.Clock == nil {
		cfg.Clock = wamux.SystemClock{}
	}
	if cfg.DefaultRate == 0 {
		cfg.DefaultRate = DefaultRate
	}
	if cfg.DefaultBurst == 0 {
		cfg.DefaultBurst = DefaultBurst
	}
	if err := checkLimit(cfg.DefaultRate, cfg.DefaultBurst); err != nil {
		return nil, fmt.Errorf("default limit: %w", err)
	}
	return &Local{
		clock:        cfg.Clock,
		defaultRate:  cfg.DefaultRate,
		defaultBurst: cfg.DefaultBurst,
		accounts:     make(map[string]*gcra),
	}, nil
}

// bucket returns the account's bucket, creating a full one with the default
// limit. The caller holds l.mu.
func (l *Local) bucket(accountID string) *gcra {
	b, ok := l.accounts[accountID]
	if !ok {
		b = &gcra{interval: intervalFor(l.defaultRate), burst: l.defaultBurst}
		l.accounts[accountID] = b
	}
	return b
}

// Reserve implements Limiter.
func (l *Local) Reserve(ctx context.Context, accountID string, n int) (bool, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return false, 0, fmt.Errorf("reserve %d tokens for %s: %w", n, accountID, err)
	}
	if n < 1 {
		return false, 0, fmt.Errorf("reserve %d tokens for %s: %w", n, accountID, ErrInvalidCount)
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(accountID)
	if n > b.burst {
		return false, 0, fmt.Errorf("reserve %d tokens for %s (burst %d): %w", n, accountID, b.burst, ErrExceedsBurst)
	}
	ok, wait := b.take(now, n)
	return ok, wait, nil
}

// SetLimit implements Limiter.
func (l *Local) SetLimit(ctx context.Context, accountID string, rate float64, burst int) error {
	if err := checkLimit(rate, burst); err != nil {
		return fmt.Errorf("set limit of %s: %w", accountID, err)
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.accounts[accountID]
	if !ok {
		l.accounts[accountID] = &gcra{interval: intervalFor(rate), burst: burst}
		return nil
	}
	b.reconfigure(now, intervalFor(rate), burst)
	return nil
}

// Tokens implements Limiter.
func (l *Local) Tokens(ctx context.Context, accountID string) (float64, error) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bucket(accountID).tokens(now), nil
}

// Debit implements Limiter.
func (l *Local) Debit(ctx context.Context, accountID string, n int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("debit %d tokens of %s: %w", n, accountID, err)
	}
	if n < 1 {
		return fmt.Errorf("debit %d tokens of %s: %w", n, accountID, ErrInvalidCount)
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bucket(accountID).debit(now, n)
	return nil
}

// Forget drops an account's bucket (a deleted account); its next use starts
// with a full bucket at the default limit.
func (l *Local) Forget(accountID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.accounts, accountID)
}
