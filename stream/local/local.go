// Package local is the embedded stream.Log: one process, its partitions
// and consumer group in memory, its records and committed offsets durable
// in a SQLite database of its own (a file next to the store's).
//
// The store's receipt log (store.PipelineStore) does not carry this
// record shape: it holds typed receipts under ids that are global rather
// than per partition, need not follow commit order on PostgreSQL, and
// keeps acknowledgements in memory, so a restart could not resume a
// partition after a committed offset. This log's tables are
// stream_records (partition, offset, key, value), stream_commits (the
// last committed offset per partition) and stream_meta (the partition
// count, fixed once the file exists).
//
// An Append returns once its transaction committed with synchronous=FULL;
// concurrent Appends and Commits share one transaction (group commit).
// Committing an offset deletes the partition's records up to it. Each
// Consume call is one member of the group; the partitions are dealt
// round-robin over the members in the order they joined, and a partition
// that moves is revoked (after its in-flight batch returned) before it is
// assigned to its next member.
package local

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"sync"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/stream"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

const (
	// PartitionsDefault is the partition count of a new log.
	PartitionsDefault = 16
	// MaxBatchDefault caps the records of one delivered batch.
	MaxBatchDefault = 512
	// groupCommitMax caps the requests that share one transaction.
	groupCommitMax = 256
)

// Config configures a Log; zero fields take their defaults.
type Config struct {
	// Partitions is the partition count; a log that exists keeps the
	// count it was created with, and opening it with another fails.
	Partitions int
	// MaxBatch caps the records of one Handler.Batch.
	MaxBatch int
}

func (c *Config) setDefaults() {
	if c.Partitions <= 0 {
		c.Partitions = PartitionsDefault
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = MaxBatchDefault
	}
}

// Log is the local stream.Log. It is safe for concurrent use.
type Log struct {
	db  *sql.DB
	cfg Config

	reqs       chan *request
	closing    chan struct{} // closed by Close: Consume calls return
	writerDone chan struct{}
	consumers  sync.WaitGroup // running Consume calls
	submits    sync.WaitGroup // Appends and Commits waiting for the writer

	// next is each partition's next offset; the writer goroutine alone
	// uses it.
	next []int64

	mu        sync.Mutex
	closed    bool
	end       []int64         // each partition's committed end (next offset)
	wake      []chan struct{} // closed when a partition's end grows
	committed []int64         // last committed offset; -1: none

	// rebalanceMu serializes membership changes and the handler calls
	// they make.
	rebalanceMu sync.Mutex
	members     []*member
	// ownMu guards owner; Commit holds it for reading, so a partition
	// does not change hands under a commit.
	ownMu sync.RWMutex
	owner []*member
}

var _ stream.Log = (*Log)(nil)

// Open opens (creating if needed) the log in the SQLite file at path.
// One process opens a path at a time.
func Open(ctx context.Context, path string, cfg Config) (*Log, error) {
	cfg.setDefaults()
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("stream/local: open %s: %w", path, err)
	}
	l := &Log{
		db: db, cfg: cfg,
		reqs:       make(chan *request),
		closing:    make(chan struct{}),
		writerDone: make(chan struct{}),
		next:       make([]int64, cfg.Partitions),
		end:        make([]int64, cfg.Partitions),
		wake:       make([]chan struct{}, cfg.Partitions),
		committed:  make([]int64, cfg.Partitions),
		owner:      make([]*member, cfg.Partitions),
	}
	for p := range l.wake {
		l.wake[p] = make(chan struct{})
		l.committed[p] = -1
	}
	if err := l.load(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("stream/local: open %s: %w", path, err)
	}
	go l.write()
	return l, nil
}

const schema = `
CREATE TABLE IF NOT EXISTS stream_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stream_records (
	part INTEGER NOT NULL, off INTEGER NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
	PRIMARY KEY (part, off)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stream_commits (part INTEGER PRIMARY KEY, off INTEGER NOT NULL);`

// load creates the tables if missing, checks the partition count and
// reads each partition's end and committed offset.
func (l *Log) load(ctx context.Context) error {
	if _, err := l.db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	if _, err := l.db.ExecContext(ctx, `INSERT OR IGNORE INTO stream_meta (name, value) VALUES ('partitions', ?)`, l.cfg.Partitions); err != nil {
		return fmt.Errorf("record partitions: %w", err)
	}
	var n int
	if err := l.db.QueryRowContext(ctx, `SELECT value FROM stream_meta WHERE name = 'partitions'`).Scan(&n); err != nil {
		return fmt.Errorf("read partitions: %w", err)
	}
	if n != l.cfg.Partitions {
		return wamux.Errorf(wamux.EInvalid, "stream/local: the log has %d partitions, not %d", n, l.cfg.Partitions)
	}
	scan := func(query string, into func(p int, off int64)) error {
		rows, err := l.db.QueryContext(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p int
			var off int64
			if err := rows.Scan(&p, &off); err != nil {
				return err
			}
			if p < 0 || p >= n {
				return fmt.Errorf("partition %d out of range", p)
			}
			into(p, off)
		}
		return rows.Err()
	}
	if err := scan(`SELECT part, MAX(off) FROM stream_records GROUP BY part`, func(p int, off int64) {
		l.next[p] = max(l.next[p], off+1)
	}); err != nil {
		return fmt.Errorf("read ends: %w", err)
	}
	if err := scan(`SELECT part, off FROM stream_commits`, func(p int, off int64) {
		l.committed[p] = off
		l.next[p] = max(l.next[p], off+1)
	}); err != nil {
		return fmt.Errorf("read commits: %w", err)
	}
	copy(l.end, l.next)
	return nil
}

