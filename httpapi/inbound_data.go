package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wamux/wamux/provider/cloudapi"
)

// inboundSource is what an inbound record was made of: the item as Meta
// sent it and its sender's profile name.
type inboundSource struct {
	msg     *cloudapi.InboundMessage
	profile string
}

// inboundDataKeys are the keys of the message.inbound event data the
// gateway writes itself; a message type of one of these names does not
// get its content copied under it.
var inboundDataKeys = map[string]bool{
	"account_id": true, "from": true, "wamid": true, "type": true, "timestamp": true,
	"profile_name": true, "context": true, "errors": true,
}

// replyKey names one of our messages: an account and its wamid.
type replyKey struct{ account, wamid string }

// repliedMessages finds, in one store query, the msg_ids of our messages
// that n's inbound messages reply to (their context names a wamid).
func (s *Server) repliedMessages(ctx context.Context, n *normalized) (map[replyKey]string, error) {
	var wamids []string
	seen := map[string]bool{}
	for _, src := range n.inboundSrc {
		if c := src.msg.Context; c != nil && lookupable(c.ID) && !seen[c.ID] {
			seen[c.ID] = true
			wamids = append(wamids, c.ID)
		}
	}
	if len(wamids) == 0 {
		return nil, nil
	}
	msgs, err := s.store.FindMessages(ctx, wamids, nil)
	if err != nil {
		return nil, err
	}
	ours := make(map[replyKey]string, len(msgs))
	for _, m := range msgs {
		if m.WAMID != "" {
			ours[replyKey{m.AccountID, m.WAMID}] = m.ID
		}
	}
	return ours, nil
}

// lookupable reports whether a wamid from outside can name one of ours:
// one no store keeps (empty, very long, a NUL byte or invalid UTF-8,
// which PostgreSQL refuses in a query) is not looked up, so it cannot
// fail the notification on every redelivery.
func lookupable(wamid string) bool {
	return wamid != "" && len(wamid) <= 1024 && strings.IndexByte(wamid, 0) < 0 && utf8.ValidString(wamid)
}

// fillInboundData sets the message.inbound event data of every inbound
// record; ours maps the wamids of our messages to their msg_ids.
func (n *normalized) fillInboundData(ours map[replyKey]string) {
	for i := range n.inbound {
		in := &n.inbound[i]
		src := n.inboundSrc[i]
		var msgID string
		if c := src.msg.Context; c != nil && c.ID != "" {
			msgID = ours[replyKey{in.AccountID, c.ID}]
		}
		in.Data = inboundEventData(in.AccountID, src, in.SentAt, msgID)
	}
}

// inboundEventData is the message.inbound event data of one message:
// the fields every type shares, the type's object (and an unsupported
// message's errors) as Meta sent it, and the context of a reply, with
// replyMsgID the msg_id of the message replied to when it is ours.
// Invalid UTF-8 in the item becomes U+FFFD, as every store keeps it.
func inboundEventData(account string, src inboundSource, sentAt time.Time, replyMsgID string) []byte {
	m := src.msg
	b := make([]byte, 0, 128+len(m.Raw))
	b = append(b, '{')
	b = appendField(b, "account_id", account)
	b = appendField(b, "from", m.From)
	b = appendField(b, "wamid", m.ID)
	b = appendField(b, "type", m.Type)
	if y := sentAt.Year(); !sentAt.IsZero() && y >= 1 && y <= 9999 {
		b = appendField(b, "timestamp", sentAt.UTC().Format(time.RFC3339))
	}
	if src.profile != "" {
		b = appendField(b, "profile_name", src.profile)
	}
	names := []string{"errors"}
	if m.Type != "" && !inboundDataKeys[m.Type] {
		names = append(names, m.Type)
	}
	content := m.Content(names...)
	for _, name := range names[1:] {
		b = appendRaw(b, name, content[name])
	}
	b = appendRaw(b, "errors", content["errors"])
	if c := m.Context; c != nil && (c.ID != "" || c.From != "") {
		b = appendKey(b, "context")
		b = append(b, '{')
		b = appendField(b, "wamid", c.ID)
		if c.From != "" {
			b = appendField(b, "from", c.From)
		}
		if replyMsgID != "" {
			b = appendField(b, "msg_id", replyMsgID)
		}
		b[len(b)-1] = '}'
		b = append(b, ',')
	}
	b[len(b)-1] = '}'
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	return b
}

// appendKey appends "key": to an object being built.
func appendKey(b []byte, key string) []byte {
	b = appendString(b, key)
	return append(b, ':')
}

// appendField appends "key":"v", to an object being built.
func appendField(b []byte, key, v string) []byte {
	b = appendKey(b, key)
	b = appendString(b, v)
	return append(b, ',')
}

// appendRaw appends "key":raw, (compacted) when raw is valid JSON.
func appendRaw(b []byte, key string, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return b
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return b
	}
	b = appendKey(b, key)
	b = append(b, buf.Bytes()...)
	return append(b, ',')
}

// appendString appends v as a JSON string.
func appendString(b []byte, v string) []byte {
	q, _ := json.Marshal(v) // a string always encodes
	return append(b, q...)
}
