package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wamux/wamux"
)

// accountFile names the account a spool dir belongs to. Records carry no
// account id (each batch takes Config.AccountID), so without it an agent
// restarted with another AccountID would send the receipts left in the
// spool as the other account's.
const accountFile = "account"

// ErrSpoolAccount is returned by New when SpoolDir still holds
// unacknowledged receipts of another account than Config.AccountID.
var ErrSpoolAccount = errors.New("agent: spool dir belongs to another account")

// claimAccount makes the spool dir belong to account. A dir that belongs
// to another account is taken over only when nothing in it waits for the
// gateway; pending is the number of records that do. A dir without the
// file (written by an agent from before it existed) is adopted as it is.
// It runs under the dir lock and before the first append, so no record is
// written under an account the file does not name.
func (s *spool) claimAccount(account string, pending int) error {
	owner, err := s.readAccount()
	if err != nil {
		if pending > 0 {
			return fmt.Errorf("%w: %s holds %d unacknowledged receipts and its %q file is unreadable (%v); "+
				"if they belong to account %q, write that id into the file, otherwise start the agent of their account on it",
				ErrSpoolAccount, s.dir, pending, accountFile, err, account)
		}
		s.log.Warn("agent: spool account file unreadable, the spool holds nothing to send: taking it over",
			"account_id", account, "err", err)
	}
	switch {
	case owner == account:
		return nil
	case owner == "" && err == nil && pending > 0:
		// An older agent wrote this spool and did not say for which account;
		// the configured one is the only guess there is.
		s.log.Warn("agent: spool dir has no account file (written by an older agent): its receipts are sent as the configured account",
			"account_id", account, "receipts", pending)
	case owner != "" && pending > 0:
		return fmt.Errorf("%w: %s holds %d unacknowledged receipts of account %q, not of AccountID %q; "+
			"start the agent with AccountID %q until they are delivered, or give account %q its own SpoolDir",
			ErrSpoolAccount, s.dir, pending, owner, account, owner, account)
	}
	return s.writeAccount(account)
}

// readAccount returns the account named in the spool dir, "" when the
// file does not exist.
func (s *spool) readAccount() (string, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, accountFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("agent: read spool account: %w", err)
	}
	id := strings.TrimSpace(string(data))
	if !wamux.ValidAccountID(id) {
		// Replaced by rename only, so this is outside damage.
		return "", errors.New("agent: spool account file does not hold an account id")
	}
	return id, nil
}

// writeAccount replaces the account file durably: a crash leaves the old
// name or the new one, and the new one is on disk before any record
// written under it.
func (s *spool) writeAccount(account string) error {
	tmp := filepath.Join(s.dir, accountFile+".tmp")
	if err := writeFileSync(tmp, []byte(account+"\n")); err != nil {
		return fmt.Errorf("agent: write spool account: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, accountFile)); err != nil {
		return fmt.Errorf("agent: write spool account: %w", err)
	}
	return syncDir(s.dir)
}
