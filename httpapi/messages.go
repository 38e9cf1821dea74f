package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/outbound"
)

// MaxBatchMessages bounds one batch so one request cannot hold the store's
// writer for long.
const MaxBatchMessages = 1000

// Outbound is the send pipeline as the API sees it.
type Outbound interface {
	Submit(ctx context.Context, msgs []wamux.Message) ([]outbound.SubmitResult, error)
	Release(ctx context.Context, msgID string) (wamux.Message, error)
	Drop(ctx context.Context, msgID string) (wamux.Message, error)
	AccountChanged(ctx context.Context, a wamux.Account) error
	// AccountReactivated is AccountChanged for PATCH state=active: it
	// also ends a running cooldown.
	AccountReactivated(ctx context.Context, a wamux.Account) error
}

type submitResponse struct {
	MsgID     string     `json:"msg_id,omitempty"`
	Status    string     `json:"status,omitempty"`
	AccountID string     `json:"account_id,omitempty"`
	Duplicate bool       `json:"duplicate,omitempty"`
	Error     *errorBody `json:"error,omitempty"`
	status    int        // HTTP status this result would have alone
	_         struct{}   `json:"-"`
}

func resultView(r *http.Request, res outbound.SubmitResult) submitResponse {
	if res.Err != nil {
		code := wamux.ErrorCode(res.Err)
		return submitResponse{Error: &errorBody{Code: code, Message: wamux.ErrorMessage(res.Err), RetryAfter: retryAfterSeconds(res.Err)}, status: httpStatus(code)}
	}
	v := submitResponse{MsgID: res.Message.ID, Status: string(res.Message.Status), AccountID: res.Message.AccountID, status: http.StatusAccepted}
	if res.Duplicate {
		v.Duplicate, v.status = true, http.StatusOK
	}
	return v
}

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	var req admit.Request
	if err := decodeJSON(w, r, MaxBodyV1, &req); err != nil {
		writeError(w, r, err)
		return
	}
	m, err := admit.Message(req)
	if err != nil {
		writeError(w, r, err)
		return
	}
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	if err := s.windowCheck(time.Now()).refuse(ctx, m); err != nil {
		s.fail(w, r, "submit message: check the service window", err)
		return
	}
	res, err := s.outbound.Submit(ctx, []wamux.Message{m})
	if err != nil {
		s.fail(w, r, "submit message", err)
		return
	}
	if res[0].Err != nil {
		s.fail(w, r, "submit message", res[0].Err)
		return
	}
	v := resultView(r, res[0])
	writeJSON(w, v.status, v)
}

func (s *Server) handleSubmitBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := decodeJSON(w, r, MaxBodyBatch, &req); err != nil {
		writeError(w, r, err)
		return
	}
	switch {
	case req.Messages == nil:
		writeError(w, r, wamux.Errorf(wamux.EInvalid, "messages is required"))
		return
	case len(req.Messages) == 0:
		writeError(w, r, wamux.Errorf(wamux.EInvalid, "messages must not be empty"))
		return
	case len(req.Messages) > MaxBatchMessages:
		writeError(w, r, wamux.Errorf(wamux.EInvalid, "at most %d messages per batch", MaxBatchMessages))
		return
	}
	results := make([]submitResponse, len(req.Messages))
	var admitted []wamux.Message
	var at []int
	checkCtx, cancelCheck := s.storeCtx(r)
	defer cancelCheck()
	window := s.windowCheck(time.Now())
	for i, raw := range req.Messages {
		var one admit.Request
		if err := strictDecode(raw, &one); err != nil {
			results[i] = resultView(r, outbound.SubmitResult{Err: err})
			continue
		}
		m, err := admit.Message(one)
		if err == nil {
			err = window.refuse(checkCtx, m)
		}
		if c := wamux.ErrorCode(err); c == wamux.EInternal || c == wamux.EUnavailable {
			s.fail(w, r, "submit batch: check the service window", err)
			return
		}
		if err != nil {
			results[i] = resultView(r, outbound.SubmitResult{Err: err})
			continue
		}
		admitted = append(admitted, m)
		at = append(at, i)
	}
	if len(admitted) > 0 {
		ctx, cancel := s.storeCtx(r)
		defer cancel()
		res, err := s.outbound.Submit(ctx, admitted)
		if err != nil {
			s.fail(w, r, "submit batch", err)
			return
		}
		for j, one := range res {
			if c := wamux.ErrorCode(one.Err); c == wamux.EInternal || c == wamux.EUnavailable {
				s.logger(r).Error("submit batch item failed", "err", one.Err)
			}
			results[at[j]] = resultView(r, one)
		}
	}
	// A batch with refused items answers 200 (each item has its own
	// result); Retry-After is the longest wait any of them asks.
	retry := 0
	for _, v := range results {
		if v.Error != nil && v.Error.RetryAfter > retry {
			retry = v.Error.RetryAfter
		}
	}
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retry))
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": results})
}

