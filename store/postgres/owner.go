package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wamux/wamux/store"
)

// OwnerCheckDefault is how often a claim pings its lock connection when
// Options.OwnerCheck is 0. A connection the server ends is noticed at once
// without it; the ping is for a path that went silent (see pgClaim.hold).
const OwnerCheckDefault = 5 * time.Second

// ownerTimeout bounds one check or one attempt to take the lock again.
const ownerTimeout = 10 * time.Second

// ownerRetry is how soon a claim that could not take its lock again after
// a break tries once more (Options.OwnerCheck when that is shorter): the
// process believes it owns the store meanwhile, so the gap is kept short.
const ownerRetry = 500 * time.Millisecond

// ownerKeepAlive probes an idle lock connection at the TCP level, so that a
// dead path fails the connection's blocked read even between pings.
var ownerKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3}

var _ store.Owner = (*Store)(nil)

// OwnerLockKey is the session-level advisory lock key a gateway holds on
// schema while it serves it (pg_locks shows it as classid = key>>32,
// objid = key&0xffffffff, objsubid = 1): an FNV-1a hash of
// "wamux:gateway:"+schema. The migrations' lock takes two int4 keys
// (objsubid = 2), a space of its own. Advisory locks are per database, so
// the same schema in two databases does not clash.
func OwnerLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("wamux:gateway:" + schema))
	return int64(h.Sum64())
}

// Claim takes the schema's advisory lock (OwnerLockKey of the
// connection's current schema) on a connection of its own, outside the
// pool, and holds it until Release. A lock connection that breaks (the
// server restarted, pg_terminate_backend, a network cut) loses the lock
// with it, at once on the server. The claim keeps that connection blocked
// in a read, so a session the server ends is noticed at once, and pings it
// every Options.OwnerCheck for a path that went silent. It then takes the
// lock again on a new connection, right away and every ownerRetry while it
// cannot; when another process holds it by then, the claim is lost
// (Claim.Lost). While the server cannot be reached it keeps trying: the
// store cannot be written then either, and every send writes first.
//
// The rule this gives: only one process holds the lock at a time, but a
// holder believes it owns the store from the break until it notices the
// break and takes the lock again or finds it taken. That gap is what the
// transport allows: a session the server ended is noticed at once; a
// silent path within Options.OwnerCheck plus ownerTimeout, or the TCP
// keepalive (ownerKeepAlive). A gateway that starts in the gap takes the
// store and this one reports the loss at its next attempt, a moment later.
// One that also stopped within the gap leaves the lock free, but every take
// bumps the store's claim epoch (table gateway_claim) holding the lock, and
// a retake bumps only the epoch this claim last wrote: finding another, the
// claim lets the lock go and is lost, as the store was written by two
// gateways and this one's caches and sequences may be stale. Both may
// still have sent in the gap; that is told, not prevented. A process that
// takes the lock without bumping the epoch (a wamux from before migration
// 0080, a hand-made pg_advisory_lock) and lets go within the gap is still
// not noticed.
func (s *Store) Claim(ctx context.Context) (store.Claim, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	cfg := s.pool.Config().ConnConfig.Copy()
	if cfg.RuntimeParams["application_name"] == "" {
		// Shown in pg_stat_activity, and in the error of a refused claim.
		cfg.RuntimeParams["application_name"] = "wamux gateway"
	}
	// ConnectTimeout (connect_timeout) still bounds the connect: pgx
	// applies it to the context as well.
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAliveConfig: ownerKeepAlive}
	cfg.DialFunc = dialer.DialContext
	every := s.opts.OwnerCheck
	if every <= 0 {
		every = OwnerCheckDefault
	}
	c := &pgClaim{cfg: cfg, every: every, log: s.opts.Logger, id: rand.Text(), lost: make(chan struct{}), done: make(chan struct{})}
	if err := c.take(ctx); err != nil {
		return nil, err
	}
	var watchCtx context.Context
	watchCtx, c.stop = context.WithCancel(context.Background())
	go c.watch(watchCtx)
	return c, nil
}

