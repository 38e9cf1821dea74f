package receipts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/stream"
)

// Defaults of Config.
const (
	// PartitionsDefault is 4: each partition's processor issues its own
	// store writes, so fewer partitions make larger batches and fewer
	// write requests for the one SQLite writer, which bounds the
	// pipeline, while a poison account still holds up only a quarter of
	// the accounts.
	PartitionsDefault = 4
	// BatchMinDefault and BatchWaitDefault: a partition processes as soon
	// as 50 receipts wait, or 200 ms after the first one arrived.
	BatchMinDefault  = 50
	BatchWaitDefault = 200 * time.Millisecond
	// BatchMinBusyDefault is the batch a partition waits for instead of
	// BatchMin while the process's CPUs are saturated, still no longer
	// than BatchWait. Every batch pays a fixed share of work whatever its
	// size (a Bloom pass, a state read, a write request and its commit, a
	// message lookup, an acknowledgement); under a flood of webhooks, one
	// status each, small batches make that share most of a receipt's
	// cost. Merged states then lag their receipts by up to BatchWait;
	// acknowledgements of Ingest do not wait.
	BatchMinBusyDefault = 1024
	// BatchMaxDefault caps one batch, so a backlog is worked off in large
	// batches (fewer commits) but no batch holds a partition for long.
	BatchMaxDefault = 2048
	// QueueCapDefault bounds the receipts held in memory per partition;
	// beyond it they stay in the durable log and are read back from there.
	QueueCapDefault = 1 << 16
	// AppendHoldDefault bounds how long a busy appender holds a group
	// commit open: a webhook's answer waits for it.
	AppendHoldDefault = 5 * time.Millisecond
	// SpillAfterDefault bounds the backpressure wait of Ingest.
	SpillAfterDefault = 2 * time.Second
	// ReloadPageDefault is how many log entries one read takes back.
	ReloadPageDefault = 4096
	// InboundChargeWindow is how recent an inbound message must be, by its
	// timestamp, to be charged to its account's send rate (OnInbound).
	// Meta counts a user's message against the number's throughput, a
	// per-second rate, when the user sends it; once that moment is past,
	// charging it would only slow our sends without sparing a single
	// 130429. Two seconds cover the timestamp's truncation to whole
	// seconds (up to 1 s) and Meta's delivery latency (rarely over 1 s).
	// Redeliveries and the backlog Meta
	// sends after an outage of our endpoint are older and cost nothing.
	// A timestamp as far ahead of our clock counts as recent (clock skew).
	InboundChargeWindow = 2 * time.Second
)

// Config configures a Pipeline. Store and Registry are required.
type Config struct {
	Store    store.Store
	Registry prometheus.Registerer
	// Settings supply late_window and the degradation switches (bloom,
	// apply_state), read on every batch; without them the defaults apply.
	Settings *settings.Manager
	// LateWindow is used when there are no Settings; default 5 min.
	LateWindow time.Duration
	Logger     *slog.Logger
	// Now is the clock of the merge (late window, UpdatedAt) and of the
	// Bloom buckets; time.Now when nil.
	Now        func() time.Time
	Partitions int
	BatchMin   int
	BatchWait  time.Duration
	BatchMax   int
	// BatchMinBusy replaces BatchMin while the CPUs are saturated (at
	// least batchBusyShare of GOMAXPROCS in use; see BatchMinBusyDefault).
	// It defaults to BatchMinBusyDefault when BatchMin is left to its
	// default, and to BatchMin (no change under load) when BatchMin is
	// set; it is capped at BatchMax.
	BatchMinBusy int
	QueueCap     int
	// SpillAfter is how long Ingest waits for room in a full queue before
	// leaving the receipts to the log; the wait is the backpressure.
	SpillAfter time.Duration
	// AppendHold is how long, at most, the log appender holds a group
	// commit open for more Ingest calls while the CPUs are busy (append.go);
	// default 5 ms, negative: never.
	AppendHold time.Duration
	ReloadPage int
	LRU        LRUConfig
	Bloom      BloomConfig
	// BloomFilter, when set, holds L2 instead of an in-process Bloom
	// (receipts/redisbloom: one filter for every node); Bloom.Now and
	// Bloom.Disabled still apply.
	BloomFilter Filter
	Retry       RetryConfig
	// OnInbound, when set, is given the number of new inbound messages of
	// an account that Meta counted against the number's throughput just
	// now (timestamp within InboundChargeWindow of Now), so the sender can
	// charge them to the account's rate (outbound.Dispatcher.ChargeInbound).
	// It is called after the messages are stored; an error is logged and
	// changes nothing else.
	OnInbound func(ctx context.Context, accountID string, n int) error
	// Stream, when set, is the receipt log (cluster mode, streamed.go):
	// Ingest appends to it, and the pipeline processes the partitions its
	// consumer group assigns this node; Partitions is then the stream's.
	// Unset, the log is the store's (PipelineStore), processed in process.
	// Flush waits for the receipts this node ingested to be processed
	// here, which needs this node to hold their partitions.
	Stream stream.Log
	// Observer, when set, is told about every receipt a batch processed
	// (the benchmark counts applies per receipt with it). It runs on the
	// partition's goroutine and must be quick.
	Observer func([]Processed)
}

