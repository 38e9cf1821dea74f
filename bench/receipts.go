package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/postgres"
	"github.com/wamux/wamux/store/sqlite"
)

// ReceiptsConfig configures `wamux bench receipts`.
type ReceiptsConfig struct {
	// Receipts is N, all receipts fed, duplicates included.
	Receipts int
	// Messages is M; 0 picks enough for the distinct receipts (about a
	// third of them: sent, delivered, read).
	Messages int
	// Dup is the share of the N receipts that repeat another; Reorder the
	// share of the distinct ones moved to a random place in the stream.
	Dup, Reorder float64
	// Store is "sqlite" (a fresh file in a temporary directory) or a
	// PostgreSQL URL (a fresh schema, dropped afterwards).
	Store    string
	Accounts int
	// Batch receipts per Ingest call, from Callers concurrent callers (the
	// shape of agents' batches or of webhooks arriving together).
	Batch   int
	Callers int
	Seed    uint64
	// WAMIDs is WAMIDsRandom (the default) or WAMIDsSequential.
	WAMIDs string
	// BloomPerHour sizes L2 (receipts.BloomConfig.ExpectedPerHour); 0
	// keeps the gateway's default. The generated stream's event times
	// fall within about one hour, so all distinct keys share one bucket.
	BloomPerHour uint
	// NoBaseline skips the raw-insert baseline (its fields stay zero), so
	// that a CPU profile of the run shows the pipeline alone.
	NoBaseline bool
	Logger     *slog.Logger
}

