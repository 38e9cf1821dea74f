package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/wamux/wamux"
)

type ctxKey int

const requestIDKey ctxKey = 0

// requestID returns the id withRequestID gave the request.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// logger returns the server's logger with the request id attached, so every
// line written for one request can be found together.
func (s *Server) logger(r *http.Request) *slog.Logger {
	return s.log.With("request_id", requestID(r.Context()))
}

// withRequestID gives every request an id: the caller's X-Request-Id when it
// is short and plain, a fresh one otherwise. It is echoed in the response.
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !plainID(id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

func plainID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// recoverPanics turns a handler panic into a logged 500 so one bad request
// never takes the process down.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.logger(r).Error("handler panic", "panic", v, "stack", string(debug.Stack()))
				writeError(w, r, wamux.Errorf(wamux.EInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// statusRecorder remembers the status code for metrics and logs.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// instrument counts and times requests by route pattern (bounded labels:
// the pattern, never the raw path with ids in it) and logs each one
// without headers or bodies, which may hold secrets. A handler that
// panics is counted too, as the 500 recoverPanics answers: those are the
// failures wamux_http_requests_total{code=~"5.."} is read for. It is
// counted in a deferred call that does not recover, so recoverPanics
// still logs the stack of the panic itself.
func (s *Server) instrument(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		returned := false
		defer func() {
			if rec.status == 0 {
				rec.status = http.StatusOK
				if !returned {
					rec.status = http.StatusInternalServerError
				}
			}
			s.observe(r, route, rec.status, time.Since(start))
		}()
		next.ServeHTTP(rec, r)
		returned = true
	})
}

// observe counts, times and logs one served request.
func (s *Server) observe(r *http.Request, route string, status int, elapsed time.Duration) {
	s.metrics.observe(route, status, elapsed)
	level := slog.LevelDebug
	if status >= 500 {
		level = slog.LevelWarn
	}
	// Asked first: building the request's logger and the record costs
	// time on every request, and at debug level nobody reads it.
	if s.log.Enabled(r.Context(), level) {
		s.logger(r).Log(r.Context(), level, "http request", "method", r.Method, "route", route, "status", status, "duration", elapsed)
	}
}

// onlyParams refuses (400) a query that does not parse or names a
// parameter other than params, as unknown body fields are refused:
// ignoring ?dry_run=true would send for real, ignoring ?after= would
// return the same page again. Names and values are not echoed (a query
// may hold anything).
func onlyParams(params []string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery == "" {
			next(w, r)
			return
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			writeError(w, r, wamux.Errorf(wamux.EInvalid, "the query string is malformed"))
			return
		}
		for k := range q {
			if !slices.Contains(params, k) {
				writeError(w, r, unknownParam(params))
				return
			}
		}
		next(w, r)
	}
}

func unknownParam(params []string) error {
	if len(params) == 0 {
		return wamux.Errorf(wamux.EInvalid, "this endpoint takes no query parameters")
	}
	return wamux.Errorf(wamux.EInvalid, "unknown query parameter: this endpoint takes only %s", strings.Join(params, ", "))
}

// jsonFallbacks turns the mux's plain-text 404 and 405 answers into the JSON
// error envelope, keeping the Allow header.
func jsonFallbacks(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		rec := &bufferedWriter{header: http.Header{}}
		mux.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		if rec.status == http.StatusMethodNotAllowed {
			writeError(w, r, wamux.Errorf(wamux.ENotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path))
			return
		}
		writeError(w, r, wamux.Errorf(wamux.ENotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
}

type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header         { return b.header }
func (b *bufferedWriter) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedWriter) WriteHeader(code int)        { b.status = code }