type pgClaim struct {
	cfg   *pgx.ConnConfig
	every time.Duration
	log   *slog.Logger
	id    string // this claim in gateway_claim, so it knows its own bumps

	// Only take and watch touch these, one at a time.
	conn  *pgx.Conn // nil while the lock is not held
	key   int64
	where string // database and schema, for messages
	epoch int64  // the gateway_claim epoch this claim last wrote; 0 before the first take

	stop context.CancelFunc
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	err     error
	lost    chan struct{}
	holding session // the lock's last holding session; under mu for a test's hook
	// beforeRetake, when set (by a test, under mu), runs before each
	// attempt to take the lock again, so a test can hold the claim in the
	// gap after a break.
	beforeRetake func(context.Context)
}

// session names a backend for as long as it lives: the server's pids are
// the OS's, so once the backend exited its pid may come back as another
// session, e.g. another gateway's holding this lock. Its start time tells
// them apart.
type session struct {
	pid   uint32
	start time.Time
}

// heldError is a refused claim; holder is the session holding the lock,
// with a zero start when the claim's role may not see it.
type heldError struct {
	holder session
	msg    string
}

func (e *heldError) Error() string { return e.msg }
func (e *heldError) Unwrap() error { return store.ErrInUse }

// fencedError is a retake that got the lock but found the store's claim
// epoch moved on (another gateway took the store in between), or could not
// read it: the claim is lost either way.
type fencedError struct {
	msg   string
	cause error
}

func (e *fencedError) Error() string { return e.msg }
func (e *fencedError) Unwrap() error { return e.cause }

