package receiptlog

import (
	"encoding/json"
	"fmt"

	"github.com/wamux/wamux"
)

// decodeJSON reads the JSON entries of earlier versions and of the
// stores' migrations (the format encodeJSON, in the tests, writes).
func decodeJSON(data []byte) ([]wamux.Receipt, error) {
	var rows [][]json.RawMessage
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, fmt.Errorf("decode receipt log entry: %w", err)
	}
	out := make([]wamux.Receipt, len(rows))
	for i, row := range rows {
		if len(row) != 10 {
			return nil, fmt.Errorf("decode receipt log entry: receipt %d has %d fields, want 10", i, len(row))
		}
		r := &out[i]
		var typ string
		var event, received int64
		for j, dst := range []any{&r.MessageID, &r.AccountID, &typ, &event, &r.CallbackData, &r.Recipient,
			&r.ErrorCode, &r.ErrorTitle, &r.Source, &received} {
			if err := json.Unmarshal(row[j], dst); err != nil {
				return nil, fmt.Errorf("decode receipt log entry: receipt %d field %d: %w", i, j, err)
			}
		}
		r.Type, r.EventTime, r.ReceivedAt = wamux.ReceiptType(typ), fromUnixMS(event), fromUnixMS(received)
	}
	return out, nil
}