// Partitions implements stream.Log.
func (l *Log) Partitions() int { return l.cfg.Partitions }

// Append implements stream.Log.
func (l *Log) Append(ctx context.Context, rs []stream.Record) error {
	if len(rs) == 0 {
		return nil
	}
	parts := make([]int32, len(rs))
	for i, r := range rs {
		parts[i] = stream.PartitionOf(r.Key, l.cfg.Partitions)
	}
	recs := slices.Clone(rs) // the writer reads these even after ctx ended
	offsets := make([]int64, len(rs))
	err := l.submit(ctx, func(tx *sql.Tx) error {
		st, err := tx.Prepare(`INSERT INTO stream_records (part, off, key, value) VALUES (?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for i, r := range recs {
			p := parts[i]
			offsets[i] = l.next[p]
			l.next[p]++
			if _, err := st.Exec(p, offsets[i], r.Key, r.Value); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("stream/local: append: %w", err)
	}
	for i := range rs {
		rs[i].Partition, rs[i].Offset = parts[i], offsets[i]
	}
	return nil
}

// Commit implements stream.Log.
func (l *Log) Commit(ctx context.Context, partition int32, offset int64) error {
	if partition < 0 || int(partition) >= l.cfg.Partitions {
		return wamux.Errorf(wamux.EInvalid, "stream/local: partition %d out of range", partition)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stream/local: commit partition %d: %w", partition, err)
	}
	l.ownMu.RLock()
	defer l.ownMu.RUnlock()
	if l.owner[partition] == nil {
		return fmt.Errorf("stream/local: commit partition %d: %w", partition, stream.ErrNotAssigned)
	}
	err := l.submit(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO stream_commits (part, off) VALUES (?, ?)
			ON CONFLICT (part) DO UPDATE SET off = max(off, excluded.off)`, partition, offset); err != nil {
			return err
		}
		_, err := tx.Exec(`DELETE FROM stream_records WHERE part = ? AND off <= ?`, partition, offset)
		return err
	})
	if err != nil {
		return fmt.Errorf("stream/local: commit partition %d: %w", partition, err)
	}
	l.mu.Lock()
	l.committed[partition] = max(l.committed[partition], offset)
	l.mu.Unlock()
	return nil
}

// Close implements stream.Log: running Consume calls leave the group and
// return, then the writer stops and the database closes.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return stream.ErrClosed
	}
	l.closed = true
	close(l.closing)
	l.mu.Unlock()
	l.consumers.Wait()
	l.submits.Wait()
	close(l.reqs)
	<-l.writerDone
	if err := l.db.Close(); err != nil {
		return fmt.Errorf("stream/local: close: %w", err)
	}
	return nil
}

// request is one Append or Commit for the writer.
type request struct {
	apply func(*sql.Tx) error
	done  chan error
}

// submit runs apply in the writer's next transaction and waits for its
// outcome. ctx bounds the wait for the writer to take the request, not
// the transaction: once taken, the caller learns whether it committed.
func (l *Log) submit(ctx context.Context, apply func(*sql.Tx) error) error {
	r := &request{apply: apply, done: make(chan error, 1)}
	l.mu.Lock()
	closed := l.closed
	if !closed {
		l.submits.Add(1) // Close closes reqs after the registered submits
	}
	l.mu.Unlock()
	if closed {
		return stream.ErrClosed
	}
	defer l.submits.Done()
	select {
	case l.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-r.done
}

// write is the writer goroutine: it takes the requests waiting and runs
// them in one transaction.
func (l *Log) write() {
	defer close(l.writerDone)
	for r := range l.reqs {
		batch := []*request{r}
	drain:
		for len(batch) < groupCommitMax {
			select {
			case r, ok := <-l.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		err := l.commitBatch(batch)
		for _, r := range batch {
			r.done <- err
		}
	}
}

func (l *Log) commitBatch(batch []*request) error {
	saved := slices.Clone(l.next)
	err := func() error {
		tx, err := l.db.Begin()
		if err != nil {
			return err
		}
		for _, r := range batch {
			if err := r.apply(tx); err != nil {
				tx.Rollback()
				return err
			}
		}
		return tx.Commit()
	}()
	if err != nil {
		copy(l.next, saved)
		return err
	}
	l.mu.Lock()
	for p, n := range l.next {
		if n != l.end[p] {
			l.end[p] = n
			close(l.wake[p])
			l.wake[p] = make(chan struct{})
		}
	}
	l.mu.Unlock()
	return nil
}

// read returns up to limit records of partition p from offset from on.
func (l *Log) read(ctx context.Context, p int32, from int64, limit int) ([]stream.Record, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT off, key, value FROM stream_records WHERE part = ? AND off >= ? ORDER BY off LIMIT ?`, p, from, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rs []stream.Record
	for rows.Next() {
		r := stream.Record{Partition: p}
		if err := rows.Scan(&r.Offset, &r.Key, &r.Value); err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, rows.Err()
}
