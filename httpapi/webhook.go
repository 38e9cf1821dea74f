package httpapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/apikey"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
)

// Receipts is the receipt pipeline as the webhook and agent endpoints use
// it (receipts.Pipeline). Every method returns only once what it was given
// is durable.
type Receipts interface {
	Ingest(ctx context.Context, source string, rs []wamux.Receipt) (receipts.IngestResult, error)
	AddInbound(ctx context.Context, ms []store.InboundMessage) error
	DeadLetter(ctx context.Context, reason string, ds []store.DeadLetter) error
}

// initReceipts takes the part of Config the receipt endpoints read.
func (s *Server) initReceipts(cfg Config) {
	s.receipts = cfg.Receipts
	for _, secret := range strings.Split(cfg.AppSecret, ",") {
		if secret = strings.TrimSpace(secret); secret != "" {
			s.appSecrets = append(s.appSecrets, secret)
		}
	}
	s.verifyToken = cfg.VerifyToken
	s.phones = &phoneCache{ttl: phoneCacheTTL, m: map[string]phoneEntry{}}
	s.webhookGate = newBodyGate(cfg.WebhookMaxBodies, cfg.WebhookBodyBudget)
}

// receiptRoutes adds the webhook, the agents' batch endpoint and the
// dead-letter and late-receipt lists.
func (s *Server) receiptRoutes(handle func(string, http.HandlerFunc), v1 v1Route) {
	if s.receipts != nil {
		handle("GET /webhook", s.handleWebhookVerify)
		handle("POST /webhook", s.handleWebhook)
		v1("POST /v1/receipts:batch", apikey.Send, s.handleReceiptsBatch) // account agents send receipts
	}
	v1("GET /v1/dead-letters", apikey.Read, s.handleDeadLetters, "limit")
	v1("GET /v1/late-receipts", apikey.Read, s.handleLateReceipts, "limit")
}

// handleWebhookVerify answers Meta's subscription handshake: the challenge
// is echoed only for hub.mode=subscribe and the configured verify token
// (compared in constant time; with no token configured nothing verifies).
func (s *Server) handleWebhookVerify(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	token := q.Get("hub.verify_token")
	challenge := q.Get("hub.challenge")
	ok := s.verifyToken != "" && q.Get("hub.mode") == "subscribe" &&
		subtle.ConstantTimeCompare([]byte(token), []byte(s.verifyToken)) == 1 &&
		challenge != "" && len(challenge) <= 256
	if !ok {
		writeError(w, r, wamux.Errorf(wamux.EForbidden, "webhook verification failed"))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, challenge)
}

// handleWebhook takes a Cloud API notification. The signature is checked
// on the raw bytes before anything is parsed; the answer is 200 only once
// every status, inbound message and dead letter it carried is durable, so
// Meta redelivers anything we could not keep. Poison inside a signed
// notification (a status without id, a bad timestamp or one of another
// JSON type, an inbound message whose id no store can key) is
// dead-lettered and still answered 200: redelivering it would never help.
// A notification none of whose phone numbers belong to an account is
// refused (404) and nothing is stored, so Meta keeps it until the account
// is added; beside a known number, an unknown one's statuses go to a dead
// letter. Changes of other subscriptions sharing the callback URL (a field
// other than "messages": flows, calls, template updates) are ignored.
func (s *Server) handleWebhook(w http.ResponseWriter, r *http.Request) {
	hook, err := s.readWebhook(w, r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.storeTimeout)
	defer cancel()
	n, err := normalizeWebhook(hook, func(phoneID string) (string, bool, error) { return s.accountOf(ctx, phoneID) }, time.Now())
	if err != nil {
		s.fail(w, r, "webhook: look up phone numbers", err)
		return
	}
	if n.values > 0 && n.known == 0 {
		writeError(w, r, wamux.Errorf(wamux.ENotFound, "no account has the notification's phone_number_id"))
		return
	}
	if len(n.inbound) > 0 {
		ours, err := s.repliedMessages(ctx, &n)
		if err != nil {
			s.fail(w, r, "webhook: find replied-to messages", err)
			return
		}
		n.fillInboundData(ours)
	}
	if doing, err := s.keepWebhook(ctx, &n); err != nil {
		s.fail(w, r, doing, err)
		return
	}
	writeWebhookAnswer(w, &n)
}

