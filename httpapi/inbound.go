package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/apikey"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/store"
)

// ReadMarker marks an inbound message read at the provider
// (cloudapi.Client.MarkRead).
type ReadMarker interface {
	MarkRead(ctx context.Context, dest cloudapi.Destination, wamid string) cloudapi.Result
}

// inboundRoutes adds the inbound list, and marking read when the server
// has a ReadMarker.
func (s *Server) inboundRoutes(v1 v1Route) {
	v1("GET /v1/accounts/{id}/inbound", apikey.Read, s.handleListInbound, "from", "after", "limit")
	if s.readMarker != nil {
		v1("POST /v1/accounts/{id}/inbound/{wamid}/read", apikey.Admin, s.handleMarkRead)
	}
}

// handleListInbound lists an account's inbound messages newest first, as
// their message.inbound event data; ?from= keeps one customer's, ?after=
// continues from a page's next.
func (s *Server) handleListInbound(w http.ResponseWriter, r *http.Request) {
	limit, err := listLimit(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	if len(q["from"]) > 1 || len(q["after"]) > 1 {
		writeError(w, r, wamux.Errorf(wamux.EInvalid, "from and after may each be given once"))
		return
	}
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	a, err := s.store.GetAccount(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, "list inbound messages", err)
		return
	}
	ms, next, err := s.store.ListInbound(ctx, store.InboundFilter{AccountID: a.ID, From: q.Get("from"), After: q.Get("after"), Limit: limit})
	if err != nil {
		s.fail(w, r, "list inbound messages", err)
		return
	}
	out := make([]json.RawMessage, 0, len(ms))
	for _, m := range ms {
		out = append(out, inboundView(m))
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out, "next": next})
}

// inboundView is a stored message's event data; a message stored without
// (none kept its content) gets the fields the store has.
func inboundView(m store.InboundMessage) json.RawMessage {
	if json.Valid(m.Data) {
		return m.Data
	}
	v := map[string]string{"account_id": m.AccountID, "wamid": m.WAMID, "type": m.Type}
	if m.From != "" {
		v["from"] = m.From
	}
	if !m.SentAt.IsZero() {
		v["timestamp"] = m.SentAt.UTC().Format(time.RFC3339)
	}
	b, _ := json.Marshal(v)
	return b
}

// handleMarkRead marks a stored inbound message of the account read at
// the provider, with the account's number and token; the provider's
// refusal is a 502 naming its reason (never the token).
func (s *Server) handleMarkRead(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	a, err := s.store.GetAccount(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, "mark inbound message read", err)
		return
	}
	m, err := s.store.GetInbound(ctx, a.ID, r.PathValue("wamid"))
	if err != nil {
		s.fail(w, r, "mark inbound message read", err)
		return
	}
	res := s.readMarker.MarkRead(r.Context(), cloudapi.DestinationOf(a), m.WAMID)
	if res.Outcome != cloudapi.Accepted {
		s.logger(r).Warn("mark read refused by the provider", "account_id", a.ID, "outcome", res.Outcome.String(),
			"http_status", res.HTTPStatus, "code", res.Code, "err", res.Err)
		writeError(w, r, wamux.Errorf(wamux.EProvider, "the provider did not mark the message read (%s): %s", res.Outcome, res.Reason))
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}
