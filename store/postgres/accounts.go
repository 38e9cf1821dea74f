package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

const accountCols = `id, phone_number_id, access_token, base_url, rate_per_sec, burst, state,
	cooldown_until, created_at, updated_at`

func scanAccount(row pgx.Row) (wamux.Account, error) {
	var a wamux.Account
	var state string
	var burst, cooldown, created, updated int64
	if err := row.Scan(&a.ID, &a.PhoneNumberID, &a.AccessToken, &a.BaseURL, &a.RatePerSec, &burst,
		&state, &cooldown, &created, &updated); err != nil {
		return wamux.Account{}, err
	}
	a.Burst, a.State = int(burst), wamux.AccountState(state)
	a.CooldownUntil, a.CreatedAt, a.UpdatedAt = fromMS(cooldown), fromMS(created), fromMS(updated)
	return a, nil
}

// CreateAccount stores a new account. An empty State becomes active and an
// empty BaseURL the Graph API.
func (s *Store) CreateAccount(ctx context.Context, a wamux.Account) (wamux.Account, error) {
	if err := store.PrepareAccount(&a); err != nil {
		return wamux.Account{}, err
	}
	if s.closed.Load() {
		return wamux.Account{}, errClosed
	}
	now := ms(s.now())
	out, err := scanAccount(s.pool.QueryRow(ctx, `INSERT INTO accounts (`+accountCols+`)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$9) RETURNING `+accountCols,
		a.ID, a.PhoneNumberID, a.AccessToken, a.BaseURL, a.RatePerSec, int64(a.Burst), string(a.State),
		ms(a.CooldownUntil), now))
	if isUnique(err) {
		return wamux.Account{}, wamux.Errorf(wamux.EConflict, "account %q or its phone_number_id already exists", a.ID)
	}
	if err != nil {
		return wamux.Account{}, fmt.Errorf("postgres: insert account: %w", wrapErr(err))
	}
	return out, nil
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
	if s.closed.Load() {
		return wamux.Account{}, errClosed
	}
	if !storable(v) {
		return wamux.Account{}, wamux.Errorf(wamux.ENotFound, "account %q not found", v)
	}
	a, err := scanAccount(s.pool.QueryRow(ctx, `SELECT `+accountCols+` FROM accounts WHERE `+col+` = $1`, v))
	if errors.Is(err, pgx.ErrNoRows) {
		return wamux.Account{}, wamux.Errorf(wamux.ENotFound, "account %q not found", v)
	}
	if err != nil {
		return wamux.Account{}, fmt.Errorf("postgres: get account: %w", wrapErr(err))
	}
	return a, nil
}

// ListAccounts returns every account ordered by id, byte by byte as in
// store/sqlite: COLLATE "C" keeps a database's linguistic default
// collation (en_US and the like put "B" after "a") out of the order.
func (s *Store) ListAccounts(ctx context.Context) ([]wamux.Account, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT `+accountCols+` FROM accounts ORDER BY id COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list accounts: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wamux.Account, error) { return scanAccount(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: list accounts: %w", wrapErr(err))
	}
	return out, nil
}

// UpdateAccount applies the non-nil fields of p in one statement.
func (s *Store) UpdateAccount(ctx context.Context, id string, p store.AccountPatch) (wamux.Account, error) {
	if err := store.ValidateAccountPatch(p); err != nil {
		return wamux.Account{}, err
	}
	if s.closed.Load() {
		return wamux.Account{}, errClosed
	}
	if !storable(id) {
		return wamux.Account{}, wamux.Errorf(wamux.ENotFound, "account %q not found", id)
	}
	var cooldown, burst *int64
	if p.CooldownUntil != nil {
		v := ms(*p.CooldownUntil)
		cooldown = &v
	}
	if p.Burst != nil {
		v := int64(*p.Burst)
		burst = &v
	}
	var state *string
	if p.State != nil {
		v := string(*p.State)
		state = &v
	}
	a, err := scanAccount(s.pool.QueryRow(ctx, `UPDATE accounts SET
			rate_per_sec   = COALESCE($1, rate_per_sec),
			burst          = COALESCE($2, burst),
			state          = COALESCE($3, state),
			cooldown_until = COALESCE($4, cooldown_until),
			access_token   = COALESCE($5, access_token),
			base_url       = COALESCE($6, base_url),
			state_reason   = COALESCE($9, state_reason),
			updated_at     = $7
		WHERE id = $8 RETURNING `+accountCols,
		p.RatePerSec, burst, state, cooldown, p.AccessToken, p.BaseURL, ms(s.now()), id, store.StateReasonColumn(p)))
	if errors.Is(err, pgx.ErrNoRows) {
		return wamux.Account{}, wamux.Errorf(wamux.ENotFound, "account %q not found", id)
	}
	if err != nil {
		return wamux.Account{}, fmt.Errorf("postgres: update account: %w", wrapErr(err))
	}
	return a, nil
}
