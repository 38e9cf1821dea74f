package outbound_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// submitCtxKey marks the context of the Submit a test watches, so reads the
// workers make meanwhile (with their own contexts) are not counted.
type submitCtxKey struct{}

// readCountingStore counts message reads made with a marked context and,
// when failReads is set, fails them as a store that lost its connection.
type readCountingStore struct {
	store.Store
	reads     atomic.Int64
	failReads atomic.Bool
}

func (s *readCountingStore) read(ctx context.Context) error {
	if ctx.Value(submitCtxKey{}) == nil {
		return nil
	}
	s.reads.Add(1)
	if s.failReads.Load() {
		return errors.New("store unreachable")
	}
	return nil
}

func (s *readCountingStore) GetMessage(ctx context.Context, id string) (wamux.Message, error) {
	if err := s.read(ctx); err != nil {
		return wamux.Message{}, err
	}
	return s.Store.GetMessage(ctx, id)
}

func (s *readCountingStore) GetMessageByWAMID(ctx context.Context, wamid string) (wamux.Message, error) {
	if err := s.read(ctx); err != nil {
		return wamux.Message{}, err
	}
	return s.Store.GetMessageByWAMID(ctx, wamid)
}

func (s *readCountingStore) FindMessages(ctx context.Context, wamids, ids []string) ([]wamux.Message, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.Store.FindMessages(ctx, wamids, ids)
}

func (s *readCountingStore) ListMessages(ctx context.Context, f store.MessageFilter) ([]wamux.Message, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.Store.ListMessages(ctx, f)
}

func newCountingEnv(t *testing.T) (*env, *readCountingStore) {
	t.Helper()
	counting := &readCountingStore{}
	e := newEnv(t, envOpts{wrapStore: func(st store.Store) store.Store { counting.Store = st; return counting }})
	e.addAccount("a", "9501", 1000, 100, sim.Limits{Rate: 1000})
	e.addAccount("b", "9502", 1000, 100, sim.Limits{Rate: 1000})
	return e, counting
}

func routedBatch(t *testing.T, n int) []wamux.Message {
	t.Helper()
	msgs := make([]wamux.Message, n)
	for i := range msgs {
		msgs[i] = textMsg(t, admit.Request{MsgID: fmt.Sprintf("lookup-%03d", i), To: fmt.Sprintf("1555950%04d", i)})
	}
	return msgs
}

