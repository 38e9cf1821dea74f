// Package store defines the one interface through which wamux keeps its
// source of truth. Two implementations exist — store/sqlite (embedded, the
// default) and store/postgres (cluster) — and both pass the conformance
// suite in store/storetest.
//
// Every method returns domain errors (*wamux.Error) for outcomes a caller
// decides on (ENotFound, EConflict, EInvalid); infrastructure failures are
// wrapped with %w and reach clients only as "internal" or "unavailable".
// A method that returns nil has made its writes durable, except the
// receipt pipeline's merges and log acks (InsertReceipts,
// InsertReceiptsPutStates, AckReceiptLog): those may return once
// committed and visible, and become durable with the store's next durable
// write, never after a write committed later (store/sqlite defers their
// fsync this way; the pipeline replays its log when a crash loses them).
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wamux/wamux"
)

// Store is the durable state of the gateway.
type Store interface {
	// Ping reports whether the store answers; /readyz uses it.
	Ping(ctx context.Context) error
	// Close flushes pending writes and releases connections.
	Close() error

	AccountStore
	MessageStore
	ReceiptStore
	RoutingStore
	SettingsStore
	PipelineStore // the receipt pipeline
	EventStore
	InboundStore
	AdminAuditStore
	FenceStore
}

// FenceStore keeps the partition leases that fence account work in
// cluster mode: the node owning an account's partition
// (wamux.PartitionOf) acquires it, which bumps the partition's epoch, and
// carries that epoch as a Fence on the message updates it makes for the
// account. A node that lost the partition, even one that has not noticed
// yet, then has its fenced updates refused with ErrFenced.
type FenceStore interface {
	// AcquirePartition makes node the holder of partition and returns the
	// partition's new epoch: one more than the last acquisition's, 1 for
	// the first. Concurrent calls get distinct epochs; the one answered
	// with the highest is the holder.
	AcquirePartition(ctx context.Context, partition int, node string) (int64, error)
	// PartitionEpoch returns the partition's current epoch, 0 when it was
	// never acquired.
	PartitionEpoch(ctx context.Context, partition int) (int64, error)
	// PartitionLeases returns the lease of every partition ever
	// acquired, by partition number.
	PartitionLeases(ctx context.Context) ([]PartitionLease, error)
}

// PartitionLease is the last acquisition of a partition: its holder is
// the node working on the partition's accounts, unless that node died
// and no other has acquired the partition since.
type PartitionLease struct {
	Partition  int
	Epoch      int64
	Holder     string
	AcquiredAt time.Time
}

// Fence is the lease under which a node changes a message: the update
// applies only while Partition is at Epoch, checked in the transaction
// that writes it.
type Fence struct {
	Partition int
	Epoch     int64
}

// ErrFenced is wrapped by the error of an update whose Fence is stale: the
// partition was acquired again since (or never at that epoch). Nothing of
// the update was written.
var ErrFenced = errors.New("partition acquired under a newer epoch")

// FencedAccountError is the refusal of an account patch whose Fence is
// stale; it wraps ErrFenced.
func FencedAccountError(accountID string, f Fence, current int64) error {
	return fmt.Errorf("update account %q under partition %d epoch %d, now at epoch %d: %w",
		accountID, f.Partition, f.Epoch, current, ErrFenced)
}

// FencedError is the refusal of an update whose Fence is stale; it wraps
// ErrFenced. Current is the partition's epoch the store found (0: never
// acquired).
func FencedError(msgID string, f Fence, current int64) error {
	return fmt.Errorf("update message %q under partition %d epoch %d, now at epoch %d: %w",
		msgID, f.Partition, f.Epoch, current, ErrFenced)
}

// ValidatePartition is the rule for a partition lease: a partition
// number ≥ 0 and a node id.
func ValidatePartition(partition int, node string) error {
	if partition < 0 {
		return wamux.Errorf(wamux.EInvalid, "partition %d is negative", partition)
	}
	if node == "" {
		return wamux.Errorf(wamux.EInvalid, "a partition lease needs a node id")
	}
	return nil
}