func (c *ReceiptsConfig) setDefaults() error {
	if c.Receipts <= 0 {
		c.Receipts = 1_000_000
	}
	if c.Dup < 0 || c.Dup >= 1 || c.Reorder < 0 || c.Reorder > 1 {
		return fmt.Errorf("--dup must be in [0, 1) and --reorder in [0, 1]")
	}
	if c.Store == "" {
		c.Store = "sqlite"
	}
	if c.Accounts <= 0 {
		c.Accounts = 10
	}
	if c.Batch <= 0 {
		c.Batch = 100
	}
	if c.Callers <= 0 {
		c.Callers = 32
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var err error
	c.WAMIDs, err = checkWAMIDs(c.WAMIDs)
	return err
}

// ReceiptsReport is what the benchmark measured.
type ReceiptsReport struct {
	Store       string  `json:"store"`
	Receipts    int     `json:"receipts"`
	Distinct    int     `json:"distinct_receipts"`
	Messages    int     `json:"messages"`
	DupRate     float64 `json:"dup_rate"`
	ReorderRate float64 `json:"reorder_rate"`
	Batch       int     `json:"batch"`
	Callers     int     `json:"callers"`
	WAMIDs      string  `json:"wamids"`
	// BloomPerHour is what L2 was sized for (the default when not set).
	BloomPerHour uint `json:"bloom_per_hour"`

	ElapsedSec     float64 `json:"elapsed_sec"`
	ReceiptsPerSec float64 `json:"receipts_per_sec"`
	// CPUMicrosPerReceipt is the process's CPU time (user + system) from
	// the first Ingest until every receipt is merged, per receipt fed;
	// BaselineCPUMicrosPerRow the same for the baseline's inserts. On a
	// shared machine they vary less than the rates, whose wall clock
	// includes waiting for a core.
	CPUMicrosPerReceipt float64 `json:"cpu_us_per_receipt"`

	Lost                 int `json:"lost"`
	DoubleApplied        int `json:"double_applied"`
	FinalStateMismatches int `json:"final_state_mismatches"`

	DedupHits           map[string]int64 `json:"dedup_hits"`
	BloomFalsePositives int64            `json:"bloom_false_positives"`
	Applied             int64            `json:"applied"`
	Ignored             int64            `json:"ignored"`
	Late                int64            `json:"late"`
	LatencyP50Ms        float64          `json:"latency_p50_ms"`
	LatencyP99Ms        float64          `json:"latency_p99_ms"`

	BaselineRowsPerSec float64 `json:"baseline_rows_per_sec"`
	BaselineElapsedSec float64 `json:"baseline_elapsed_sec"`
	// BaselineCPUMicrosPerRow: see CPUMicrosPerReceipt.
	BaselineCPUMicrosPerRow float64 `json:"baseline_cpu_us_per_row"`
	Ratio                   float64 `json:"ratio_to_baseline"`
}

// RunReceipts feeds N receipts over M messages, with duplicates and
// reordering, through the real pipeline (receipts.Pipeline.Ingest onward,
// on a real store) and checks the result against states computed here
// independently of the merge code; then it inserts the same rows, in the
// same batches, straight into a fresh store of the same kind: the baseline.
func RunReceipts(ctx context.Context, cfg ReceiptsConfig) (ReceiptsReport, error) {
	if err := cfg.setDefaults(); err != nil {
		return ReceiptsReport{}, err
	}
	w, err := generateReceipts(cfg)
	if err != nil {
		return ReceiptsReport{}, err
	}
	rep := ReceiptsReport{Store: storeKind(cfg.Store), Receipts: len(w.stream), Distinct: len(w.uniq), Messages: w.messages,
		DupRate: cfg.Dup, ReorderRate: cfg.Reorder, Batch: cfg.Batch, Callers: cfg.Callers, WAMIDs: cfg.WAMIDs,
		BloomPerHour: cfg.BloomPerHour}
	if rep.BloomPerHour == 0 {
		rep.BloomPerHour = receipts.BloomExpectedPerHourDefault
	}

	st, closeStore, err := openBenchStore(ctx, cfg.Store)
	if err != nil {
		return rep, err
	}
	defer closeStore()
	if err := runReceiptsPipeline(ctx, cfg, w, st, &rep); err != nil {
		return rep, err
	}
	if rep.Lost, rep.FinalStateMismatches, err = verify(ctx, st, w); err != nil {
		return rep, err
	}
	if cfg.NoBaseline {
		return rep, nil
	}
	err = runReceiptsBaseline(ctx, cfg, w, &rep)
	return rep, err
}

// runReceiptsPipeline feeds the stream through the pipeline on st and
// fills rep's figures of the pipeline.
func runReceiptsPipeline(ctx context.Context, cfg ReceiptsConfig, w *workload, st store.Store, rep *ReceiptsReport) error {
	obs := newObserver(w)
	writes := countStateWrites(st, w)
	p, err := receipts.New(receipts.Config{Store: writes.store(), Registry: prometheus.NewRegistry(), Logger: cfg.Logger,
		LateWindow: 24 * time.Hour, Observer: obs.observe, Bloom: receipts.BloomConfig{ExpectedPerHour: cfg.BloomPerHour}})
	if err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	start, cpu0 := time.Now(), processCPU()
	err = feed(ctx, w, cfg.Batch, cfg.Callers, func(ctx context.Context, rs []wamux.Receipt) error {
		_, err := p.Ingest(ctx, "agent", rs)
		return err
	})
	if err == nil {
		err = p.Flush(ctx)
	}
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	stopErr := p.Stop(context.Background())
	if err = errors.Join(err, stopErr); err != nil {
		return fmt.Errorf("bench receipts: pipeline: %w", err)
	}
	rep.ElapsedSec = elapsed.Seconds()
	rep.ReceiptsPerSec = float64(len(w.stream)) / elapsed.Seconds()
	rep.CPUMicrosPerReceipt = float64(cpu.Microseconds()) / float64(len(w.stream))
	s := p.Stats()
	rep.DedupHits = map[string]int64{receipts.LayerBatch: s.DedupBatch, receipts.LayerLRU: s.DedupLRU,
		receipts.LayerBloom: s.DedupBloom, receipts.LayerStore: s.DedupStore}
	rep.BloomFalsePositives, rep.Applied, rep.Ignored, rep.Late = s.BloomFalsePositives, s.Applied, s.Ignored, s.Late
	rep.DoubleApplied = doubleApplied(obs, writes)
	rep.LatencyP50Ms, rep.LatencyP99Ms = obs.percentiles()
	return nil
}

// runReceiptsBaseline inserts the same rows, in the same batches, straight
// into a fresh store of the same kind, and fills rep's baseline figures.
func runReceiptsBaseline(ctx context.Context, cfg ReceiptsConfig, w *workload, rep *ReceiptsReport) error {
	bst, closeBase, err := openBenchStore(ctx, cfg.Store)
	if err != nil {
		return err
	}
	defer closeBase()
	bstart, bcpu0 := time.Now(), processCPU()
	if err := feed(ctx, w, cfg.Batch, cfg.Callers, func(ctx context.Context, rs []wamux.Receipt) error {
		_, err := bst.InsertReceipts(ctx, rs)
		return err
	}); err != nil {
		return fmt.Errorf("bench receipts: baseline: %w", err)
	}
	belapsed, bcpu := time.Since(bstart), processCPU()-bcpu0
	rep.BaselineCPUMicrosPerRow = float64(bcpu.Microseconds()) / float64(len(w.stream))
	rep.BaselineElapsedSec = belapsed.Seconds()
	rep.BaselineRowsPerSec = float64(len(w.stream)) / belapsed.Seconds()
	rep.Ratio = rep.ReceiptsPerSec / rep.BaselineRowsPerSec
	return nil
}

// workload is the generated stream and what it should end in. It holds
// no pointers but a few large strings: message ids and callback data are
// spans of one string, receipts small records, the stream positions. The
// benchmark keeps a million receipts alive for the whole run; held as
// wamux.Receipt values (seven strings each) they were most of a 650 MB
// heap that the collector marked again in every cycle, CPU charged to the
// pipeline that a gateway's heap does not carry. receipt builds the
// wamux.Receipt a caller hands over, without allocating.
type workload struct {
	text     string // every message id and callback datum, back to back
	accounts []string
	msgs     []benchMessage
	uniq     []benchReceipt   // distinct receipts, in generation order
	stream   []int32          // positions in uniq, in feeding order
	index    map[uint64]int32 // hashed receipt key → position in uniq
	seed     maphash.Seed
	want     []int32 // per message, the position in uniq of its expected state
	t0       time.Time
	messages int
}

// span is a substring of workload.text.
type span struct{ off, n uint32 }

type benchMessage struct {
	id, callback span
	account      uint16
}

// benchReceipt is one distinct receipt: its message, its type (index in
// benchTypes), its event time in minutes after the message's start, and
// its error code (the title follows from it, benchTitle).
type benchReceipt struct {
	msg     int32
	typ     uint8
	minutes uint8
	code    int32
}

var benchTypes = [...]wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptDelivered, wamux.ReceiptRead, wamux.ReceiptFailed}