// submitCounted submits msgs and returns the results and the message reads
// the Submit made.
func submitCounted(t *testing.T, e *env, counting *readCountingStore, msgs []wamux.Message) ([]outbound.SubmitResult, int64) {
	t.Helper()
	before := counting.reads.Load()
	ctx := context.WithValue(context.Background(), submitCtxKey{}, true)
	res, err := e.d.Submit(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	return res, counting.reads.Load() - before
}

// TestSubmitLooksUpARoutedBatchOnce: a batch of messages without account_id
// is checked for already stored msg_ids with one store read, not one per
// message, both when all are new and when all are a client's retry.
func TestSubmitLooksUpARoutedBatchOnce(t *testing.T) {
	e, counting := newCountingEnv(t)
	msgs := routedBatch(t, 100)
	res, reads := submitCounted(t, e, counting, msgs)
	if reads != 1 {
		t.Fatalf("submit of 100 new routed messages read the store %d times, want 1", reads)
	}
	for i, r := range res {
		if r.Err != nil || r.Duplicate || r.Message.AccountID == "" {
			t.Fatalf("new message %d: %+v, want routed and stored", i, r)
		}
	}
	retry, reads := submitCounted(t, e, counting, msgs)
	if reads != 1 {
		t.Fatalf("retry of 100 routed messages read the store %d times, want 1", reads)
	}
	for i, r := range retry {
		if r.Err != nil || !r.Duplicate || r.Message.ID != msgs[i].ID || r.Message.AccountID != res[i].Message.AccountID {
			t.Fatalf("retried message %d: %+v, want the stored one on %q as a duplicate", i, r, res[i].Message.AccountID)
		}
	}
	if got := metric(t, e, "wamux_messages_duplicate_total", nil); got != 100 {
		t.Fatalf("duplicates counted %v, want 100", got)
	}
}

// TestSubmitBatchLookupKeepsPerMessageOutcomes: one lookup answers a mixed
// batch as the per-message lookups did: a stored msg_id with the same
// content is the stored message as a duplicate, with other content a
// conflict; a msg_id repeated in the batch is routed once; a message with
// an account_id is not looked up (the store's insert decides it).
func TestSubmitBatchLookupKeepsPerMessageOutcomes(t *testing.T) {
	e, counting := newCountingEnv(t)
	stored := textMsg(t, admit.Request{MsgID: "mix-stored", To: "15559510001"})
	e.submit(stored)
	first, err := e.store.GetMessage(context.Background(), stored.ID)
	if err != nil {
		t.Fatal(err)
	}
	changed := textMsg(t, admit.Request{MsgID: "mix-stored", To: "15559510001", Type: "text", Text: []byte(`{"body":"other"}`)})
	fresh := textMsg(t, admit.Request{MsgID: "mix-new", To: "15559510002"})
	direct := textMsg(t, admit.Request{MsgID: "mix-direct", AccountID: "b", To: "15559510003"})

	res, reads := submitCounted(t, e, counting, []wamux.Message{stored, changed, fresh, fresh, direct})
	if reads != 1 {
		t.Fatalf("mixed batch read the store %d times, want 1", reads)
	}
	if r := res[0]; r.Err != nil || !r.Duplicate || r.Message.AccountID != first.AccountID || !r.Message.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("stored msg_id resubmitted: %+v, want the stored message as a duplicate", r)
	}
	if r := res[1]; wamux.ErrorCode(r.Err) != wamux.EConflict || !strings.Contains(r.Err.Error(), "other content") {
		t.Fatalf("stored msg_id with other content: %+v, want a conflict", r)
	}
	if r := res[2]; r.Err != nil || r.Duplicate || r.Message.AccountID == "" {
		t.Fatalf("new message: %+v, want routed and stored", r)
	}
	if r := res[3]; r.Err != nil || !r.Duplicate || r.Message.AccountID != res[2].Message.AccountID {
		t.Fatalf("repeat inside the batch: %+v, want a duplicate of the message on %q", r, res[2].Message.AccountID)
	}
	if r := res[4]; r.Err != nil || r.Duplicate || r.Message.AccountID != "b" {
		t.Fatalf("message with account_id: %+v, want stored on b", r)
	}
}

// TestSubmitFailedLookupFailsOnlyRoutedMessages: when the store cannot say
// whether msg_ids are already stored, the messages that needed routing get
// that error and are neither routed nor stored; a message with an
// account_id in the same batch is stored.
func TestSubmitFailedLookupFailsOnlyRoutedMessages(t *testing.T) {
	e, counting := newCountingEnv(t)
	counting.failReads.Store(true)
	batch := append(routedBatch(t, 3), textMsg(t, admit.Request{MsgID: "fail-direct", AccountID: "a", To: "15559520001"}))
	res, _ := submitCounted(t, e, counting, batch)
	for i, r := range res[:3] {
		if r.Err == nil || !strings.Contains(r.Err.Error(), "look up msg_id") || !strings.Contains(r.Err.Error(), "store unreachable") {
			t.Fatalf("routed message %d with the lookup failing: %+v, want the lookup's error", i, r)
		}
		if _, err := e.store.GetMessage(context.Background(), batch[i].ID); wamux.ErrorCode(err) != wamux.ENotFound {
			t.Fatalf("routed message %d stored though its lookup failed (%v)", i, err)
		}
		if _, err := e.store.GetOwner(context.Background(), batch[i].To); wamux.ErrorCode(err) != wamux.ENotFound {
			t.Fatalf("recipient of routed message %d got an owner though its lookup failed (%v)", i, err)
		}
	}
	if r := res[3]; r.Err != nil || r.Message.AccountID != "a" {
		t.Fatalf("message with account_id: %+v, want stored on a", r)
	}
}
