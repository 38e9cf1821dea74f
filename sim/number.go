package sim

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// number is the live state of one simulated phone number. Everything that
// changes per request is guarded by mu, so numbers never contend with each
// other and rate accounting stays exact.
type number struct {
	id      string
	token   string
	display string
	waba    string
	limits  Limits
	rate    gcra
	pair    pairLimit

	// faults and codes (its sorted code list) are guarded by mu, since
	// SetFaults may change them while requests run.
	faults Faults
	codes  []int

	mu  sync.Mutex
	tat int64 // throughput GCRA state
	// second holds the times (unix ns) of the last len(second) accepted
	// messages, oldest at secondNext, when limits.StrictSecond is set.
	second     []int64
	secondNext int
	pairs      map[string]pairState // pair limit state per recipient
	// windows holds when each user last wrote (unix ns on the sim's
	// clock): the customer-service window; windowPruneAt as pruneAt.
	windows       map[string]int64
	windowPruneAt int
	// pruneAt is the pairs size that triggers the next prune; doubling it
	// keeps pruning amortised O(1) per send however many pairs are live.
	pruneAt int
	rng     *rand.Rand
	st      numberStats
	// msgs holds accepted messages in fixed-size chunks, so recording
	// never copies what is already stored (a growing slice would, and at
	// tens of thousands of sends per second that copying dominated).
	msgs [][]Message
}

const msgChunk = 4096

func (nb *number) record(m Message) {
	if n := len(nb.msgs); n == 0 || len(nb.msgs[n-1]) == msgChunk {
		nb.msgs = append(nb.msgs, make([]Message, 0, msgChunk))
	}
	last := &nb.msgs[len(nb.msgs)-1]
	*last = append(*last, m)
}

// numberStats is the ground truth kept per number.
type numberStats struct {
	requests      int64
	accepted      int64
	rejected      map[int]int64
	overLimit     int64 // 130429
	pairOverLimit int64 // 131056
	duplicates    int64 // accepted with callback data accepted before
	inbound       int64 // user messages to the number (Inbound)
	inboundByType map[string]int64
	windowClosed  int64 // accepted, then failed with 131047
	reads         int64 // inbound messages marked as read
	readsRejected int64 // mark-as-read requests answered with an error
	faults        map[string]int64
	sec           int64 // current clock second
	secRequests   int64
	secAccepted   int64
	peakRequests  int64
	peakAccepted  int64
}

func newNumber(n Number, defaults Limits, faults Faults, seed uint64) *number {
	l := defaults.over(n.Limits)
	h := fnv.New64a()
	h.Write([]byte(n.PhoneNumberID))
	sum := h.Sum64()
	display, waba := n.DisplayPhoneNumber, n.WABAID
	if display == "" {
		display = "1555" + strconv.FormatUint(sum%10_000_000, 10)
	}
	if waba == "" {
		waba = strconv.FormatUint(100_000_000_000_000+sum%900_000_000_000_000, 10)
	}
	nb := &number{
		id: n.PhoneNumberID, token: n.AccessToken, display: display, waba: waba, limits: l,
		rate: newGCRA(time.Duration(float64(time.Second)/l.Rate), l.Burst),
		pair: newPairLimit(l.PairInterval, l.PairBurst),
		rng:  rand.New(rand.NewPCG(seed, sum)),
	}
	if n.Faults != nil {
		faults = *n.Faults
	}
	nb.setFaultsLocked(faults)
	nb.resetLocked(seed)
	return nb
}

// resetLocked forgets limits, stats and records; the caller holds mu (or
// owns nb exclusively).
func (nb *number) resetLocked(seed uint64) {
	nb.tat = 0
	nb.second, nb.secondNext = nil, 0
	if nb.limits.StrictSecond {
		// Times far in the past: the first second may hold them all.
		nb.second = make([]int64, max(1, int(nb.limits.Rate)))
		for i := range nb.second {
			nb.second[i] = math.MinInt64
		}
	}
	nb.pairs = make(map[string]pairState)
	nb.pruneAt = pruneFloor
	nb.windows = make(map[string]int64)
	nb.windowPruneAt = pruneFloor
	h := fnv.New64a()
	h.Write([]byte(nb.id))
	nb.rng = rand.New(rand.NewPCG(seed, h.Sum64()))
	nb.st = numberStats{rejected: make(map[int]int64), faults: make(map[string]int64), inboundByType: make(map[string]int64)}
	nb.msgs = nil
}

func (nb *number) setFaultsLocked(f Faults) {
	nb.faults = f
	nb.codes = f.sortedCodes()
}

// secondFull reports whether a message accepted at now would make more
// than the strict limit in the second (now-1s, now]. The caller holds mu.
func (nb *number) secondFull(now int64) bool {
	return nb.second != nil && nb.second[nb.secondNext] > now-int64(time.Second)
}

// secondTake records a message accepted at now for secondFull. The caller
// holds mu.
func (nb *number) secondTake(now int64) {
	if nb.second == nil {
		return
	}
	nb.second[nb.secondNext] = now
	nb.secondNext = (nb.secondNext + 1) % len(nb.second)
}

// tick counts one request in the per-second peak accounting.
func (nb *number) tick(now int64, accepted bool) {
	sec := now / int64(time.Second)
	if sec != nb.st.sec {
		nb.st.sec, nb.st.secRequests, nb.st.secAccepted = sec, 0, 0
	}
	if accepted {
		nb.st.secAccepted++
		nb.st.peakAccepted = max(nb.st.peakAccepted, nb.st.secAccepted)
		return
	}
	nb.st.secRequests++
	nb.st.peakRequests = max(nb.st.peakRequests, nb.st.secRequests)
}

// chance draws a Bernoulli trial; p == 0 costs no draw so that enabling
// one fault does not change the draws of the others.
func (nb *number) chance(p float64) bool {
	return p > 0 && nb.rng.Float64() < p
}

// jitter draws how long a request is held before it is counted: the
// network's variation on the way in (Faults.Jitter). No jitter costs no
// draw, so a seed replays the same run as without the fault.
func (nb *number) jitter() time.Duration {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if nb.faults.Jitter <= 0 {
		return 0
	}
	return time.Duration(nb.rng.Int64N(int64(nb.faults.Jitter) + 1))
}

func (nb *number) between(r Range) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(nb.rng.Int64N(int64(r.Max-r.Min)+1))
}

const pruneFloor = 100_000

// maybePruneLocked drops pair entries that no longer limit anything, so a
// long run over millions of recipients does not grow without bound.
func (nb *number) maybePruneLocked(now int64) {
	if len(nb.pairs) < nb.pruneAt {
		return
	}
	for k, ps := range nb.pairs {
		if nb.pair.idle(ps, now) {
			delete(nb.pairs, k)
		}
	}
	nb.pruneAt = max(pruneFloor, 2*len(nb.pairs))
}