// readWebhook reads a notification's body, checks its signature while
// reading (readSignedBody) and parses it only once it verified; the error
// is the domain error to answer.
func (s *Server) readWebhook(w http.ResponseWriter, r *http.Request) (*cloudapi.Webhook, error) {
	body, err := s.readSignedBody(w, r)
	if err != nil {
		return nil, err
	}
	hook, err := cloudapi.ParseWebhook(body)
	if err != nil {
		return nil, wamux.Errorf(wamux.EInvalid, "webhook body is not a JSON notification")
	}
	if hook.Object != cloudapi.ObjectWhatsApp {
		return nil, wamux.Errorf(wamux.EInvalid, "webhook object must be %q", cloudapi.ObjectWhatsApp)
	}
	return hook, nil
}

// keepWebhook makes what n carries durable: receipts, inbound messages and
// dead letters. On error it also says what it was doing.
func (s *Server) keepWebhook(ctx context.Context, n *normalized) (string, error) {
	if len(n.receipts) > 0 {
		if _, err := s.receipts.Ingest(ctx, "webhook", n.receipts); err != nil {
			return "webhook: ingest receipts", err
		}
	}
	if err := s.receipts.AddInbound(ctx, n.inbound); err != nil {
		return "webhook: store inbound messages", err
	}
	for reason, ds := range n.dead {
		if err := s.receipts.DeadLetter(ctx, reason, ds); err != nil {
			return "webhook: store dead letters", err
		}
	}
	return "", nil
}