// Processed is what processing did with one logged receipt.
type Processed struct {
	Key store.ReceiptKey
	// Duplicate names the layer that found it a duplicate ("" when new).
	Duplicate string
	Decision  Decision
	// Latency is from intake (ReceivedAt) to the batch being committed.
	Latency time.Duration
}

// IngestResult says what Ingest did with the receipts it was given.
type IngestResult struct {
	// Accepted receipts are durable and will be processed.
	Accepted int
	// Duplicates were repeats of a receipt in the same call or of one seen
	// recently (L1); later layers find more, which only metrics show.
	Duplicates int
}

// Pipeline turns receipts into merged current statuses:
//
//	Ingest: normalize → L1 (per-account LRU) → durable append to the
//	        receipt log (one appender group-commits concurrent calls) →
//	        return: the caller's 200 means durable
//	partition processor (one per hash(account) mod Partitions), in batches
//	        of ≥ BatchMin (BatchMinBusy while the CPUs are saturated) or
//	        after BatchWait: L2 Bloom (hits confirmed in the store) → L3
//	        unique insert ∥ Merge → states → outbound message resolution →
//	        late audit → acknowledge (delete) the log entries
//
// The log is the stream: what Ingest acknowledged is in it until processed,
// so a crash between the two is repaired at the next Start, which processes
// whatever the log still holds. Receipts that do not fit a partition's
// memory queue, or arrive while apply_state is off, stay in the log and
// the partition reads them back when it has caught up.
//
// A status whose outbound message is not known yet (the send's response
// has not been recorded) is not lost: its receipt and merged state are
// stored under account and wamid, and the dispatcher applies
// wamux.MessageStatusFor when it records the wamid.
type Pipeline struct {
	cfg Config
	st  store.Store
	set *settings.Manager
	log *slog.Logger
	now func() time.Time
	lru *LRU
	// appends carries Ingest calls to the appender (append.go).
	appends chan *appendReq
	// busy and appendGap decide whether and how long the appender holds
	// a group open (collect), and busy which batch a partition waits for
	// (batchMin); tests replace them.
	busy      func() float64
	appendGap time.Duration
	bloom     Dedupper
	m         *metrics
	c         counters
	parts     []*partition

	paused atomic.Bool // apply_state off
	// backlogUpTo: log ids up to it were left by an earlier run and, when
	// read back, are merged whatever the dedup layers say (see recover).
	// Set when Start finds merging paused and leaves them for later.
	backlogUpTo atomic.Int64
	started     atomic.Bool
	closing     atomic.Bool

	flushMu sync.Mutex
	flushed *sync.Cond // broadcast when processed grows

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	stop   chan struct{}
}

// New builds a pipeline; nothing runs until Start.
func New(cfg Config) (*Pipeline, error) {
	if cfg.Store == nil || cfg.Registry == nil {
		return nil, errors.New("receipts: pipeline needs a Store and a Registry")
	}
	if cfg.Stream != nil {
		cfg.Partitions = cfg.Stream.Partitions()
	}
	cfg.setDefaults()
	lru, err := NewLRU(cfg.LRU)
	if err != nil {
		return nil, err
	}
	if cfg.Bloom.Now == nil {
		cfg.Bloom.Now = cfg.Now
	}
	if cfg.Settings != nil {
		cfg.Bloom.Disabled = !cfg.Settings.Current().Bloom
	}
	var bloom Dedupper
	if cfg.BloomFilter != nil {
		bloom = NewFilterDedup(cfg.BloomFilter, cfg.Bloom.Now, cfg.Logger, !cfg.Bloom.Disabled)
	} else if bloom, err = NewBloom(cfg.Bloom); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{cfg: cfg, st: cfg.Store, set: cfg.Settings, log: cfg.Logger, now: cfg.Now,
		lru: lru, bloom: bloom, m: m, stop: make(chan struct{}), appends: make(chan *appendReq, 1024),
		busy: newCPULoad().busy, appendGap: appendGapDefault}
	p.flushed = sync.NewCond(&p.flushMu)
	for i := range cfg.Partitions {
		p.parts = append(p.parts, newPartition(i, m))
	}
	if cfg.Settings != nil {
		p.paused.Store(!cfg.Settings.Current().ApplyState)
		cfg.Settings.OnChange(func(_, next settings.Values) { p.applySettings(next) })
	}
	return p, nil
}