const (
	bSent = iota
	bDelivered
	bRead
	bFailed
)

func benchTitle(code int32) string {
	if code == 131049 {
		return "not delivered to maintain healthy ecosystem engagement"
	}
	return ""
}

func (w *workload) str(s span) string { return w.text[s.off : s.off+s.n] }

// receipt returns distinct receipt i as the gateway receives it.
func (w *workload) receipt(i int32) wamux.Receipt {
	r := w.uniq[i]
	m := &w.msgs[r.msg]
	return wamux.Receipt{MessageID: w.str(m.id), AccountID: w.accounts[m.account], Type: benchTypes[r.typ],
		EventTime:    w.t0.Add(time.Duration(r.msg)*time.Millisecond + time.Duration(r.minutes)*time.Minute),
		CallbackData: w.str(m.callback), ErrorCode: int(r.code), ErrorTitle: benchTitle(r.code)}
}

func (w *workload) hashKey(messageID, accountID string, t wamux.ReceiptType) uint64 {
	var h maphash.Hash
	h.SetSeed(w.seed)
	h.WriteString(messageID)
	h.WriteByte(0)
	h.WriteString(accountID)
	h.WriteByte(0)
	h.WriteString(string(t))
	return h.Sum64()
}

// generateReceipts plans each message's statuses (most: sent, delivered,
// read; some stop at delivered; some fail, a few fail and are delivered
// after all), takes distinct receipts round by round until there are
// N×(1−dup), moves Reorder of them to random places, and inserts the
// duplicates at random places.
func generateReceipts(cfg ReceiptsConfig) (*workload, error) {
	rng := mrand.New(mrand.NewPCG(cfg.Seed, 0x5eed))
	nUniq := cfg.Receipts - int(math.Round(float64(cfg.Receipts)*cfg.Dup))
	m := cfg.Messages
	if m <= 0 {
		m = max(2, int(float64(nUniq)/2.6)) // plans average 2.83 receipts
	}
	w := &workload{messages: m, t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), msgs: make([]benchMessage, m)}
	for a := range cfg.Accounts {
		w.accounts = append(w.accounts, fmt.Sprintf("acc%02d", a))
	}
	var text strings.Builder
	add := func(s string) span {
		sp := span{uint32(text.Len()), uint32(len(s))}
		text.WriteString(s)
		return sp
	}
	plans := make([][]benchReceipt, m)
	ids := wamids(cfg.WAMIDs, m, cfg.Seed)
	total := 0
	for i := range plans {
		w.msgs[i] = benchMessage{id: add(ids[i]), callback: add("msg-" + strconv.Itoa(i)), account: uint16(i % cfg.Accounts)}
		plans[i] = planStatuses(rng, int32(i))
		total += len(plans[i])
	}
	ids = nil
	if total < nUniq {
		return nil, fmt.Errorf("%d messages carry at most %d distinct receipts; %d needed (raise --messages)", m, total, nUniq)
	}
	w.text = text.String()
	w.uniq = roundRobin(plans, nUniq)
	plans = nil
	w.stream = placeReceipts(rng, len(w.uniq), cfg.Receipts, cfg.Reorder)
	// A 64-bit hash collision among a million keys is unlikely (about
	// 1 in 10^7); should one occur, another seed.
	for attempt := 0; ; attempt++ {
		if w.indexKeys() {
			break
		}
		if attempt == 3 {
			return nil, errors.New("bench receipts: receipt key hashes collide")
		}
	}
	w.want = expectedStates(w)
	return w, nil
}