// AdminAuditStore keeps the record of admin actions (GET /v1/audit).
type AdminAuditStore interface {
	// AddAdminAction records one action; a zero At is stamped with the
	// store's clock.
	AddAdminAction(ctx context.Context, a AdminAction) error
	// ListAdminActions returns up to limit actions, newest first.
	ListAdminActions(ctx context.Context, limit int) ([]AdminAction, error)
}

// AdminAction is one change of configuration or decision for others made
// through the API: who (the API key's id, never the key), what (the route,
// its target and the names of the fields it set, never their values) and
// when.
type AdminAction struct {
	ID     int64
	At     time.Time
	KeyID  string
	Route  string // the route pattern, "PATCH /v1/accounts/{id}"
	Target string // the id the route names; "" for /v1/config
	Fields []string
}

// AccountStore keeps the business phone numbers.
type AccountStore interface {
	// CreateAccount stores a new account; CreatedAt and UpdatedAt are set by
	// the store. An existing id or phone_number_id → EConflict.
	CreateAccount(ctx context.Context, a wamux.Account) (wamux.Account, error)
	// GetAccount → ENotFound when absent.
	GetAccount(ctx context.Context, id string) (wamux.Account, error)
	// GetAccountByPhoneNumberID maps a webhook's metadata.phone_number_id to
	// its account → ENotFound when absent.
	GetAccountByPhoneNumberID(ctx context.Context, phoneNumberID string) (wamux.Account, error)
	// ListAccounts returns every account ordered by id.
	ListAccounts(ctx context.Context) ([]wamux.Account, error)
	// UpdateAccount applies the non-nil fields of p → ENotFound when absent.
	UpdateAccount(ctx context.Context, id string, p AccountPatch) (wamux.Account, error)
}

// AccountPatch names the account fields that may change at runtime; nil
// fields stay as they are.
type AccountPatch struct {
	RatePerSec    *float64
	Burst         *int
	State         *wamux.AccountState
	CooldownUntil *time.Time
	AccessToken   *string
	BaseURL       *string
	// StateReason is why State or CooldownUntil changed, reported in the
	// account.state event; a patch of either without it records none.
	StateReason *string
	// Fence, when set, applies the patch only while the account's
	// partition is at the fence's epoch, checked in the statement that
	// writes it: the send pipeline's own changes (a cooldown, disabling
	// the account) come from the account's holder, and one from a node
	// that lost the account changes nothing and fails with an error
	// wrapping ErrFenced.
	Fence *Fence
}

// InsertOutcome says what InsertMessages did with one message.
type InsertOutcome int

const (
	// Inserted: the message is new and now durable.
	Inserted InsertOutcome = iota
	// Duplicate: the msg_id exists with the same ContentHash; nothing changed.
	Duplicate
	// Conflict: the msg_id exists with other content, or another msg_id
	// holds the same (account_id, client_seq); nothing changed.
	Conflict
)

func (o InsertOutcome) String() string {
	switch o {
	case Inserted:
		return "inserted"
	case Duplicate:
		return "duplicate"
	case Conflict:
		return "conflict"
	}
	return "unknown"
}

// InsertResult is the outcome for one message of an InsertMessages call.
type InsertResult struct {
	Outcome InsertOutcome
	// Existing is the stored message for Duplicate and Conflict.
	Existing *wamux.Message
}

// MessageStore keeps outbound messages and their lifecycle.
type MessageStore interface {
	// InsertMessages stores messages, deciding each one on its own: one
	// conflict does not fail the others. Results are in input order.
	// CreatedAt and UpdatedAt are set by the store.
	InsertMessages(ctx context.Context, msgs []wamux.Message) ([]InsertResult, error)
	// GetMessage → ENotFound when absent.
	GetMessage(ctx context.Context, msgID string) (wamux.Message, error)
	// GetMessageByWAMID finds the message the provider accepted under wamid
	// → ENotFound when absent.
	GetMessageByWAMID(ctx context.Context, wamid string) (wamux.Message, error)
	// UpdateMessage changes one message's lifecycle fields. When u.From is
	// not empty the update applies only if the current status is one of
	// them (compare-and-set) and reports false otherwise. When u.Fence is
	// set and stale, it fails with an error wrapping ErrFenced, checked
	// before anything else, and changes nothing.
	// A wamid already used by another message → EConflict.
	UpdateMessage(ctx context.Context, u MessageUpdate) (bool, error)
	// ListMessages returns messages of one account (all accounts when
	// AccountID is empty) in the given statuses, oldest first; messages
	// stored by one InsertMessages in the order they were given.
	ListMessages(ctx context.Context, f MessageFilter) ([]wamux.Message, error)
	// ListQueue returns messages of one account in status queued, in the
	// order its queue sends them (QueueFilter), for loading the queue a
	// window at a time.
	ListQueue(ctx context.Context, f QueueFilter) ([]wamux.Message, error)
	// CountQueued returns how many messages of one account are in status
	// queued, per priority.
	CountQueued(ctx context.Context, accountID string) ([3]int, error)
}

