package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
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
	obs := newObserver(w.index)
	p, err := receipts.New(receipts.Config{Store: st, Registry: prometheus.NewRegistry(), Logger: cfg.Logger,
		LateWindow: 24 * time.Hour, Observer: obs.observe, Bloom: receipts.BloomConfig{ExpectedPerHour: cfg.BloomPerHour}})
	if err != nil {
		return rep, err
	}
	if err := p.Start(ctx); err != nil {
		return rep, err
	}
	start, cpu0 := time.Now(), processCPU()
	err = feed(ctx, w.stream, cfg.Batch, cfg.Callers, func(ctx context.Context, rs []wamux.Receipt) error {
		_, err := p.Ingest(ctx, "agent", rs)
		return err
	})
	if err == nil {
		err = p.Flush(ctx)
	}
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	stopErr := p.Stop(context.Background())
	if err = errors.Join(err, stopErr); err != nil {
		return rep, fmt.Errorf("bench receipts: pipeline: %w", err)
	}
	rep.ElapsedSec = elapsed.Seconds()
	rep.ReceiptsPerSec = float64(len(w.stream)) / elapsed.Seconds()
	rep.CPUMicrosPerReceipt = float64(cpu.Microseconds()) / float64(len(w.stream))
	s := p.Stats()
	rep.DedupHits = map[string]int64{receipts.LayerBatch: s.DedupBatch, receipts.LayerLRU: s.DedupLRU,
		receipts.LayerBloom: s.DedupBloom, receipts.LayerStore: s.DedupStore}
	rep.BloomFalsePositives, rep.Applied, rep.Ignored, rep.Late = s.BloomFalsePositives, s.Applied, s.Ignored, s.Late
	rep.DoubleApplied = obs.doubleApplied()
	rep.LatencyP50Ms, rep.LatencyP99Ms = obs.percentiles()

	if rep.Lost, rep.FinalStateMismatches, err = verify(ctx, st, w); err != nil {
		return rep, err
	}

	if cfg.NoBaseline {
		return rep, nil
	}
	// Baseline: the same rows, the same batches, straight into a fresh
	// store of the same kind.
	bst, closeBase, err := openBenchStore(ctx, cfg.Store)
	if err != nil {
		return rep, err
	}
	defer closeBase()
	bstart, bcpu0 := time.Now(), processCPU()
	if err := feed(ctx, w.stream, cfg.Batch, cfg.Callers, func(ctx context.Context, rs []wamux.Receipt) error {
		_, err := bst.InsertReceipts(ctx, rs)
		return err
	}); err != nil {
		return rep, fmt.Errorf("bench receipts: baseline: %w", err)
	}
	belapsed, bcpu := time.Since(bstart), processCPU()-bcpu0
	rep.BaselineCPUMicrosPerRow = float64(bcpu.Microseconds()) / float64(len(w.stream))
	rep.BaselineElapsedSec = belapsed.Seconds()
	rep.BaselineRowsPerSec = float64(len(w.stream)) / belapsed.Seconds()
	rep.Ratio = rep.ReceiptsPerSec / rep.BaselineRowsPerSec
	return rep, nil
}

// workload is the generated stream and what it should end in.
type workload struct {
	stream   []wamux.Receipt
	uniq     []wamux.Receipt
	index    map[store.ReceiptKey]int32 // key → position in uniq
	want     map[store.StateKey]wamux.Receipt
	messages int
}

