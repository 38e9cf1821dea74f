package receiptlog

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/wamux/wamux"
)

// The binary entry format. Every byte of an entry is written to SQLite's
// WAL, fsynced, copied into the database by a checkpoint and freed when
// the entry is acknowledged; under a receipt flood the JSON entries were
// about a fifth of the SQLite writer's time (an entry of no bytes, in a
// throwaway build: 12.2 s of writer CPU per million receipts down to
// 9.5 s). This format is about half the size of the JSON one.
//
//	entry    = 0x01 uvarint(count) receipt{count}
//	receipt  = message_id account_id type event_time callback_data
//	           recipient error_code error_title source received_at
//	message_id = uvarint(n<<1 | packed) and n bytes; packed: the id is
//	           "wamid." and the standard base64 of those n bytes, which
//	           is what the Cloud API's ids look like (2/3 of the size)
//	account_id, type, recipient, error_title, source (few distinct values):
//	           uvarint(k); k odd: the (k>>1)th string this entry spelled
//	           out; k even: k>>1 bytes follow, spelled out
//	callback_data = uvarint(n) and n bytes
//	event_time, received_at = zigzag varint of the difference to the
//	           previous receipt's (the first's to 0), Unix ms, 0 for none
//	error_code = zigzag varint
//
// Strings are kept byte for byte (the JSON format replaced invalid UTF-8).
const binaryVersion = 0x01

// maxDict bounds the strings an entry may refer back to; later distinct
// values are spelled out every time.
const maxDict = 256

const wamidPrefix = "wamid."

// minReceiptBytes is the smallest encoded receipt: ten one-byte fields.
const minReceiptBytes = 10

// Encode writes receipts as one binary entry (see the format above),
// times in Unix ms and a zero ReceivedAt replaced by now.
func Encode(rs []wamux.Receipt, now int64) []byte {
	b := make([]byte, 0, 16+len(rs)*72)
	b = append(b, binaryVersion)
	b = binary.AppendUvarint(b, uint64(len(rs)))
	dict := make(map[string]int, 8)
	var prevEvent, prevReceived int64
	for i := range rs {
		r := &rs[i]
		b = appendMessageID(b, r.MessageID)
		b = appendDict(b, dict, r.AccountID)
		b = appendDict(b, dict, string(r.Type))
		event := unixMS(r.EventTime)
		b = binary.AppendVarint(b, event-prevEvent)
		prevEvent = event
		b = binary.AppendUvarint(b, uint64(len(r.CallbackData)))
		b = append(b, r.CallbackData...)
		b = appendDict(b, dict, r.Recipient)
		b = binary.AppendVarint(b, int64(r.ErrorCode))
		b = appendDict(b, dict, r.ErrorTitle)
		b = appendDict(b, dict, r.Source)
		received := unixMS(r.ReceivedAt)
		if received == 0 {
			received = now
		}
		b = binary.AppendVarint(b, received-prevReceived)
		prevReceived = received
	}
	return b
}

// maxPacked bounds the base64 text of a packed message id, so that the
// packing needs no allocation.
const maxPacked = 128

func appendMessageID(b []byte, id string) []byte {
	if rest, ok := strings.CutPrefix(id, wamidPrefix); ok && len(rest)%4 == 0 && len(rest) <= maxPacked {
		var text, raw, again [maxPacked]byte
		copy(text[:], rest)
		m, err := base64.StdEncoding.Decode(raw[:], text[:len(rest)])
		// Only a round trip to the same text is packed: base64 has more
		// than one spelling of some byte strings.
		if err == nil && base64.StdEncoding.EncodedLen(m) == len(rest) {
			base64.StdEncoding.Encode(again[:], raw[:m])
			if string(again[:len(rest)]) == rest {
				b = binary.AppendUvarint(b, uint64(m)<<1|1)
				return append(b, raw[:m]...)
			}
		}
	}
	b = binary.AppendUvarint(b, uint64(len(id))<<1)
	return append(b, id...)
}

func appendDict(b []byte, dict map[string]int, s string) []byte {
	if k, ok := dict[s]; ok {
		return binary.AppendUvarint(b, uint64(k)<<1|1)
	}
	if len(dict) < maxDict {
		dict[s] = len(dict)
	}
	b = binary.AppendUvarint(b, uint64(len(s))<<1)
	return append(b, s...)
}

// Decode reads an entry that Encode wrote, or one in the JSON format of
// earlier versions and of the stores' migrations.
func Decode(data []byte) ([]wamux.Receipt, error) {
	if len(data) > 0 && data[0] == binaryVersion {
		return decodeBinary(data[1:])
	}
	return decodeJSON(data)
}

// errShort: the entry ends inside a field.
var errShort = errors.New("truncated")

// reader walks a binary entry; its first error sticks.
type reader struct {
	data []byte
	err  error
	dict []string
}

func (r *reader) uvarint() uint64 { return next(r, binary.Uvarint) }

func (r *reader) varint() int64 { return next(r, binary.Varint) }

// next reads one varint with read (binary.Uvarint or binary.Varint).
func next[T any](r *reader, read func([]byte) (T, int)) T {
	var zero T
	if r.err != nil {
		return zero
	}
	v, n := read(r.data)
	if n <= 0 {
		r.err = errShort
		return zero
	}
	r.data = r.data[n:]
	return v
}

func (r *reader) bytes(n uint64) string {
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.data)) {
		r.err = errShort
		return ""
	}
	s := string(r.data[:n])
	r.data = r.data[n:]
	return s
}

func (r *reader) messageID() string {
	k := r.uvarint()
	s := r.bytes(k >> 1)
	if k&1 == 0 {
		return s
	}
	return wamidPrefix + base64.StdEncoding.EncodeToString([]byte(s))
}

func (r *reader) dictString() string {
	k := r.uvarint()
	if r.err != nil {
		return ""
	}
	if k&1 == 1 {
		if k>>1 >= uint64(len(r.dict)) {
			r.err = fmt.Errorf("reference to string %d of %d", k>>1, len(r.dict))
			return ""
		}
		return r.dict[k>>1]
	}
	s := r.bytes(k >> 1)
	if r.err == nil && len(r.dict) < maxDict {
		r.dict = append(r.dict, s)
	}
	return s
}

func decodeBinary(data []byte) ([]wamux.Receipt, error) {
	r := &reader{data: data}
	count := r.uvarint()
	if r.err == nil && count > uint64(len(r.data)/minReceiptBytes) {
		r.err = fmt.Errorf("%d receipts cannot fit in %d bytes", count, len(r.data))
	}
	if r.err != nil {
		return nil, fmt.Errorf("decode receipt log entry: %w", r.err)
	}
	out := make([]wamux.Receipt, count)
	var event, received int64
	for i := range out {
		rc := &out[i]
		rc.MessageID = r.messageID()
		rc.AccountID = r.dictString()
		rc.Type = wamux.ReceiptType(r.dictString())
		event += r.varint()
		rc.EventTime = fromUnixMS(event)
		rc.CallbackData = r.bytes(r.uvarint())
		rc.Recipient = r.dictString()
		rc.ErrorCode = int(r.varint())
		rc.ErrorTitle = r.dictString()
		rc.Source = r.dictString()
		received += r.varint()
		rc.ReceivedAt = fromUnixMS(received)
		if r.err != nil {
			return nil, fmt.Errorf("decode receipt log entry: receipt %d: %w", i, r.err)
		}
	}
	if len(r.data) != 0 {
		return nil, fmt.Errorf("decode receipt log entry: %d bytes after the last receipt", len(r.data))
	}
	return out, nil
}
