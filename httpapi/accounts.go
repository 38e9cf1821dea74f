package httpapi

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/store"
)

// Limits on account settings. 1,000 msg/s is far above any Cloud API tier
// (80/s default, up to 1,000/s on request), so a larger value is a typo.
const (
	ratePerSecDefault = 80
	ratePerSecMax     = 1000
	burstMax          = 10000
	// accessTokenMax is far above Meta's tokens (about 200 characters);
	// baseURLMax bounds a URL that is stored and shown with the account.
	accessTokenMax = 4096
	baseURLMax     = 2048
)

var (
	digitsPattern = regexp.MustCompile(`^[0-9]{1,32}$`)
	// bearerTokenPattern is RFC 6750's b64token: the token goes out in
	// "Authorization: Bearer <token>", where a control character makes
	// net/http refuse the request and other bytes are no token Meta issues.
	bearerTokenPattern = regexp.MustCompile(`^[A-Za-z0-9._~+/-]+=*$`)
)

type createAccountRequest struct {
	ID            string   `json:"id"`
	PhoneNumberID string   `json:"phone_number_id"`
	AccessToken   string   `json:"access_token"`
	BaseURL       string   `json:"base_url"`
	RatePerSec    *float64 `json:"rate_per_sec"`
	Burst         *int     `json:"burst"`
}

type patchAccountRequest struct {
	RatePerSec  *float64 `json:"rate_per_sec"`
	Burst       *int     `json:"burst"`
	State       *string  `json:"state"`
	AccessToken *string  `json:"access_token"`
	BaseURL     *string  `json:"base_url"`
	// CooldownUntil goes with state "cooldown": when the pause ends.
	CooldownUntil *time.Time `json:"cooldown_until"`
}

// accountResponse is what clients see of an account: never the token.
type accountResponse struct {
	ID            string         `json:"id"`
	PhoneNumberID string         `json:"phone_number_id"`
	BaseURL       string         `json:"base_url"`
	RatePerSec    float64        `json:"rate_per_sec"`
	Burst         int            `json:"burst"`
	State         string         `json:"state"`
	CooldownUntil *time.Time     `json:"cooldown_until"`
	Tokens        float64        `json:"tokens"`
	QueueDepth    map[string]int `json:"queue_depth"`
	CreatedAt     time.Time      `json:"created_at"`
	UpdatedAt     time.Time      `json:"updated_at"`
	// Owner is, in a cluster, the node working on the account.
	Owner *accountOwner `json:"owner,omitempty"`
}

// accountOwner is the lease of the partition an account belongs to: the
// node that sends its messages and merges its receipts.
type accountOwner struct {
	Node      string    `json:"node"`
	Partition int       `json:"partition"`
	Epoch     int64     `json:"epoch"`
	Since     time.Time `json:"since"`
}

// leases reads, in a cluster, every partition's lease for accountView; nil
// on one node. A failed read is logged and shows no owner: the rest of
// the view is still right.
func (s *Server) leases(ctx context.Context) map[int]store.PartitionLease {
	if s.partitions <= 0 {
		return nil
	}
	ls, err := s.store.PartitionLeases(ctx)
	if err != nil {
		s.log.Warn("read partition leases", "err", err)
		return nil
	}
	out := make(map[int]store.PartitionLease, len(ls))
	for _, l := range ls {
		out[l.Partition] = l
	}
	return out
}

