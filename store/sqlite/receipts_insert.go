package sqlite

import (
	"fmt"

	"github.com/wamux/wamux"
)

// receiptCol returns column c (in receiptCols order) of r.
func receiptCol(r *wamux.Receipt, c int, now int64) any {
	switch c {
	case 0:
		return r.MessageID
	case 1:
		return r.AccountID
	case 2:
		return string(r.Type)
	case 3:
		return ms(r.EventTime)
	case 4:
		return r.CallbackData
	case 5:
		return r.Recipient
	case 6:
		return int64(r.ErrorCode)
	case 7:
		return r.ErrorTitle
	case 8:
		return r.Source
	default:
		if v := ms(r.ReceivedAt); v != 0 {
			return v
		}
		return now
	}
}

// receiptSharedMask finds the columns whose value is the same in every
// receipt of the chunk (typically account, source, error fields and
// received_at, as batches come per account from one source).
func receiptSharedMask(rs []wamux.Receipt, chunk []int, now int64) uint32 {
	const all = 1<<receiptColCount - 1
	mask := uint32(all &^ 1) // message_id differs by construction
	f := &rs[chunk[0]]
	fRecv := receiptCol(f, 9, now)
	for _, i := range chunk[1:] {
		r := &rs[i]
		if r.AccountID != f.AccountID {
			mask &^= 1 << 1
		}
		if r.Type != f.Type {
			mask &^= 1 << 2
		}
		if !r.EventTime.Equal(f.EventTime) {
			mask &^= 1 << 3
		}
		if r.CallbackData != f.CallbackData {
			mask &^= 1 << 4
		}
		if r.Recipient != f.Recipient {
			mask &^= 1 << 5
		}
		if r.ErrorCode != f.ErrorCode {
			mask &^= 1 << 6
		}
		if r.ErrorTitle != f.ErrorTitle {
			mask &^= 1 << 7
		}
		if r.Source != f.Source {
			mask &^= 1 << 8
		}
		if receiptCol(r, 9, now) != fRecv {
			mask &^= 1 << 9
		}
		if mask == 0 {
			break
		}
	}
	return mask
}

// storedCols is the number of columns insertReceiptChunk binds per row:
// storedReceiptCols, where seq stands for the message's provider id and
// account, and applied comes last.
const storedCols = receiptColCount

// storedCol returns column c (in storedReceiptCols order) of r filed under
// seq and applied at applied.
func storedCol(r *wamux.Receipt, seq, applied int64, c int, now int64) any {
	switch c {
	case 0:
		return seq
	case storedCols - 1:
		return applied
	}
	return receiptCol(r, c+1, now)
}

type seqEntry struct {
	seq   int64
	entry wamux.ReceiptType
}

// insertReceiptChunk inserts the receipts rs[chunk] (distinct keys), of
// the messages numbered seqs, applied at applied[i] for rs[i] (nil: none
// applied), and marks the new ones in out.
//
// Most receipts that reach the store are new (the LRU and Bloom layers
// drop most repeats), so the chunk is first inserted without RETURNING
// under a savepoint: when the change count says all rows or none were new,
// that is the answer. Only a mixed chunk is rolled back and inserted again
// with RETURNING to learn which rows were new.
func insertReceiptChunk(w *writeTx, rs []wamux.Receipt, chunk []int, seqs []int64, applied []int64, out []bool, now int64) error {
	rows := padRows(len(chunk))
	args := w.argBuf(rows * storedCols)
	defer func() { w.keepArgs(args) }()
	// receiptSharedMask's bits follow receiptCols; storedReceiptCols drops
	// message_id and account_id for seq, which is never shared, and adds
	// applied, shared when every row has the same.
	shared := (receiptSharedMask(rs, chunk, now) >> 1) &^ 1
	appliedAt := func(i int) int64 {
		if applied == nil {
			return 0
		}
		return applied[i]
	}
	shared |= 1 << (storedCols - 1)
	for _, i := range chunk[1:] {
		if appliedAt(i) != appliedAt(chunk[0]) {
			shared &^= 1 << (storedCols - 1)
			break
		}
	}
	lastJ := len(chunk) - 1
	for c := 0; c < storedCols; c++ {
		if shared&(1<<c) != 0 {
			args = append(args, storedCol(&rs[chunk[lastJ]], seqs[lastJ], appliedAt(chunk[lastJ]), c, now))
		}
	}
	for i := 0; i < rows; i++ {
		// Padding repeats the last receipt; the copies conflict with it and
		// are ignored, so few distinct statement sizes get prepared.
		j := min(i, lastJ)
		for c := 0; c < storedCols; c++ {
			if shared&(1<<c) == 0 {
				args = append(args, storedCol(&rs[chunk[j]], seqs[j], appliedAt(chunk[j]), c, now))
			}
		}
	}
	const prefix = "INSERT INTO message_receipts (" + storedReceiptCols + ") VALUES "
	// One row is new or not: it needs no savepoint to be undone.
	mixable := len(chunk) > 1
	if mixable {
		if _, err := w.exec("SAVEPOINT receipts"); err != nil {
			return fmt.Errorf("sqlite: insert receipts: %w", wrapErr(err))
		}
	}
	res, err := w.exec(sharedInsert(prefix, storedCols, shared, rows, " ON CONFLICT DO NOTHING"), args...)
	if err != nil {
		return fmt.Errorf("sqlite: insert receipts: %w", wrapErr(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlite: insert receipts: %w", err)
	}
	if n == int64(len(chunk)) || n == 0 {
		for _, i := range chunk {
			out[i] = n != 0
		}
		if !mixable {
			return nil
		}
		if _, err := w.exec("RELEASE receipts"); err != nil {
			return fmt.Errorf("sqlite: insert receipts: %w", wrapErr(err))
		}
		return nil
	}
	if _, err := w.exec("ROLLBACK TO receipts"); err != nil {
		return fmt.Errorf("sqlite: insert receipts: %w", wrapErr(err))
	}
	if _, err := w.exec("RELEASE receipts"); err != nil {
		return fmt.Errorf("sqlite: insert receipts: %w", wrapErr(err))
	}
	at := make(map[seqEntry]int, len(chunk))
	for j, i := range chunk {
		at[seqEntry{seqs[j], rs[i].Type}] = i
	}
	res2, err := w.query(sharedInsert(prefix, storedCols, shared, rows,
		" ON CONFLICT DO NOTHING RETURNING seq, entry"), args...)
	if err != nil {
		return fmt.Errorf("sqlite: insert receipts: %w", wrapErr(err))
	}
	defer res2.Close()
	var k seqEntry
	for res2.Next() {
		if err := res2.Scan(&k.seq, &k.entry); err != nil {
			return fmt.Errorf("sqlite: insert receipts: %w", err)
		}
		out[at[k]] = true
	}
	if err := res2.Close(); err != nil {
		return fmt.Errorf("sqlite: insert receipts: %w", wrapErr(err))
	}
	if err := res2.Err(); err != nil {
		return fmt.Errorf("sqlite: insert receipts: %w", wrapErr(err))
	}
	return nil
}
