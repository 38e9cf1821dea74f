package httpapi

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/apikey"
)

// v1Route registers a /v1 route: the scope a key needs to call it, then
// the query parameters it takes (none but the lists' ones).
type v1Route func(pattern string, need apikey.Scope, h http.HandlerFunc, params ...string)

// apiKeys checks bearer keys in constant time.
type apiKeys struct {
	keys    []apikey.Key
	secrets [][]byte
}

func newAPIKeys(entries []string) (*apiKeys, error) {
	keys, err := apikey.Parse(entries)
	if err != nil {
		return nil, err
	}
	a := &apiKeys{keys: keys}
	for _, k := range keys {
		a.secrets = append(a.secrets, []byte(k.Secret))
	}
	return a, nil
}

// match compares against every key without stopping early, so the time
// taken does not tell which key (or how much of one) matched.
func (a *apiKeys) match(got string) (apikey.Key, bool) {
	found := -1
	for i, k := range a.secrets {
		eq := subtle.ConstantTimeCompare([]byte(got), k)
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return apikey.Key{}, false
	}
	return a.keys[found], true
}

// bearerKey returns the credentials of "Authorization: Bearer <key>". The
// scheme is case-insensitive (RFC 9110 §11.1): some clients send "bearer".
func bearerKey(h string) (string, bool) {
	const scheme = "Bearer "
	if len(h) < len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	return h[len(scheme):], true
}

// requireKey lets a request through with a valid key that holds need: no
// key or a wrong one is a 401, a key without the scope a 403 naming it.
func (s *Server) requireKey(need apikey.Scope, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got, found := bearerKey(r.Header.Get("Authorization"))
		key, ok := s.auth.match(got)
		if !found || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="wamux"`)
			writeError(w, r, wamux.Errorf(wamux.EUnauthorized, "a valid API key is required: Authorization: Bearer <key>"))
			return
		}
		if !key.Scopes.Has(need) {
			s.logger(r).Info("API key lacks a scope", "key_id", key.ID(), "key_scopes", key.Scopes.String(), "scope_needed", need.String())
			writeError(w, r, wamux.Errorf(wamux.EForbidden, "this API key (id %s, scopes %s) lacks the %s scope this endpoint needs", key.ID(), key.Scopes, need))
			return
		}
		if ok, wait := s.keyLimits.allow(key.ID()); !ok {
			writeError(w, r, keyLimited(key.ID(), wait))
			return
		}
		if need == apikey.Admin && r.Method != http.MethodGet {
			s.audited(w, r, key.ID(), next)
			return
		}
		next(w, r)
	}
}
