// Package admit checks a message as a client submits it and builds the
// message the gateway stores: validated fields, canonical payload, msg_id
// and content fingerprint.
package admit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/wamux/wamux"
)

// Limits on what a message may carry. The Cloud API caps a text body at
// 4,096 characters; a template object beyond 64 KiB is certainly a mistake.
// The deepest components Meta defines nest 9 levels of arrays and objects
// (components, a carousel's cards, a card's components, their parameters,
// a parameter's media object; or a button's action, its sections and their
// product items); deeper is no template, and is refused before it is
// stored and forwarded.
const (
	maxTextBody        = 4096
	maxTemplateBytes   = 64 << 10
	maxComponentsDepth = 16
	maxClientSeq       = 1<<53 - 1 // exact in every JSON client
	maxMsgIDLength     = 128
	maxBizTypeLength   = 64
	maxAccountIDBytes  = 64
)

var (
	msgIDPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
	bizTypePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	// E.164 allows at most 15 digits and never a leading 0; the Cloud API
	// takes the digits without the '+'.
	recipientPattern = regexp.MustCompile(`^[1-9][0-9]{6,14}$`)
)

// Request is one message as a client submits it (POST /v1/messages).
type Request struct {
	MsgID     string          `json:"msg_id"`
	BizType   string          `json:"biz_type"`
	AccountID string          `json:"account_id"`
	ClientSeq *int64          `json:"client_seq"`
	To        string          `json:"to"`
	Priority  string          `json:"priority"`
	Type      string          `json:"type"`
	Text      json.RawMessage `json:"text"`
	Template  json.RawMessage `json:"template"`
}

type textPayload struct {
	Body       string `json:"body"`
	PreviewURL bool   `json:"preview_url"`
}

type templatePayload struct {
	Name       string          `json:"name"`
	Language   templateLang    `json:"language"`
	Components json.RawMessage `json:"components,omitempty"`
}

type templateLang struct {
	Code   string `json:"code"`
	Policy string `json:"policy,omitempty"`
}

// Message validates a request and builds the message it describes, with
// its msg_id and content fingerprint. It does not route: AccountID is the
// client's and may be empty. Every failure is an EInvalid with a message
// that names the field.
func Message(req Request) (wamux.Message, error) {
	m := wamux.Message{
		BizType:   req.BizType,
		AccountID: req.AccountID,
		To:        req.To,
		Type:      req.Type,
	}
	switch {
	case req.BizType == "":
		return m, invalid("biz_type is required")
	case len(req.BizType) > maxBizTypeLength || !bizTypePattern.MatchString(req.BizType):
		return m, invalid("biz_type must be 1-64 letters, digits, '_', '-' or '.'")
	case len(req.AccountID) > maxAccountIDBytes:
		return m, invalid("account_id is too long")
	case req.To == "":
		return m, invalid("to is required")
	case !recipientPattern.MatchString(req.To):
		return m, invalid("to must be the digits of an E.164 number without '+' (7 to 15 digits, no leading 0)")
	}
	if req.MsgID != "" && (len(req.MsgID) > maxMsgIDLength || !msgIDPattern.MatchString(req.MsgID)) {
		return m, invalid("msg_id must be 1-128 letters, digits, '_', '-', '.' or ':'")
	}
	if req.ClientSeq != nil {
		switch {
		case req.AccountID == "":
			return m, invalid("client_seq requires account_id: a sequence is kept per account")
		case *req.ClientSeq < 1 || *req.ClientSeq > maxClientSeq:
			return m, invalid("client_seq must be a whole number from 1 to " + strconv.FormatInt(maxClientSeq, 10))
		}
		m.ClientSeq = *req.ClientSeq
	}
	p, err := wamux.ParsePriority(req.Priority)
	if err != nil {
		return m, err
	}
	m.Priority = p

	payload, err := admitPayload(req)
	if err != nil {
		return m, err
	}
	m.Payload = payload

	switch {
	case req.MsgID != "":
		m.ID = req.MsgID
	case m.ClientSeq > 0:
		m.ID = wamux.DeriveMsgID(m.BizType, m.AccountID, m.ClientSeq)
	default:
		m.ID = wamux.NewMsgID()
	}
	m.ContentHash = contentHash(m)
	m.Status = wamux.StatusQueued
	if m.ClientSeq > 0 {
		m.Status = wamux.StatusWaitingSeq
	}
	return m, nil
}