// strictDecode decodes one batch item as the single-message endpoint does.
func strictDecode(raw json.RawMessage, dst any) error {
	// raw is one element of an already parsed array, so it is valid JSON:
	// its first byte says whether it is an object, without a second parse.
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return wamux.Errorf(wamux.EInvalid, "each message must be a JSON object")
	}
	dec := json.NewDecoder(bytesReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err, MaxBodyBatch)
	}
	return nil
}

type messageView struct {
	MsgID     string                `json:"msg_id"`
	AccountID string                `json:"account_id"`
	To        string                `json:"to"`
	ClientSeq *int64                `json:"client_seq"`
	Priority  string                `json:"priority"`
	Status    string                `json:"status"`
	WAMID     string                `json:"wamid"`
	Attempts  int                   `json:"attempts"`
	LastError string                `json:"last_error"`
	CreatedAt time.Time             `json:"created_at"`
	UpdatedAt time.Time             `json:"updated_at"`
	Receipts  map[string]*time.Time `json:"receipts"`
}

func (s *Server) handleGetMessage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	m, err := s.store.GetMessage(ctx, r.PathValue("msg_id"))
	if err != nil {
		s.fail(w, r, "get message", err)
		return
	}
	v := messageView{
		MsgID: m.ID, AccountID: m.AccountID, To: m.To, Priority: m.Priority.String(), Status: string(m.Status),
		WAMID: m.WAMID, Attempts: m.Attempts, LastError: m.LastError, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
		Receipts: map[string]*time.Time{"sent": nil, "delivered": nil, "read": nil, "failed": nil},
	}
	if m.ClientSeq > 0 {
		seq := m.ClientSeq
		v.ClientSeq = &seq
	}
	if m.WAMID != "" {
		rs, err := s.store.ListReceipts(ctx, m.AccountID, m.WAMID)
		if err != nil {
			s.fail(w, r, "list receipts", err)
			return
		}
		for _, rc := range rs {
			t := rc.EventTime
			v.Receipts[string(rc.Type)] = &t
		}
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) {
	s.decideHeld(w, r, s.outbound.Release, "release")
}

func (s *Server) handleDrop(w http.ResponseWriter, r *http.Request) {
	s.decideHeld(w, r, s.outbound.Drop, "drop")
}

func (s *Server) decideHeld(w http.ResponseWriter, r *http.Request, fn func(context.Context, string) (wamux.Message, error), what string) {
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	m, err := fn(ctx, r.PathValue("msg_id"))
	if err != nil {
		s.fail(w, r, what+" held message", err)
		return
	}
	s.logger(r).Info("held message decided", "msg_id", m.ID, "account_id", m.AccountID, "decision", what)
	writeJSON(w, http.StatusOK, map[string]string{"msg_id": m.ID, "status": string(m.Status), "account_id": m.AccountID})
}
