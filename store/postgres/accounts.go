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

// scanAccount reads an account row; the access token is opened with
// sealer (store.OpenToken).
func scanAccount(row pgx.Row, sealer store.Sealer) (wamux.Account, error) {
	var a wamux.Account
	var state string
	var burst, cooldown, created, updated int64
	if err := row.Scan(&a.ID, &a.PhoneNumberID, &a.AccessToken, &a.BaseURL, &a.RatePerSec, &burst,
		&state, &cooldown, &created, &updated); err != nil {
		return wamux.Account{}, err
	}
	a.Burst, a.State = int(burst), wamux.AccountState(state)
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
	if s.closed.Load() {
		return wamux.Account{}, errClosed
	}
	now := ms(s.now())
	token, err := store.SealToken(s.opts.Sealer, a.AccessToken)
	if err != nil {
		return wamux.Account{}, err
	}
	out, err := scanAccount(s.pool.QueryRow(ctx, `INSERT INTO accounts (`+accountCols+`)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$9) RETURNING `+accountCols,
		a.ID, a.PhoneNumberID, token, a.BaseURL, a.RatePerSec, int64(a.Burst), string(a.State),
		ms(a.CooldownUntil), now), s.opts.Sealer)
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
	a, err := scanAccount(s.pool.QueryRow(ctx, `SELECT `+accountCols+` FROM accounts WHERE `+col+` = $1`, v), s.opts.Sealer)
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
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wamux.Account, error) { return scanAccount(r, s.opts.Sealer) })
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
	token, err := store.SealPatchToken(s.opts.Sealer, p.AccessToken)
	if err != nil {
		return wamux.Account{}, err
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
	args := []any{p.RatePerSec, burst, state, cooldown, token, p.BaseURL, ms(s.now()), id, store.StateReasonColumn(p)}
	where := `id = $8`
	if p.Fence != nil {
		where += ` AND EXISTS (SELECT 1 FROM partition_leases WHERE partition_id = $10 AND epoch = $11 FOR SHARE)`
		args = append(args, p.Fence.Partition, p.Fence.Epoch)
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
		WHERE `+where+` RETURNING `+accountCols, args...), s.opts.Sealer)
	if errors.Is(err, pgx.ErrNoRows) && p.Fence != nil {
		if ferr := s.accountFence(ctx, id, *p.Fence); ferr != nil {
			return wamux.Account{}, ferr
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return wamux.Account{}, wamux.Errorf(wamux.ENotFound, "account %q not found", id)
	}
	if err != nil {
		return wamux.Account{}, fmt.Errorf("postgres: update account: %w", wrapErr(err))
	}
	return a, nil
}

// accountFence is why a fenced account patch changed no row: an error
// wrapping store.ErrFenced when the fence is stale, nil when it holds (the
// account is missing).
func (s *Store) accountFence(ctx context.Context, id string, f store.Fence) error {
	var epoch int64
	err := s.pool.QueryRow(ctx, `SELECT epoch FROM partition_leases WHERE partition_id = $1`, f.Partition).Scan(&epoch)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: update account: read epoch of partition %d: %w", f.Partition, wrapErr(err))
	}
	if epoch != f.Epoch {
		return store.FencedAccountError(id, f, epoch)
	}
	return nil
}

// sealTokens runs store.SealTokens over every account when the store
// opens, and logs what it wrote. It writes only while no gateway holds
// the schema's lock (Claim), since a running one may lack the key the
// tokens would be sealed under, and otherwise only checks that every
// token opens. Each token is replaced only while it still holds the text
// read, so a concurrent write is never undone.
func (s *Store) sealTokens(ctx context.Context) error {
	var n store.SealCounts
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var schema string
		if err := tx.QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&schema); err != nil {
			return err
		}
		var free bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, OwnerLockKey(schema)).Scan(&free); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id, access_token FROM accounts ORDER BY id`)
		if err != nil {
			return err
		}
		toks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.StoredToken, error) {
			var t store.StoredToken
			err := r.Scan(&t.AccountID, &t.Stored)
			return t, err
		})
		if err != nil {
			return err
		}
		var replace store.ReplaceToken
		if free {
			replace = func(ctx context.Context, id, prev, next string) error {
				_, err := tx.Exec(ctx, `UPDATE accounts SET access_token = $1 WHERE id = $2 AND access_token = $3`, next, id, prev)
				return err
			}
		}
		n, err = store.SealTokens(ctx, s.opts.Sealer, toks, replace)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: access tokens: %w", wrapErr(err))
	}
	if n.Sealed+n.Resealed > 0 && s.opts.Logger != nil {
		s.opts.Logger.Info("access tokens sealed at rest", "plaintext_sealed", n.Sealed, "resealed_under_current_key", n.Resealed)
	}
	return nil
}
