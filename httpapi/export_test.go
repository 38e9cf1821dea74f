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
