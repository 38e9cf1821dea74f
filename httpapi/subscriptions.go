package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/events"
	"github.com/wamux/wamux/internal/apikey"
)

// Events is the event pipeline behind /v1/subscriptions and /v1/events
// (events.Manager).
type Events interface {
	Create(ctx context.Context, n events.NewSubscription) (wamux.Subscription, string, error)
	Get(ctx context.Context, id string) (wamux.Subscription, error)
	List(ctx context.Context) ([]wamux.Subscription, error)
	Update(ctx context.Context, id string, p events.Patch) (wamux.Subscription, error)
	Delete(ctx context.Context, id string) error
	RotateSecret(ctx context.Context, id string) (wamux.Subscription, string, error)
	Replay(ctx context.Context, id string, since time.Time) (wamux.Subscription, error)
	Backlog(ctx context.Context, id string) (int, time.Time, error)
	Attempts(id string) []events.Attempt
	Feed(ctx context.Context, after string, limit int, wait time.Duration) ([]wamux.Event, string, error)
	Recent() []wamux.Event
}

type subscriptionRequest struct {
	URL         *string            `json:"url"`
	Events      *[]wamux.EventType `json:"events"`
	AccountIDs  *[]string          `json:"account_ids"`
	Description *string            `json:"description"`
	State       *string            `json:"state"`
}

// subscriptionResponse is what clients see of a subscription; the secret
// only on create and rotate.
type subscriptionResponse struct {
	ID                 string            `json:"id"`
	URL                string            `json:"url"`
	Events             []wamux.EventType `json:"events"`
	AccountIDs         []string          `json:"account_ids"`
	Description        string            `json:"description"`
	State              string            `json:"state"`
	StateReason        string            `json:"state_reason,omitempty"`
	Secret             string            `json:"secret,omitempty"`
	PreviousSecretEnds *time.Time        `json:"previous_secret_valid_until,omitempty"`
	Pending            *int              `json:"pending,omitempty"`
	OldestPendingAt    *time.Time        `json:"oldest_pending_at,omitempty"`
	CreatedAt          time.Time         `json:"created_at"`
	UpdatedAt          time.Time         `json:"updated_at"`
}

