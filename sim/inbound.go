package sim

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/provider/cloudapi"
)

// InboundTypes are the message types users can send (InboundRequest.Type).
var InboundTypes = []string{"text", "image", "audio", "video", "document", "sticker", "location", "contacts", "interactive", "button", "reaction"}

// InboundRequest has users write to a number, as customers do. Fields a
// type does not use are ignored; empty ones take a plausible default.
type InboundRequest struct {
	// Count is how many messages arrive at once (default 1, at most 1000).
	Count int `json:"count,omitempty"`
	// From is the users' wa_id (digits); by default the recipient of the
	// Context message, or else each message comes from a user of its own.
	From string `json:"from,omitempty"`
	// Type is one of InboundTypes; default text.
	Type string `json:"type,omitempty"`
	// Context is the wamid of a message the number sent that the user
	// replies to; the webhook then carries Meta's
	// "context":{"from":<business display number>,"id":<wamid>}. For a
	// reaction it is the message reacted to (reaction.message_id), which
	// a reaction requires.
	Context string `json:"context,omitempty"`
	// Text is a text message's body; default a customer's question.
	Text string `json:"text,omitempty"`
	// Caption goes with an image, a video or a document; Filename with a
	// document; MimeType overrides the media type's default.
	Caption  string `json:"caption,omitempty"`
	Filename string `json:"filename,omitempty"`
	MimeType string `json:"mime_type,omitempty"`
	// Latitude, Longitude, Name and Address make a location; Name is also
	// a shared contact's formatted name.
	Latitude  float64 `json:"latitude,omitempty"`
	Longitude float64 `json:"longitude,omitempty"`
	Name      string  `json:"name,omitempty"`
	Address   string  `json:"address,omitempty"`
	// Interactive is "button_reply" (default) or "list_reply"; ReplyID,
	// ReplyTitle and ReplyDescription (list rows only) are what the user
	// tapped.
	Interactive      string `json:"interactive,omitempty"`
	ReplyID          string `json:"reply_id,omitempty"`
	ReplyTitle       string `json:"reply_title,omitempty"`
	ReplyDescription string `json:"reply_description,omitempty"`
	// Payload and ReplyTitle are a template quick-reply button's payload
	// and label (type button).
	Payload string `json:"payload,omitempty"`
	// Emoji is a reaction's emoji; default a thumbs-up.
	Emoji string `json:"emoji,omitempty"`
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
// Each message opens or refreshes its user's 24 h customer-service window
// (reference §8). With a webhook URL each message is then delivered in
// Meta's inbound shape (reference §4.5: value.contacts[] and
// value.messages[], one message per notification, timestamp in unix
// seconds), signed and retried like the status notifications, without
// their delay: a user's message reaches the business within about a
// second.
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
	if req.Type == "" {
		req.Type = "text"
	}
	if !isInboundType(req.Type) {
		return InboundResult{}, wamux.Errorf(wamux.EInvalid, "type must be one of %s", strings.Join(InboundTypes, ", "))
	}
	if req.Interactive != "" && req.Interactive != "button_reply" && req.Interactive != "list_reply" {
		return InboundResult{}, wamux.Errorf(wamux.EInvalid, "interactive must be button_reply or list_reply")
	}
	nb := s.number(phoneNumberID)
	if nb == nil {
		return InboundResult{}, wamux.Errorf(wamux.ENotFound, "no number %q", phoneNumberID)
	}
	from := waID(req.From)
	if req.Context != "" {
		nb.mu.Lock()
		m, ok := nb.findSentLocked(req.Context, len(nb.msgs)*msgChunk)
		nb.mu.Unlock()
		if !ok {
			return InboundResult{}, wamux.Errorf(wamux.EInvalid, "context %q is not a message number %s sent (or it is no longer recorded)", clip(req.Context), nb.id)
		}
		// Only the recipient of a message can reply to it.
		if from == "" {
			from = waID(m.To)
		} else if from != waID(m.To) {
			return InboundResult{}, wamux.Errorf(wamux.EInvalid, "context %q was sent to %s, not to %s", clip(req.Context), waID(m.To), from)
		}
	} else if req.Type == "reaction" {
		return InboundResult{}, wamux.Errorf(wamux.EInvalid, "a reaction needs the context of the message reacted to")
	}
	req.From = from
	res := InboundResult{PhoneNumberID: nb.id, WAMIDs: make([]string, 0, req.Count)}
	for range req.Count {
		wamid, queued := s.inbound(nb, &req)
		res.WAMIDs = append(res.WAMIDs, wamid)
		if queued {
			res.Webhooks++
		}
	}
	return res, nil
}