// QueueFilter selects an account's queued messages for ListQueue.
type QueueFilter struct {
	AccountID string
	// Recipient, when set, lists only that recipient's messages, with or
	// without a client_seq, oldest first (messages of one InsertMessages
	// in the order given). Sequenced is then ignored.
	Recipient string
	// Sequenced lists the messages with a client_seq, by client_seq;
	// otherwise those without one, by priority (P0 first), then oldest
	// first as ListMessages orders them.
	Sequenced bool
	// ExceptRecipients leaves out these recipients' messages (not with
	// Recipient).
	ExceptRecipients []string
	Limit            int // 0 means ListLimitDefault
}

// MessageUpdate is one lifecycle transition of a message.
type MessageUpdate struct {
	MsgID  string
	From   []wamux.Status // optional precondition on the current status
	Status wamux.Status
	// WAMID is set when non-empty; it is never cleared.
	WAMID string
	// AttemptsDelta is added to Attempts: 1 before each provider call, -1
	// when its answer was a throttle, which does not count against
	// max_attempts.
	AttemptsDelta int
	// LastError replaces the last error when non-nil.
	LastError *string
	// AccountID moves the message to another account when non-empty
	// (re-routing after its owner was disabled).
	AccountID string
	// Fence, when set, applies the update only while the fence's
	// partition is at its epoch (FenceStore); nil updates unfenced.
	Fence *Fence
}

// MessageFilter selects messages for ListMessages.
type MessageFilter struct {
	AccountID string
	Statuses  []wamux.Status
	Limit     int // 0 means ListLimitDefault
}

// ListLimitDefault is how many rows a list call returns when it asks for
// a limit <= 0, in every backend.
const ListLimitDefault = 1000

// ListLimit is limit, or ListLimitDefault when limit <= 0.
func ListLimit(limit int) int {
	if limit <= 0 {
		return ListLimitDefault
	}
	return limit
}

// ValidateReceipts is the rule every backend applies before storing or
// logging receipts: each needs its message id, account and type.
func ValidateReceipts(rs []wamux.Receipt) error {
	for i := range rs {
		if rs[i].MessageID == "" || rs[i].AccountID == "" || rs[i].Type == "" {
			return wamux.Errorf(wamux.EInvalid, "receipt %d needs message_id, account_id and type", i)
		}
	}
	return nil
}

// ValidateSeqState is the rule for storing an account's sequence state.
func ValidateSeqState(st SeqState) error {
	if st.AccountID == "" {
		return wamux.Errorf(wamux.EInvalid, "sequence state needs an account_id")
	}
	return nil
}

// ValidateUpdates is the rule for message updates: each names its
// message, and a fence names a partition ≥ 0.
func ValidateUpdates(us ...MessageUpdate) error {
	for _, u := range us {
		if u.MsgID == "" {
			return wamux.Errorf(wamux.EInvalid, "update needs a msg_id")
		}
		if u.Fence != nil && u.Fence.Partition < 0 {
			return wamux.Errorf(wamux.EInvalid, "update of %q is fenced by negative partition %d", u.MsgID, u.Fence.Partition)
		}
	}
	return nil
}