// writeWebhookAnswer answers 200 with what writeJSON makes of
// {"inbound": …, "receipts": …} (keys in order, a newline), built by hand:
// every status of a flood comes through here, and encoding a map costs
// more than the rest of the answer.
func writeWebhookAnswer(w http.ResponseWriter, n *normalized) {
	answer := make([]byte, 0, 40)
	answer = append(answer, `{"inbound":`...)
	answer = strconv.AppendInt(answer, int64(len(n.inbound)), 10)
	answer = append(answer, `,"receipts":`...)
	answer = strconv.AppendInt(answer, int64(len(n.receipts)), 10)
	answer = append(answer, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(answer)
}

// normalized is what one notification carries, mapped to accounts.
type normalized struct {
	values   int // changes with a value
	known    int // of those, values whose phone number belongs to an account
	receipts []wamux.Receipt
	inbound  []store.InboundMessage
	// inboundSrc[i] is what inbound[i] was made of, for its event data.
	inboundSrc []inboundSource
	dead       map[string][]store.DeadLetter // by reason label
	ignored    int                           // statuses we do not track (played)
}

// normalizeWebhook walks every entry, change and status (all levels are
// arrays) and turns them into receipts of accounts, inbound records and
// dead letters. It is pure but for lookup, so it can be fuzzed.
func normalizeWebhook(hook *cloudapi.Webhook, lookup func(phoneID string) (string, bool, error), now time.Time) (normalized, error) {
	n := normalized{dead: map[string][]store.DeadLetter{}}
	var unknown []unknownValue
	for _, e := range hook.Entry {
		for _, c := range e.Changes {
			if c.Field != "" && c.Field != cloudapi.FieldMessages {
				// Other subscriptions share the callback URL (flows,
				// calls, template and account updates): not receipts, and
				// their values need not name a phone number.
				continue
			}
			v := &c.Value
			if v.Metadata.PhoneNumberID == "" && len(v.Statuses) == 0 && len(v.Messages) == 0 && len(v.Errors) == 0 && len(v.Unreadable) == 0 {
				continue // a change without content for us (other fields)
			}
			n.values++
			account, ok, err := lookup(v.Metadata.PhoneNumberID)
			if err != nil {
				return normalized{}, err
			}
			if !ok {
				unknown = append(unknown, unknownValueOf(v))
				continue
			}
			n.known++
			n.addStatuses(account, v.Statuses, now)
			n.addInbound(account, v, now)
			for _, e := range v.Errors {
				n.deadLetter("provider_error", account, fmt.Sprintf("provider error notification: code %d: %s", e.Code, e.Title), e)
			}
			n.addUnreadable(account, v.Unreadable)
		}
	}
	if n.known > 0 && len(unknown) > 0 {
		// Stored with the rest so the notification can be answered 200.
		for _, u := range unknown {
			n.deadLetter("unknown_phone_number", "", "no account has phone_number_id "+u.PhoneNumberID, u)
		}
	}
	return n, nil
}

// deadLetter keeps v as a dead letter of account under the reason label.
func (n *normalized) deadLetter(reason, account, why string, v any) {
	payload, _ := json.Marshal(v)
	n.dead[reason] = append(n.dead[reason], store.DeadLetter{Source: "webhook", AccountID: account, Reason: why, Payload: payload})
}

// addStatuses turns the statuses of account's value into receipts; one
// that cannot be read is a dead letter, a voice message's play is ignored.
func (n *normalized) addStatuses(account string, statuses []cloudapi.Status, now time.Time) {
	for _, st := range statuses {
		r, err := st.Receipt()
		if err != nil {
			if st.Status == "played" {
				n.ignored++ // voice-message plays say nothing about delivery
				continue
			}
			n.deadLetter("invalid_status", account, "status could not be read: "+wamux.ErrorMessage(err), st)
			continue
		}
		r.AccountID = account
		r.ReceivedAt = now
		if err := receipts.Normalize(&r); err != nil {
			n.deadLetter("invalid_status", account, "status could not be read: "+wamux.ErrorMessage(err), st)
			continue
		}
		n.receipts = append(n.receipts, r)
	}
}

// addInbound turns what customers wrote to account into inbound records;
// their event data is filled later (fillInboundData).
func (n *normalized) addInbound(account string, v *cloudapi.Value, now time.Time) {
	for i := range v.Messages {
		m := &v.Messages[i]
		in := store.InboundMessage{AccountID: account, WAMID: m.ID, Type: m.Type, From: m.From, ReceivedAt: now}
		if err := receipts.NormalizeInbound(&in); err != nil {
			// Not the user's text or number, as for an unknown number.
			n.deadLetter("invalid_inbound", account, wamux.ErrorMessage(err), map[string]string{"id": m.ID, "type": m.Type, "timestamp": m.Timestamp})
			continue
		}
		if secs, err := strconv.ParseInt(m.Timestamp, 10, 64); err == nil {
			in.SentAt = time.Unix(secs, 0).UTC()
		}
		n.inbound = append(n.inbound, in)
		n.inboundSrc = append(n.inboundSrc, inboundSource{msg: m, profile: v.ProfileName(m.From)})
	}
}

// addUnreadable keeps items of another shape than Meta's (ParseWebhook
// kept them aside so the rest could be read) as poison, like a status
// without an id.
func (n *normalized) addUnreadable(account string, items []cloudapi.UnreadableItem) {
	for _, it := range items {
		switch it.Kind {
		case cloudapi.ItemStatus:
			n.deadLetter("invalid_status", account, "status could not be read: "+it.Reason, namingFields(it.Raw))
		case cloudapi.ItemMessage:
			n.deadLetter("invalid_inbound", account, "inbound message could not be read: "+it.Reason, namingFields(it.Raw))
		default:
			n.deadLetter("provider_error", account, "provider error notification could not be read: "+it.Reason, namingFields(it.Raw))
		}
	}
}

// unknownValue is what a dead letter keeps of a value whose number has no
// account: enough to replay its statuses and find its messages once the
// account exists (Meta does not redeliver what was answered 200), and no
// user's phone number or text.
type unknownValue struct {
	PhoneNumberID string           `json:"phone_number_id"`
	Statuses      []unknownStatus  `json:"statuses,omitempty"`
	Messages      []unknownMessage `json:"messages,omitempty"`
	Errors        []unknownError   `json:"errors,omitempty"`
	Unreadable    []unknownItem    `json:"unreadable,omitempty"`
}

type unknownStatus struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	Timestamp    string `json:"timestamp"`
	CallbackData string `json:"biz_opaque_callback_data,omitempty"`
	ErrorCode    int    `json:"error_code,omitempty"`
	ErrorTitle   string `json:"error_title,omitempty"`
}

