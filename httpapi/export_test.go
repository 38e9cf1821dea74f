package httpapi

// Patterns lists the routes the server registered, for tests that must
// cover every one of them.
func (s *Server) Patterns() []string { return append([]string(nil), s.patterns...) }

// SetAccountLockWait makes f run whenever a change of an account has to
// wait for another change of it in progress; the returned func undoes it.
func SetAccountLockWait(f func(id string)) (restore func()) {
	old := accountLockWait
	accountLockWait = f
	return func() { accountLockWait = old }
}

// RouteScopes maps every /v1 pattern to the scope a key needs for it.
func (s *Server) RouteScopes() map[string]string {
	out := make(map[string]string, len(s.scopes))
	for p, sc := range s.scopes {
		out[p] = sc.String()
	}
	return out
}
