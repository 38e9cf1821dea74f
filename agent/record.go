package agent

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/wamux/wamux"
)

const (
	recordHeaderLen = 8
	// maxRecordPayload holds the largest valid receipt (MaxMessageIDLen
	// bytes that each JSON-escape to six) and is small enough that a
	// garbage length after a crash cannot make us allocate much.
	maxRecordPayload = 8192
)

var (
	// errShortRecord: the bytes end inside a record — a torn tail, or a
	// read that stopped early.
	errShortRecord = errors.New("agent: spool record truncated")
	// errBadRecord: the bytes are not a record (bad length, CRC or content).
	errBadRecord = errors.New("agent: spool record corrupt")
	// errBadContent: a whole record (length and CRC check out) whose
	// content does not pass; the records after it are intact and readable.
	errBadContent = fmt.Errorf("%w: invalid content", errBadRecord)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendRecord appends the encoding of r to dst.
func appendRecord(dst []byte, r record) ([]byte, error) {
	payload, err := json.Marshal(r)
	if err != nil {
		return dst, fmt.Errorf("agent: encode spool record: %w", err)
	}
	if len(payload) > maxRecordPayload {
		return dst, fmt.Errorf("agent: spool record of %d bytes exceeds %d", len(payload), maxRecordPayload)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(payload, castagnoli))
	return append(dst, payload...), nil
}

// decodeRecord reads the record at the start of b and returns it with its
// encoded length. It fails with errShortRecord when b ends inside the
// record and with errBadRecord when b does not start with a valid record.
// A zero length is invalid, so a zero-filled tail (which some file systems
// leave after a crash) is reported as corrupt, not as an empty record.
func decodeRecord(b []byte) (record, int, error) {
	if len(b) < recordHeaderLen {
		return record{}, 0, errShortRecord
	}
	n := binary.BigEndian.Uint32(b)
	if n == 0 || n > maxRecordPayload {
		return record{}, 0, errBadRecord
	}
	end := recordHeaderLen + int(n)
	if len(b) < end {
		return record{}, 0, errShortRecord
	}
	payload := b[recordHeaderLen:end]
	if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return record{}, 0, errBadRecord
	}
	var r record
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || dec.More() {
		return record{}, end, errBadContent
	}
	if r.Seq == 0 || r.MessageID == "" || len(r.MessageID) > MaxMessageIDLen || r.EventTime <= 0 || r.Version < 0 {
		return record{}, end, errBadContent
	}
	if _, err := wamux.ParseReceiptType(r.Type); err != nil {
		return record{}, end, errBadContent
	}
	return r, end, nil
}
