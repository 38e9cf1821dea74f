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

func scanAccount(sc scanner) (wamux.Account, error) {
	var a wamux.Account
	var state string
	var cooldown, created, updated int64
	if err := sc.Scan(&a.ID, &a.PhoneNumberID, &a.AccessToken, &a.BaseURL, &a.RatePerSec, &a.Burst,
		&state, &cooldown, &created, &updated); err != nil {
		return wamux.Account{}, err
	}
	a.State = wamux.AccountState(state)
	a.CooldownUntil, a.CreatedAt, a.UpdatedAt = fromMS(cooldown), fromMS(created), fromMS(updated)
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
	err := s.write(ctx, func(w *writeTx) error {
		_, err := w.exec(`INSERT INTO accounts (`+accountCols+`) VALUES (?,?,?,?,?,?,?,?,?,?)`,
			a.ID, a.PhoneNumberID, a.AccessToken, a.BaseURL, a.RatePerSec, a.Burst, string(a.State),
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
	a, err := scanAccount(s.rqueryRow(ctx, `SELECT `+accountCols+` FROM accounts WHERE `+col+` = ?`, v))
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
		a, err := scanAccount(rows)
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
	var out wamux.Account
	err := s.write(ctx, func(w *writeTx) error {
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
		rows, err := w.query(`UPDATE accounts SET
				rate_per_sec   = COALESCE(?, rate_per_sec),
				burst          = COALESCE(?, burst),
				state          = COALESCE(?, state),
				cooldown_until = COALESCE(?, cooldown_until),
				access_token   = COALESCE(?, access_token),
				base_url       = COALESCE(?, base_url),
				state_reason   = COALESCE(?, state_reason),
				updated_at     = ?
			WHERE id = ? RETURNING `+accountCols,
			p.RatePerSec, p.Burst, state, cooldown, p.AccessToken, p.BaseURL, store.StateReasonColumn(p), ms(s.now()), id)
		if err != nil {
			return fmt.Errorf("sqlite: update account: %w", wrapErr(err))
		}
		defer rows.Close()
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sqlite: update account: %w", wrapErr(err))
			}
			return wamux.Errorf(wamux.ENotFound, "account %q not found", id)
		}
		if out, err = scanAccount(rows); err != nil {
			return fmt.Errorf("sqlite: update account: %w", err)
		}
		return rows.Close()
	})
	if err != nil {
		return wamux.Account{}, err
	}
	return out, nil
}
