package sim

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Message is one accepted message, as recorded for /sim/messages.
type Message struct {
	// Seq orders acceptances across all numbers.
	Seq           int64     `json:"seq"`
	WAMID         string    `json:"wamid"`
	PhoneNumberID string    `json:"phone_number_id"`
	To            string    `json:"to"`
	Type          string    `json:"type"`
	CallbackData  string    `json:"biz_opaque_callback_data,omitempty"`
	AcceptedAt    time.Time `json:"accepted_at"`
	// Duplicate is true when this callback data had been accepted before.
	Duplicate bool `json:"duplicate,omitempty"`
	// Paced is true when the send was answered held_for_quality_assessment
	// (Faults.Paced); PacedDropped when the held message was then dropped
	// and never got a status.
	Paced        bool `json:"paced,omitempty"`
	PacedDropped bool `json:"paced_dropped,omitempty"`
	// WindowClosed is true when the send was not a template and its
	// recipient's customer-service window was closed (Config.ServiceWindow):
	// its only status is failed with code 131047.
	WindowClosed bool `json:"window_closed,omitempty"`
	// Body is the request body exactly as received.
	Body json.RawMessage `json:"body"`
}

// fault is what, if anything, goes wrong with one request.
type fault struct {
	serverError      bool
	serverErrorAlt   bool
	reset            bool
	slowAccept       bool
	resetAfterAccept bool
	// serverErrorAfterAccept answers errServer(false) although accepted.
	serverErrorAfterAccept bool
	latency                time.Duration
	slowDelay              time.Duration
}

// validVersion accepts Graph API versions like "v24.0" (or "v24"); a
// hand-written check because a regexp costs more than the rest of routing.
func validVersion(v string) bool {
	major, minor, dotted := strings.Cut(v, ".")
	if len(major) < 2 || major[0] != 'v' || !digits(major[1:], 3) {
		return false
	}
	return !dotted || digits(minor, 3)
}

