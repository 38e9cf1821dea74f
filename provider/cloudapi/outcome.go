package cloudapi

import "time"

// Outcome is what a send attempt means for the dispatcher.
type Outcome int

const (
	// Accepted: Meta returned a wamid. Delivery is reported later by webhook.
	Accepted Outcome = iota
	// Retry: the message was certainly not sent; try it again after Delay.
	Retry
	// SlowDown: the number (130429), the app (4) or the WABA (80007) hit a
	// rate limit; nothing was sent. Lower the account's rate and retry.
	SlowDown
	// PairLimit: too many messages to this recipient (131056). Only this
	// recipient waits (4^X s); other recipients of the account continue.
	PairLimit
	// Cooldown: the account must pause for Delay (spam limit 131048,
	// maintenance 131057, template-classification limit 131064).
	Cooldown
	// Disable: the account cannot send until an operator fixes it (policy
	// block 368, locked 131031, bad or expired token 0/190, permissions,
	// deleted or invalid phone number id 33).
	Disable
	// Permanent: this message will never be accepted as it is (bad
	// parameter, undeliverable recipient, template problem, opt-out …).
	Permanent
	// Unknown: the request may or may not have been accepted (timeout,
	// connection reset, 5xx, codes 1, 2, 131000, 131016). Do not resend
	// blindly: wait for a status webhook carrying our callback data first.
	Unknown
)

var outcomeNames = [...]string{
	Accepted:  "accepted",
	Retry:     "retry",
	SlowDown:  "slow_down",
	PairLimit: "pair_limit",
	Cooldown:  "cooldown",
	Disable:   "disable",
	Permanent: "permanent",
	Unknown:   "unknown",
}

// String is a short, stable name, fit for a metric label.
func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "invalid"
}

// MessageHeld is the message_status Meta answers when it paces a
// marketing or utility template (reference §1, §8): the message is
// accepted, but Meta holds it and later sends it, its statuses coming
// late, or drops it.
const MessageHeld = "held_for_quality_assessment"

// Result is the classified outcome of one send attempt.
type Result struct {
	Outcome Outcome
	// WAMID is Meta's message id; set only when Outcome is Accepted.
	WAMID string
	// MessageStatus is Meta's messages[0].message_status ("accepted" or
	// MessageHeld); it may be empty.
	MessageStatus string
	// Delay is how long to wait before the next attempt the outcome allows
	// (for the recipient when PairLimit, for the account when SlowDown or
	// Cooldown). A Retry-After header, when present, wins. Zero means the
	// outcome implies no timed retry (Accepted, Disable, Permanent, and
	// Unknown, which waits for the dispatcher's quiet period instead).
	Delay time.Duration
	// HTTPStatus is the response status, 0 when no response arrived.
	HTTPStatus int
	// Code and Subcode are Meta's error.code and error.error_subcode; Code
	// is -1 when the response carried no error code at all.
	Code    int
	Subcode int
	// Overloaded is set on an HTTP 503 without a recognised error code:
	// whatever the outcome (Unknown: it may have been taken), the provider
	// says it is overloaded, and the account should slow down as after a
	// throttle (reference §2).
	Overloaded bool
	// Reason is a short, client-safe explanation (Meta's title and details
	// or the transport failure). It never contains the access token, and
	// is valid UTF-8 without NUL bytes, which every store can keep.
	Reason string
	// Err is the underlying error, if any, for logs; like Reason it never
	// contains the access token.
	Err error
}

// Paced reports whether Meta accepted the message but holds it for
// quality assessment (MessageHeld). It is still accepted: nothing is to
// be retried, but its statuses may come late or never.
func (r Result) Paced() bool {
	return r.Outcome == Accepted && r.MessageStatus == MessageHeld
}
