package httpapi

// Patterns lists the routes the server registered, for tests that must
// cover every one of them.
func (s *Server) Patterns() []string { return append([]string(nil), s.patterns...) }