// setDefaults fills in what c leaves zero and keeps BatchMin and
// BatchMinBusy within BatchMax.
func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	setDefault(&c.Partitions, PartitionsDefault)
	if c.BatchMin <= 0 {
		setDefault(&c.BatchMinBusy, BatchMinBusyDefault)
	}
	setDefault(&c.BatchMin, BatchMinDefault)
	setDefault(&c.BatchMinBusy, c.BatchMin)
	setDefault(&c.BatchMax, BatchMaxDefault)
	setDefault(&c.QueueCap, QueueCapDefault)
	setDefault(&c.ReloadPage, ReloadPageDefault)
	if c.BatchWait <= 0 {
		c.BatchWait = BatchWaitDefault
	}
	if c.SpillAfter <= 0 {
		c.SpillAfter = SpillAfterDefault
	}
	if c.AppendHold == 0 {
		c.AppendHold = AppendHoldDefault
	}
	c.BatchMin = min(c.BatchMin, c.BatchMax)
	c.BatchMinBusy = min(max(c.BatchMinBusy, c.BatchMin), c.BatchMax)
	c.Retry.setDefaults()
}

func setDefault(v *int, d int) {
	if *v <= 0 {
		*v = d
	}
}

// applySettings makes a /v1/config change take effect without restart:
// the Bloom switch at the next batch, apply_state at once (resuming wakes
// every partition, which then reads back what waited in the log).
func (p *Pipeline) applySettings(v settings.Values) {
	p.bloom.SetEnabled(v.Bloom)
	was := p.paused.Swap(!v.ApplyState)
	if was && v.ApplyState {
		for _, pt := range p.parts {
			pt.poke()
		}
	}
}

