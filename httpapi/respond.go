package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/wamux/wamux"
)

type errorBody struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
	// RetryAfter is the Retry-After of a 429, in whole seconds.
	RetryAfter int `json:"retry_after,omitempty"`
}

// retryAfterSeconds rounds a wait up to whole seconds, as Retry-After
// counts them (0: no wait asked).
func retryAfterSeconds(err error) int {
	d := wamux.RetryAfter(err)
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError sends the error envelope. Domain errors carry their own
// client-safe message; anything else is logged here with the request id and
// leaves as "internal" or "unavailable" without its details (no SQL, no
// stack traces).
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := wamux.ErrorCode(err)
	msg := wamux.ErrorMessage(err)
	if code == wamux.EInternal && unavailable(err) {
		code, msg = wamux.EUnavailable, "a dependency does not answer; retry later"
	}
	retry := retryAfterSeconds(err)
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retry))
	}
	writeJSON(w, httpStatus(code), map[string]errorBody{
		"error": {Code: code, Message: msg, RequestID: requestID(r.Context()), RetryAfter: retry},
	})
}

// fail logs an infrastructure error with what was being done and answers.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, doing string, err error) {
	if c := wamux.ErrorCode(err); c == wamux.EInternal || c == wamux.EUnavailable {
		s.logger(r).Error(doing+" failed", "err", err)
	}
	writeError(w, r, err)
}

// unavailable tells a dependency that did not answer (the client may retry)
// from a failure that retrying will not fix.
func unavailable(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.As(err, &netErr)
}

// decodeJSON reads one JSON object of at most limit bytes into dst,
// rejecting unknown fields, trailing data, bytes that are not UTF-8 and
// non-JSON content types. All failures are client errors (400, 413, 415)
// and nothing has been written.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, dst any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return wamux.Errorf(wamux.EUnsupported, "Content-Type must be application/json")
		}
	}
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	// JSON is UTF-8 (RFC 8259 §8.1). The decoder would quietly turn broken
	// bytes inside a string into U+FFFD, so a message text or a URL would
	// be stored and sent other than the client wrote it.
	if !utf8.Valid(body) {
		return wamux.Errorf(wamux.EInvalid, "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return wamux.Errorf(wamux.EInvalid, "request body must hold a single JSON object")
	}
	return nil
}

// readBody reads the whole body, refusing it (413) past limit bytes
// without reading further. The decoder would hold the whole value in
// memory anyway; reading it first lets the bytes be checked as a whole.
// The buffer grows with what arrives, not with the Content-Length a
// client announces.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, jsonError(err, limit)
		}
		return nil, wamux.Errorf(wamux.EInvalid, "request body could not be read")
	}
	return buf.Bytes(), nil
}

func jsonError(err error, limit int64) error {
	var (
		tooLarge  *http.MaxBytesError
		syntax    *json.SyntaxError
		typeError *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		return wamux.Errorf(wamux.ETooLarge, "request body exceeds %d bytes", limit)
	case errors.Is(err, io.EOF):
		return wamux.Errorf(wamux.EInvalid, "request body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return wamux.Errorf(wamux.EInvalid, "request body is truncated JSON")
	case errors.As(err, &syntax) && strings.Contains(syntax.Error(), "exceeded max depth"):
		return wamux.Errorf(wamux.EInvalid, "JSON nested too deeply (max %d)", maxJSONDepth)
	case errors.As(err, &syntax):
		return wamux.Errorf(wamux.EInvalid, "malformed JSON at byte %d", syntax.Offset)
	case errors.As(err, &typeError):
		if typeError.Field != "" {
			return wamux.Errorf(wamux.EInvalid, "field %q must be %s", typeError.Field, jsonKindOf(typeError.Type))
		}
		return wamux.Errorf(wamux.EInvalid, "request body must be a JSON object")
	case strings.HasPrefix(err.Error(), "Time.UnmarshalJSON: "), strings.HasPrefix(err.Error(), "parsing time "):
		// encoding/json does not say which field a time.Time was.
		return wamux.Errorf(wamux.EInvalid, "a time field must be an RFC 3339 time string (2006-01-02T15:04:05Z)")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return wamux.Errorf(wamux.EInvalid, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return wamux.Errorf(wamux.EInvalid, "invalid JSON body")
}

// maxJSONDepth is encoding/json's bound on nesting.
const maxJSONDepth = 10000

// jsonKindOf names the JSON a Go type is read from.
func jsonKindOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return "an RFC 3339 time string"
	case t.Kind() == reflect.Struct, t.Kind() == reflect.Map:
		return "an object"
	case t.Kind() == reflect.Array:
		return "an array"
	}
	return jsonKind(t.Kind().String())
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "float64", "float32", "int", "int64", "int32", "uint", "uint64":
		return "a number"
	case "bool":
		return "a boolean"
	case "slice":
		return "an array"
	}
	return fmt.Sprintf("of type %s", goKind)
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