func isInboundType(t string) bool {
	for _, k := range InboundTypes {
		if k == t {
			return true
		}
	}
	return false
}

// inbound receives one validated message: it takes its share of the
// throughput, opens the sender's window, counts it and queues its webhook
// (reporting whether it was queued).
func (s *Server) inbound(nb *number, req *InboundRequest) (string, bool) {
	now := s.cfg.Clock()
	ns := now.UnixNano()
	wamid := s.newInboundWAMID(nb.id)
	from := req.From
	if from == "" {
		h := fnv.New64a()
		h.Write([]byte(wamid))
		from = "49" + strconv.FormatUint(1_000_000_000+h.Sum64()%9_000_000_000, 10)
	}
	nb.mu.Lock()
	// A user's message is never refused for throughput: it takes the
	// number's capacity, even beyond what is left.
	nb.tat = max(nb.tat, ns) + nb.rate.interval
	nb.st.inbound++
	nb.st.inboundByType[req.Type]++
	nb.openWindowLocked(from, ns)
	nb.mu.Unlock()
	if s.hooks == nil {
		return wamid, false
	}
	m := inboundMessage(nb, req, wamid, from, strconv.FormatInt(now.Unix(), 10))
	return wamid, s.hooks.enqueueReady(s.inboundBatch(nb, m))
}