// take connects, takes the lock without waiting for it, and bumps the
// store's claim epoch (fence).
func (c *pgClaim) take(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, c.cfg)
	if err != nil {
		return fmt.Errorf("postgres: connect for the gateway lock: %w", wrapErr(err))
	}
	var db, schema, selfApp, selfClient string
	var self session
	if err := conn.QueryRow(ctx, `SELECT current_database(), coalesce(current_schema(), ''), pid, backend_start,
		coalesce(application_name, ''), coalesce(host(client_addr), '-')
		FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&db, &schema, &self.pid, &self.start, &selfApp, &selfClient); err != nil {
		conn.Close(context.Background())
		return fmt.Errorf("postgres: gateway lock: %w", wrapErr(err))
	}
	key := OwnerLockKey(schema)
	where := fmt.Sprintf("database %s, schema %s", db, schema)
	held := &heldError{}
	holder := "another session"
	for attempt := 0; attempt < 3; attempt++ {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
			conn.Close(context.Background())
			return fmt.Errorf("postgres: gateway lock on %s: %w", where, wrapErr(err))
		}
		if ok {
			epoch, err := c.fence(ctx, conn, schema, where, fmt.Sprintf("backend pid %d (application %q, client %s)", self.pid, selfApp, selfClient))
			if err != nil {
				letGo(conn, key)
				return err
			}
			c.conn, c.key, c.where, c.epoch = conn, key, where, epoch
			c.mu.Lock()
			c.holding = self
			c.mu.Unlock()
			return nil
		}
		// Name the holder, so the operator can find the other gateway, and
		// tell whether it is this claim's broken session (watch). One that
		// let go in between is not found: try again. So is one missing
		// from pg_stat_activity: a backend leaves it only after dropping
		// its locks, so the lock is free by now. backend_start is NULL for
		// a session of a role whose activity this one may not see: never
		// ours.
		var app, client string
		var start *time.Time
		err = conn.QueryRow(ctx, `SELECT l.pid, a.backend_start, coalesce(a.application_name, ''), coalesce(host(a.client_addr), '-')
			FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
			AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND l.classid = $1::bigint::oid AND l.objid = $2::bigint::oid`,
			int64(uint64(key)>>32), int64(uint64(key)&0xffffffff)).Scan(&held.holder.pid, &start, &app, &client)
		if err == nil {
			if start != nil {
				held.holder.start = *start
			}
			holder = fmt.Sprintf("backend pid %d (application %q, client %s)", held.holder.pid, app, client)
			break
		}
	}
	conn.Close(context.Background())
	held.msg = fmt.Sprintf("postgres: gateway lock (advisory lock %d) on %s is held by %s: %v", key, where, holder, store.ErrInUse)
	return held
}

// fence bumps the store's claim epoch (table gateway_claim, in the schema
// the lock key is for) on conn, which holds the lock, and returns the epoch
// written. The lock alone cannot tell a retake that another gateway held
// the store while this claim's connection was broken, if that one has let
// go again by now; the epoch can, as every gateway's take bumps it. So a
// retake bumps it only from the epoch this claim last wrote, in one
// statement, and otherwise fails with a fencedError. The exception is a
// higher epoch this claim wrote itself (its id): a bump whose answer was
// lost with the connection. A missing table is an error too, never a claim
// without fencing: Open migrates before there is a Store to claim, so only
// a dropped table gets here.
func (c *pgClaim) fence(ctx context.Context, conn *pgx.Conn, schema, where, holder string) (int64, error) {
	table := pgx.Identifier{"gateway_claim"}
	if schema != "" {
		table = pgx.Identifier{schema, "gateway_claim"}
	}
	name := table.Sanitize()
	var epoch int64
	var err error
	if c.epoch == 0 {
		err = conn.QueryRow(ctx, `INSERT INTO `+name+` AS g (id, epoch, claim, taken_at, holder) VALUES (1, 1, $1, now(), $2)
			ON CONFLICT (id) DO UPDATE SET epoch = g.epoch + 1, claim = excluded.claim, taken_at = excluded.taken_at, holder = excluded.holder
			RETURNING epoch`, c.id, holder).Scan(&epoch)
	} else {
		err = conn.QueryRow(ctx, `UPDATE `+name+` SET epoch = epoch + 1, claim = $1, taken_at = now(), holder = $2
			WHERE id = 1 AND (epoch = $3 OR (claim = $1 AND epoch > $3))
			RETURNING epoch`, c.id, holder, c.epoch).Scan(&epoch)
	}
	if err == nil {
		return epoch, nil
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		err = fmt.Errorf("postgres: gateway lock on %s: the claim epoch table %s is missing, so a gateway that held the store in between cannot be told (Open creates it): %w",
			where, name, err)
		if c.epoch == 0 {
			return 0, err
		}
		return 0, &fencedError{msg: err.Error(), cause: err}
	case c.epoch != 0 && errors.Is(err, pgx.ErrNoRows): // the epoch moved on: below
	default:
		return 0, fmt.Errorf("postgres: gateway lock on %s: bump the claim epoch: %w", where, wrapErr(err))
	}
	// Holding the lock, read who moved the epoch on, for the operator.
	var takenAt time.Time
	var other string
	err = conn.QueryRow(ctx, `SELECT epoch, taken_at, holder FROM `+name+` WHERE id = 1`).Scan(&epoch, &takenAt, &other)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, &fencedError{cause: store.ErrInUse, msg: fmt.Sprintf(
			"the claim epoch row of %s is gone, so whether another gateway held the store while this one's lock connection was broken cannot be told (this gateway last took epoch %d): %v",
			where, c.epoch, store.ErrInUse)}
	case err != nil:
		return 0, fmt.Errorf("postgres: gateway lock on %s: read the claim epoch: %w", where, wrapErr(err))
	}
	return 0, &fencedError{cause: store.ErrInUse, msg: fmt.Sprintf(
		"another gateway held the store (%s) while this one's lock connection was broken: claim epoch %d taken at %s by %s; this gateway last took epoch %d: %v",
		where, epoch, takenAt.UTC().Format(time.RFC3339Nano), other, c.epoch, store.ErrInUse)}
}

// letGo unlocks key on conn and closes it. Unlock before closing: the
// server drops a closed session's locks only once its backend has exited,
// and a gateway started right after this one let go must find the lock
// free.
func letGo(conn *pgx.Conn, key int64) {
	ctx, cancel := context.WithTimeout(context.Background(), ownerTimeout)
	defer cancel()
	_, _ = conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key)
	conn.Close(ctx)
}

// watch holds the lock connection until it breaks and then takes the lock
// again, until ctx ends or the claim is lost.
func (c *pgClaim) watch(ctx context.Context) {
	defer close(c.done)
	defer func() {
		if c.conn != nil {
			letGo(c.conn, c.key)
		}
	}()
	retry := min(ownerRetry, c.every)
	for {
		if c.conn != nil {
			err := c.hold(ctx)
			if ctx.Err() != nil {
				return
			}
			c.conn.Close(context.Background())
			c.conn = nil
			c.logger().Warn("gateway lock connection broke; taking the lock again", "store", c.where, "err", err)
		} else {
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
		}
		c.mu.Lock()
		old, hook := c.holding, c.beforeRetake
		c.mu.Unlock()
		if hook != nil {
			hook(ctx)
		}
		tctx, cancel := context.WithTimeout(ctx, ownerTimeout)
		err := c.take(tctx)
		cancel()
		var held *heldError
		var fenced *fencedError
		switch {
		case err == nil:
			c.logger().Info("gateway lock taken again", "store", c.where)
		case ctx.Err() != nil:
			return
		case errors.As(err, &held) && held.holder.pid == old.pid && held.holder.start.Equal(old.start):
			// Our broken session still holds it until the server notices:
			// no other process can have it. End that session and try again.
			// A session with only our old pid is another's (see session).
			ended, err := c.terminate(ctx, old)
			switch {
			case err != nil:
				c.logger().Warn("gateway lock still held by this gateway's broken session; trying again", "store", c.where, "pid", old.pid, "err", err)
			case ended:
				c.logger().Info("gateway lock still held by this gateway's broken session; ended it", "store", c.where, "pid", old.pid)
			}
		case errors.As(err, &fenced):
			// take let go of the lock again: the other gateway may have
			// written what this one caches, and it must stop.
			c.mu.Lock()
			c.err = fmt.Errorf("postgres: gateway lock lost: %w", err)
			c.mu.Unlock()
			close(c.lost)
			return
		case errors.As(err, &held):
			c.mu.Lock()
			c.err = fmt.Errorf("postgres: gateway lock lost: its connection broke and another process took it: %w", err)
			c.mu.Unlock()
			close(c.lost)
			return
		default:
			c.logger().Warn("gateway lock: cannot take the lock again yet", "store", c.where, "err", err)
		}
	}
}

// hold returns when the lock connection broke, with why, or when ctx
// ended. It keeps the connection blocked in a read (no LISTEN: nothing is
// expected to arrive), so the server ending the session (a terminate, a
// shutdown) fails the read at once. Every c.every the read gives way to a
// ping, for a path that went silent: one goroutine does both, as a pgx
// connection serves one call at a time.
func (c *pgClaim) hold(ctx context.Context) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, c.every)
		err := c.conn.PgConn().WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil: // a notification nobody should send
			continue
		case !errors.Is(err, context.DeadlineExceeded):
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, ownerTimeout)
		err = c.conn.Ping(pctx)
		cancel()
		if err != nil {
			return err
		}
	}
}

// terminate ends s, our own broken session, so that its locks are
// released. It checks that s is still that session in the statement that
// ends it: s may have exited since take saw it hold the lock, and its pid
// may be another session's by now. ended says whether s was signalled;
// finding it gone is no error: the next take says who holds the lock.
func (c *pgClaim) terminate(ctx context.Context, s session) (ended bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, ownerTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, c.cfg)
	if err != nil {
		return false, fmt.Errorf("postgres: connect to end the gateway lock's broken session: %w", wrapErr(err))
	}
	defer conn.Close(context.Background())
	err = conn.QueryRow(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2",
		int64(s.pid), s.start).Scan(&ended)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("postgres: end the gateway lock's broken session: %w", wrapErr(err))
	}
	return ended, nil
}

func (c *pgClaim) logger() *slog.Logger {
	if c.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.log
}

func (c *pgClaim) Lost() <-chan struct{} { return c.lost }

func (c *pgClaim) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Release stops the checks and closes the lock connection, which releases
// the lock.
func (c *pgClaim) Release() error {
	c.once.Do(func() {
		c.stop()
		<-c.done
	})
	return nil
}