func digits(s string, most int) bool {
	if s == "" || len(s) > most {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (s *Server) handleSend(w http.ResponseWriter, r *http.Request) {
	version, id := r.PathValue("version"), r.PathValue("phone_number_id")
	if !validVersion(version) {
		badParam("Unknown path components: /"+clip(version), "").write(w)
		return
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		errBadToken("Cannot parse access token").write(w)
		return
	}
	nb := s.number(id)
	if nb == nil {
		s.unknownNumber.Add(1)
		// Graph validates the token before it looks the object up.
		if !s.knownToken(token) {
			errBadToken("Error validating access token: The session is invalid.").write(w)
			return
		}
		errUnknownNumber(clip(id)).write(w)
		return
	}
	body, readErr := readBody(w, r)
	authOK := subtle.ConstantTimeCompare([]byte(token), []byte(nb.token)) == 1
	var req *sendRequest
	var apiErr *apiError
	switch {
	case !authOK:
		apiErr = errBadToken("Error validating access token: The session is invalid.")
	case readErr != nil:
		apiErr = badParam("Invalid parameter", "Request body could not be read or is larger than 1 MiB.")
	default:
		req, apiErr = parseSend(body)
		if req != nil && req.Status != "" {
			s.markRead(w, nb, req)
			return
		}
	}

	if j := nb.jitter(); j > 0 && !s.wait(r, j) {
		return
	}
	now := s.cfg.Clock()
	msg, f, plan, apiErr := s.decide(nb, req, apiErr, body, now)
	if plan != nil && s.hooks != nil {
		s.hooks.enqueue(plan)
	}
	if f.latency > 0 && !s.wait(r, f.latency) {
		return
	}
	switch {
	case f.reset, f.resetAfterAccept:
		resetConn(w)
	case f.serverError:
		errServer(f.serverErrorAlt).write(w)
	case f.serverErrorAfterAccept:
		errServer(false).write(w)
	case apiErr != nil:
		apiErr.write(w)
	default:
		if f.slowAccept && !s.wait(r, f.slowDelay) {
			return
		}
		writeAccepted(w, msg)
	}
}

// knownToken reports whether any number accepts token: a valid token on
// an id it cannot reach is 100/33, an invalid one 190.
func (s *Server) knownToken(token string) bool {
	s.numMu.RLock()
	defer s.numMu.RUnlock()
	known := false
	for _, nb := range s.numbers {
		if subtle.ConstantTimeCompare([]byte(token), []byte(nb.token)) == 1 {
			known = true
		}
	}
	return known
}

// decide does everything that needs the number's lock in one critical
// section: counting, fault draws, rate limits, acceptance and recording.
func (s *Server) decide(nb *number, req *sendRequest, apiErr *apiError, body []byte, now time.Time) (Message, fault, []hookStatus, *apiError) {
	ns := now.UnixNano()
	nb.mu.Lock()
	fc := &nb.faults
	defer nb.mu.Unlock()
	nb.st.requests++
	nb.tick(ns, false)

	var f fault
	if apiErr == nil {
		// Drawn in a fixed order so that a seed replays the same run.
		f.serverError = nb.chance(fc.ServerError)
		f.serverErrorAlt = f.serverError && nb.rng.IntN(2) == 0
		f.reset = !f.serverError && nb.chance(fc.Reset)
		if !f.serverError && !f.reset {
			apiErr = nb.injectCode()
		}
		f.latency = nb.between(fc.Latency)
	}
	switch {
	case f.serverError:
		nb.st.faults["server_error"]++
		nb.st.rejected[errServer(f.serverErrorAlt).code]++
		return Message{}, f, nil, nil
	case f.reset:
		nb.st.faults["reset"]++
		return Message{}, f, nil, nil
	case apiErr != nil:
		nb.st.rejected[apiErr.code]++
		return Message{}, f, nil, apiErr
	}
	tat, ok := nb.rate.allow(nb.tat, ns)
	if !ok || nb.secondFull(ns) {
		nb.st.overLimit++
		nb.st.rejected[130429]++
		return Message{}, fault{latency: f.latency}, nil, nb.withRetryAfter(errThroughput())
	}
	to := waID(req.To)
	ps, ok := nb.pair.allow(nb.pairs[to], ns)
	if !ok {
		// Not sent, so it takes none of the throughput either: Meta says
		// other recipients can still be sent to without waiting.
		nb.st.pairOverLimit++
		nb.st.rejected[131056]++
		return Message{}, fault{latency: f.latency}, nil, nb.withRetryAfter(errPairLimit())
	}
	nb.tat = tat
	nb.secondTake(ns)
	nb.pairs[to] = ps
	nb.maybePruneLocked(ns)

	f.slowAccept = nb.chance(fc.SlowAccept)
	f.slowDelay = fc.SlowDelay
	f.resetAfterAccept = !f.slowAccept && nb.chance(fc.ResetAfterAccept)
	if f.slowAccept {
		nb.st.faults["slow_accept"]++
	}
	if f.resetAfterAccept {
		nb.st.faults["reset_after_accept"]++
	}
	// Drawn only when the others did not fire, so that a seed replays the
	// same run as before this fault existed.
	f.serverErrorAfterAccept = !f.slowAccept && !f.resetAfterAccept && nb.chance(fc.ServerErrorAfterAccept)
	if f.serverErrorAfterAccept {
		nb.st.faults["server_error_after_accept"]++
	}
	msg := Message{
		Seq: s.seq.Add(1), WAMID: s.newWAMID(nb.id), PhoneNumberID: nb.id, To: req.To, Type: req.Type,
		CallbackData: req.BizOpaqueCallbackData, AcceptedAt: now, Body: body,
	}
	// Last, and only for templates, so that a seed replays the same run as
	// before pacing existed when no template is paced.
	if req.Type == "template" && nb.chance(fc.Paced) {
		msg.Paced = true
		nb.st.faults["paced"]++
		if nb.chance(fc.PacedDrop) {
			msg.PacedDropped = true
			nb.st.faults["paced_dropped"]++
		}
	}
	if s.cfg.ServiceWindow && req.Type != "template" && !nb.windowOpenLocked(to, ns) {
		msg.WindowClosed = true
		nb.st.windowClosed++
	}
	if msg.CallbackData != "" && !s.callbacks.add(msg.CallbackData) {
		msg.Duplicate = true
		nb.st.duplicates++
	}
	nb.st.accepted++
	nb.tick(ns, true)
	if s.records.Add(1) <= int64(s.cfg.MaxRecords) {
		nb.record(msg)
	} else {
		s.recordsDropped.Add(1)
	}
	var plan []hookStatus
	switch {
	case s.hooks == nil || msg.PacedDropped:
	case msg.WindowClosed:
		plan = s.planReengagement(nb, msg)
	default:
		plan = s.plan(nb, msg)
	}
	return msg, f, plan, nil
}

// injectCode draws the number's error-code faults in a fixed order; the
// caller holds nb.mu.
func (nb *number) injectCode() *apiError {
	for _, code := range nb.codes {
		if nb.chance(nb.faults.Codes[code]) {
			nb.st.faults["code_"+strconv.Itoa(code)]++
			return nb.withRetryAfter(codeError(code))
		}
	}
	return nil
}

func (nb *number) withRetryAfter(e *apiError) *apiError {
	if ra := nb.faults.RetryAfter; ra > 0 {
		e.retryAfter = int((ra + time.Second - 1) / time.Second)
	}
	return e
}

// newWAMID makes a unique id shaped like Meta's ("wamid." + base64).
func (s *Server) newWAMID(numberID string) string {
	raw := make([]byte, 0, 48)
	raw = append(raw, "HBgL"...)
	raw = append(raw, numberID...)
	raw = append(raw, '.')
	raw = strconv.AppendUint(raw, s.cfg.Seed, 36)
	raw = append(raw, '.')
	raw = strconv.AppendUint(raw, s.wamidSeq.Add(1), 36)
	return "wamid." + base64.StdEncoding.EncodeToString(raw)
}

// newInboundWAMID makes the id of a user's message to a number. It is
// marked as inbound inside, so that a mark-as-read can be checked
// without keeping every inbound id.
func (s *Server) newInboundWAMID(numberID string) string {
	return "wamid." + base64.StdEncoding.EncodeToString(s.inboundPrefix(numberID, s.wamidSeq.Add(1)))
}

func (s *Server) inboundPrefix(numberID string, seq uint64) []byte {
	raw := make([]byte, 0, 48)
	raw = append(raw, "HBgL"...)
	raw = append(raw, numberID...)
	raw = append(raw, ".in."...)
	raw = strconv.AppendUint(raw, s.cfg.Seed, 36)
	raw = append(raw, '.')
	if seq > 0 {
		raw = strconv.AppendUint(raw, seq, 36)
	}
	return raw
}

// isInbound reports whether wamid is a message a user sent to the
// number: one this server made with newInboundWAMID for it.
func (s *Server) isInbound(numberID, wamid string) bool {
	b64, ok := strings.CutPrefix(wamid, "wamid.")
	if !ok {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return false
	}
	rest, ok := strings.CutPrefix(string(raw), string(s.inboundPrefix(numberID, 0)))
	if !ok {
		return false
	}
	seq, err := strconv.ParseUint(rest, 36, 64)
	return err == nil && seq > 0 && seq <= s.wamidSeq.Load() && strconv.FormatUint(seq, 36) == rest
}

// markRead answers a mark-as-read request (a body with "status":"read"
// and the message_id of a message a user sent to the number): 200
// {"success":true}, or code 100 for anything else. It is not a message,
// so it takes no throughput and draws no fault.
func (s *Server) markRead(w http.ResponseWriter, nb *number, req *sendRequest) {
	var e *apiError
	switch {
	case req.MessagingProduct == nil || *req.MessagingProduct == "":
		e = badParam("The parameter messaging_product is required.", "")
	case *req.MessagingProduct != "whatsapp":
		e = badParam(`Param messaging_product must be one of {WHATSAPP} - got "`+clip(*req.MessagingProduct)+`".`, "")
	case req.Status != "read":
		e = badParam(`Param status must be one of {READ} - got "`+clip(req.Status)+`".`, "")
	case req.MessageID == "":
		e = badParam("The parameter message_id is required.", "")
	case !s.isInbound(nb.id, req.MessageID):
		e = badParam("Invalid parameter", "Invalid message_id: "+clip(req.MessageID)+" is not a message received by this phone number.")
	}
	nb.mu.Lock()
	if e != nil {
		nb.st.readsRejected++
	} else {
		nb.st.reads++
	}
	nb.mu.Unlock()
	if e != nil {
		e.write(w)
		return
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	w.Write([]byte(`{"success":true}`))
}

func writeAccepted(w http.ResponseWriter, m Message) {
	// to is validated (digits and '+') and the wamid is base64, so neither
	// needs JSON escaping; appending beats encoding/json on the hot path.
	b := make([]byte, 0, 192)
	b = append(b, `{"messaging_product":"whatsapp","contacts":[{"input":"`...)
	b = append(b, m.To...)
	b = append(b, `","wa_id":"`...)
	b = append(b, waID(m.To)...)
	b = append(b, `"}],"messages":[{"id":"`...)
	b = append(b, m.WAMID...)
	if m.Paced {
		b = append(b, `","message_status":"held_for_quality_assessment"}]}`...)
	} else {
		b = append(b, `","message_status":"accepted"}]}`...)
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.Write(b)
}

// jsonContentType is shared by every success answer; net/http only reads
// header values, so one slice saves an allocation per request.
var jsonContentType = []string{"application/json; charset=UTF-8"}

// readBody reads the request body up to MaxBodyBytes, in one allocation
// when the client sent a Content-Length (as every HTTP/1.1 client does).
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= MaxBodyBytes {
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
}

// wait blocks for d unless the client goes away or the server closes; it
// reports whether the full time passed.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.done:
		return false
	}
}

// resetConn drops the connection with a TCP RST where possible, so the
// client sees "connection reset by peer" rather than a clean EOF.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): abort the response instead.
		panic(http.ErrAbortHandler)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.SetLinger(0)
	}
	conn.Close()
}

// bearer extracts the token of an "Authorization: Bearer <token>" header.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