type unknownMessage struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
}

type unknownError struct {
	Code  int    `json:"code"`
	Title string `json:"title,omitempty"`
}

type unknownItem struct {
	Kind string                     `json:"kind"`
	Item map[string]json.RawMessage `json:"item"`
}

func unknownValueOf(v *cloudapi.Value) unknownValue {
	u := unknownValue{PhoneNumberID: v.Metadata.PhoneNumberID}
	for _, st := range v.Statuses {
		us := unknownStatus{ID: st.ID, Status: st.Status, Timestamp: st.Timestamp, CallbackData: st.BizOpaqueCallbackData}
		if len(st.Errors) > 0 {
			us.ErrorCode, us.ErrorTitle = st.Errors[0].Code, st.Errors[0].Title
		}
		u.Statuses = append(u.Statuses, us)
	}
	for _, m := range v.Messages {
		u.Messages = append(u.Messages, unknownMessage{ID: m.ID, Type: m.Type, Timestamp: m.Timestamp})
	}
	for _, e := range v.Errors {
		// Top-level errors of a known number are dead letters of their
		// own (provider_error); these would be lost.
		u.Errors = append(u.Errors, unknownError{Code: e.Code, Title: e.Title})
	}
	for _, it := range v.Unreadable {
		u.Unreadable = append(u.Unreadable, unknownItem{Kind: it.Kind, Item: namingFields(it.Raw)})
	}
	return u
}

// namingFields is what a dead letter keeps of an item that could not be
// read: the fields that name it and say what happened (as received, so
// the item can be replayed once fixed), not the user's phone number or
// text. Keys match case-insensitively, as encoding/json's do; an item that
// is not even an object keeps nothing.
func namingFields(raw json.RawMessage) map[string]json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return map[string]json.RawMessage{}
	}
	for k := range fields {
		switch strings.ToLower(k) {
		case "id", "status", "timestamp", "type", "biz_opaque_callback_data", "errors", "code", "title", "message", "error_data", "href":
		default:
			delete(fields, k)
		}
	}
	return fields
}

// phoneCacheTTL bounds how long a phone_number_id → account mapping is
// trusted; accounts change rarely and a webhook burst should not cost a
// store read per POST.
const phoneCacheTTL = 30 * time.Second

type phoneEntry struct {
	account string
	at      time.Time
}

// phoneCache remembers known phone numbers only: an unknown one is asked
// again, so an account added a moment ago is found on Meta's next retry.
type phoneCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]phoneEntry
}

func (s *Server) accountOf(ctx context.Context, phoneID string) (string, bool, error) {
	if phoneID == "" {
		return "", false, nil
	}
	c := s.phones
	now := time.Now()
	c.mu.Lock()
	e, ok := c.m[phoneID]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e.account, true, nil
	}
	a, err := s.store.GetAccountByPhoneNumberID(ctx, phoneID)
	if wamux.ErrorCode(err) == wamux.ENotFound {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	c.mu.Lock()
	if len(c.m) > 10_000 {
		clear(c.m)
	}
	c.m[phoneID] = phoneEntry{account: a.ID, at: now}
	c.mu.Unlock()
	return a.ID, true, nil
}
