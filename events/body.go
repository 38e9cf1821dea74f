package events

import (
	"encoding/json"
	"regexp"
	"strconv"
	"time"

	"github.com/wamux/wamux"
)

// WebhookID is the webhook-id of an event: the same on every attempt and
// replay, so a receiver drops repeats by it.
func WebhookID(e wamux.Event) string { return "evt_" + strconv.FormatInt(e.ID, 10) }

// envelope is an event's body as delivered and listed.
type envelope struct {
	ID        string          `json:"id,omitempty"`
	Type      wamux.EventType `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      any             `json:"data"`
}

// StatusData is the data of a message.status event.
type StatusData struct {
	MsgID          string       `json:"msg_id"`
	AccountID      string       `json:"account_id"`
	To             string       `json:"to"`
	BizType        string       `json:"biz_type"`
	ClientSeq      *int64       `json:"client_seq,omitempty"`
	Status         string       `json:"status"`
	PreviousStatus *string      `json:"previous_status"`
	WAMID          string       `json:"wamid,omitempty"`
	EventTime      string       `json:"event_time"`
	Version        int64        `json:"version"`
	Error          *StatusError `json:"error,omitempty"`
}

// StatusError says why a message failed.
type StatusError struct {
	Code    int    `json:"code"`
	Title   string `json:"title"`
	Details string `json:"details"`
}

// AccountData is the data of an account.state event.
type AccountData struct {
	AccountID     string  `json:"account_id"`
	State         string  `json:"state"`
	PreviousState string  `json:"previous_state"`
	Reason        string  `json:"reason,omitempty"`
	Until         *string `json:"until,omitempty"`
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// failureCode reads the code and title wamux.FailureReason wrote.
var failureCode = regexp.MustCompile(`^provider reported failure \(code (\d+)\)(?:: (.*))?$`)

// statusError is the error of a failed message from its last error.
func statusError(lastError string) *StatusError {
	se := &StatusError{Title: lastError, Details: lastError}
	if m := failureCode.FindStringSubmatch(lastError); m != nil {
		se.Code, _ = strconv.Atoi(m[1])
		se.Title = m[2]
	}
	return se
}

// Data is an event's data object.
func Data(e wamux.Event) any {
	switch e.Type {
	case wamux.EventMessageStatus:
		d := StatusData{MsgID: e.MsgID, AccountID: e.AccountID, To: e.To, BizType: e.BizType, Status: e.Status,
			WAMID: e.WAMID, EventTime: rfc3339(e.CreatedAt), Version: e.ID}
		if e.ClientSeq != 0 {
			d.ClientSeq = &e.ClientSeq
		}
		if e.PreviousStatus != "" {
			d.PreviousStatus = &e.PreviousStatus
		}
		if e.Status == string(wamux.StatusFailed) && e.Detail != "" {
			d.Error = statusError(e.Detail)
		}
		return d
	case wamux.EventAccountState:
		d := AccountData{AccountID: e.AccountID, State: e.Status, PreviousState: e.PreviousStatus, Reason: e.Detail}
		if e.Status == string(wamux.AccountCooldown) && !e.Until.IsZero() {
			u := rfc3339(e.Until)
			d.Until = &u
		}
		return d
	}
	if json.Valid(e.Data) {
		return json.RawMessage(e.Data)
	}
	return struct{}{}
}

// Body is the JSON an endpoint receives for e: {"type","timestamp","data"}.
func Body(e wamux.Event) ([]byte, error) {
	return json.Marshal(envelope{Type: e.Type, Timestamp: rfc3339(e.CreatedAt), Data: Data(e)})
}

// FeedItem is e as the pull feed lists it: the body with its webhook-id.
func FeedItem(e wamux.Event) any {
	return envelope{ID: WebhookID(e), Type: e.Type, Timestamp: rfc3339(e.CreatedAt), Data: Data(e)}
}
