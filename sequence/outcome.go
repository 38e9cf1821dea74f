package sequence

import (
	"errors"
	"time"
)

// Outcome is what the buffer did with an offered seq.
type Outcome int

const (
	// Released: the item is releasable now; it is in Result.Released.
	Released Outcome = iota + 1
	// Waiting: a predecessor is missing; the item waits in the buffer.
	Waiting
	// Held: the seq was skipped after the gap timeout; the item arrived
	// too late to be sent in order and must be parked.
	Held
	// Duplicate: the seq was already released, or is waiting now; the
	// offered item is dropped.
	Duplicate
	// Late: the seq is below NextSeq and older than what the buffer
	// remembers (it was restored, or the skip ranges were trimmed), so it
	// cannot say whether the seq was released or skipped. The caller asks
	// its store: if a message with this (account_id, client_seq) is stored
	// in a status past waiting_seq and held (queued, sending, accepted, …),
	// the seq was released and this is a duplicate; otherwise it was
	// skipped and this is held. For a message the store has just inserted
	// as new, Late always means held: the store's unique (account_id,
	// client_seq) proves no other message with this seq was released.
	Late
)

func (o Outcome) String() string {
	switch o {
	case Released:
		return "released"
	case Waiting:
		return "waiting"
	case Held:
		return "held"
	case Duplicate:
		return "duplicate"
	case Late:
		return "late"
	}
	return "unknown"
}

// Entry is one item and its seq.
type Entry[T any] struct {
	Seq  int64
	Item T
}

// Pending is a waiting item as the caller reloads it from its store after a
// restart (messages in status waiting_seq).
type Pending[T any] struct {
	Seq  int64
	Item T
	// Since is when the item started waiting (the message's created_at),
	// so its gap timeout runs on from there instead of starting over.
	Since time.Time
}

// Range is an inclusive range of seqs skipped together.
type Range struct {
	From, To int64
}

// Len is the number of seqs in r.
func (r Range) Len() int64 { return r.To - r.From + 1 }

// ErrInvalidSeq is returned for a seq below 1 (0 means "no client_seq" and
// never reaches the buffer) and for a restored state with NextSeq below 1.
var ErrInvalidSeq = errors.New("sequence: seq must be at least 1")

// ErrItemsWaiting is returned by Pass while items wait in the buffer: they
// must be released (Expire) before a seq may pass them.
var ErrItemsWaiting = errors.New("sequence: items are waiting; release them first")

// ErrInvalidTimeout is returned for a negative gap timeout.
var ErrInvalidTimeout = errors.New("sequence: gap timeout must not be negative")

// Defaults.
const (
	// DefaultGapTimeout is how long a message waits for a missing
	// predecessor before the gap is skipped (runtime setting gap_timeout).
	DefaultGapTimeout = 5 * time.Minute
	// DefaultMaxSkipped is how many skip ranges a buffer remembers to
	// answer Held by itself; older ones are forgotten and their seqs come
	// back as Late.
	DefaultMaxSkipped = 1024
)