// generateReceipts plans each message's statuses (most: sent, delivered,
// read; some stop at delivered; some fail, a few fail and are delivered
// after all), takes distinct receipts round by round until there are
// N×(1−dup), moves Reorder of them to random places, and inserts the
// duplicates at random places.
func generateReceipts(cfg ReceiptsConfig) (workload, error) {
	rng := mrand.New(mrand.NewPCG(cfg.Seed, 0x5eed))
	nUniq := cfg.Receipts - int(math.Round(float64(cfg.Receipts)*cfg.Dup))
	m := cfg.Messages
	if m <= 0 {
		m = max(2, int(float64(nUniq)/2.6)) // plans average 2.83 receipts
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	plans := make([][]wamux.Receipt, m)
	ids := wamids(cfg.WAMIDs, m, cfg.Seed)
	total := 0
	for i := range plans {
		acc := fmt.Sprintf("acc%02d", i%cfg.Accounts)
		wamid := ids[i]
		at := func(k int) time.Time { return t0.Add(time.Duration(i)*time.Millisecond + time.Duration(k)*time.Minute) }
		r := func(t wamux.ReceiptType, k int) wamux.Receipt {
			return wamux.Receipt{MessageID: wamid, AccountID: acc, Type: t, EventTime: at(k), CallbackData: fmt.Sprintf("msg-%d", i)}
		}
		switch x := rng.Float64(); {
		case x < 0.80:
			plans[i] = []wamux.Receipt{r(wamux.ReceiptSent, 0), r(wamux.ReceiptDelivered, 1), r(wamux.ReceiptRead, 2)}
		case x < 0.92:
			plans[i] = []wamux.Receipt{r(wamux.ReceiptSent, 0), r(wamux.ReceiptDelivered, 1)}
		case x < 0.97:
			f := r(wamux.ReceiptFailed, 1)
			f.ErrorCode, f.ErrorTitle = 131049, "not delivered to maintain healthy ecosystem engagement"
			plans[i] = []wamux.Receipt{r(wamux.ReceiptSent, 0), f}
		default:
			f := r(wamux.ReceiptFailed, 1)
			f.ErrorCode = 131026
			plans[i] = []wamux.Receipt{r(wamux.ReceiptSent, 0), f, r(wamux.ReceiptDelivered, 2)}
		}
		total += len(plans[i])
	}
	if total < nUniq {
		return workload{}, fmt.Errorf("%d messages carry at most %d distinct receipts; %d needed (raise --messages)", m, total, nUniq)
	}
	w := workload{messages: m, index: make(map[store.ReceiptKey]int32, nUniq)}
	for round := 0; len(w.uniq) < nUniq; round++ {
		for i := range plans {
			if round < len(plans[i]) && len(w.uniq) < nUniq {
				w.uniq = append(w.uniq, plans[i][round])
			}
		}
	}
	// Positions: distinct receipts in order, a share of them moved; the
	// duplicates anywhere.
	type placed struct {
		pos float64
		r   int32
	}
	order := make([]placed, 0, cfg.Receipts)
	for i := range w.uniq {
		pos := float64(i)
		if rng.Float64() < cfg.Reorder {
			pos = rng.Float64() * float64(len(w.uniq))
		}
		order = append(order, placed{pos, int32(i)})
	}
	for len(order) < cfg.Receipts {
		order = append(order, placed{rng.Float64() * float64(len(w.uniq)), int32(rng.IntN(len(w.uniq)))})
	}
	sort.SliceStable(order, func(a, b int) bool { return order[a].pos < order[b].pos })
	w.stream = make([]wamux.Receipt, len(order))
	for i, o := range order {
		w.stream[i] = w.uniq[o.r]
	}
	for i, r := range w.uniq {
		w.index[store.ReceiptKey{MessageID: r.MessageID, AccountID: r.AccountID, Type: r.Type}] = int32(i)
	}
	w.want = expectedStates(w.uniq)
	return w, nil
}

// benchRank is the merge order written out here, apart from the merge code
// whose result it checks: sent < failed < delivered < read.
var benchRank = map[wamux.ReceiptType]int{wamux.ReceiptSent: 0, wamux.ReceiptFailed: 1, wamux.ReceiptDelivered: 2, wamux.ReceiptRead: 3}

// expectedStates is, per message, the greatest receipt by (strength,
// event time, error code).
func expectedStates(rs []wamux.Receipt) map[store.StateKey]wamux.Receipt {
	out := make(map[store.StateKey]wamux.Receipt, len(rs)/2)
	for _, r := range rs {
		k := store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}
		c, ok := out[k]
		if !ok || benchRank[r.Type] > benchRank[c.Type] ||
			(benchRank[r.Type] == benchRank[c.Type] && (r.EventTime.After(c.EventTime) ||
				(r.EventTime.Equal(c.EventTime) && r.ErrorCode > c.ErrorCode))) {
			out[k] = r
		}
	}
	return out
}

// feed hands the stream out in order, batch by batch, to concurrent
// callers.
func feed(ctx context.Context, stream []wamux.Receipt, batch, callers int, call func(context.Context, []wamux.Receipt) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(int64(batch))) - batch
				if i >= len(stream) || ctx.Err() != nil {
					return
				}
				if err := call(ctx, stream[i:min(i+batch, len(stream))]); err != nil {
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
	index   map[store.ReceiptKey]int32
	mu      sync.Mutex
	applies []uint8
	lat     []float32 // ms, of receipts merged
}

func newObserver(index map[store.ReceiptKey]int32) *observer {
	return &observer{index: index, applies: make([]uint8, len(index)), lat: make([]float32, 0, len(index))}
}

func (o *observer) observe(ps []receipts.Processed) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if p.Duplicate != "" {
			continue
		}
		o.lat = append(o.lat, float32(p.Latency.Seconds()*1000))
		if p.Decision == receipts.Apply {
			if i, ok := o.index[p.Key]; ok && o.applies[i] < 255 {
				o.applies[i]++
			}
		}
	}
}

func (o *observer) doubleApplied() int {
	n := 0
	for _, a := range o.applies {
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
func verify(ctx context.Context, st store.Store, w workload) (lost, mismatches int, err error) {
	const chunk = 5000
	keys := make([]store.ReceiptKey, 0, chunk)
	for start := 0; start < len(w.uniq); start += chunk {
		keys = keys[:0]
		for _, r := range w.uniq[start:min(start+chunk, len(w.uniq))] {
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
	all := make([]store.StateKey, 0, len(w.want))
	for k := range w.want {
		all = append(all, k)
	}
	for start := 0; start < len(all); start += chunk {
		part := all[start:min(start+chunk, len(all))]
		got, err := st.GetStates(ctx, part)
		if err != nil {
			return 0, 0, fmt.Errorf("bench receipts: verify: %w", err)
		}
		for _, k := range part {
			g, ok := got[k]
			e := w.want[k]
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
	if !strings.HasPrefix(spec, "postgres://") && !strings.HasPrefix(spec, "postgresql://") {
		return nil, nil, fmt.Errorf(`--store must be "sqlite" or a PostgreSQL URL`)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "wamux_bench_" + hex.EncodeToString(b)
	st, err := postgres.Open(ctx, spec, postgres.Options{Schema: schema})
	if err != nil {
		return nil, nil, err
	}
	return st, func() {
		_, _ = st.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		st.Close()
	}, nil
}
