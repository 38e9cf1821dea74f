package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/wamux/wamux/store"
)

// audited serves an admin change and, when it succeeds (2xx), records it
// in the store's admin audit: the key's id, the route, the ids its path
// names and the names of the top-level body fields (a request with a field
// the route does not take is refused, so these are the fields it set). No
// value is kept: a body may hold an access token. The record is written
// after the answer; a failure to write it is logged.
func (s *Server) audited(w http.ResponseWriter, r *http.Request, keyID string, next http.HandlerFunc) {
	body := &cappedBuffer{max: MaxBodyBatch}
	if r.Body != nil {
		r.Body = teeBody{ReadCloser: r.Body, w: body}
	}
	rec := &statusRecorder{ResponseWriter: w}
	next(rec, r)
	if rec.status != 0 && (rec.status < 200 || rec.status > 299) {
		return
	}
	a := store.AdminAction{KeyID: keyID, Route: r.Pattern, Target: pathTarget(r), Fields: bodyFields(body.Bytes())}
	if loc := rec.Header().Get("Location"); a.Target == "" && loc != "" {
		// A create names what it made in Location.
		if id, err := url.PathUnescape(path.Base(loc)); err == nil {
			a.Target = id
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.storeTimeout)
	defer cancel()
	if err := s.store.AddAdminAction(ctx, a); err != nil {
		s.logger(r).Error("record admin action", "route", a.Route, "target", a.Target, "err", err)
		return
	}
	s.logger(r).Info("admin action", "key_id", a.KeyID, "route", a.Route, "target", a.Target, "fields", a.Fields)
}

var pathWildcard = regexp.MustCompile(`\{([a-z_]+)\}`)

// pathTarget joins the values of the pattern's wildcards ("acc1",
// "acc1/wamid.X"); "" for a route without any.
func pathTarget(r *http.Request) string {
	var vals []string
	for _, m := range pathWildcard.FindAllStringSubmatch(r.Pattern, -1) {
		vals = append(vals, r.PathValue(m[1]))
	}
	return strings.Join(vals, "/")
}

// bodyFields returns the sorted top-level keys of a JSON object body.
func bodyFields(b []byte) []string {
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(b)) == 0 || json.Unmarshal(b, &m) != nil {
		return []string{}
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// teeBody copies what a handler reads of a body.
type teeBody struct {
	io.ReadCloser
	w io.Writer
}

func (t teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		t.w.Write(p[:n])
	}
	return n, err
}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// adminActionJSON is one row of GET /v1/audit.
type adminActionJSON struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	KeyID  string    `json:"key_id"`
	Route  string    `json:"route"`
	Target string    `json:"target"`
	Fields []string  `json:"fields"`
}

// handleAudit lists the newest admin actions.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	serveList(s, w, r, "actions", s.store.ListAdminActions, func(a store.AdminAction) adminActionJSON {
		if a.Fields == nil {
			a.Fields = []string{}
		}
		return adminActionJSON{ID: a.ID, At: a.At.UTC(), KeyID: a.KeyID, Route: a.Route, Target: a.Target, Fields: a.Fields}
	})
}