func subscriptionView(s wamux.Subscription) subscriptionResponse {
	v := subscriptionResponse{ID: s.ID, URL: s.URL, Events: s.Events, AccountIDs: s.AccountIDs, Description: s.Description,
		State: string(s.State), StateReason: s.StateReason, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	if v.AccountIDs == nil {
		v.AccountIDs = []string{}
	}
	if s.OldSecret != "" && time.Now().Before(s.OldSecretUntil) {
		t := s.OldSecretUntil
		v.PreviousSecretEnds = &t
	}
	return v
}

func (s *Server) subscriptionRoutes(v1 v1Route) {
	if s.events == nil {
		return
	}
	v1("POST /v1/subscriptions", apikey.Admin, s.handleCreateSubscription)
	v1("GET /v1/subscriptions", apikey.Read, s.handleListSubscriptions)
	v1("GET /v1/subscriptions/{id}", apikey.Read, s.handleGetSubscription)
	v1("PATCH /v1/subscriptions/{id}", apikey.Admin, s.handlePatchSubscription)
	v1("DELETE /v1/subscriptions/{id}", apikey.Admin, s.handleDeleteSubscription)
	v1("POST /v1/subscriptions/{id}/secret:rotate", apikey.Admin, s.handleRotateSecret)
	v1("POST /v1/subscriptions/{id}/replay", apikey.Admin, s.handleReplay)
	v1("GET /v1/subscriptions/{id}/deliveries", apikey.Read, s.handleDeliveries)
	v1("GET /v1/events", apikey.Read, s.handleEvents, "after", "limit", "wait")
}

func (s *Server) handleCreateSubscription(w http.ResponseWriter, r *http.Request) {
	var req subscriptionRequest
	if err := decodeJSON(w, r, MaxBodyV1, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if req.URL == nil || req.Events == nil {
		writeError(w, r, wamux.Errorf(wamux.EInvalid, "url and events are required"))
		return
	}
	if req.State != nil {
		writeError(w, r, wamux.Errorf(wamux.EInvalid, "a subscription starts active; state is changed with PATCH"))
		return
	}
	n := events.NewSubscription{URL: *req.URL, Events: *req.Events}
	if req.AccountIDs != nil {
		n.AccountIDs = *req.AccountIDs
	}
	if req.Description != nil {
		n.Description = *req.Description
	}
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	sub, secret, err := s.events.Create(ctx, n)
	if err != nil {
		s.fail(w, r, "create subscription", err)
		return
	}
	s.logger(r).Info("subscription created", "subscription", sub.ID, "events", sub.Events, "accounts", sub.AccountIDs)
	v := subscriptionView(sub)
	v.Secret = secret
	writeJSON(w, http.StatusCreated, v)
}

func (s *Server) handleListSubscriptions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	subs, err := s.events.List(ctx)
	if err != nil {
		s.fail(w, r, "list subscriptions", err)
		return
	}
	out := make([]subscriptionResponse, 0, len(subs))
	for _, sub := range subs {
		out = append(out, subscriptionView(sub))
	}
	writeJSON(w, http.StatusOK, map[string]any{"subscriptions": out})
}

// withBacklog adds the pending deliveries to a view.
func (s *Server) withBacklog(ctx context.Context, v subscriptionResponse) (subscriptionResponse, error) {
	n, oldest, err := s.events.Backlog(ctx, v.ID)
	if err != nil {
		return v, err
	}
	v.Pending = &n
	if !oldest.IsZero() {
		v.OldestPendingAt = &oldest
	}
	return v, nil
}

func (s *Server) handleGetSubscription(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	sub, err := s.events.Get(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, "get subscription", err)
		return
	}
	v, err := s.withBacklog(ctx, subscriptionView(sub))
	if err != nil {
		s.fail(w, r, "read subscription backlog", err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handlePatchSubscription(w http.ResponseWriter, r *http.Request) {
	var req subscriptionRequest
	if err := decodeJSON(w, r, MaxBodyV1, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if req.URL == nil && req.Events == nil && req.AccountIDs == nil && req.Description == nil && req.State == nil {
		writeError(w, r, wamux.Errorf(wamux.EInvalid, "nothing to change: give url, events, account_ids, description or state"))
		return
	}
	p := events.Patch{URL: req.URL, Events: req.Events, AccountIDs: req.AccountIDs, Description: req.Description}
	if req.State != nil {
		st := wamux.SubscriptionState(*req.State)
		p.State = &st
	}
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	sub, err := s.events.Update(ctx, r.PathValue("id"), p)
	if err != nil {
		s.fail(w, r, "update subscription", err)
		return
	}
	s.logger(r).Info("subscription changed", "subscription", sub.ID, "state", sub.State, "url_changed", req.URL != nil)
	writeJSON(w, http.StatusOK, subscriptionView(sub))
}

func (s *Server) handleDeleteSubscription(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	if err := s.events.Delete(ctx, r.PathValue("id")); err != nil {
		s.fail(w, r, "delete subscription", err)
		return
	}
	s.logger(r).Info("subscription deleted", "subscription", r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRotateSecret(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	sub, secret, err := s.events.RotateSecret(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, "rotate subscription secret", err)
		return
	}
	s.logger(r).Info("subscription secret rotated", "subscription", sub.ID)
	v := subscriptionView(sub)
	v.Secret = secret
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleReplay(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Since *time.Time `json:"since"`
	}
	if err := decodeJSON(w, r, MaxBodyV1, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if req.Since == nil {
		writeError(w, r, wamux.Errorf(wamux.EInvalid, "since is required (RFC 3339)"))
		return
	}
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	sub, err := s.events.Replay(ctx, r.PathValue("id"), *req.Since)
	if err != nil {
		s.fail(w, r, "replay events", err)
		return
	}
	s.logger(r).Info("subscription replay", "subscription", sub.ID, "since", req.Since)
	writeJSON(w, http.StatusAccepted, subscriptionView(sub))
}

func (s *Server) handleDeliveries(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	sub, err := s.events.Get(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, "get subscription", err)
		return
	}
	v, err := s.withBacklog(ctx, subscriptionView(sub))
	if err != nil {
		s.fail(w, r, "read subscription backlog", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"subscription": v, "attempts": s.events.Attempts(sub.ID)})
}

// handleEvents is the pull feed: ?after=<cursor>&limit=&wait=<seconds or
// duration>.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, r, wamux.Errorf(wamux.EInvalid, "limit must be a number from 1 to 1000"))
			return
		}
		limit = n
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if n, nerr := strconv.Atoi(v); nerr == nil {
			d, err = time.Duration(n)*time.Second, nil
		}
		if err != nil || d < 0 || d > events.MaxFeedWait {
			writeError(w, r, wamux.Errorf(wamux.EInvalid, "wait must be seconds or a duration from 0 to %s", events.MaxFeedWait))
			return
		}
		wait = d
	}
	es, next, err := s.events.Feed(r.Context(), q.Get("after"), limit, wait)
	if err != nil {
		s.fail(w, r, "read events", err)
		return
	}
	items := make([]any, 0, len(es))
	for _, e := range es {
		items = append(items, events.FeedItem(e))
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": items, "next": next})
}
