package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// receiptsBatchRequest is what an account agent reports.
type receiptsBatchRequest struct {
	AccountID string         `json:"account_id"`
	Receipts  []agentReceipt `json:"receipts"`
}

type agentReceipt struct {
	MessageID string `json:"message_id"`
	Type      string `json:"type"`
	EventTime *int64 `json:"event_time"` // unix milliseconds
	// Version is an optional hint (sent=1, delivered=2, read=3); when given
	// it must agree with the type, since the merge orders by type.
	Version *int `json:"version"`
}

// MaxBatchReceipts bounds one agent batch, as MaxBatchMessages does for
// messages; the agent never sends more (agent.MaxBatchLimit).
const MaxBatchReceipts = 1000

var typeVersion = map[wamux.ReceiptType]int{wamux.ReceiptSent: 1, wamux.ReceiptDelivered: 2, wamux.ReceiptRead: 3}

// handleReceiptsBatch takes receipts an account agent collected itself.
// The whole batch is validated first: one bad receipt is a 400 naming it,
// and nothing is stored. 200 means every accepted receipt is durable.
func (s *Server) handleReceiptsBatch(w http.ResponseWriter, r *http.Request) {
	var req receiptsBatchRequest
	if err := decodeJSON(w, r, MaxBodyBatch, &req); err != nil {
		writeError(w, r, err)
		return
	}
	rs, err := req.receipts()
	if err != nil {
		writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.storeTimeout)
	defer cancel()
	if _, err := s.store.GetAccount(ctx, req.AccountID); err != nil {
		if wamux.ErrorCode(err) == wamux.ENotFound {
			// The agent package reads this message as a configuration
			// error and keeps the batch to retry it: keep the prefix.
			writeError(w, r, wamux.Errorf(wamux.EInvalid, "unknown account_id %q", req.AccountID))
			return
		}
		s.fail(w, r, "receipts batch: read account", err)
		return
	}
	// Ingest refuses a receipt its checks (Normalize) fail as
	// "receipts[i]: …", naming it as this handler's own checks do.
	res, err := s.receipts.Ingest(ctx, "agent", rs)
	if err != nil {
		s.fail(w, r, "receipts batch: ingest", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"accepted": res.Accepted, "duplicates": res.Duplicates})
}

// receipts validates the whole batch and returns its receipts; the error
// names the first bad one.
func (req *receiptsBatchRequest) receipts() ([]wamux.Receipt, error) {
	if req.AccountID == "" {
		return nil, wamux.Errorf(wamux.EInvalid, "account_id is required")
	}
	if !wamux.ValidAccountID(req.AccountID) {
		// Not looked up, and not quoted back: it may be megabytes long.
		return nil, wamux.Errorf(wamux.EInvalid, "account_id must be an account's id: 1-64 letters, digits, '_', '-' or '.'")
	}
	if len(req.Receipts) == 0 {
		return nil, wamux.Errorf(wamux.EInvalid, "receipts must hold at least one receipt")
	}
	if len(req.Receipts) > MaxBatchReceipts {
		return nil, wamux.Errorf(wamux.EInvalid, "at most %d receipts per batch", MaxBatchReceipts)
	}
	rs := make([]wamux.Receipt, len(req.Receipts))
	for i, in := range req.Receipts {
		typ, err := wamux.ParseReceiptType(in.Type)
		if err != nil {
			return nil, wamux.Errorf(wamux.EInvalid, "receipts[%d]: %s", i, wamux.ErrorMessage(err))
		}
		if in.EventTime == nil || *in.EventTime <= 0 {
			return nil, wamux.Errorf(wamux.EInvalid, "receipts[%d]: event_time (unix milliseconds) is required", i)
		}
		if in.Version != nil {
			if want, ok := typeVersion[typ]; *in.Version < 0 || (ok && *in.Version != 0 && *in.Version != want) {
				return nil, wamux.Errorf(wamux.EInvalid, "receipts[%d]: version %d does not match type %s", i, *in.Version, typ)
			}
		}
		rs[i] = wamux.Receipt{MessageID: in.MessageID, AccountID: req.AccountID, Type: typ, EventTime: time.UnixMilli(*in.EventTime).UTC()}
	}
	return rs, nil
}

// listLimit reads ?limit= (1..1000, default 100). The route takes no
// other parameter (onlyParams); a limit given empty or twice is refused
// rather than guessed at.
func listLimit(r *http.Request) (int, error) {
	vs, ok := r.URL.Query()["limit"]
	if !ok {
		return 100, nil
	}
	n, err := strconv.Atoi(vs[0])
	if len(vs) != 1 || err != nil || n < 1 || n > 1000 {
		return 0, wamux.Errorf(wamux.EInvalid, "limit must be given once, as a number from 1 to 1000")
	}
	return n, nil
}

type deadLetterJSON struct {
	ID         int64           `json:"id"`
	Source     string          `json:"source"`
	AccountID  string          `json:"account_id"`
	Reason     string          `json:"reason"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	RecordedAt time.Time       `json:"recorded_at"`
}

// handleDeadLetters lists the newest dead letters: input the gateway could
// not process, with why.
func (s *Server) handleDeadLetters(w http.ResponseWriter, r *http.Request) {
	serveList(s, w, r, "dead_letters", s.store.ListDeadLetters, func(d store.DeadLetter) deadLetterJSON {
		j := deadLetterJSON{ID: d.ID, Source: d.Source, AccountID: d.AccountID, Reason: d.Reason, RecordedAt: d.RecordedAt}
		if json.Valid(d.Payload) {
			j.Payload = d.Payload
		} else if len(d.Payload) > 0 {
			j.Payload, _ = json.Marshal(string(d.Payload))
		}
		return j
	})
}

type lateReceiptJSON struct {
	MessageID  string    `json:"message_id"`
	AccountID  string    `json:"account_id"`
	Type       string    `json:"type"`
	EventTime  time.Time `json:"event_time"`
	ErrorCode  int       `json:"error_code,omitempty"`
	Source     string    `json:"source"`
	Reason     string    `json:"reason"`
	RecordedAt time.Time `json:"recorded_at"`
}

// handleLateReceipts lists the newest receipts kept for audit instead of
// merged (out of order after the late window).
func (s *Server) handleLateReceipts(w http.ResponseWriter, r *http.Request) {
	serveList(s, w, r, "late_receipts", s.store.ListLateReceipts, func(l store.LateReceipt) lateReceiptJSON {
		return lateReceiptJSON{MessageID: l.MessageID, AccountID: l.AccountID, Type: string(l.Type),
			EventTime: l.EventTime, ErrorCode: l.ErrorCode, Source: l.Source, Reason: l.Reason, RecordedAt: l.RecordedAt}
	})
}

// serveList answers a read-only list endpoint: ?limit checked, the store
// asked under the store timeout, each row shown as view makes it, the
// rows under key.
func serveList[T, V any](s *Server, w http.ResponseWriter, r *http.Request, key string,
	list func(context.Context, int) ([]T, error), view func(T) V) {
	limit, err := listLimit(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.storeTimeout)
	defer cancel()
	rows, err := list(ctx, limit)
	if err != nil {
		s.fail(w, r, "list "+strings.ReplaceAll(key, "_", " "), err)
		return
	}
	out := make([]V, 0, len(rows))
	for _, row := range rows {
		out = append(out, view(row))
	}
	writeJSON(w, http.StatusOK, map[string]any{key: out})
}
