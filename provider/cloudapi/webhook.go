package cloudapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	gojson "github.com/goccy/go-json"

	"github.com/wamux/wamux"
)

// The webhook envelope (reference §4.2). Every level is an array and a
// single POST may carry several entries, changes and statuses, so
// consumers must iterate all of them. Unknown fields are ignored, since
// Meta adds fields between versions.

// ObjectWhatsApp is the only Webhook.Object value for WhatsApp events.
const ObjectWhatsApp = "whatsapp_business_account"

// MaxWebhookBytes is the largest body Meta sends (3 MB); readers cap at it.
const MaxWebhookBytes = 3 << 20

// Webhook is one notification POST.
type Webhook struct {
	Object string  `json:"object"`
	Entry  []Entry `json:"entry"`
}

// Entry groups changes of one WhatsApp Business Account (ID is the WABA id).
type Entry struct {
	ID      string   `json:"id"`
	Changes []Change `json:"changes"`
}

// FieldMessages is Change.Field for statuses and inbound messages; other
// subscriptions (flows, calls, template and account updates) arrive at
// the same callback with other fields.
const FieldMessages = "messages"

// Change is one update; Field is "messages" for statuses and inbound.
type Change struct {
	Field string `json:"field"`
	Value Value  `json:"value"`
}

// Value carries the content for one business phone number.
type Value struct {
	MessagingProduct string           `json:"messaging_product"`
	Metadata         Metadata         `json:"metadata"`
	Contacts         []Contact        `json:"contacts,omitempty"`
	Messages         []InboundMessage `json:"messages,omitempty"`
	Statuses         []Status         `json:"statuses,omitempty"`
	Errors           []WebhookError   `json:"errors,omitempty"`
	// Unreadable are the items of Statuses, Messages and Errors that do
	// not have their kind's shape (a number where Meta sends a string),
	// left out of those: a value holding one is decoded item by item
	// (ParseWebhookByChange), so the caller can keep them aside and take
	// the rest.
	Unreadable []UnreadableItem `json:"-"`
}

// Kinds of UnreadableItem.
const (
	ItemStatus  = "status"
	ItemMessage = "message"
	ItemError   = "error"
)

// UnreadableItem is one item of a value that did not decode.
type UnreadableItem struct {
	Kind   string          // ItemStatus, ItemMessage or ItemError
	Raw    json.RawMessage // the item as received, bytes that are not UTF-8 as U+FFFD
	Reason string          // why it did not decode
}

// Metadata names the business number; PhoneNumberID routes to an account.
type Metadata struct {
	DisplayPhoneNumber string `json:"display_phone_number"`
	PhoneNumberID      string `json:"phone_number_id"`
}

// Contact is the sender of an inbound message.
type Contact struct {
	Profile struct {
		Name string `json:"name"`
	} `json:"profile"`
	WaID string `json:"wa_id"`
}

// InboundMessage is a message a user sent to the business. The fields
// every type shares are decoded; Raw is the whole item as Meta sent it,
// for the type's content (Content) and whatever Meta adds.
type InboundMessage struct {
	From      string          `json:"from"`
	ID        string          `json:"id"`
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Context   *InboundContext `json:"context,omitempty"`
	Text      *InboundText    `json:"text,omitempty"`
	// Raw is the item as received (set when decoded, never encoded).
	Raw json.RawMessage `json:"-"`
}

// InboundContext names the message an inbound message replies to (or, for
// a product enquiry, was forwarded from): ID is its wamid, From its sender.
type InboundContext struct {
	From string `json:"from,omitempty"`
	ID   string `json:"id,omitempty"`
}

// InboundText is the content of an inbound text message.
type InboundText struct {
	Body string `json:"body"`
}

// inboundFields is InboundMessage without its methods, for UnmarshalJSON.
type inboundFields struct {
	From      string          `json:"from"`
	ID        string          `json:"id"`
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Context   *InboundContext `json:"context,omitempty"`
	Text      *InboundText    `json:"text,omitempty"`
}

// UnmarshalJSON decodes the shared fields of an item and keeps a copy of
// its bytes in Raw, so the whole body is parsed once whichever decoder
// reads it. null leaves m as it is, as for a struct without the method.
func (m *InboundMessage) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var f inboundFields
	if err := gojson.Unmarshal(data, &f); err != nil {
		return err
	}
	*m = InboundMessage{From: f.From, ID: f.ID, Timestamp: f.Timestamp, Type: f.Type, Context: f.Context, Text: f.Text,
		Raw: append(json.RawMessage(nil), data...)}
	return nil
}

