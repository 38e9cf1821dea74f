// Package postgres is the cluster store: PostgreSQL through a pgx pool.
// Message updates, a few per message sent, are group-committed: concurrent
// ones share one pipelined transaction (updates.go). Other writes are each
// their own transaction; batches travel as arrays and are expanded with
// unnest, so one round trip carries thousands of rows.
package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/receiptlog"
)

// Options tunes a Store; the zero value is ready to use.
type Options struct {
	// Schema, when set, is created if missing and becomes the search_path of
	// every pooled connection, so several gateways (or test runs) can share
	// one database without seeing each other's tables.
	Schema string
	// MaxConns caps the pool; 0 means MaxConnsDefault. More connections
	// than cores pay off: a commit mostly waits for the WAL flush, and
	// PostgreSQL flushes the commits of concurrent sessions together.
	MaxConns int32
	// Now is the clock used for CreatedAt, UpdatedAt and similar stamps.
	Now func() time.Time
	// OwnerCheck is how often a Claim pings its lock connection, to notice
	// a path that went silent; a session the server ends is noticed at
	// once without it. 0 means OwnerCheckDefault.
	OwnerCheck time.Duration
	// Logger receives a Claim's warnings (its lock connection broke, the
	// lock was taken again) and the count of access tokens Open sealed;
	// nil discards them.
	Logger *slog.Logger
	// Sealer encrypts the accounts' access tokens at rest (a
	// *seal.Keyring). Open seals every token stored in plaintext and seals
	// again those under an older key, and fails when a sealed token does
	// not open. Nil keeps tokens in plaintext: for tools and tests whose
	// store holds no real token; such a store cannot read sealed tokens.
	Sealer store.Sealer
}

// MaxConnsDefault is the pool size when Options.MaxConns is 0.
const MaxConnsDefault = 16

// ConnectTimeoutDefault bounds each connect (TCP, TLS, startup and
// authentication) when the store URL sets no connect_timeout: pgx would
// otherwise wait for ever on a server that accepts and never answers, and
// `wamux serve` would hang at start without a word.
const ConnectTimeoutDefault = 10 * time.Second

// Store implements store.Store on PostgreSQL.
type Store struct {
	opts Options
	// schema is where the tables live: Options.Schema, else the first
	// schema the URL's search_path names ("" when it names none); Open
	// creates it when missing.
	schema string
	pool   *pgxpool.Pool
	closed atomic.Bool
	// updates group-commits UpdateMessage (updates.go).
	updates *updateWriter
	// logAcks: acknowledgements of receipt log entries (pipeline.go).
	logAcks *receiptlog.Acks
}

var _ store.Store = (*Store)(nil)

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Open connects, creates the schema if missing (Options.Schema, else the
// first one the URL's search_path names), and applies pending migrations. The DSN never appears in returned errors.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, wamux.Errorf(wamux.EInvalid, "postgres connection string does not parse")
	}
	schema := opts.Schema
	if schema != "" {
		if !schemaName.MatchString(schema) {
			return nil, wamux.Errorf(wamux.EInvalid, "postgres schema must match %s", schemaName)
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
	} else if schema, err = pathSchema(cfg.ConnConfig.RuntimeParams["search_path"]); err != nil {
		return nil, wamux.Errorf(wamux.EInvalid, "postgres connection string: %v", err)
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = ConnectTimeoutDefault
	}
	cfg.MaxConns = MaxConnsDefault
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open pool: %w", wrapErr(err))
	}
	s := &Store{opts: opts, schema: schema, pool: pool, logAcks: receiptlog.NewAcks()}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.sealTokens(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	s.startUpdates()
	return s, nil
}

// Ping checks that the server answers.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return errClosed
	}
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", wrapErr(err))
	}
	return nil
}

// Close waits for in-flight calls to return their connections and closes
// the pool. Writes are synchronous, so nothing is left to flush.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.updates.stop()
	s.pool.Close()
	return nil
}

// Pool exposes the connection pool, for tests and for the cluster wiring
// that shares one pool between components.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

func (s *Store) now() time.Time { return s.opts.Now().UTC() }

// inTx runs fn in a transaction, retrying when the server aborted it for a
// deadlock or a serialization failure; fn must be safe to run again.
func (s *Store) inTx(ctx context.Context, what string, fn func(tx pgx.Tx) error) error {
	if s.closed.Load() {
		return errClosed
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = pgx.BeginFunc(ctx, s.pool, fn)
		if !isRetryable(err) {
			break
		}
	}
	if err == nil {
		return nil
	}
	if isDomain(err) {
		return err
	}
	return fmt.Errorf("postgres: %s: %w", what, wrapErr(err))
}