// ReceiptStateWriter is implemented by stores for which one write of
// receipts and states together costs less than two: the receipt pipeline
// then stores a batch's receipts and the states they merge into in one
// call instead of InsertReceipts and PutStates.
type ReceiptStateWriter interface {
	// InsertReceiptsPutStates is InsertReceipts(rs) and PutStates(states)
	// as one atomic write: both are committed when it returns nil, neither
	// when it fails. Durable in commit order (see the package comment).
	InsertReceiptsPutStates(ctx context.Context, rs []wamux.Receipt, states []MessageState) ([]bool, error)
}

// Owner is implemented by stores a gateway process can claim for itself.
// One gateway serves one store (the cluster backends that would let
// several share one are not built): two dispatchers restoring and sending
// the same queued messages would hand a msg_id to the provider twice. The
// gateway (package app) claims its store before its dispatcher starts and
// releases the claim after it stopped and closed the store; tools that open
// a store for other purposes (bench, tests, migrations) do not claim it.
type Owner interface {
	// Claim makes the calling process the store's gateway until Release.
	// When another process holds the claim it fails with an error wrapping
	// ErrInUse that says which lock is taken.
	Claim(ctx context.Context) (Claim, error)
}

// Claim is a held ownership of a store (Owner.Claim).
type Claim interface {
	// Lost is closed when the claim was lost for good, with Err saying
	// why: its hold broke and another process took it before it could be
	// taken again, or held it in between (a store that can tell). The
	// holder must stop sending at once. A claim that cannot break (a file
	// lock) never closes it.
	Lost() <-chan struct{}
	// Err is why the claim was lost; nil while Lost is open.
	Err() error
	// Release gives the claim up; safe to call more than once.
	Release() error
}

// ErrInUse is wrapped by Owner.Claim's error when another gateway process
// holds the store.
var ErrInUse = errors.New("store is in use by another wamux gateway process")

// ReceiptStore keeps receipts, the merged current status per provider
// message, the late-receipt audit and dead letters.
type ReceiptStore interface {
	// InsertReceipts stores receipts and reports for each whether it was new
	// (true) or already stored under the same (message_id, account_id,
	// receipt_type) (false). Results are in input order; repeats inside one
	// call count once. Durable in commit order (see the package comment).
	InsertReceipts(ctx context.Context, rs []wamux.Receipt) ([]bool, error)
	// HasReceipts reports for each key whether a receipt with that triple is
	// stored; the Bloom layer confirms its hits with it.
	HasReceipts(ctx context.Context, keys []ReceiptKey) ([]bool, error)
	// HasCallbackReceipts reports for each key whether the receipt stored
	// with that triple carries callback data (a non-empty
	// biz_opaque_callback_data). The Bloom layer confirms with it the hits
	// of receipts that carry some: such a receipt repeats only a stored
	// copy that carried some too, as a copy without it (an agent's) could
	// not resolve the message its callback data names.
	HasCallbackReceipts(ctx context.Context, keys []ReceiptKey) ([]bool, error)
	// ListReceipts returns the receipts stored for one provider message.
	ListReceipts(ctx context.Context, accountID, messageID string) ([]wamux.Receipt, error)

	// GetStates returns the current merged status of provider messages;
	// a message without one is absent from the map.
	GetStates(ctx context.Context, keys []StateKey) (map[StateKey]MessageState, error)
	// PutStates writes merged statuses (insert or replace).
	PutStates(ctx context.Context, states []MessageState) error

	// AddLateReceipts records receipts that arrived too late to change the
	// state, for audit.
	AddLateReceipts(ctx context.Context, rs []LateReceipt) error
	// ListLateReceipts returns the newest audited receipts first.
	ListLateReceipts(ctx context.Context, limit int) ([]LateReceipt, error)

	// AddDeadLetters keeps input that could not be processed, with why.
	AddDeadLetters(ctx context.Context, ds []DeadLetter) error
	// ListDeadLetters returns the newest dead letters first.
	ListDeadLetters(ctx context.Context, limit int) ([]DeadLetter, error)
}

// ReceiptKey is the uniqueness triple of a receipt.
type ReceiptKey struct {
	MessageID string
	AccountID string
	Type      wamux.ReceiptType
}

// StateKey names one provider message of one account.
type StateKey struct {
	AccountID string
	MessageID string
}

// MessageState is the merged current status of one provider message.
type MessageState struct {
	StateKey
	Type      wamux.ReceiptType
	EventTime time.Time
	ErrorCode int
	UpdatedAt time.Time
}

