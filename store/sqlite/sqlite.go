// Package sqlite is the embedded store: one SQLite file in WAL mode with
// synchronous=FULL, written by a single goroutine that group-commits many
// callers' requests in one transaction, and read through a separate pool of
// read-only connections.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/receiptlog"
)

// Defaults for Options fields left zero.
const (
	BusyTimeoutDefault = 5 * time.Second
	MaxBatchDefault    = 512
	CacheKiBDefault    = 32 << 10
	// CheckpointEveryDefault paces the background WAL checkpoints. A
	// checkpoint copies the newest frame of each page written since the
	// last one, so a page the writer rewrites many times within a second
	// (the ledger's and the receipt table's last pages, the key index
	// during a fill) is copied once per checkpoint however often it was
	// rewritten. The WAL's size stays bounded by walSafetyPages.
	CheckpointEveryDefault = time.Second
	// walSafetyPages is the writer's own auto-checkpoint threshold when a
	// background checkpointer runs (≈ 160 MiB of WAL with 4 KiB pages).
	// Under a steady flood the WAL never restarts by itself: a PASSIVE
	// checkpoint cannot catch up with a writer that keeps appending, so
	// the WAL grows to this size, and from there every commit runs a
	// checkpoint on the writer until a restart gets past the readers. A
	// high threshold makes that rare, at the price of a larger WAL file.
	walSafetyPages      = 40000
	stmtCacheMaxDefault = 512
	// GroupWaitDefault: see Options.GroupWait.
	GroupWaitDefault = 200 * time.Microsecond
	// StateCacheDefault: see Options.StateCache.
	StateCacheDefault = 896 << 10
	// groupFill is how many requests a lingering batch waits for,
	// groupBusy how soon after the last commit a batch must start for the
	// writer to linger at all, and groupGiveUp how many lingers in a row
	// may gather nobody before it stops lingering.
	groupFill   = 16
	groupBusy   = 2 * time.Millisecond
	groupGiveUp = 8
)

// Options tunes a Store; the zero value is ready to use.
type Options struct {
	// BusyTimeout is how long a connection waits for a lock held by another
	// process before failing with "database is locked".
	BusyTimeout time.Duration
	// MaxBatch bounds how many write requests share one transaction. Larger
	// batches amortise the fsync over more callers but delay the first.
	MaxBatch int
	// ReadConns is the size of the read-only connection pool; by default
	// half the processors Go may use (GOMAXPROCS), at least one, at most
	// four. Reads and the single writer share the CPU, and the writer is
	// what bounds the store: readers that may take every core leave it
	// waiting for one.
	ReadConns int
	// CacheKiB is the page cache of the writer connection. SQLite's 2 MiB
	// default makes inserts into a large receipts table re-read index pages
	// on every batch.
	CacheKiB int
	// CheckpointEvery is the least time between two background WAL
	// checkpoints. A negative value turns the background checkpointer off
	// and leaves checkpoints to SQLite inside the writer's commits.
	CheckpointEvery time.Duration
	// GroupWait is how long the writer may hold a batch of fewer than 16
	// requests open for more while it is busy (its last commit ended less
	// than 2 ms ago), so that a stream of small writes (the receipt log's
	// appends, status updates) shares commits instead of paying BEGIN, WAL
	// frames and fsync nearly once per request. It yields the core while
	// it waits. An idle writer never waits, and after 8 waits
	// in a row that gathered nobody it stops until requests share a batch
	// by themselves, so a caller writing alone does not pay it on every
	// write. A negative value turns it off.
	GroupWait time.Duration
	// StateCache is how many messages' committed receipt state the store
	// keeps in memory (statecache.go): the newest numbers, in a ring of
	// 32-byte slots rounded up to a power of two, so that the receipt
	// pipeline's state reads and Bloom confirmations need no read
	// transaction. The default, 896 Ki messages (a ring of 1 Mi, 32 MiB
	// once full), holds every message of a receipt flood of a few hundred
	// thousand messages in flight at once.
	StateCache int
	// KeyIndexFill is how many new message numbers wait in memory before
	// the writer files them in the message key index, sorted, a few
	// thousand per transaction (keyindex.go); tests make it small.
	KeyIndexFill int
	// keyFillChunk is how many numbers one transaction of an index fill
	// files (keyindex.go); tests make it small.
	keyFillChunk int
	// Logger receives what the store does in the background and can only
	// report there (a failed index fill); nil discards it.
	Logger *slog.Logger
	// Now is the clock used for CreatedAt, UpdatedAt and similar stamps;
	// tests inject one to control time.
	Now func() time.Time
	// Sealer encrypts the accounts' access tokens at rest (a
	// *seal.Keyring). Open seals every token stored in plaintext and seals
	// again those under an older key, and fails when a sealed token does
	// not open. Nil keeps tokens in plaintext: for tools and tests whose
	// store holds no real token; such a store cannot read sealed tokens.
	Sealer store.Sealer
}

