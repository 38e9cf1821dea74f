package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

const accountCols = `id, phone_number_id, access_token, base_url, rate_per_sec, burst, state,
	cooldown_until, created_at, updated_at`

type scanner interface{ Scan(dest ...any) error }

// scanAccount reads an account row; the access token is opened with
// sealer (store.OpenToken).
func scanAccount(sc scanner, sealer store.Sealer) (wamux.Account, error) {
	var a wamux.Account
	var state string
	var cooldown, created, updated int64
	if err := sc.Scan(&a.ID, &a.PhoneNumberID, &a.AccessToken, &a.BaseURL, &a.RatePerSec, &a.Burst,
		&state, &cooldown, &created, &updated); err != nil {
		return wamux.Account{}, err
	}
	a.State = wamux.AccountState(state)
	a.CooldownUntil, a.CreatedAt, a.UpdatedAt = fromMS(cooldown), fromMS(created), fromMS(updated)
	token, err := store.OpenToken(sealer, a.ID, a.AccessToken)
	if err != nil {
		return wamux.Account{}, err
	}
	a.AccessToken = token
	return a, nil
}

// CreateAccount stores a new account. An empty State becomes active and an
// empty BaseURL the Graph API.
func (s *Store) CreateAccount(ctx context.Context, a wamux.Account) (wamux.Account, error) {
	if err := store.PrepareAccount(&a); err != nil {
		return wamux.Account{}, err
	}
	now := s.now()
	a.CreatedAt, a.UpdatedAt = now, now
	a.CooldownUntil = fromMS(ms(a.CooldownUntil))
	token, err := store.SealToken(s.opts.Sealer, a.AccessToken)
	if err != nil {
		return wamux.Account{}, err
	}
	err = s.write(ctx, func(w *writeTx) error {
		_, err := w.exec(`INSERT INTO accounts (`+accountCols+`) VALUES (?,?,?,?,?,?,?,?,?,?)`,
			a.ID, a.PhoneNumberID, token, a.BaseURL, a.RatePerSec, a.Burst, string(a.State),
			ms(a.CooldownUntil), ms(now), ms(now))
		if isUnique(err) {
			return wamux.Errorf(wamux.EConflict, "account %q or its phone_number_id already exists", a.ID)
		}
		if err != nil {
			return fmt.Errorf("sqlite: insert account: %w", wrapErr(err))
		}
		return nil
	})
	if err != nil {
		return wamux.Account{}, err
	}
	a.CreatedAt, a.UpdatedAt = fromMS(ms(now)), fromMS(ms(now))
	return a, nil
}

// GetAccount returns one account by id.
func (s *Store) GetAccount(ctx context.Context, id string) (wamux.Account, error) {
	return s.getAccount(ctx, "id", id)
}

// GetAccountByPhoneNumberID returns the account of a Cloud API number.
func (s *Store) GetAccountByPhoneNumberID(ctx context.Context, phoneNumberID string) (wamux.Account, error) {
	return s.getAccount(ctx, "phone_number_id", phoneNumberID)
}

func (s *Store) getAccount(ctx context.Context, col, v string) (wamux.Account, error) {
	a, err := scanAccount(s.rqueryRow(ctx, `SELECT `+accountCols+` FROM accounts WHERE `+col+` = ?`, v), s.opts.Sealer)
	if errors.Is(err, sql.ErrNoRows) {
		return wamux.Account{}, wamux.Errorf(wamux.ENotFound, "account %q not found", v)
	}
	if err != nil {
		return wamux.Account{}, fmt.Errorf("sqlite: get account: %w", wrapErr(err))
	}
	return a, nil
}

