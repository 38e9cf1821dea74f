package sim

import (
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// Defaults, from Meta's documented limits where there are any (reference §3).
const (
	RateDefault         = 80.0            // messages per second per number
	PairIntervalDefault = 6 * time.Second // one message per 6 s per recipient
	PairBurstDefault    = 45              // Meta allows bursts of up to 45 in 6 s
	SlowDelayDefault    = 30 * time.Second
	PacedHoldDefault    = time.Minute
	MaxRecordsDefault   = 1_000_000
	MaxBodyBytes        = 1 << 20
	// StrictSecondMaxRate bounds the rate of a number with
	// Limits.StrictSecond, which keeps the time of each message of the
	// last second.
	StrictSecondMaxRate = 1_000_000
	maxBatch            = 1000
)

// Number is one simulated business phone number.
type Number struct {
	// PhoneNumberID is the id in the send path.
	PhoneNumberID string `json:"phone_number_id"`
	// AccessToken is the bearer token this number accepts. It is never
	// shown by /sim endpoints or logs.
	AccessToken string `json:"access_token"`
	// DisplayPhoneNumber and WABAID appear in webhooks; derived when empty.
	DisplayPhoneNumber string `json:"display_phone_number,omitempty"`
	WABAID             string `json:"waba_id,omitempty"`
	// Limits overrides Config.Limits field by field (zero keeps the default).
	Limits Limits `json:"limits,omitzero"`
	// Faults, when set, replace Config.Faults for this number only, e.g.
	// to ban one account (code 368) while the others keep sending.
	Faults *Faults `json:"-"`
}

// Limits are the rate limits of one number.
type Limits struct {
	// Rate is the throughput in messages per second (130429 above it).
	Rate float64 `json:"rate,omitempty"`
	// Burst is how many messages may arrive at once; default one second's
	// worth (Rate).
	Burst int `json:"burst,omitempty"`
	// PairInterval is the sustained spacing of messages to one recipient.
	PairInterval time.Duration `json:"pair_interval,omitempty"`
	// StrictSecond also refuses (130429) a message that would make more
	// than Rate (rounded down, at least 1) accepted in any one second
	// (t-1s, t], as a provider counting every one-second window does;
	// without it only the Rate/Burst bucket applies, which lets Burst + Rate
	// through in the second after an idle spell.
	StrictSecond bool `json:"strict_second,omitempty"`
	// PairBurst is how many messages to one recipient may come within 6 s
	// before 131056. As with Meta, a burst borrows future quota: after a
	// burst of n the recipient gets nothing more until n×PairInterval
	// after the burst began.
	PairBurst int `json:"pair_burst,omitempty"`
}

// over returns l with o's non-zero fields applied.
func (l Limits) over(o Limits) Limits {
	if o.Rate > 0 {
		l.Rate = o.Rate
		if o.Burst <= 0 {
			l.Burst = 0
		}
	}
	if o.Burst > 0 {
		l.Burst = o.Burst
	}
	if o.PairInterval > 0 {
		l.PairInterval = o.PairInterval
	}
	if o.PairBurst > 0 {
		l.PairBurst = o.PairBurst
	}
	l.StrictSecond = l.StrictSecond || o.StrictSecond
	return l.withDefaults()
}

func (l Limits) withDefaults() Limits {
	if l.Rate <= 0 {
		l.Rate = RateDefault
	}
	if l.Burst <= 0 {
		l.Burst = max(1, int(l.Rate))
	}
	if l.PairInterval <= 0 {
		l.PairInterval = PairIntervalDefault
	}
	if l.PairBurst <= 0 {
		l.PairBurst = PairBurstDefault
	}
	return l
}

// Range is a uniform distribution of durations in [Min, Max].
type Range struct {
	Min time.Duration
	Max time.Duration
}

// Faults are injected into sends and webhooks, each with a probability in
// [0, 1] per request (or per message, for webhooks). Config.Faults apply
// to every number unless Number.Faults or Server.SetFaults says otherwise.
type Faults struct {
	// ServerError answers 500 (code 131000) or 503 (code 2) without
	// accepting the message.
	ServerError float64
	// SlowAccept accepts the message, then answers only after SlowDelay:
	// past the client's timeout this is the ambiguous case the gateway
	// must compensate for.
	SlowAccept float64
	// SlowDelay is how long a SlowAccept response takes; default 30 s.
	SlowDelay time.Duration
	// Reset drops the connection without an answer and without accepting.
	Reset float64
	// ResetAfterAccept accepts the message, then drops the connection.
	ResetAfterAccept float64
	// ServerErrorAfterAccept accepts the message (it gets its wamid and
	// status webhooks and counts toward the limits), then answers HTTP 500
	// with code 131000 "Something went wrong": the 5xx whose outcome the
	// reference (§7) calls ambiguous, here on the side where Meta did
	// send. Drawn after SlowAccept and ResetAfterAccept, never with them.
	ServerErrorAfterAccept float64
	// Codes answers with the given Meta error code, with the probability
	// given, without accepting (e.g. {131048: 1} to test spam cooldown).
	// Drawn after ServerError and Reset, in ascending code order.
	Codes map[int]float64
	// RetryAfter, when set, adds a Retry-After header (whole seconds) to
	// injected and rate-limit errors. Meta does not document one; this
	// checks that a client would honour it.
	RetryAfter time.Duration
	// Latency delays every answer by a draw from this range, after the
	// request is counted: the provider's time to answer.
	Latency Range
	// Jitter delays every request by a draw from [0, Jitter] before it is
	// counted against the limits: the network's variation on the way in,
	// which bunches requests that left evenly spaced.
	Jitter time.Duration
	// WebhookDuplicate sends a status webhook a second time.
	WebhookDuplicate float64
	// WebhookReorder sends a message's statuses in reverse order (read
	// before delivered, sent last), timestamps unchanged.
	WebhookReorder float64
	// Paced is the chance that an accepted template send is paced, as
	// Meta paces marketing and utility templates (reference §1, §8): the
	// 200 answer says "message_status":"held_for_quality_assessment"
	// instead of "accepted", and the message's status webhooks come
	// PacedHold later than they otherwise would. Text and other free-form
	// sends are never paced. A paced send counts toward the limits as any
	// accepted one. Drawn after the answer faults and independently of
	// them: pacing is about the message, not the transport.
	Paced float64
	// PacedHold is the extra time a paced message is held before its
	// statuses start; default 1 min.
	PacedHold time.Duration
	// PacedDrop is the chance that a paced message is dropped after the
	// hold instead of sent. The reference does not say what Meta sends
	// then, so the simulator sends nothing at all: the message never gets
	// a status webhook.
	PacedDrop float64
}

// Webhooks configures status notifications. With URL empty none are sent.
type Webhooks struct {
	URL string
	// AppSecret keys the X-Hub-Signature-256 HMAC; never logged.
	AppSecret string
	// Delay is the time from acceptance to sent, and from each status to
	// the next. Zero sends them at once (in order); `wamux sim` defaults
	// to 50–500 ms.
	Delay Range
	// ReadProbability is the chance a delivered message is also read.
	ReadProbability float64
	// FailProbability is the chance an accepted message fails instead of
	// being delivered, with FailCode (default 131049).
	FailProbability float64
	FailCode        int
	// SkipDeliveredProbability is the chance that a read message gets no
	// delivered status: Meta skips it when delivery and reading coincide
	// (reference §6); the read then carries the pricing.
	SkipDeliveredProbability float64
	// FailAfterSentProbability is the chance that a failed message first
	// gets a sent status (with WebhookReorder, sent arrives after failed).
	FailAfterSentProbability float64
	// BatchSize is the most statuses per POST (default 1, at most 1000 as
	// with Meta); BatchWait is how long a partial batch waits for more
	// (default 20 ms).
	BatchSize int
	BatchWait time.Duration
	// Concurrency is the number of POSTs in flight (default 4).
	Concurrency int
	// Timeout bounds one POST (default 5 s).
	Timeout time.Duration
	// RetryFor is how long a POST not answered 200 is redelivered, from
	// its first attempt: Meta retries for up to 7 days (the default).
	// MaxAttempts, when positive, also caps the attempts (default none).
	// RetryBase and RetryMax shape the exponential backoff (1 s, 1 min).
	RetryFor    time.Duration
	MaxAttempts int
	RetryBase   time.Duration
	RetryMax    time.Duration
	// QueueSize bounds statuses waiting to be sent; beyond it new ones are
	// dropped and counted (default 1,000,000).
	QueueSize int
}

// InboundTraffic has users write to every number on their own, as
// customers do all day.
type InboundTraffic struct {
	// Rate is the messages per second per number; zero sends none.
	Rate float64
	// Customers is the pool of users per number the messages come from
	// (default 100), so the same users write again and their
	// customer-service windows stay open.
	Customers int
}

// InboundCustomersDefault is InboundTraffic.Customers when unset.
const InboundCustomersDefault = 100

// Config configures a Server.
type Config struct {
	// Numbers are known from the start; more can be added at run time.
	Numbers []Number
	// Limits are the defaults for every number.
	Limits   Limits
	Webhooks Webhooks
	Faults   Faults
	// ServiceWindow enforces Meta's 24 h customer-service window
	// (reference §8): a send other than a template to a user who has not
	// written to the number (Inbound) within 24 h on the sim's clock is
	// accepted, as Meta accepts it, and then gets a failed status with
	// code 131047 instead of sent, delivered and read. Off by default:
	// every send is delivered whoever it goes to.
	ServiceWindow bool
	// Inbound is the users' own traffic to every number, in a mix of
	// message types (Server.Inbound for each); none by default.
	Inbound InboundTraffic
	// Seed makes fault and webhook draws reproducible (per number, for
	// sequential sends). Zero is a fixed seed too.
	Seed uint64
	// MaxRecords caps the accepted messages kept for /sim/messages; counts
	// in /sim/stats go on beyond it.
	MaxRecords int
	// Clock is used for rate limits, per-second peaks and timestamps;
	// default time.Now. Tests inject one to control limits.
	Clock func() time.Time
	// After waits on the same clock as Clock; it paces the inbound
	// traffic. Default time.After; tests that move Clock by hand pass
	// their clock's After.
	After func(time.Duration) <-chan time.Time
	// Logger receives operational messages (never tokens or the app
	// secret); default discards.
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	c.Limits = c.Limits.withDefaults()
	if err := c.Faults.check(); err != nil {
		return err
	}
	w := &c.Webhooks
	if w.FailCode == 0 {
		w.FailCode = 131049
	}
	if w.BatchSize <= 0 {
		w.BatchSize = 1
	}
	// Graph batches at most 1000 updates per POST, which also keeps a
	// body under the 3 MB receivers are told to accept.
	w.BatchSize = min(w.BatchSize, maxBatch)
	if w.BatchWait <= 0 {
		w.BatchWait = 20 * time.Millisecond
	}
	if w.Concurrency <= 0 {
		w.Concurrency = 4
	}
	if w.Timeout <= 0 {
		w.Timeout = 5 * time.Second
	}
	if w.RetryFor <= 0 {
		w.RetryFor = 7 * 24 * time.Hour
	}
	if w.RetryBase <= 0 {
		w.RetryBase = time.Second
	}
	if w.RetryMax <= 0 {
		w.RetryMax = time.Minute
	}
	if w.QueueSize <= 0 {
		w.QueueSize = 1_000_000
	}
	if c.MaxRecords <= 0 {
		c.MaxRecords = MaxRecordsDefault
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.After == nil {
		c.After = time.After
	}
	if c.Limits.StrictSecond && c.Limits.Rate > StrictSecondMaxRate {
		return fmt.Errorf("sim: strict_second needs a rate of at most %d", StrictSecondMaxRate)
	}
	if c.Inbound.Rate < 0 || c.Inbound.Customers < 0 {
		return fmt.Errorf("sim: inbound rate %v and customers %d must not be negative", c.Inbound.Rate, c.Inbound.Customers)
	}
	if c.Inbound.Customers == 0 {
		c.Inbound.Customers = InboundCustomersDefault
	}
	for name, p := range map[string]float64{
		"read": w.ReadProbability, "fail": w.FailProbability,
		"skip delivered": w.SkipDeliveredProbability, "fail after sent": w.FailAfterSentProbability,
	} {
		if p < 0 || p > 1 {
			return fmt.Errorf("sim: %s probability %v is outside [0, 1]", name, p)
		}
	}
	if w.Delay.Min < 0 || w.Delay.Max < w.Delay.Min {
		return fmt.Errorf("sim: webhook delay range %v..%v is invalid", w.Delay.Min, w.Delay.Max)
	}
	return nil
}

// check fills the default slow delay and validates probabilities and ranges.
func (f *Faults) check() error {
	if f.SlowDelay <= 0 {
		f.SlowDelay = SlowDelayDefault
	}
	if f.PacedHold < 0 {
		return fmt.Errorf("sim: paced hold %v is negative", f.PacedHold)
	}
	if f.PacedHold == 0 {
		f.PacedHold = PacedHoldDefault
	}
	for name, p := range map[string]float64{
		"server error": f.ServerError, "slow accept": f.SlowAccept,
		"reset": f.Reset, "reset after accept": f.ResetAfterAccept,
		"server error after accept": f.ServerErrorAfterAccept,
		"webhook duplicate":         f.WebhookDuplicate, "webhook reorder": f.WebhookReorder,
		"paced": f.Paced, "paced drop": f.PacedDrop,
	} {
		if p < 0 || p > 1 {
			return fmt.Errorf("sim: %s probability %v is outside [0, 1]", name, p)
		}
	}
	for code, p := range f.Codes {
		if p < 0 || p > 1 {
			return fmt.Errorf("sim: probability %v for code %d is outside [0, 1]", p, code)
		}
	}
	if f.Latency.Min < 0 || f.Latency.Max < f.Latency.Min {
		return fmt.Errorf("sim: latency range %v..%v is invalid", f.Latency.Min, f.Latency.Max)
	}
	if f.Jitter < 0 {
		return fmt.Errorf("sim: jitter %v is negative", f.Jitter)
	}
	if f.RetryAfter < 0 {
		return fmt.Errorf("sim: retry-after %v is negative", f.RetryAfter)
	}
	return nil
}

// sortedCodes is the fixed order in which code faults are drawn.
func (f *Faults) sortedCodes() []int {
	codes := make([]int, 0, len(f.Codes))
	for code := range f.Codes {
		codes = append(codes, code)
	}
	slices.Sort(codes)
	return codes
}
