package sim

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// sendRequest is the part of a send body the simulator checks. Type
// objects are kept raw and checked by type.
type sendRequest struct {
	MessagingProduct      *string         `json:"messaging_product"`
	RecipientType         string          `json:"recipient_type"`
	To                    string          `json:"to"`
	Type                  string          `json:"type"`
	BizOpaqueCallbackData string          `json:"biz_opaque_callback_data"`
	Text                  *textObject     `json:"text"`
	Template              *templateObject `json:"template"`
	Image                 json.RawMessage `json:"image"`
	Audio                 json.RawMessage `json:"audio"`
	Video                 json.RawMessage `json:"video"`
	Document              json.RawMessage `json:"document"`
	Sticker               json.RawMessage `json:"sticker"`
	Location              json.RawMessage `json:"location"`
	Contacts              json.RawMessage `json:"contacts"`
	Interactive           json.RawMessage `json:"interactive"`
	Reaction              json.RawMessage `json:"reaction"`
	// Status and MessageID make a mark-as-read request instead of a send
	// (Meta's "status":"read" on the same endpoint).
	Status    string `json:"status"`
	MessageID string `json:"message_id"`
}

const (
	maxTextBody     = 4096
	maxCallbackData = 512
	typeList        = "{AUDIO, CONTACTS, DOCUMENT, IMAGE, INTERACTIVE, LOCATION, REACTION, STICKER, TEMPLATE, TEXT, VIDEO}"
)

// parseSend validates a send body as Meta would, answering code 100 with
// the parameter at fault. On success the request's To, Type and callback
// data are safe to record. A body with a status is a mark-as-read: it is
// returned unchecked, for markRead.
func parseSend(body []byte) (*sendRequest, *apiError) {
	r, e := decodeSend(body)
	if e != nil {
		return nil, e
	}
	if r.Status != "" {
		return r, nil // a mark-as-read, checked by markRead
	}
	if r.MessagingProduct == nil || *r.MessagingProduct == "" {
		return nil, badParam("The parameter messaging_product is required.", "")
	}
	if *r.MessagingProduct != "whatsapp" {
		return nil, badParam(`Param messaging_product must be one of {WHATSAPP} - got "`+clip(*r.MessagingProduct)+`".`, "")
	}
	if r.RecipientType != "" && r.RecipientType != "individual" && r.RecipientType != "group" {
		return nil, badParam(`Param recipient_type must be one of {INDIVIDUAL, GROUP} - got "`+clip(r.RecipientType)+`".`, "")
	}
	if r.To == "" {
		return nil, badParam("The parameter to is required.", "")
	}
	if !validPhone(r.To) {
		return nil, badParam("Invalid parameter", "Param to must be a phone number of 5 to 20 digits.")
	}
	// Meta's limit is 512 bytes ("an arbitrary 512B string"), not
	// characters: non-ASCII data reaches it sooner.
	if len(r.BizOpaqueCallbackData) > maxCallbackData {
		return nil, badParam("Param biz_opaque_callback_data must be at most 512 bytes long.", "")
	}
	if r.Type == "" {
		r.Type = "text" // Meta's default
	}
	if e, ok := r.checkTyped(); ok {
		if e != nil {
			return nil, e
		}
		return r, nil
	}
	obj, ok := r.object()
	if !ok {
		return nil, badParam(`Param type must be one of `+typeList+` - got "`+clip(r.Type)+`".`, "")
	}
	if len(obj) == 0 || string(obj) == "null" {
		return nil, badParam("The parameter "+r.Type+" is required.", "")
	}
	if e := checkObject(r.Type, obj); e != nil {
		return nil, e
	}
	return r, nil
}

// decodeSend decodes a send body, taking the reflection-free path for
// plain text messages.
func decodeSend(body []byte) (*sendRequest, *apiError) {
	if r, ok := decodeTextFast(body); ok {
		return r, nil
	}
	var r sendRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, badParam("Invalid parameter", "Request body is not a valid JSON object.")
	}
	return &r, nil
}

// textObject and templateObject are decoded in the same pass as the
// envelope: text is the hot path of every benchmark.
type textObject struct {
	Body       *string `json:"body"`
	PreviewURL *bool   `json:"preview_url"`
}

type templateObject struct {
	Name     string `json:"name"`
	Language *struct {
		Code string `json:"code"`
	} `json:"language"`
	Components []struct {
		Type string `json:"type"`
	} `json:"components"`
}

// checkTyped checks the objects decoded with the envelope. It reports
// false when Type names another type.
func (r *sendRequest) checkTyped() (*apiError, bool) {
	switch r.Type {
	case "text":
		t := r.Text
		if t == nil {
			return badParam("The parameter text is required.", ""), true
		}
		if t.Body == nil || *t.Body == "" {
			return badParam("The parameter text['body'] is required.", ""), true
		}
		if utf8.RuneCountInString(*t.Body) > maxTextBody {
			return badParam("Param text['body'] must be at most 4096 characters long.", ""), true
		}
		return nil, true
	case "template":
		t := r.Template
		if t == nil {
			return badParam("The parameter template is required.", ""), true
		}
		if t.Name == "" {
			return badParam("The parameter template['name'] is required.", ""), true
		}
		if t.Language == nil || t.Language.Code == "" {
			return badParam("The parameter template['language']['code'] is required.", ""), true
		}
		return nil, true
	}
	return nil, false
}

// object returns the raw object named by Type, for the types not decoded
// with the envelope.
func (r *sendRequest) object() (json.RawMessage, bool) {
	switch r.Type {
	case "image":
		return r.Image, true
	case "audio":
		return r.Audio, true
	case "video":
		return r.Video, true
	case "document":
		return r.Document, true
	case "sticker":
		return r.Sticker, true
	case "location":
		return r.Location, true
	case "contacts":
		return r.Contacts, true
	case "interactive":
		return r.Interactive, true
	case "reaction":
		return r.Reaction, true
	}
	return nil, false
}

// checkObject checks the fields Meta requires for each type.
func checkObject(typ string, obj json.RawMessage) *apiError {
	switch typ {
	case "contacts":
		var c []json.RawMessage
		if json.Unmarshal(obj, &c) != nil || len(c) == 0 {
			return badParam("Invalid parameter", "Param contacts must be a non-empty array.")
		}
	case "image", "audio", "video", "document", "sticker":
		var m struct {
			ID   string `json:"id"`
			Link string `json:"link"`
		}
		if json.Unmarshal(obj, &m) != nil || (m.ID == "" && m.Link == "") {
			return badParam("Invalid parameter", "Param "+typ+" must have an id or a link.")
		}
	default:
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) != nil || len(m) == 0 {
			return badParam("Invalid parameter", "Param "+typ+" must be a non-empty object.")
		}
	}
	return nil
}

// validPhone accepts what Meta normalises: digits with an optional '+',
// 5 to 20 digits.
func validPhone(s string) bool {
	s = strings.TrimPrefix(s, "+")
	if len(s) < 5 || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// waID is the recipient's WhatsApp id as Meta echoes it: digits only.
func waID(to string) string { return strings.TrimPrefix(to, "+") }

// clip keeps echoed user input short in error messages.
func clip(s string) string {
	const n = 40
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return strings.ToValidUTF8(s, "")
}
