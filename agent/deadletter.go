package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// deadLetterFile collects batches the gateway rejected for good, one JSON
// object a line, so an operator can inspect and replay them.
const deadLetterFile = "deadletter.jsonl"

type deadLetter struct {
	Time      time.Time `json:"time"`
	Status    int       `json:"status"`
	Code      string    `json:"code,omitempty"`
	Message   string    `json:"message,omitempty"`
	AccountID string    `json:"account_id"`
	Receipts  []record  `json:"receipts"`
}

// writeDeadLetter appends d durably: the batch is acked (dropped from the
// spool) only after this returns nil, so a rejection never loses data
// silently. Only the sender goroutine calls it.
func writeDeadLetter(dir string, d deadLetter) error {
	line, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("agent: encode dead letter: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, deadLetterFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("agent: open dead letters: %w", err)
	}
	_, err = f.Write(append(line, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("agent: write dead letter: %w", err)
	}
	return nil
}