// Start processes what the log still holds from before (a crash or a stop
// that could not drain), then starts the partition processors. Call it
// before the first Ingest. With apply_state off the backlog waits in the
// log like new receipts do, and is merged once apply_state is on again:
// "later" holds across a restart, which an operator who paused merging
// because the store is struggling counts on. In stream mode it joins the
// stream's consumer group instead (streamed.go).
func (p *Pipeline) Start(ctx context.Context) error {
	if p.started.Swap(true) {
		return errors.New("receipts: pipeline already started")
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if p.cfg.Stream != nil {
		p.wg.Add(1)
		go p.runConsumer()
		return nil
	}
	if p.paused.Load() {
		// The backlog ends at the last id stored now: every later append
		// gets a higher one. It must be known before the first append
		// commits, as a partition may read that entry back before the
		// append returns (SQLite answers it after the fsync).
		end, err := p.logEnd(ctx)
		if err != nil {
			p.cancel()
			return err
		}
		p.backlogUpTo.Store(end)
		for _, pt := range p.parts {
			pt.spill(0)
		}
		p.log.Info("receipts: apply_state is off; receipts left in the log by the last run wait until it is on")
	} else if err := p.recover(ctx); err != nil {
		p.cancel()
		return err
	}
	for _, pt := range p.parts {
		p.wg.Add(1)
		go p.run(pt)
	}
	p.wg.Add(1)
	go p.runAppender()
	return nil
}

// recover processes the entries left in the log by an earlier run. They
// may have been stored (L3) and not merged when the process died, so they
// are merged whatever the dedup layers say: merging a receipt again is a
// no-op (Merge is idempotent), skipping it might lose it.
func (p *Pipeline) recover(ctx context.Context) error {
	var after int64
	total := 0
	for {
		page, err := p.logPage(ctx, after)
		if err != nil {
			return fmt.Errorf("receipts: recover the receipt log: %w", err)
		}
		if len(page) == 0 {
			break
		}
		after = page[len(page)-1].ID
		for start := 0; start < len(page); start += p.cfg.BatchMax {
			batch := page[start:min(start+p.cfg.BatchMax, len(page))]
			if err := p.process(ctx, -1, batch, true); err != nil {
				if transient(err) {
					return fmt.Errorf("receipts: recover the receipt log: %w", err)
				}
				// A receipt the store refuses: dead-letter it, as the
				// partitions do, instead of failing every Start.
				if err := p.recoverPoison(ctx, batch); err != nil {
					return fmt.Errorf("receipts: recover the receipt log: %w", err)
				}
				continue
			}
			if _, err := p.ack(ctx, batch); err != nil {
				return fmt.Errorf("receipts: recover the receipt log: %w", err)
			}
		}
		total += len(page)
	}
	if total > 0 {
		p.log.Info("receipts: processed receipts left in the log by the last run", "count", total)
	}
	return nil
}

// recoverPoison processes a recovered batch the store refused as invalid
// one receipt at a time, dead-lettering (then acknowledging) each one it
// still refuses.
func (p *Pipeline) recoverPoison(ctx context.Context, batch []store.LoggedReceipt) error {
	for i := range batch {
		one := batch[i : i+1]
		if err := p.process(ctx, -1, one, true); err != nil {
			if transient(err) {
				return err
			}
			if err := p.deadLetterUnprocessable(ctx, one[0], err); err != nil {
				return err
			}
		}
		if _, err := p.ack(ctx, one); err != nil {
			return err
		}
	}
	return nil
}

// logPage reads the log's next page after the entry id after, retrying
// transient failures.
func (p *Pipeline) logPage(ctx context.Context, after int64) ([]store.LoggedReceipt, error) {
	var page []store.LoggedReceipt
	err := p.retry(ctx, "read receipt log", func(ctx context.Context) error {
		var err error
		page, err = p.st.ListReceiptLog(ctx, after, p.cfg.ReloadPage)
		return err
	})
	return page, err
}

// logEnd returns the highest id the log holds (0 when empty).
func (p *Pipeline) logEnd(ctx context.Context) (int64, error) {
	var after int64
	for {
		page, err := p.logPage(ctx, after)
		if err != nil {
			return 0, fmt.Errorf("receipts: read the receipt log: %w", err)
		}
		if len(page) == 0 {
			return after, nil
		}
		after = page[len(page)-1].ID
	}
}

// Stop stops intake and lets the partitions work off their queues until
// ctx ends; whatever is left stays in the durable log for the next Start.
func (p *Pipeline) Stop(ctx context.Context) error {
	if !p.started.Load() || p.closing.Swap(true) {
		return nil
	}
	close(p.stop)
	for _, pt := range p.parts {
		pt.poke()
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		p.cancel()
		return nil
	case <-ctx.Done():
		p.cancel()
		<-done
		return fmt.Errorf("receipts: stop: %w", ctx.Err())
	}
}

// Stats returns the counters since New.
func (p *Pipeline) Stats() Stats { return p.c.snapshot() }

// Flush waits until every receipt Ingest accepted so far has been
// processed, or ctx ends.
func (p *Pipeline) Flush(ctx context.Context) error {
	target := p.c.appended.Load()
	stopWake := context.AfterFunc(ctx, func() {
		p.flushMu.Lock()
		p.flushed.Broadcast()
		p.flushMu.Unlock()
	})
	defer stopWake()
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	for p.c.processed.Load() < target {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("receipts: flush: %w", err)
		}
		p.flushed.Wait()
	}
	return nil
}

func (p *Pipeline) markProcessed(pt *partition, n int) {
	if n == 0 {
		return
	}
	pt.processed.Add(int64(n))
	p.c.processed.Add(int64(n))
	p.flushMu.Lock()
	p.flushed.Broadcast()
	p.flushMu.Unlock()
}

