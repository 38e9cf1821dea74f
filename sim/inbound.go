package sim

import (
	"encoding/json"
	"errors"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/provider/cloudapi"
)

// InboundRequest has users write to a number, as customers do.
type InboundRequest struct {
	// Count is how many messages arrive at once (default 1, at most 1000).
	Count int `json:"count,omitempty"`
	// From is the users' wa_id (digits); by default each message comes
	// from a user of its own.
	From string `json:"from,omitempty"`
	// Text is each message's body; default a customer's question.
	Text string `json:"text,omitempty"`
}

// InboundResult says what became of the messages.
type InboundResult struct {
	PhoneNumberID string `json:"phone_number_id"`
	// WAMIDs are the messages' ids, in order.
	WAMIDs []string `json:"wamids"`
	// Webhooks is how many notifications were queued for the webhook URL:
	// none without one, fewer than the messages when the queue is full.
	Webhooks int `json:"webhooks"`
}

const inboundTextDefault = "Does it come in another color?"

// Inbound has users send messages to a number. Meta counts inbound and
// outbound messages together against the number's throughput (reference
// §3), so each message takes its share of the limit at once, whatever is
// left: a send right after that exceeds the combined rate gets 130429.
// With a webhook URL each message is then delivered in Meta's inbound
// shape (reference §4.5: value.contacts[] and value.messages[], one
// message per notification, timestamp in unix seconds), signed and retried
// like the status notifications, without their delay: a user's message
// reaches the business within about a second.
func (s *Server) Inbound(phoneNumberID string, req InboundRequest) (InboundResult, error) {
	if req.Count == 0 {
		req.Count = 1
	}
	if req.Count < 0 || req.Count > maxBatch {
		return InboundResult{}, wamux.Errorf(wamux.EInvalid, "count must be in [1, %d]", maxBatch)
	}
	if req.From != "" && !digits(waID(req.From), 20) {
		return InboundResult{}, wamux.Errorf(wamux.EInvalid, "from must be a wa_id (digits)")
	}
	if req.Text == "" {
		req.Text = inboundTextDefault
	}
	nb := s.number(phoneNumberID)
	if nb == nil {
		return InboundResult{}, wamux.Errorf(wamux.ENotFound, "no number %q", phoneNumberID)
	}
	now := s.cfg.Clock()
	ns := now.UnixNano()
	res := InboundResult{PhoneNumberID: nb.id, WAMIDs: make([]string, 0, req.Count)}
	nb.mu.Lock()
	for range req.Count {
		// A user's message is never refused for throughput: it takes
		// the number's capacity, even beyond what is left.
		nb.tat = max(nb.tat, ns) + nb.rate.interval
		nb.st.inbound++
	}
	nb.mu.Unlock()
	ts := strconv.FormatInt(now.Unix(), 10)
	for range req.Count {
		wamid := s.newWAMID(nb.id)
		res.WAMIDs = append(res.WAMIDs, wamid)
		if s.hooks == nil {
			continue
		}
		from := waID(req.From)
		if from == "" {
			h := fnv.New64a()
			h.Write([]byte(wamid))
			from = "49" + strconv.FormatUint(1_000_000_000+h.Sum64()%9_000_000_000, 10)
		}
		if s.hooks.enqueueReady(s.inboundBatch(nb, wamid, from, ts, req.Text)) {
			res.Webhooks++
		}
	}
	return res, nil
}

// inboundBatch is one inbound notification in the envelope of status
// notifications (hookBody: value before field, non-ASCII escaped).
func (s *Server) inboundBatch(nb *number, wamid, from, ts, text string) *batch {
	contact := cloudapi.Contact{WaID: from}
	contact.Profile.Name = "Customer " + from[max(0, len(from)-4):]
	w := hookBody{Object: cloudapi.ObjectWhatsApp, Entry: []hookEntry{{ID: nb.waba, Changes: []hookChange{{
		Field: cloudapi.FieldMessages,
		Value: cloudapi.Value{
			MessagingProduct: "whatsapp",
			Metadata:         cloudapi.Metadata{DisplayPhoneNumber: nb.display, PhoneNumberID: nb.id},
			Contacts:         []cloudapi.Contact{contact},
			Messages: []cloudapi.InboundMessage{{From: from, ID: wamid, Timestamp: ts, Type: "text",
				Text: &cloudapi.InboundText{Body: text}}},
		},
	}}}}}
	body, err := json.Marshal(w)
	if err != nil {
		// Our own types always marshal; keep the count right regardless.
		s.log.Error("sim: marshal inbound webhook", "err", err)
	}
	return &batch{body: escapeNonASCII(body), n: 1}
}

// enqueueReady queues a notification that is already built, to be posted
// at once; it reports false, counting it dropped, when the queue is full.
func (h *webhooker) enqueueReady(b *batch) bool {
	h.mu.Lock()
	if h.pending+b.n > h.cfg.QueueSize {
		h.mu.Unlock()
		h.dropped.Add(int64(b.n))
		return false
	}
	h.seq++
	h.inbox = append(h.inbox, item{due: time.Now(), seq: h.seq, b: b})
	h.pending += b.n
	h.mu.Unlock()
	h.poke()
	return true
}

// handleInbound serves POST /sim/numbers/{id}/inbound: an InboundRequest
// (an empty body is one message) answered with an InboundResult.
func (s *Server) handleInbound(w http.ResponseWriter, r *http.Request) {
	var req InboundRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, wamux.Errorf(wamux.EInvalid, "body is not an inbound request: %v", err))
		return
	}
	res, err := s.Inbound(r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