// LateReceipt is a receipt kept for audit instead of being merged.
type LateReceipt struct {
	wamux.Receipt
	Reason     string
	RecordedAt time.Time
}

// DeadLetter is input that failed processing for good.
type DeadLetter struct {
	ID         int64
	Source     string // "webhook", "agent", "dispatch", …
	AccountID  string
	Reason     string
	Payload    []byte
	RecordedAt time.Time
}

// RoutingStore keeps which account owns a recipient and the per-account
// sequence state.
type RoutingStore interface {
	// GetOwner returns the account that owns the recipient → ENotFound when
	// none does.
	GetOwner(ctx context.Context, recipient string) (string, error)
	// SetOwner makes accountID the owner of recipient and records the move
	// (from the previous owner, if any) with its reason.
	SetOwner(ctx context.Context, recipient, accountID, reason string) error
	// ListOwnerMoves returns the recorded ownership moves of a recipient,
	// oldest first.
	ListOwnerMoves(ctx context.Context, recipient string) ([]OwnerMove, error)

	// GetSeq returns the sequence state of an account; a fresh account has
	// NextSeq 1.
	GetSeq(ctx context.Context, accountID string) (SeqState, error)
	// PutSeq stores the sequence state of an account.
	PutSeq(ctx context.Context, s SeqState) error
	// ApplySeq applies the status changes one step of the reorder buffer
	// decided (released → queued, late → held) and the account's new
	// sequence state in one transaction, so that after a crash the stored
	// NextSeq never disagrees with the stored statuses. Results are as
	// UpdateMessage's, in input order; an error applies nothing, a
	// stale Fence of any update included (ErrFenced).
	ApplySeq(ctx context.Context, s SeqState, updates []MessageUpdate) ([]bool, error)
}

// OwnerMove is one recorded change of a recipient's owning account.
type OwnerMove struct {
	Recipient string
	From      string // empty for the first assignment
	To        string
	Reason    string
	MovedAt   time.Time
}

// SeqState is where an account's client_seq stream stands.
type SeqState struct {
	AccountID string
	// NextSeq is the next client_seq the sequencer will release.
	NextSeq int64
	// GapsSkipped counts seqs given up on after the gap timeout.
	GapsSkipped int64
	UpdatedAt   time.Time
}

// SettingsStore keeps the runtime settings changed through /v1/config.
type SettingsStore interface {
	// Settings returns every stored setting (key → value as text).
	Settings(ctx context.Context) (map[string]string, error)
	// PutSettings stores the given settings in one transaction.
	PutSettings(ctx context.Context, kv map[string]string) error
}

// PipelineStore is what the receipt pipeline (package receipts) needs
// beyond ReceiptStore: in embedded mode the receipt "stream" is durable
// through the store, as a log of receipts appended before the webhook or
// agent is answered and deleted once processed; a crash in between leaves
// them in the log, and the pipeline processes them again at Start.
type PipelineStore interface {
	// AppendReceiptLog appends receipts to the log and returns their ids,
	// in input order. Ids grow with each call but need not follow commit
	// order (PostgreSQL), so readers must not treat them as a cursor of
	// what is committed.
	AppendReceiptLog(ctx context.Context, rs []wamux.Receipt) ([]int64, error)
	// ListReceiptLog returns up to limit logged receipts with an id above
	// afterID, by id.
	ListReceiptLog(ctx context.Context, afterID int64, limit int) ([]LoggedReceipt, error)
	// AckReceiptLog deletes processed receipts from the log and reports
	// how many were still there. Durable in commit order (see the package
	// comment): an ack lost in a crash leaves its receipts to be processed
	// again.
	AckReceiptLog(ctx context.Context, ids []int64) (int, error)
	// FindMessages returns the messages whose wamid is one of wamids or
	// whose msg_id is one of msgIDs, in one round trip, so a batch of
	// statuses resolves its outbound messages without a query per status
	// and a submitted batch finds its stored msg_ids without a query per
	// message. Each message comes once, however many keys name it; keys
	// with no message are skipped; the order is unspecified.
	FindMessages(ctx context.Context, wamids, msgIDs []string) ([]wamux.Message, error)
	// AddInboundMessages keeps the minimal record of messages users sent
	// to a business number (unique per account and wamid; repeats are
	// ignored) and reports how many were new.
	AddInboundMessages(ctx context.Context, ms []InboundMessage) (int, error)
}