// admitPayload checks the type-specific object and re-encodes it in a
// canonical form, so that the same content submitted twice with other
// whitespace or key order fingerprints the same.
func admitPayload(req Request) ([]byte, error) {
	present := func(raw json.RawMessage) bool { return len(raw) > 0 && !bytes.Equal(raw, []byte("null")) }
	switch req.Type {
	case "":
		return nil, invalid("type is required: text or template")
	case "text":
		if present(req.Template) {
			return nil, invalid("a text message must not carry template")
		}
		if !present(req.Text) {
			return nil, invalid("text is required for type text")
		}
		var t textPayload
		if err := strictUnmarshal(req.Text, &t); err != nil {
			return nil, invalid("text must be {\"body\": string, \"preview_url\"?: bool}")
		}
		if t.Body == "" {
			return nil, invalid("text.body is required")
		}
		if utf8.RuneCountInString(t.Body) > maxTextBody {
			return nil, invalid("text.body exceeds " + strconv.Itoa(maxTextBody) + " characters")
		}
		return json.Marshal(t)
	case "template":
		if present(req.Text) {
			return nil, invalid("a template message must not carry text")
		}
		if !present(req.Template) {
			return nil, invalid("template is required for type template")
		}
		if len(req.Template) > maxTemplateBytes {
			return nil, invalid("template exceeds " + strconv.Itoa(maxTemplateBytes) + " bytes")
		}
		var t templatePayload
		if err := strictUnmarshal(req.Template, &t); err != nil {
			return nil, invalid("template must be {\"name\", \"language\":{\"code\"}, \"components\"?}")
		}
		// Only spaces name no template: the provider refuses it for
		// good, so it is refused here as a missing one is.
		if strings.TrimSpace(t.Name) == "" || strings.TrimSpace(t.Language.Code) == "" {
			return nil, invalid("template.name and template.language.code are required")
		}
		if len(t.Components) > 0 {
			var comps []any
			dec := json.NewDecoder(bytes.NewReader(t.Components))
			dec.UseNumber() // keep numbers as the client wrote them, not as float64
			if err := dec.Decode(&comps); err != nil {
				return nil, invalid("template.components must be an array")
			}
			if at, deep := tooDeep(comps, 1, "template.components"); deep {
				return nil, invalid("template.components nests arrays and objects more than " +
					strconv.Itoa(maxComponentsDepth) + " levels deep (at " + at + ")")
			}
			// No components, null and [] are one request: the same
			// fingerprint (a retry spelling it otherwise is a duplicate,
			// not a conflict), and null never reaches the provider, which
			// takes components only as an array.
			t.Components = nil
			if len(comps) > 0 {
				canon, err := json.Marshal(comps) // map keys come out sorted
				if err != nil {
					return nil, invalid("template.components is not valid JSON")
				}
				t.Components = canon
			}
		}
		return json.Marshal(t)
	}
	return nil, invalid("type must be text or template")
}

// tooDeep reports whether v, at nesting level depth, is or holds an array
// or object past maxComponentsDepth, and the path of the first (keys in
// order) that is.
func tooDeep(v any, depth int, path string) (string, bool) {
	switch v := v.(type) {
	case []any:
		if depth > maxComponentsDepth {
			return path, true
		}
		for i, e := range v {
			if at, deep := tooDeep(e, depth+1, path+"["+strconv.Itoa(i)+"]"); deep {
				return at, true
			}
		}
	case map[string]any:
		if depth > maxComponentsDepth {
			return path, true
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if at, deep := tooDeep(v[k], depth+1, path+pathKey(k)); deep {
				return at, true
			}
		}
	}
	return "", false
}

// pathKey is how a key shows in a path: .key for a short name of letters,
// digits and '_', [...] for anything else, which is not repeated back.
func pathKey(k string) string {
	if len(k) == 0 || len(k) > 32 || strings.ContainsFunc(k, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		return "[...]"
	}
	return "." + k
}

func strictUnmarshal(raw []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(dst)
}

// contentHash fingerprints what the client asked for — not what the gateway
// decided (the routed account, the status) — so a retry of the same request
// is recognised as a duplicate whatever happened to the first one.
func contentHash(m wamux.Message) string {
	h := sha256.New()
	for _, part := range []string{m.BizType, m.AccountID, strconv.FormatInt(m.ClientSeq, 10), m.To, m.Priority.String(), m.Type} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(m.Payload)
	return hex.EncodeToString(h.Sum(nil))
}

// Routed reports whether the gateway chose m's account: the client sent no
// account_id, and the fingerprint of what it asked for covers that empty
// account_id, not the one routing filled in. A message with a client_seq
// names its account.
func Routed(m wamux.Message) bool {
	if m.ClientSeq > 0 {
		return false
	}
	asked := m
	asked.AccountID = ""
	return contentHash(asked) == m.ContentHash
}

func invalid(msg string) error { return wamux.Errorf(wamux.EInvalid, "%s", msg) }