func (o *Options) setDefaults() {
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = BusyTimeoutDefault
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = MaxBatchDefault
	}
	if o.ReadConns <= 0 {
		o.ReadConns = min(max(1, runtime.GOMAXPROCS(0)/2), 4)
	}
	if o.CacheKiB <= 0 {
		o.CacheKiB = CacheKiBDefault
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = CheckpointEveryDefault
	}
	if o.GroupWait == 0 {
		o.GroupWait = GroupWaitDefault
	}
	if o.StateCache <= 0 {
		o.StateCache = StateCacheDefault
	}
	if o.KeyIndexFill <= 0 {
		o.KeyIndexFill = keyIndexFillDefault
	}
	if o.keyFillChunk <= 0 {
		o.keyFillChunk = keyFillChunkDefault
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Store implements store.Store on one SQLite file.
type Store struct {
	opts Options
	path string
	wdb  *sql.DB // one connection, owned by the writer goroutine
	rdb  *sql.DB // read-only pool
	// rstmts caches prepared read statements by SQL text.
	rstmts sync.Map

	mu     sync.RWMutex // guards closed against sends on reqs
	closed bool
	reqs   chan *request
	done   chan struct{} // closed when the writer has drained and stopped
	wconn  *sql.Conn
	ckpt   *checkpointer // nil when checkpoints are left to the writer
	// numbers caches committed message numbers for the writer and the
	// readers (numbers.go); tail holds those not in the message key index
	// yet (keyindex.go).
	numbers *numbers
	tail    *keyTail
	// states caches the states the writer committed (statecache.go).
	states *stateCache
	// keyFill is Options.KeyIndexFill (tests lower it while the store
	// runs). Only the writer goroutine touches filling, the index fill in
	// progress, and nextKeyFill, the tail size at which it may start the
	// next (keyindex.go).
	keyFill     atomic.Int64
	filling     *keyFill
	nextKeyFill int
	// filter knows which messages the index lacks (keyfilter.go); the
	// scan that fills it runs until loaded is closed, or stopLoad.
	filter   *keyFilter
	stopLoad context.CancelFunc
	loaded   chan struct{}
	// logAcks: acknowledgements of receipt log entries (receiptlog.go).
	logAcks *receiptlog.Acks
	// wal fsyncs the WAL for batches committed without it (walsync.go);
	// only the writer's syncer goroutine uses it.
	wal *walSyncer
	// syncFailed is set by the syncer once an fsync of the WAL has failed
	// (Store.answer).
	syncFailed atomic.Bool
}

var _ store.Store = (*Store)(nil)

// Open opens (creating when missing) the database at path, applies pending
// migrations and starts the writer.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	opts.setDefaults()
	if path == "" || strings.ContainsRune(path, '?') {
		return nil, wamux.Errorf(wamux.EInvalid, "sqlite path must be a file name without '?'")
	}
	if err := prepareFiles(path, opts.Logger); err != nil {
		return nil, err
	}
	busy := strconv.FormatInt(opts.BusyTimeout.Milliseconds(), 10)
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+busy+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	// Deleted and replaced content (an access token sealed again) is
	// zeroed when that costs no extra I/O.
	q.Add("_pragma", "secure_delete(FAST)")
	base := q.Encode() // the checkpointer's connection: durable, no big cache
	q.Add("_pragma", "cache_size(-"+strconv.Itoa(opts.CacheKiB)+")")
	// Every write request runs under its own SAVEPOINT (writer.go), so
	// each page it changes is first copied to the statement journal; with
	// temp files that journal spills to disk past 64 KiB and costs a
	// pwrite per page. In memory it is a copy: about +10 % receipts/s.
	q.Add("_pragma", "temp_store(MEMORY)")
	if opts.CheckpointEvery > 0 {
		q.Add("_pragma", "wal_autocheckpoint("+strconv.Itoa(walSafetyPages)+")")
	}
	wdb, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open writer: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	s := &Store{opts: opts, path: path, wdb: wdb, logAcks: receiptlog.NewAcks(), numbers: newNumbers(),
		tail: newKeyTail(), states: newStateCache(opts.StateCache), wal: newWALSyncer(path)}
	s.keyFill.Store(int64(opts.KeyIndexFill))
	s.wconn, err = wdb.Conn(ctx)
	if err != nil {
		_ = wdb.Close()
		return nil, fmt.Errorf("sqlite: open writer: %w", wrapErr(err))
	}
	err = migrate(ctx, s.wconn)
	if err == nil {
		err = s.sealTokens(ctx, s.wconn)
	}
	if err == nil {
		err = s.loadKeyTail(ctx)
	}
	if err != nil {
		_ = s.wconn.Close()
		_ = wdb.Close()
		return nil, err
	}

	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout("+busy+")")
	rq.Add("_pragma", "query_only(1)")
	rdb, err := sql.Open("sqlite", path+"?"+rq.Encode())
	if err != nil {
		_ = s.wconn.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("sqlite: open readers: %w", err)
	}
	rdb.SetMaxOpenConns(opts.ReadConns)
	rdb.SetMaxIdleConns(opts.ReadConns)
	s.rdb = rdb
	upto, _ := s.tail.bounds()
	s.filter = newKeyFilter(2 * upto)
	var loadCtx context.Context
	loadCtx, s.stopLoad = context.WithCancel(context.Background())
	s.loaded = make(chan struct{})
	go func() {
		defer close(s.loaded)
		s.loadKeyFilter(loadCtx, keyFilterPage)
	}()

	if opts.CheckpointEvery > 0 {
		cdb, err := sql.Open("sqlite", path+"?"+base)
		if err != nil {
			s.stopLoad()
			<-s.loaded
			_ = s.wconn.Close()
			_ = wdb.Close()
			_ = rdb.Close()
			return nil, fmt.Errorf("sqlite: open checkpointer: %w", err)
		}
		cdb.SetMaxOpenConns(1)
		s.ckpt = newCheckpointer(cdb, opts.CheckpointEvery)
	}

	s.reqs = make(chan *request, opts.MaxBatch)
	s.done = make(chan struct{})
	go s.runWriter(newWriteTx(s.wconn, stmtCacheMaxDefault, s.numbers, s.tail, s.filter, s.states))
	return s, nil
}

// Ping checks that a read connection answers.
func (s *Store) Ping(ctx context.Context) error {
	if s.isClosed() {
		return errClosed
	}
	if err := s.rdb.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping: %w", wrapErr(err))
	}
	var one int
	if err := s.rdb.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("sqlite: ping: %w", wrapErr(err))
	}
	return nil
}

// Close stops accepting writes, lets the writer commit everything already
// queued, then closes every connection. It is safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	close(s.reqs)
	s.mu.Unlock()
	<-s.done
	s.stopLoad()
	<-s.loaded
	s.closeReadStmts()
	var ckptErr error
	if s.ckpt != nil {
		ckptErr = s.ckpt.close()
	}
	return errors.Join(ckptErr, s.wconn.Close(), s.wdb.Close(), s.rdb.Close())
}

func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

func (s *Store) now() time.Time { return s.opts.Now().UTC() }