// planStatuses draws the statuses message msg receives: most sent,
// delivered, read; some stop at delivered; some fail, a few fail and are
// delivered after all.
func planStatuses(rng *mrand.Rand, msg int32) []benchReceipt {
	r := func(t uint8, k uint8) benchReceipt { return benchReceipt{msg: msg, typ: t, minutes: k} }
	switch x := rng.Float64(); {
	case x < 0.80:
		return []benchReceipt{r(bSent, 0), r(bDelivered, 1), r(bRead, 2)}
	case x < 0.92:
		return []benchReceipt{r(bSent, 0), r(bDelivered, 1)}
	case x < 0.97:
		// Failed is final against sent, even a sent stamped later.
		f := r(bFailed, 1)
		f.code = 131049
		sent := r(bSent, 0)
		if rng.IntN(2) == 0 {
			sent.minutes = 2
		}
		return []benchReceipt{sent, f}
	default:
		// Delivered beats failed whichever event came first: half the
		// time the failure is stamped after the delivery, so that a
		// merge ordering by event time before strength is caught.
		f := r(bFailed, 1)
		f.code = 131026
		d := r(bDelivered, 2)
		if rng.IntN(2) == 0 {
			f.minutes, d.minutes = 2, 1
		}
		return []benchReceipt{r(bSent, 0), f, d}
	}
}

// roundRobin takes n receipts from plans: every message's first, then
// every message's second, and so on.
func roundRobin(plans [][]benchReceipt, n int) []benchReceipt {
	uniq := make([]benchReceipt, 0, n)
	for round := 0; len(uniq) < n; round++ {
		for i := range plans {
			if round < len(plans[i]) && len(uniq) < n {
				uniq = append(uniq, plans[i][round])
			}
		}
	}
	return uniq
}

// placeReceipts orders a stream of total receipts, as positions in the
// distinct ones: the distinct receipts in order, a share reorder of them
// moved to random places, and the duplicates anywhere.
func placeReceipts(rng *mrand.Rand, distinct, total int, reorder float64) []int32 {
	type placed struct {
		pos float64
		r   int32
	}
	order := make([]placed, 0, total)
	for i := range distinct {
		pos := float64(i)
		if rng.Float64() < reorder {
			pos = rng.Float64() * float64(distinct)
		}
		order = append(order, placed{pos, int32(i)})
	}
	for len(order) < total {
		order = append(order, placed{rng.Float64() * float64(distinct), int32(rng.IntN(distinct))})
	}
	sort.SliceStable(order, func(a, b int) bool { return order[a].pos < order[b].pos })
	stream := make([]int32, len(order))
	for i, o := range order {
		stream[i] = o.r
	}
	return stream
}

// indexKeys hashes every distinct receipt's key with a fresh seed; false
// when two collide.
func (w *workload) indexKeys() bool {
	w.seed = maphash.MakeSeed()
	w.index = make(map[uint64]int32, len(w.uniq))
	for i := range w.uniq {
		r := w.receipt(int32(i))
		h := w.hashKey(r.MessageID, r.AccountID, r.Type)
		if _, dup := w.index[h]; dup {
			return false
		}
		w.index[h] = int32(i)
	}
	return true
}

// benchRank is the merge order written out here, apart from the merge code
// whose result it checks: sent < failed < delivered < read.
var benchRank = map[wamux.ReceiptType]int{wamux.ReceiptSent: 0, wamux.ReceiptFailed: 1, wamux.ReceiptDelivered: 2, wamux.ReceiptRead: 3}