// Content returns the fields of Raw named in names (Meta's key for the
// type's object, such as "image", and "errors" of an unsupported message),
// as received; a name Raw lacks is left out.
func (m *InboundMessage) Content(names ...string) map[string]json.RawMessage {
	if len(m.Raw) == 0 || len(names) == 0 {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(m.Raw, &fields) != nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(names))
	for _, n := range names {
		if v, ok := fields[n]; ok {
			out[n] = v
		}
	}
	return out
}

// ProfileName is the profile name of the contact whose wa_id is waID, as
// the value's contacts name the senders of its messages; "" when none.
func (v *Value) ProfileName(waID string) string {
	for i := range v.Contacts {
		if v.Contacts[i].WaID == waID {
			return v.Contacts[i].Profile.Name
		}
	}
	return ""
}

// Status is one receipt about one of our messages.
type Status struct {
	// ID is the wamid returned when the message was accepted.
	ID string `json:"id"`
	// Status is sent, delivered, read, failed (or played).
	Status string `json:"status"`
	// Timestamp is Unix seconds as a string.
	Timestamp   string `json:"timestamp"`
	RecipientID string `json:"recipient_id"`
	// BizOpaqueCallbackData echoes what the send carried: our msg_id.
	BizOpaqueCallbackData string         `json:"biz_opaque_callback_data,omitempty"`
	Conversation          *Conversation  `json:"conversation,omitempty"`
	Pricing               *Pricing       `json:"pricing,omitempty"`
	Errors                []WebhookError `json:"errors,omitempty"`
}

// Conversation is present on some statuses before v24.0.
type Conversation struct {
	ID                  string `json:"id"`
	ExpirationTimestamp string `json:"expiration_timestamp,omitempty"`
	Origin              struct {
		Type string `json:"type"`
	} `json:"origin"`
}

// Pricing tells whether and how a message is billed.
type Pricing struct {
	Billable     bool   `json:"billable"`
	PricingModel string `json:"pricing_model"`
	Type         string `json:"type,omitempty"`
	Category     string `json:"category"`
}

// WebhookError is an asynchronous error, on a failed status or top level.
type WebhookError struct {
	Code      int        `json:"code"`
	Title     string     `json:"title"`
	Message   string     `json:"message,omitempty"`
	ErrorData *ErrorData `json:"error_data,omitempty"`
	Href      string     `json:"href,omitempty"`
}

// ErrorData holds Meta's human-readable details.
type ErrorData struct {
	Details string `json:"details"`
}

// ParseWebhook decodes a notification body. It rejects what is not a JSON
// object and ignores unknown fields; it does not check the signature (do
// that first, on the raw bytes, with VerifySignature).
//
// A refused notification is a 400, which Meta redelivers for days with
// everything in it, so a body that does not decode as a whole is decoded
// again change by change (ParseWebhookByChange). Values of other
// subscriptions' changes (Field not "messages"), which share the callback
// URL and may use names such as "errors" with other types, are left empty.
// In a "messages" value, a status, inbound message or error of another
// shape goes to Value.Unreadable and the items beside it are kept; a
// contact of another shape is dropped (contacts are not used). Only a
// value whose own shape is wrong (not an object, metadata not an object,
// statuses not an array) is refused. JSON is UTF-8 (RFC 8259): a status,
// inbound message or error holding bytes that are not goes to
// Value.Unreadable too, rather than being read with them replaced.
//
// The whole-body decode uses github.com/goccy/go-json: the webhook path is
// CPU-bound under a flood and the standard decoder is a tenth of a POST's
// CPU there. Only bodies whose signature was verified reach it, and it
// must answer exactly as encoding/json does: FuzzParseWebhookMatchesStdlib
// checks that.
func ParseWebhook(body []byte) (*Webhook, error) {
	if !utf8.Valid(body) {
		// Decoders turn such bytes into U+FFFD, making an id that is not
		// the one sent: the items holding them are found change by change.
		return ParseWebhookByChange(body)
	}
	var w Webhook
	if err := gojson.Unmarshal(body, &w); err != nil {
		lenient, lerr := ParseWebhookByChange(body)
		if lerr != nil {
			return nil, wamux.Errorf(wamux.EInvalid, "webhook body is not a notification: %v", err)
		}
		return lenient, nil
	}
	return &w, nil
}