// LoggedReceipt is a receipt in the pipeline's durable log.
type LoggedReceipt struct {
	ID int64
	wamux.Receipt
}

// InboundMessage is what wamux keeps of an inbound message.
type InboundMessage struct {
	AccountID  string
	WAMID      string
	Type       string
	SentAt     time.Time
	ReceivedAt time.Time
	// From is the customer's WhatsApp id.
	From string
	// Data is the message.inbound event data (JSON). A message stored
	// with Data has its event written in the same transaction; one
	// without has none.
	Data []byte
}

// PrepareAccount fills an account's defaults and rejects one no sender
// could use; every implementation calls it in CreateAccount, so the rules
// exist once.
func PrepareAccount(a *wamux.Account) error {
	if a.ID == "" || a.PhoneNumberID == "" {
		return wamux.Errorf(wamux.EInvalid, "account needs an id and a phone_number_id")
	}
	if a.State == "" {
		a.State = wamux.AccountActive
	}
	if !a.State.Valid() {
		return wamux.Errorf(wamux.EInvalid, "unknown account state %q", a.State)
	}
	if a.BaseURL == "" {
		a.BaseURL = wamux.DefaultBaseURL
	}
	if !validRate(a.RatePerSec) || a.Burst < 0 {
		return wamux.Errorf(wamux.EInvalid, "rate_per_sec must be a number, and it and burst must not be negative")
	}
	return nil
}

// ValidateAccountPatch is PrepareAccount's rule for the fields a patch
// changes; every implementation calls it in UpdateAccount.
func ValidateAccountPatch(p AccountPatch) error {
	if p.State != nil && !p.State.Valid() {
		return wamux.Errorf(wamux.EInvalid, "unknown account state %q", *p.State)
	}
	if (p.RatePerSec != nil && !validRate(*p.RatePerSec)) || (p.Burst != nil && *p.Burst < 0) {
		return wamux.Errorf(wamux.EInvalid, "rate_per_sec must be a number, and it and burst must not be negative")
	}
	return nil
}

// StateReasonColumn is the state_reason an account update stores: the
// patch's reason, or none when it changes State or CooldownUntil without
// one (an earlier reason does not describe this change); nil (unchanged)
// otherwise.
func StateReasonColumn(p AccountPatch) *string {
	if p.StateReason != nil {
		return p.StateReason
	}
	if p.State != nil || p.CooldownUntil != nil {
		none := ""
		return &none
	}
	return nil
}

// validRate rejects a negative rate and NaN, which no comparison catches
// and the backends would treat apart: SQLite binds NaN as NULL (a NOT NULL
// failure on insert, "unchanged" under the patch's COALESCE), PostgreSQL
// stores it.
func validRate(r float64) bool { return r >= 0 }

// Blocked is the idempotency rule for a message that could not be inserted
// because existing holds its msg_id (sameID) or its (account_id,
// client_seq) or wamid: the same msg_id with the same content is a
// Duplicate, anything else a Conflict. Every implementation decides with
// it, so the rule exists once.
func Blocked(m, existing wamux.Message, sameID bool) InsertResult {
	outcome := Conflict
	if sameID && existing.ContentHash == m.ContentHash {
		outcome = Duplicate
	}
	return InsertResult{Outcome: outcome, Existing: &existing}
}

// StoredCopy reports whether stored, the row an InsertMessages call just
// inserted under m's msg_id, is m and not another message of the same
// batch with that msg_id: of several, the first one nothing blocks is
// stored, which is not the first given when an earlier one's (account_id,
// client_seq) or wamid is taken. Every implementation decides with it.
func StoredCopy(m, stored wamux.Message) bool {
	return m.ID == stored.ID && m.AccountID == stored.AccountID && m.ClientSeq == stored.ClientSeq &&
		m.ContentHash == stored.ContentHash && m.WAMID == stored.WAMID
}