// Ingest normalizes receipts, drops repeats (in the call and L1; one
// carrying callback data repeats only a copy that carried some), and
// appends the rest durably: when it returns nil they will be processed,
// across crashes. source is "webhook" or "agent". A receipt that does not
// normalize fails the whole call with EInvalid and nothing is stored;
// callers that must keep the good ones (the webhook) check each with
// Normalize first.
func (p *Pipeline) Ingest(ctx context.Context, source string, rs []wamux.Receipt) (IngestResult, error) {
	if !p.started.Load() || p.closing.Load() {
		return IngestResult{}, wamux.Errorf(wamux.EUnavailable, "the receipt pipeline is not running")
	}
	now := p.now().UTC()
	norm := make([]wamux.Receipt, len(rs))
	for i, r := range rs {
		r.Source = source
		if r.ReceivedAt.IsZero() {
			r.ReceivedAt = now
		}
		if err := Normalize(&r); err != nil {
			return IngestResult{}, wamux.Errorf(wamux.EInvalid, "receipts[%d]: %s", i, wamux.ErrorMessage(err))
		}
		norm[i] = r
	}
	p.c.received.Add(int64(len(norm)))
	p.m.received.WithLabelValues(source).Add(float64(len(norm)))

	var res IngestResult
	keep := norm[:0]
	// A receipt carrying callback data is not a repeat of copies without
	// (copies): it may be the only one that names an unknown send.
	seen := make(copies, len(norm))
	var batchDups, lruDups int
	for _, r := range norm {
		cb := r.CallbackData != ""
		if seen.repeat(keyOf(r), cb) {
			batchDups++
			continue
		}
		if p.lru.Contains(r.AccountID, ReceiptID{MessageID: r.MessageID, Type: r.Type}, cb) {
			lruDups++
			continue
		}
		keep = append(keep, r)
	}
	res.Duplicates = batchDups + lruDups
	p.c.batch.Add(int64(batchDups))
	p.c.lru.Add(int64(lruDups))
	p.m.dedup.WithLabelValues(LayerBatch).Add(float64(batchDups))
	p.m.dedup.WithLabelValues(LayerLRU).Add(float64(lruDups))
	if len(keep) == 0 {
		return res, nil
	}
	appendLog := p.append
	if p.cfg.Stream != nil {
		appendLog = p.appendStreamed
	}
	if err := appendLog(ctx, keep); err != nil {
		return IngestResult{}, fmt.Errorf("receipts: ingest %d receipts: %w", len(keep), err)
	}
	res.Accepted = len(keep)
	return res, nil
}

// dispatch queues logged receipts with their partitions; when a queue
// stays full, or merging is paused, they are left to the log (spilled).
func (p *Pipeline) dispatch(ctx context.Context, ids []int64, rs []wamux.Receipt) {
	// Two passes, so each partition's slice is allocated once at its size.
	of := make([]int, len(rs))
	counts := make([]int, len(p.parts))
	for i := range rs {
		of[i] = p.partitionOf(rs[i].AccountID)
		counts[of[i]]++
	}
	byPart := make([][]store.LoggedReceipt, len(p.parts))
	for pi, n := range counts {
		if n > 0 {
			byPart[pi] = make([]store.LoggedReceipt, 0, n)
		}
	}
	for i := range rs {
		byPart[of[i]] = append(byPart[of[i]], store.LoggedReceipt{ID: ids[i], Receipt: rs[i]})
	}
	for pi, n := range counts {
		if n > 0 {
			p.parts[pi].appended.Add(int64(n))
		}
	}
	paused := p.paused.Load()
	for pi, ls := range byPart {
		if len(ls) > 0 && p.parts[pi].offer(ctx, ls, p.cfg.QueueCap, paused, p.cfg.SpillAfter) {
			p.c.spilled.Add(int64(len(ls)))
		}
	}
}

// partitionOf maps an account to its partition: one account is always
// processed by the same partition, so its receipts never race each other.
func (p *Pipeline) partitionOf(accountID string) int {
	return wamux.PartitionOf(accountID, len(p.parts))
}

func keyOf(r wamux.Receipt) store.ReceiptKey {
	return store.ReceiptKey{MessageID: r.MessageID, AccountID: r.AccountID, Type: r.Type}
}

// noSpill marks a partition with nothing left in the log.
const noSpill = math.MaxInt64

// Appended counts the receipts made durable by Ingest since New in the
// partition that processes accountID; Processed counts that partition's
// log entries processed since New. The dispatcher's compensator compares
// them for the account it resends for: a status that arrived before its
// quiet period ended must be processed before it concludes that none
// came, and only the account's own partition can hold that status, so a
// busy or stalled partition of other accounts neither delays it nor, by
// processing faster, lets it conclude early.
func (p *Pipeline) Appended(accountID string) int64 {
	return p.parts[p.partitionOf(accountID)].appended.Load()
}

// Processed: see Appended.
func (p *Pipeline) Processed(accountID string) int64 {
	return p.parts[p.partitionOf(accountID)].processed.Load()
}

// MergePaused reports whether merging is paused (apply_state off):
// receipts are kept in the log and resolve no message until it is on
// again, so the dispatcher's compensator resends nothing meanwhile.
func (p *Pipeline) MergePaused() bool { return p.paused.Load() }