// expectedStates is, per message, the position in uniq of its greatest
// receipt by (strength, event time, error code).
func expectedStates(w *workload) []int32 {
	out := make([]int32, w.messages)
	for i := range out {
		out[i] = -1
	}
	for i := range w.uniq {
		r := w.receipt(int32(i))
		m := w.uniq[i].msg
		if out[m] < 0 {
			out[m] = int32(i)
			continue
		}
		c := w.receipt(out[m])
		if benchRank[r.Type] > benchRank[c.Type] ||
			(benchRank[r.Type] == benchRank[c.Type] && (r.EventTime.After(c.EventTime) ||
				(r.EventTime.Equal(c.EventTime) && r.ErrorCode > c.ErrorCode))) {
			out[m] = int32(i)
		}
	}
	return out
}

// feed hands the stream out in order, batch by batch, to concurrent
// callers; each caller builds its batch in a slice of its own, which the
// call must not keep.
func feed(ctx context.Context, w *workload, batch, callers int, call func(context.Context, []wamux.Receipt) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]wamux.Receipt, 0, batch)
			for {
				i := int(next.Add(int64(batch))) - batch
				if i >= len(w.stream) || ctx.Err() != nil {
					return
				}
				buf = buf[:0]
				for _, u := range w.stream[i:min(i+batch, len(w.stream))] {
					buf = append(buf, w.receipt(u))
				}
				if err := call(ctx, buf); err != nil {
					errs[c] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}

// observer counts applies per distinct receipt and keeps latencies.
type observer struct {
	mu      sync.Mutex
	applies *tally
	lat     []float32 // ms, of receipts merged
}

func newObserver(w *workload) *observer {
	return &observer{applies: newTally(w), lat: make([]float32, 0, len(w.uniq))}
}

func (o *observer) observe(ps []receipts.Processed) {
	// The hashing runs before the lock: the pipeline's partitions call
	// this from their own goroutines, and its cost is the benchmark's.
	lat := make([]float32, 0, len(ps))
	applied := make([]uint64, 0, len(ps))
	for _, p := range ps {
		if p.Duplicate != "" {
			continue
		}
		lat = append(lat, float32(p.Latency.Seconds()*1000))
		if p.Decision == receipts.Apply {
			applied = append(applied, o.applies.w.hashKey(p.Key.MessageID, p.Key.AccountID, p.Key.Type))
		}
	}
	o.applies.record(applied)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lat = append(o.lat, lat...)
}

// tally counts keys per distinct receipt. record only keeps the keys'
// hashes, which the pipeline's goroutines compute while the caches hold
// the key's strings; counts looks them up in the workload's index of
// hashes once the timed run is over, so that those lookups, a cache miss
// or two each, are not charged to the pipeline. A hash that is not in the index (a key the workload never
// had) is not counted: the index holds no colliding hashes, and a foreign
// key matches one by chance with odds of about 1 in 2^44.
type tally struct {
	w       *workload
	mu      sync.Mutex
	pending []uint64
	n       []uint8 // by position in uniq; saturates at 255
}

func newTally(w *workload) *tally {
	return &tally{w: w, n: make([]uint8, len(w.uniq))}
}

func (t *tally) record(hs []uint64) {
	if len(hs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = append(t.pending, hs...)
}

// counts folds in the hashes recorded so far and returns the counts.
func (t *tally) counts() []uint8 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range t.pending {
		if i, ok := t.w.index[h]; ok && t.n[i] < 255 {
			t.n[i]++
		}
	}
	t.pending = t.pending[:0]
	return t.n
}

// stateWrites counts, per distinct receipt, the successful store writes of
// a state made from it, as the store is asked to make them: what the
// pipeline did, not what it reports to the observer. A receipt whose
// state is written twice was applied twice, even when the pipeline calls
// it a duplicate afterwards (L3 finds it stored once the merge has run).
type stateWrites struct {
	store.Store
	writes *tally
}

// stateWritesRSW keeps the store's combined write, so that the pipeline
// takes the same path as on the bare store.
type stateWritesRSW struct {
	*stateWrites
	both store.ReceiptStateWriter
}

func countStateWrites(st store.Store, w *workload) *stateWrites {
	return &stateWrites{Store: st, writes: newTally(w)}
}

func (c *stateWrites) store() store.Store {
	if both, ok := c.Store.(store.ReceiptStateWriter); ok {
		return stateWritesRSW{c, both}
	}
	return c
}

func (c *stateWrites) count(states []store.MessageState) {
	hs := make([]uint64, len(states))
	for j, s := range states {
		hs[j] = c.writes.w.hashKey(s.MessageID, s.AccountID, s.Type)
	}
	c.writes.record(hs)
}

func (c *stateWrites) PutStates(ctx context.Context, states []store.MessageState) error {
	err := c.Store.PutStates(ctx, states)
	if err == nil {
		c.count(states)
	}
	return err
}

func (c stateWritesRSW) InsertReceiptsPutStates(ctx context.Context, rs []wamux.Receipt, states []store.MessageState) ([]bool, error) {
	fresh, err := c.both.InsertReceiptsPutStates(ctx, rs, states)
	if err == nil {
		c.count(states)
	}
	return fresh, err
}

// doubleApplied counts distinct receipts applied more than once, by the
// pipeline's own report or by the state writes the store saw.
func doubleApplied(o *observer, c *stateWrites) int {
	n := 0
	writes := c.writes.counts()
	for i, a := range o.applies.counts() {
		if a > 1 || writes[i] > 1 {
			n++
		}
	}
	return n
}

func (o *observer) doubleApplied() int {
	n := 0
	for _, a := range o.applies.counts() {
		if a > 1 {
			n++
		}
	}
	return n
}

func (o *observer) percentiles() (p50, p99 float64) {
	if len(o.lat) == 0 {
		return 0, 0
	}
	s := slices.Clone(o.lat)
	slices.Sort(s)
	at := func(q float64) float64 { return float64(s[min(len(s)-1, int(q*float64(len(s))))]) }
	return at(0.50), at(0.99)
}

// verify counts distinct receipts missing from the store and messages
// whose stored state is not the expected one.
func verify(ctx context.Context, st store.Store, w *workload) (lost, mismatches int, err error) {
	const chunk = 5000
	keys := make([]store.ReceiptKey, 0, chunk)
	for start := 0; start < len(w.uniq); start += chunk {
		keys = keys[:0]
		for i := start; i < min(start+chunk, len(w.uniq)); i++ {
			r := w.receipt(int32(i))
			keys = append(keys, store.ReceiptKey{MessageID: r.MessageID, AccountID: r.AccountID, Type: r.Type})
		}
		has, err := st.HasReceipts(ctx, keys)
		if err != nil {
			return 0, 0, fmt.Errorf("bench receipts: verify: %w", err)
		}
		for _, h := range has {
			if !h {
				lost++
			}
		}
	}
	var want []wamux.Receipt
	for _, u := range w.want {
		if u >= 0 {
			want = append(want, w.receipt(u))
		}
	}
	part := make([]store.StateKey, 0, chunk)
	for start := 0; start < len(want); start += chunk {
		part = part[:0]
		for _, e := range want[start:min(start+chunk, len(want))] {
			part = append(part, store.StateKey{AccountID: e.AccountID, MessageID: e.MessageID})
		}
		got, err := st.GetStates(ctx, part)
		if err != nil {
			return 0, 0, fmt.Errorf("bench receipts: verify: %w", err)
		}
		for j, k := range part {
			g, ok := got[k]
			e := want[start+j]
			if !ok || g.Type != e.Type || !g.EventTime.Equal(e.EventTime) || g.ErrorCode != e.ErrorCode {
				mismatches++
			}
		}
	}
	return lost, mismatches, nil
}

func storeKind(s string) string {
	if s == "sqlite" {
		return "sqlite"
	}
	return "postgres"
}

// openBenchStore opens a fresh, empty store: a new SQLite file in a
// temporary directory, or a new schema on the PostgreSQL server.
func openBenchStore(ctx context.Context, spec string) (store.Store, func(), error) {
	if spec == "sqlite" {
		dir, err := os.MkdirTemp("", "wamux-bench-")
		if err != nil {
			return nil, nil, err
		}
		st, err := sqlite.Open(ctx, filepath.Join(dir, "wamux.db"), sqlite.Options{})
		if err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
		return st, func() { st.Close(); os.RemoveAll(dir) }, nil
	}
	url, drop, err := benchSchema(ctx, spec)
	if err != nil {
		return nil, nil, err
	}
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		drop()
		return nil, nil, err
	}
	return st, func() { st.Close(); drop() }, nil
}
