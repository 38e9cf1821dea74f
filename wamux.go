// Package wamux holds the vocabulary shared by every part of the gateway:
// accounts, messages, receipts, their states, and the domain error codes.
// It imports nothing of ours, so every other package can depend on it.
package wamux

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// AccountState is the operational state of a WhatsApp business number.
type AccountState string

const (
	// AccountActive sends normally.
	AccountActive AccountState = "active"
	// AccountCooldown sends nothing until CooldownUntil, after repeated limits.
	AccountCooldown AccountState = "cooldown"
	// AccountDisabled sends nothing until an operator re-enables it
	// (auth failure, ban, policy block).
	AccountDisabled AccountState = "disabled"
)

// Valid reports whether s is one of the known account states.
func (s AccountState) Valid() bool {
	switch s {
	case AccountActive, AccountCooldown, AccountDisabled:
		return true
	}
	return false
}

// DefaultBaseURL is the Graph API host used when an account names none.
const DefaultBaseURL = "https://graph.facebook.com"

// MaxAccountIDLen bounds an account id (ValidAccountID).
const MaxAccountIDLen = 64

var accountIDPattern = regexp.MustCompile(fmt.Sprintf(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,%d}$`, MaxAccountIDLen-1))

// ValidAccountID tells whether id can name an account: 1 to
// MaxAccountIDLen letters, digits, '_', '-' or '.', starting with a letter
// or digit. The API creates accounts by it and the receipts batch refuses
// any other id, so an agent checks its own by it too: one it would send
// in vain is refused when the agent starts, not dead-lettered batch by
// batch.
func ValidAccountID(id string) bool { return accountIDPattern.MatchString(id) }

// Account is one Cloud API business phone number wamux sends through.
type Account struct {
	ID            string
	PhoneNumberID string
	// AccessToken is the bearer token for the Cloud API. It is stored but
	// never returned by the API, logged or exported as a metric.
	AccessToken   string
	BaseURL       string
	RatePerSec    float64
	Burst         int
	State         AccountState
	CooldownUntil time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// String deliberately omits the access token so that an Account printed by
// mistake (%v in a log line) never leaks it.
func (a Account) String() string {
	return fmt.Sprintf("Account{ID:%s PhoneNumberID:%s State:%s}", a.ID, a.PhoneNumberID, a.State)
}

// GoString keeps %#v as safe as %v.
func (a Account) GoString() string { return a.String() }

// LogValue is what slog records of an Account: its JSON handler
// (--log-format json) ignores String and would write every field, the
// token too.
func (a Account) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", a.ID), slog.String("phone_number_id", a.PhoneNumberID),
		slog.String("state", string(a.State)))
}

// Priority orders work inside an account queue: P0 before P1 before P2.
type Priority int

const (
	P0 Priority = 0
	P1 Priority = 1
	P2 Priority = 2
)

// DefaultPriority is used when a message names none.
const DefaultPriority = P1

func (p Priority) String() string {
	switch p {
	case P0:
		return "P0"
	case P1:
		return "P1"
	case P2:
		return "P2"
	}
	return "P" + strconv.Itoa(int(p))
}

// ParsePriority reads "P0", "P1" or "P2"; the empty string is DefaultPriority.
func ParsePriority(s string) (Priority, error) {
	switch s {
	case "":
		return DefaultPriority, nil
	case "P0":
		return P0, nil
	case "P1":
		return P1, nil
	case "P2":
		return P2, nil
	}
	return 0, Errorf(EInvalid, "priority must be P0, P1 or P2, got %q", s)
}

// Status is where a message is in its life, from admission to the
// recipient's read receipt.
type Status string

const (
	StatusWaitingSeq Status = "waiting_seq" // predecessor client_seq missing
	StatusQueued     Status = "queued"      // in its account queue
	StatusSending    Status = "sending"     // handed to the provider, no answer yet
	StatusUnknown    Status = "unknown"     // outcome unknown, compensation pending
	StatusAccepted   Status = "accepted"    // the provider returned a wamid
	StatusSent       Status = "sent"
	StatusDelivered  Status = "delivered"
	StatusRead       Status = "read"
	StatusFailed     Status = "failed"
	StatusDropped    Status = "dropped" // P2 shed under overload
	StatusHeld       Status = "held"    // late seq after a skipped gap, awaits release or drop
)

// Valid reports whether s is a known message status.
func (s Status) Valid() bool {
	switch s {
	case StatusWaitingSeq, StatusQueued, StatusSending, StatusUnknown, StatusAccepted,
		StatusSent, StatusDelivered, StatusRead, StatusFailed, StatusDropped, StatusHeld:
		return true
	}
	return false
}

// Message is one outbound message and its current state.
type Message struct {
	// ID is the msg_id: the client's, or derived by DeriveMsgID / NewMsgID.
	ID        string
	BizType   string
	AccountID string
	// ClientSeq is the client's per-account sequence number; 0 means none.
	ClientSeq int64
	To        string
	Priority  Priority
	Type      string
	// Payload is the type-specific JSON (text, template, …) passed to the
	// provider as-is.
	Payload []byte
	// ContentHash fingerprints what the client sent, so that a repeat of
	// the same msg_id can be told apart from a conflicting reuse.
	ContentHash string
	Status      Status
	WAMID       string
	Attempts    int
	LastError   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// ReceiptType is the kind of status a receipt reports.
type ReceiptType string

const (
	ReceiptSent      ReceiptType = "sent"
	ReceiptDelivered ReceiptType = "delivered"
	ReceiptRead      ReceiptType = "read"
	ReceiptFailed    ReceiptType = "failed"
)

// ParseReceiptType validates a receipt type from outside input.
func ParseReceiptType(s string) (ReceiptType, error) {
	switch t := ReceiptType(s); t {
	case ReceiptSent, ReceiptDelivered, ReceiptRead, ReceiptFailed:
		return t, nil
	}
	return "", Errorf(EInvalid, "receipt type must be sent, delivered, read or failed, got %q", s)
}

// Version is the strength of a receipt type in the merge order
// sent(1) < failed(1.5) < delivered(2) < read(3), scaled by two so it stays
// an integer: a delivered or read is proof of arrival and beats failed.
func (t ReceiptType) Version() int {
	switch t {
	case ReceiptSent:
		return 2
	case ReceiptFailed:
		return 3
	case ReceiptDelivered:
		return 4
	case ReceiptRead:
		return 6
	}
	return 0
}

// MaxEventTimeAhead is how far past the moment the gateway receives a
// receipt its EventTime may lie; the gateway refuses one further ahead.
// Meta stamps a status with its own clock and an agent with its host's,
// so a little skew against the gateway's is normal. A receipt far ahead
// would win every tie at its strength until then, and make a stronger
// receipt stamped before it late (audited, not merged) once the late
// window had passed: the message's status would hold for as long as the
// time lies ahead.
const MaxEventTimeAhead = 15 * time.Minute

// Receipt is one status report about one provider message.
type Receipt struct {
	// MessageID is the provider's id (the wamid) the status is about.
	MessageID string
	AccountID string
	Type      ReceiptType
	EventTime time.Time
	// CallbackData is the echoed biz_opaque_callback_data: our msg_id when
	// we sent the message.
	CallbackData string
	Recipient    string
	ErrorCode    int
	ErrorTitle   string
	// Source says where the receipt came from: "webhook" or "agent".
	Source     string
	ReceivedAt time.Time
}

// DeriveMsgID returns the msg_id of a message that carries a client_seq:
// the first 24 hex digits of sha256(biz_type ":" account_id ":" client_seq).
// No timestamp goes in, so a retry a second later gets the same id.
func DeriveMsgID(bizType, accountID string, clientSeq int64) string {
	sum := sha256.Sum256([]byte(bizType + ":" + accountID + ":" + strconv.FormatInt(clientSeq, 10)))
	return hex.EncodeToString(sum[:])[:24]
}

// NewMsgID returns a fresh UUIDv7 for a message without a client_seq;
// its time prefix keeps ids roughly sortable by creation.
func NewMsgID() string {
	id, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only when the system's random source does.
		panic(fmt.Sprintf("wamux: uuid v7: %v", err))
	}
	return id.String()
}