// ListAccounts returns every account ordered by id.
func (s *Store) ListAccounts(ctx context.Context) ([]wamux.Account, error) {
	rows, err := s.rquery(ctx, `SELECT `+accountCols+` FROM accounts ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list accounts: %w", wrapErr(err))
	}
	defer rows.Close()
	var out []wamux.Account
	for rows.Next() {
		a, err := scanAccount(rows, s.opts.Sealer)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list accounts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list accounts: %w", wrapErr(err))
	}
	return out, nil
}

// UpdateAccount applies the non-nil fields of p.
func (s *Store) UpdateAccount(ctx context.Context, id string, p store.AccountPatch) (wamux.Account, error) {
	if err := store.ValidateAccountPatch(p); err != nil {
		return wamux.Account{}, err
	}
	token, err := store.SealPatchToken(s.opts.Sealer, p.AccessToken)
	if err != nil {
		return wamux.Account{}, err
	}
	var out wamux.Account
	err = s.write(ctx, func(w *writeTx) error {
		var cooldown *int64
		if p.CooldownUntil != nil {
			v := ms(*p.CooldownUntil)
			cooldown = &v
		}
		var state *string
		if p.State != nil {
			v := string(*p.State)
			state = &v
		}
		args := []any{p.RatePerSec, p.Burst, state, cooldown, token, p.BaseURL, store.StateReasonColumn(p), ms(s.now()), id}
		where := `id = ?`
		if p.Fence != nil {
			where += ` AND EXISTS (SELECT 1 FROM partition_leases WHERE partition_id = ? AND epoch = ?)`
			args = append(args, p.Fence.Partition, p.Fence.Epoch)
		}
		rows, err := w.query(`UPDATE accounts SET
				rate_per_sec   = COALESCE(?, rate_per_sec),
				burst          = COALESCE(?, burst),
				state          = COALESCE(?, state),
				cooldown_until = COALESCE(?, cooldown_until),
				access_token   = COALESCE(?, access_token),
				base_url       = COALESCE(?, base_url),
				state_reason   = COALESCE(?, state_reason),
				updated_at     = ?
			WHERE `+where+` RETURNING `+accountCols, args...)
		if err != nil {
			return fmt.Errorf("sqlite: update account: %w", wrapErr(err))
		}
		defer rows.Close()
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sqlite: update account: %w", wrapErr(err))
			}
			if p.Fence != nil {
				rows.Close()
				var epoch int64
				if _, err := w.queryRow(`SELECT COALESCE((SELECT epoch FROM partition_leases WHERE partition_id = ?), 0)`,
					[]any{p.Fence.Partition}, &epoch); err != nil {
					return fmt.Errorf("sqlite: update account: read epoch of partition %d: %w", p.Fence.Partition, wrapErr(err))
				}
				if epoch != p.Fence.Epoch {
					return store.FencedAccountError(id, *p.Fence, epoch)
				}
			}
			return wamux.Errorf(wamux.ENotFound, "account %q not found", id)
		}
		if out, err = scanAccount(rows, s.opts.Sealer); err != nil {
			return fmt.Errorf("sqlite: update account: %w", err)
		}
		return rows.Close()
	})
	if err != nil {
		return wamux.Account{}, err
	}
	return out, nil
}

// sealTokens runs store.SealTokens over every account on conn, before the
// writer starts, and logs what it wrote; it writes only while it can take
// the gateway lock (Claim), and otherwise only checks that every token
// opens. When it wrote anything it
// checkpoints the WAL and truncates it, so no page holding a token in
// plaintext stays in the WAL file (secure_delete zeroes the replaced cells
// in the database file).
func (s *Store) sealTokens(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx, `SELECT id, access_token FROM accounts ORDER BY id`)
	if err != nil {
		return fmt.Errorf("sqlite: read access tokens: %w", wrapErr(err))
	}
	var toks []store.StoredToken
	for rows.Next() {
		var t store.StoredToken
		if err := rows.Scan(&t.AccountID, &t.Stored); err != nil {
			rows.Close()
			return fmt.Errorf("sqlite: read access tokens: %w", wrapErr(err))
		}
		toks = append(toks, t)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("sqlite: read access tokens: %w", wrapErr(err))
	}
	replace := func(ctx context.Context, id, prev, next string) error {
		_, err := conn.ExecContext(ctx, `UPDATE accounts SET access_token = ? WHERE id = ? AND access_token = ?`, next, id, prev)
		return wrapErr(err)
	}
	// Only while no gateway holds the store: a running one may lack the
	// key these tokens would be sealed under.
	unlock, err := lockFile(s.path + LockSuffix)
	if errors.Is(err, store.ErrInUse) {
		replace = nil
	} else if err != nil {
		return err
	} else {
		defer unlock()
	}
	n, err := store.SealTokens(ctx, s.opts.Sealer, toks, replace)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	if n.Sealed+n.Resealed == 0 {
		return nil
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("sqlite: checkpoint after sealing access tokens: %w", wrapErr(err))
	}
	s.opts.Logger.Info("access tokens sealed at rest", "plaintext_sealed", n.Sealed, "resealed_under_current_key", n.Resealed)
	return nil
}