// accountView is the account as clients see it; leases (from s.leases)
// give its owner.
func (s *Server) accountView(a wamux.Account, leases map[int]store.PartitionLease) accountResponse {
	v := accountResponse{
		ID:            a.ID,
		PhoneNumberID: a.PhoneNumberID,
		BaseURL:       a.BaseURL,
		RatePerSec:    a.RatePerSec,
		Burst:         a.Burst,
		State:         string(a.State),
		Tokens:        float64(a.Burst),
		QueueDepth:    map[string]int{"P0": 0, "P1": 0, "P2": 0},
		CreatedAt:     a.CreatedAt,
		UpdatedAt:     a.UpdatedAt,
	}
	if !a.CooldownUntil.IsZero() {
		t := a.CooldownUntil
		v.CooldownUntil = &t
	}
	if s.live != nil {
		if tok, ok := s.live.Tokens(a.ID); ok {
			v.Tokens = tok
		}
		d := s.live.QueueDepth(a.ID)
		v.QueueDepth = map[string]int{"P0": d[0], "P1": d[1], "P2": d[2]}
		if until := s.live.CooldownUntil(a.ID); a.State == wamux.AccountActive && until.After(time.Now()) {
			v.State, v.CooldownUntil = string(wamux.AccountCooldown), &until
		}
	}
	if a.State == wamux.AccountActive && v.State == string(wamux.AccountActive) && a.CooldownUntil.After(time.Now()) {
		// A stored cooldown the send pipeline has not applied (none runs).
		v.State = string(wamux.AccountCooldown)
	}
	if s.partitions > 0 {
		p := wamux.PartitionOf(a.ID, s.partitions)
		if l, ok := leases[p]; ok {
			v.Owner = &accountOwner{Node: l.Holder, Partition: p, Epoch: l.Epoch, Since: l.AcquiredAt}
		}
	}
	return v
}

func (s *Server) storeCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.storeTimeout)
}

func (s *Server) handleCreateAccount(w http.ResponseWriter, r *http.Request) {
	var req createAccountRequest
	if err := decodeJSON(w, r, MaxBodyV1, &req); err != nil {
		writeError(w, r, err)
		return
	}
	a, err := req.validate()
	if err == nil {
		err = s.allowedBaseURL(a.BaseURL)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	defer s.accountLocks.lock(a.ID)()
	created, err := s.store.CreateAccount(ctx, a)
	if err != nil {
		s.fail(w, r, "create account", err)
		return
	}
	s.accountChanged(r, created, false)
	s.logger(r).Info("account created", "account_id", created.ID, "base_url", created.BaseURL,
		"rate_per_sec", created.RatePerSec, "burst", created.Burst)
	w.Header().Set("Location", "/v1/accounts/"+url.PathEscape(created.ID))
	writeJSON(w, http.StatusCreated, s.accountView(created, s.leases(ctx)))
}

func (req createAccountRequest) validate() (wamux.Account, error) {
	a := wamux.Account{
		ID:            req.ID,
		PhoneNumberID: req.PhoneNumberID,
		AccessToken:   req.AccessToken,
		BaseURL:       req.BaseURL,
		RatePerSec:    ratePerSecDefault,
		State:         wamux.AccountActive,
	}
	switch {
	case req.ID == "":
		return a, wamux.Errorf(wamux.EInvalid, "id is required")
	case !wamux.ValidAccountID(req.ID):
		return a, wamux.Errorf(wamux.EInvalid, "id must be 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit")
	case req.PhoneNumberID == "":
		return a, wamux.Errorf(wamux.EInvalid, "phone_number_id is required")
	case !digitsPattern.MatchString(req.PhoneNumberID):
		return a, wamux.Errorf(wamux.EInvalid, "phone_number_id must be the numeric id of the business phone number")
	}
	if err := validToken(req.AccessToken); err != nil {
		return a, err
	}
	if a.BaseURL == "" {
		a.BaseURL = wamux.DefaultBaseURL
	}
	if err := validBaseURL(a.BaseURL); err != nil {
		return a, err
	}
	if req.RatePerSec != nil {
		a.RatePerSec = *req.RatePerSec
	}
	if err := validRate(a.RatePerSec); err != nil {
		return a, err
	}
	a.Burst = ratelimit.DefaultBurstFor(a.RatePerSec)
	if req.Burst != nil {
		a.Burst = *req.Burst
	}
	if err := validBurst(a.Burst); err != nil {
		return a, err
	}
	return a, nil
}

func validToken(t string) error {
	switch {
	case t == "":
		return wamux.Errorf(wamux.EInvalid, "access_token is required")
	case len(t) > accessTokenMax || !bearerTokenPattern.MatchString(t):
		return wamux.Errorf(wamux.EInvalid, "access_token must be one bearer token of at most %d characters: letters, digits, '-', '.', '_', '~', '+', '/', then any '='", accessTokenMax)
	}
	return nil
}

func validBaseURL(s string) error {
	if len(s) > baseURLMax {
		return wamux.Errorf(wamux.EInvalid, "base_url must be at most %d bytes", baseURLMax)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return wamux.Errorf(wamux.EInvalid, "base_url must be an absolute http(s) URL without credentials")
	}
	return nil
}

// allowedBaseURL refuses a base_url outside the provider allow-list: the
// account's access token goes to it with every send.
func (s *Server) allowedBaseURL(u string) error {
	if !s.baseURLs.Allows(u) {
		return wamux.Errorf(wamux.EInvalid, "base_url must fall under one of the provider base URLs the gateway allows (WAMUX_PROVIDER_BASE_URLS): %s", s.baseURLs)
	}
	return nil
}

// validRate keeps a rate within what the send pipeline's limiter takes:
// a smaller one would be stored, then refused by the limiter, leaving the
// account without a sender and the next start failing on it.
func validRate(r float64) error {
	if math.IsNaN(r) || r < ratelimit.MinLimitRate || r > ratePerSecMax {
		return wamux.Errorf(wamux.EInvalid, "rate_per_sec must be from 1/3600 (one message an hour) to %d", ratePerSecMax)
	}
	return nil
}

func validBurst(b int) error {
	if b < 1 || b > burstMax {
		return wamux.Errorf(wamux.EInvalid, "burst must be between 1 and %d", burstMax)
	}
	return nil
}

func (s *Server) handleListAccounts(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	accounts, err := s.store.ListAccounts(ctx)
	if err != nil {
		s.fail(w, r, "list accounts", err)
		return
	}
	out := make([]accountResponse, 0, len(accounts))
	leases := s.leases(ctx)
	for _, a := range accounts {
		out = append(out, s.accountView(a, leases))
	}
	writeJSON(w, http.StatusOK, map[string]any{"accounts": out})
}

func (s *Server) handleGetAccount(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	a, err := s.store.GetAccount(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, "get account", err)
		return
	}
	writeJSON(w, http.StatusOK, s.accountView(a, s.leases(ctx)))
}