// ParseWebhookByChange decodes a notification with encoding/json one
// change at a time, leaving the values of other subscriptions' changes
// empty (ParseWebhook's second try; exported for its fuzz target).
func ParseWebhookByChange(body []byte) (*Webhook, error) {
	var raw struct {
		Object string `json:"object"`
		Entry  []struct {
			ID      string `json:"id"`
			Changes []struct {
				Field string          `json:"field"`
				Value json.RawMessage `json:"value"`
			} `json:"changes"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, err
	}
	w := &Webhook{Object: raw.Object}
	if raw.Entry != nil {
		w.Entry = make([]Entry, len(raw.Entry))
	}
	for i, e := range raw.Entry {
		w.Entry[i].ID = e.ID
		if e.Changes != nil {
			w.Entry[i].Changes = make([]Change, len(e.Changes))
		}
		for j, c := range e.Changes {
			w.Entry[i].Changes[j].Field = c.Field
			if c.Field != "" && c.Field != FieldMessages || len(c.Value) == 0 {
				continue
			}
			v := &w.Entry[i].Changes[j].Value
			if !utf8.Valid(c.Value) || json.Unmarshal(c.Value, v) != nil {
				if err := decodeValueByItem(c.Value, v); err != nil {
					return nil, err
				}
			}
		}
	}
	return w, nil
}

// decodeValueByItem decodes a "messages" value that did not decode as a
// whole, or is not all UTF-8, one item at a time, into a fresh *v: one status of another shape
// is poison the caller dead-letters, and must not cost the statuses
// beside it (a 400 has Meta redeliver them all for 7 days, failing alike).
func decodeValueByItem(raw []byte, v *Value) error {
	var items struct {
		MessagingProduct string            `json:"messaging_product"`
		Metadata         Metadata          `json:"metadata"`
		Contacts         []json.RawMessage `json:"contacts"`
		Messages         []json.RawMessage `json:"messages"`
		Statuses         []json.RawMessage `json:"statuses"`
		Errors           []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return err
	}
	*v = Value{MessagingProduct: items.MessagingProduct, Metadata: items.Metadata}
	v.Contacts = decodeItems[Contact](items.Contacts, "", nil)
	v.Messages = decodeItems[InboundMessage](items.Messages, ItemMessage, &v.Unreadable)
	v.Statuses = decodeItems[Status](items.Statuses, ItemStatus, &v.Unreadable)
	v.Errors = decodeItems[WebhookError](items.Errors, ItemError, &v.Unreadable)
	return nil
}

// decodeItems decodes each of raws into a T, and adds those that do not
// decode to *unreadable as kind (or drops them when kind is "").
func decodeItems[T any](raws []json.RawMessage, kind string, unreadable *[]UnreadableItem) []T {
	if raws == nil {
		return nil
	}
	out := make([]T, 0, len(raws))
	for _, r := range raws {
		if kind != "" && !utf8.Valid(r) {
			*unreadable = append(*unreadable, UnreadableItem{Kind: kind, Raw: bytes.ToValidUTF8(r, []byte("\uFFFD")),
				Reason: "holds bytes that are not UTF-8"})
			continue
		}
		var x T
		if err := json.Unmarshal(r, &x); err != nil {
			if kind != "" {
				*unreadable = append(*unreadable, UnreadableItem{Kind: kind, Raw: r, Reason: err.Error()})
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// Receipt converts a status into the gateway's receipt. AccountID is left
// for the caller, who maps the value's phone_number_id to an account.
func (s Status) Receipt() (wamux.Receipt, error) {
	if s.ID == "" {
		return wamux.Receipt{}, wamux.Errorf(wamux.EInvalid, "status without a message id")
	}
	t, err := wamux.ParseReceiptType(s.Status)
	if err != nil {
		return wamux.Receipt{}, err
	}
	secs, err := strconv.ParseInt(s.Timestamp, 10, 64)
	if err != nil {
		return wamux.Receipt{}, wamux.Errorf(wamux.EInvalid, "status timestamp %q is not Unix seconds", s.Timestamp)
	}
	r := wamux.Receipt{
		MessageID:    s.ID,
		Type:         t,
		EventTime:    time.Unix(secs, 0).UTC(),
		CallbackData: s.BizOpaqueCallbackData,
		Recipient:    s.RecipientID,
		Source:       "webhook",
	}
	if len(s.Errors) > 0 {
		r.ErrorCode = s.Errors[0].Code
		r.ErrorTitle = s.Errors[0].Title
	}
	return r, nil
}

// String is for logs; statuses carry no secrets but phone numbers are
// personal data, so the recipient is left out.
func (s Status) String() string {
	return fmt.Sprintf("Status{%s %s at %s}", s.ID, s.Status, s.Timestamp)
}
