package receiptlog

import (
	"strconv"
	"unicode/utf8"

	"github.com/wamux/wamux"
)

// encodeJSON writes receipts as a JSON array of arrays: [message_id,
// account_id, receipt_type, event_time, callback_data, recipient,
// error_code, error_title, source, received_at], times in Unix ms (0 for
// none) and a zero ReceivedAt replaced by now. It is the format of
// entries written before the binary one (binary.go), which the stores'
// migrations also build from their old per-receipt rows; it stays to
// test that such entries are still read.
func encodeJSON(rs []wamux.Receipt, now int64) []byte {
	b := make([]byte, 0, len(rs)*128)
	b = append(b, '[')
	for i := range rs {
		r := &rs[i]
		if i > 0 {
			b = append(b, ',')
		}
		received := unixMS(r.ReceivedAt)
		if received == 0 {
			received = now
		}
		b = appendJSONString(append(b, '['), r.MessageID)
		for _, f := range [...]field{{s: r.AccountID}, {s: string(r.Type)}, {n: unixMS(r.EventTime), num: true},
			{s: r.CallbackData}, {s: r.Recipient}, {n: int64(r.ErrorCode), num: true}, {s: r.ErrorTitle},
			{s: r.Source}, {n: received, num: true}} {
			if f.num {
				b = strconv.AppendInt(append(b, ','), f.n, 10)
			} else {
				b = appendJSONString(append(b, ','), f.s)
			}
		}
		b = append(b, ']')
	}
	return append(b, ']')
}

// field is one field after the first of an encoded receipt: a string, or
// a number when num is set.
type field struct {
	s   string
	n   int64
	num bool
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