func (s *Server) handlePatchAccount(w http.ResponseWriter, r *http.Request) {
	var req patchAccountRequest
	if err := decodeJSON(w, r, MaxBodyV1, &req); err != nil {
		writeError(w, r, err)
		return
	}
	p, err := req.validate(time.Now())
	if err == nil && p.BaseURL != nil {
		err = s.allowedBaseURL(*p.BaseURL)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	id := r.PathValue("id")
	// Held until the send pipeline has been told: see accountLocks.
	defer s.accountLocks.lock(id)()
	before, err := s.store.GetAccount(ctx, id)
	if err != nil {
		s.fail(w, r, "get account", err)
		return
	}
	// A burst given alone is checked against nothing else; a rate given
	// alone keeps the stored burst, which is valid on its own.
	after, err := s.store.UpdateAccount(ctx, id, p)
	if err != nil {
		s.fail(w, r, "update account", err)
		return
	}
	s.accountChanged(r, after, req.State != nil && wamux.AccountState(*req.State) == wamux.AccountActive)
	attrs := []any{"account_id", id,
		"rate_per_sec_old", before.RatePerSec, "rate_per_sec_new", after.RatePerSec,
		"burst_old", before.Burst, "burst_new", after.Burst,
		"state_old", before.State, "state_new", after.State,
		"token_changed", p.AccessToken != nil, "base_url_changed", after.BaseURL != before.BaseURL}
	if after.BaseURL != before.BaseURL {
		attrs = append(attrs, "base_url_old", before.BaseURL, "base_url_new", after.BaseURL)
	}
	s.logger(r).Info("account changed", attrs...)
	writeJSON(w, http.StatusOK, s.accountView(after, s.leases(ctx)))
}

func (req patchAccountRequest) validate(now time.Time) (store.AccountPatch, error) {
	var p store.AccountPatch
	if req.RatePerSec == nil && req.Burst == nil && req.State == nil && req.AccessToken == nil && req.BaseURL == nil {
		return p, wamux.Errorf(wamux.EInvalid, "nothing to change: give rate_per_sec, burst, state, access_token or base_url")
	}
	if req.CooldownUntil != nil && (req.State == nil || wamux.AccountState(*req.State) != wamux.AccountCooldown) {
		return p, wamux.Errorf(wamux.EInvalid, `cooldown_until goes with state "cooldown"`)
	}
	if req.RatePerSec != nil {
		if err := validRate(*req.RatePerSec); err != nil {
			return p, err
		}
		p.RatePerSec = req.RatePerSec
	}
	if req.Burst != nil {
		if err := validBurst(*req.Burst); err != nil {
			return p, err
		}
		p.Burst = req.Burst
	}
	if req.State != nil {
		st := wamux.AccountState(*req.State)
		if !st.Valid() {
			return p, wamux.Errorf(wamux.EInvalid, "state must be active, cooldown or disabled")
		}
		p.State = &st
		operator := "set by an operator"
		p.StateReason = &operator
		switch st {
		case wamux.AccountActive:
			// Re-activating ends any cooldown the gateway had set.
			zero := time.Time{}
			p.CooldownUntil = &zero
		case wamux.AccountCooldown:
			until, err := operatorCooldown(req.CooldownUntil, now)
			if err != nil {
				return p, err
			}
			// Stored like a cooldown the gateway sets: an active account
			// with a cooldown_until, which pauses it until then and lets it
			// send again afterwards, across a restart too. A "cooldown"
			// state stored as such would outlive its end.
			active := wamux.AccountActive
			p.State, p.CooldownUntil = &active, &until
		}
	}
	if req.AccessToken != nil {
		if err := validToken(*req.AccessToken); err != nil {
			return p, err
		}
		p.AccessToken = req.AccessToken
	}
	if req.BaseURL != nil {
		if err := validBaseURL(*req.BaseURL); err != nil {
			return p, err
		}
		p.BaseURL = req.BaseURL
	}
	return p, nil
}

// operatorCooldown checks the end of a cooldown an operator sets: without
// an end, or with one already past, the account would show "cooldown"
// without ever pausing or ever ending.
func operatorCooldown(until *time.Time, now time.Time) (time.Time, error) {
	switch {
	case until == nil:
		return time.Time{}, wamux.Errorf(wamux.EInvalid, `state "cooldown" needs cooldown_until, when it ends`)
	case !until.After(now):
		return time.Time{}, wamux.Errorf(wamux.EInvalid, `cooldown_until must be in the future; state "active" ends a cooldown`)
	case until.After(now.Add(MaxOperatorCooldown)):
		return time.Time{}, wamux.Errorf(wamux.EInvalid, `cooldown_until must be at most %d days ahead; state "disabled" stops an account for longer`, int(MaxOperatorCooldown.Hours()/24))
	}
	return until.UTC(), nil
}

// MaxOperatorCooldown is how far ahead an operator's cooldown may end: a
// pause longer than a month is a disabled account, which says so.
const MaxOperatorCooldown = 30 * 24 * time.Hour

// accountChanged tells the send pipeline; the change is stored already, so
// a failure here is logged and the pipeline picks it up on restart.
// reactivated says the request set state "active", which ends a running
// cooldown. The account alone cannot say it: a zero cooldown_until in the
// store may be a cooldown the gateway has started and not stored yet,
// which a PATCH of anything else must leave running.
func (s *Server) accountChanged(r *http.Request, a wamux.Account, reactivated bool) {
	if s.outbound == nil {
		return
	}
	tell := s.outbound.AccountChanged
	if reactivated {
		tell = s.outbound.AccountReactivated
	}
	if err := tell(r.Context(), a); err != nil {
		s.logger(r).Error("apply account change to the send pipeline", "account_id", a.ID, "err", err)
	}
}