// inboundMessage builds the messages[] item of Meta's inbound webhook for
// one message of req's type (the shapes of Meta's messages webhook
// reference, one page per type).
func inboundMessage(nb *number, req *InboundRequest, wamid, from, ts string) inMessage {
	m := inMessage{From: from, ID: wamid, Timestamp: ts, Type: req.Type}
	if req.Context != "" && req.Type != "reaction" {
		m.Context = &inContext{From: nb.display, ID: req.Context}
	}
	switch req.Type {
	case "text":
		m.Text = &inText{Body: or(req.Text, inboundTextDefault)}
	case "image":
		m.Image = media(wamid, or(req.MimeType, "image/jpeg"))
		m.Image.Caption = req.Caption
	case "audio":
		voice := req.MimeType == ""
		m.Audio = media(wamid, or(req.MimeType, "audio/ogg; codecs=opus"))
		m.Audio.Voice = &voice
	case "video":
		m.Video = media(wamid, or(req.MimeType, "video/mp4"))
		m.Video.Caption = req.Caption
	case "document":
		m.Document = media(wamid, or(req.MimeType, "application/pdf"))
		m.Document.Caption = req.Caption
		m.Document.Filename = or(req.Filename, "order.pdf")
	case "sticker":
		animated := false
		m.Sticker = media(wamid, or(req.MimeType, "image/webp"))
		m.Sticker.Animated = &animated
	case "location":
		lat, lng := req.Latitude, req.Longitude
		if lat == 0 && lng == 0 {
			lat, lng = 52.520008, 13.404954
		}
		m.Location = &inLocation{Address: or(req.Address, "Pariser Platz 1, 10117 Berlin"), Latitude: lat, Longitude: lng,
			Name: or(req.Name, "Brandenburger Tor"), URL: "https://maps.example.com/?q=" + strconv.FormatFloat(lat, 'f', -1, 64) + "," + strconv.FormatFloat(lng, 'f', -1, 64)}
	case "contacts":
		name := or(req.Name, "Ada Lovelace")
		first, last, _ := strings.Cut(name, " ")
		m.Contacts = []inContactCard{{
			Name:   inContactName{FormattedName: name, FirstName: first, LastName: last},
			Phones: []inContactPhone{{Phone: "+49 1512 3456789", WaID: "4915123456789", Type: "CELL"}},
		}}
	case "interactive":
		kind := or(req.Interactive, "button_reply")
		m.Interactive = &inInteractive{Type: kind}
		r := &inReply{ID: or(req.ReplyID, "yes-button"), Title: or(req.ReplyTitle, "Yes")}
		if kind == "list_reply" {
			r.ID, r.Title = or(req.ReplyID, "priority_express"), or(req.ReplyTitle, "Priority Mail Express")
			r.Description = or(req.ReplyDescription, "Next Day to 2 Days")
			m.Interactive.ListReply = r
		} else {
			m.Interactive.ButtonReply = r
		}
	case "button":
		m.Button = &inButton{Payload: or(req.Payload, "STOP_PROMOTIONS"), Text: or(req.ReplyTitle, "Stop promotions")}
	case "reaction":
		m.Reaction = &inReaction{MessageID: req.Context, Emoji: or(req.Emoji, "\U0001F44D")}
	}
	return m
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// media describes a file the user sent: a media id of digits, a sha256
// (base64, as Meta sends it) and a download URL on Meta's host, which the
// simulator does not serve.
func media(wamid, mime string) *inMedia {
	sum := sha256.Sum256([]byte(wamid))
	h := fnv.New64a()
	h.Write([]byte(wamid))
	id := strconv.FormatUint(1_000_000_000_000_000+h.Sum64()%9_000_000_000_000_000, 10)
	return &inMedia{MimeType: mime, SHA256: base64.StdEncoding.EncodeToString(sum[:]), ID: id,
		URL: "https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=" + id}
}

// The inbound webhook's types, in the key order of Meta's samples.
type (
	inBody struct {
		Object string    `json:"object"`
		Entry  []inEntry `json:"entry"`
	}
	inEntry struct {
		ID      string     `json:"id"`
		Changes []inChange `json:"changes"`
	}
	inChange struct {
		Value inValue `json:"value"`
		Field string  `json:"field"`
	}
	inValue struct {
		MessagingProduct string             `json:"messaging_product"`
		Metadata         cloudapi.Metadata  `json:"metadata"`
		Contacts         []cloudapi.Contact `json:"contacts"`
		Messages         []inMessage        `json:"messages"`
	}
	inMessage struct {
		Context     *inContext      `json:"context,omitempty"`
		From        string          `json:"from"`
		ID          string          `json:"id"`
		Timestamp   string          `json:"timestamp"`
		Type        string          `json:"type"`
		Text        *inText         `json:"text,omitempty"`
		Image       *inMedia        `json:"image,omitempty"`
		Audio       *inMedia        `json:"audio,omitempty"`
		Video       *inMedia        `json:"video,omitempty"`
		Document    *inMedia        `json:"document,omitempty"`
		Sticker     *inMedia        `json:"sticker,omitempty"`
		Location    *inLocation     `json:"location,omitempty"`
		Contacts    []inContactCard `json:"contacts,omitempty"`
		Interactive *inInteractive  `json:"interactive,omitempty"`
		Button      *inButton       `json:"button,omitempty"`
		Reaction    *inReaction     `json:"reaction,omitempty"`
	}
	inContext struct {
		From string `json:"from"`
		ID   string `json:"id"`
	}
	inText struct {
		Body string `json:"body"`
	}
	inMedia struct {
		Caption  string `json:"caption,omitempty"`
		Filename string `json:"filename,omitempty"`
		MimeType string `json:"mime_type"`
		SHA256   string `json:"sha256"`
		ID       string `json:"id"`
		URL      string `json:"url"`
		Voice    *bool  `json:"voice,omitempty"`
		Animated *bool  `json:"animated,omitempty"`
	}
	inLocation struct {
		Address   string  `json:"address"`
		Latitude  float64 `json:"latitude"`
		Longitude float64 `json:"longitude"`
		Name      string  `json:"name"`
		URL       string  `json:"url"`
	}
	inContactCard struct {
		Name   inContactName    `json:"name"`
		Phones []inContactPhone `json:"phones"`
	}
	inContactName struct {
		FormattedName string `json:"formatted_name"`
		FirstName     string `json:"first_name"`
		LastName      string `json:"last_name,omitempty"`
	}
	inContactPhone struct {
		Phone string `json:"phone"`
		WaID  string `json:"wa_id"`
		Type  string `json:"type"`
	}
	inInteractive struct {
		Type        string   `json:"type"`
		ButtonReply *inReply `json:"button_reply,omitempty"`
		ListReply   *inReply `json:"list_reply,omitempty"`
	}
	inReply struct {
		ID          string `json:"id"`
		Title       string `json:"title"`
		Description string `json:"description,omitempty"`
	}
	inButton struct {
		Payload string `json:"payload"`
		Text    string `json:"text"`
	}
	inReaction struct {
		MessageID string `json:"message_id"`
		Emoji     string `json:"emoji"`
	}
)

// inboundBatch is one inbound notification (value before field, non-ASCII
// escaped, as the status notifications).
func (s *Server) inboundBatch(nb *number, m inMessage) *batch {
	contact := cloudapi.Contact{WaID: m.From}
	contact.Profile.Name = "Customer " + m.From[max(0, len(m.From)-4):]
	w := inBody{Object: cloudapi.ObjectWhatsApp, Entry: []inEntry{{ID: nb.waba, Changes: []inChange{{
		Field: cloudapi.FieldMessages,
		Value: inValue{
			MessagingProduct: "whatsapp",
			Metadata:         cloudapi.Metadata{DisplayPhoneNumber: nb.display, PhoneNumberID: nb.id},
			Contacts:         []cloudapi.Contact{contact},
			Messages:         []inMessage{m},
		},
	}}}}}
	body, err := json.Marshal(w)
	if err != nil {
		// Our own types always marshal; keep the count right regardless.
		s.log.Error("sim: marshal inbound webhook", "err", err)
	}
	return &batch{body: escapeNonASCII(body), n: 1}
}

// findSentLocked looks for a recorded message of the number by wamid,
// newest first, among at most the last limit records; the caller holds
// nb.mu.
func (nb *number) findSentLocked(wamid string, limit int) (Message, bool) {
	for i := len(nb.msgs) - 1; i >= 0 && limit > 0; i-- {
		chunk := nb.msgs[i]
		for j := len(chunk) - 1; j >= 0 && limit > 0; j-- {
			if chunk[j].WAMID == wamid {
				return chunk[j], true
			}
			limit--
		}
	}
	return Message{}, false
}

// lastSentToLocked is the newest recorded message to a recipient among
// the last limit records; the caller holds nb.mu.
func (nb *number) lastSentToLocked(to string, limit int) (Message, bool) {
	for i := len(nb.msgs) - 1; i >= 0 && limit > 0; i-- {
		chunk := nb.msgs[i]
		for j := len(chunk) - 1; j >= 0 && limit > 0; j-- {
			if waID(chunk[j].To) == to {
				return chunk[j], true
			}
			limit--
		}
	}
	return Message{}, false
}

// serviceWindow is Meta's customer-service window (reference §8).
const serviceWindow = int64(24 * time.Hour)

// openWindowLocked records a user's message at ns; the caller holds
// nb.mu. Entries whose window has closed are pruned as pairs are.
func (nb *number) openWindowLocked(from string, ns int64) {
	nb.windows[from] = ns
	if len(nb.windows) < nb.windowPruneAt {
		return
	}
	for k, at := range nb.windows {
		if ns-at >= serviceWindow {
			delete(nb.windows, k)
		}
	}
	nb.windowPruneAt = max(pruneFloor, 2*len(nb.windows))
}

// windowOpenLocked reports whether the user wrote to the number within
// the last 24 h; the caller holds nb.mu.
func (nb *number) windowOpenLocked(to string, ns int64) bool {
	at, ok := nb.windows[to]
	return ok && ns-at < serviceWindow
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
