package outbound_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/ownership"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/postgres/pgtest"
)

// clusterParts is how many partitions the cluster tests spread accounts
// over.
const clusterParts = 4

// cluster is two dispatchers over one store and one simulator, each with
// an ownership.Cluster of its own node id, as two gateway nodes.
type cluster struct {
	t        *testing.T
	store    store.Store
	sim      *sim.Server
	url      string
	clock    *fakeclock.Clock
	settings *settings.Manager
	reload   time.Duration
	a, b     *node
}

// node is one gateway node: its dispatcher, its ownership, the provider
// calls it made and the store updates the fence refused it.
type node struct {
	d    *outbound.Dispatcher
	own  *ownership.Cluster
	prov *nodeProvider
	st   *fenceLog
}

// nodeProvider records the messages a node sent; with a gate set, a call
// waits for the gate to open first, and then answers gated instead of
// calling the simulator when that is set.
type nodeProvider struct {
	base    outbound.Provider
	entered atomic.Int32
	mu      sync.Mutex
	sent    []string
	gate    chan struct{}
	gated   *cloudapi.Result
}

func (p *nodeProvider) Send(ctx context.Context, dest cloudapi.Destination, m wamux.Message) cloudapi.Result {
	p.mu.Lock()
	gate, gated := p.gate, p.gated
	p.sent = append(p.sent, m.ID)
	p.mu.Unlock()
	if gate != nil {
		p.entered.Add(1)
		<-gate
		if gated != nil {
			return *gated
		}
	}
	return p.base.Send(ctx, dest, m)
}

func (p *nodeProvider) sentIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sent)
}

// hold makes the next calls wait until the returned function is called;
// answer, when set, is what they answer then, without the simulator.
func (p *nodeProvider) hold(answer *cloudapi.Result) (release func()) {
	gate := make(chan struct{})
	p.mu.Lock()
	p.gate, p.gated = gate, answer
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.gate, p.gated = nil, nil
		p.mu.Unlock()
		close(gate)
	}
}

// newCluster starts nodes a and b over st (nil: SQLite), a holding every
// partition and b none. With clk the dispatchers run on it.
func newCluster(t *testing.T, st store.Store, clk *fakeclock.Clock) *cluster {
	return newClusterReloading(t, st, clk, 0)
}

// newClusterReloading is newCluster with the nodes' ReloadInterval.
func newClusterReloading(t *testing.T, st store.Store, clk *fakeclock.Clock, reload time.Duration) *cluster {
	t.Helper()
	// The first env brings the store, the simulator and the client; its
	// dispatcher, without an Ownership, is stopped at once.
	e := newEnv(t, envOpts{store: st})
	e.stop()
	c := &cluster{t: t, store: e.store, sim: e.sim, url: e.simURL, clock: clk, settings: e.settings, reload: reload}
	c.a = c.node("node-a", e.provider, e.settings)
	c.b = c.node("node-b", e.provider, e.settings)
	all := make([]int, clusterParts)
	for p := range all {
		all[p] = p
	}
	if err := c.a.own.Assign(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cluster) node(id string, base outbound.Provider, set *settings.Manager) *node {
	t := c.t
	own, err := ownership.NewCluster(ownership.Config{Store: c.store, Node: id, Partitions: clusterParts, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{own: own, prov: &nodeProvider{base: base}, st: &fenceLog{Store: c.store}}
	var clock wamux.Clock
	if c.clock != nil {
		clock = timerClock{c.clock}
	}
	d, err := outbound.New(outbound.Config{Store: n.st, Provider: n.prov, Settings: set, Logger: quietLog(),
		Registry: prometheus.NewRegistry(), Clock: clock, Ownership: own, RevokeDrain: 5 * time.Second, ReloadInterval: c.reload})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	n.d = d
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d.Stop(ctx)
		own.Close()
	})
	return n
}

// addAccount creates an account in the store and the simulator and tells
// both nodes.
func (c *cluster) addAccount(id, pnid string) {
	t := c.t
	token := "token-" + id
	if err := c.sim.AddNumber(sim.Number{PhoneNumberID: pnid, AccessToken: token,
		Limits: sim.Limits{Rate: 1000, Burst: 1000, PairInterval: time.Millisecond, PairBurst: 1000}}); err != nil {
		t.Fatal(err)
	}
	a, err := c.store.CreateAccount(context.Background(), wamux.Account{ID: id, PhoneNumberID: pnid, AccessToken: token,
		BaseURL: c.url, RatePerSec: 1000, Burst: 1000, State: wamux.AccountActive})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{c.a, c.b} {
		if err := n.d.AccountChanged(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
}

// accountsIn returns n account ids of partition p and n of the others.
func accountsIn(p, n int) (in, out []string) {
	for i := 0; len(in) < n || len(out) < n; i++ {
		id := fmt.Sprintf("acc%d", i)
		if wamux.PartitionOf(id, clusterParts) == p {
			if len(in) < n {
				in = append(in, id)
			}
		} else if len(out) < n {
			out = append(out, id)
		}
	}
	return in, out
}

// seqBatch makes messages seq from..to of an account, spread over its
// recipients in turn.
func seqBatch(t *testing.T, acc string, tos []string, from, to int64) []wamux.Message {
	var ms []wamux.Message
	for s := from; s <= to; s++ {
		ms = append(ms, textMsg(t, admit.Request{AccountID: acc, ClientSeq: seqp(s), To: tos[int(s)%len(tos)]}))
	}
	return ms
}

// plainBatch makes n messages without a client_seq of an account to one
// recipient.
func plainBatch(t *testing.T, acc, to string, n int) []wamux.Message {
	var ms []wamux.Message
	for range n {
		ms = append(ms, textMsg(t, admit.Request{AccountID: acc, To: to}))
	}
	return ms
}

func (n *node) submit(t *testing.T, ms []wamux.Message) {
	t.Helper()
	res, err := n.d.Submit(context.Background(), ms)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("submit %d: %v", i, r.Err)
		}
	}
}

// wantOnceInOrder checks the simulator's ground truth: every message was
// accepted exactly once, and each recipient got its messages in the order
// given.
func (c *cluster) wantOnceInOrder(ms []wamux.Message) {
	t := c.t
	t.Helper()
	testwait.For(t, fmt.Sprintf("%d messages accepted", len(ms)), 20*time.Second, func() bool {
		return c.sim.Stats().Totals.Accepted >= int64(len(ms))
	})
	st := c.sim.Stats().Totals
	if st.Accepted != int64(len(ms)) || st.Duplicates != 0 {
		t.Fatalf("simulator accepted %d with %d duplicates; want %d and none", st.Accepted, st.Duplicates, len(ms))
	}
	want := map[string][]string{}
	for _, m := range ms {
		want[m.To] = append(want[m.To], m.ID)
	}
	for to, ids := range want {
		var got []string
		for _, m := range c.sim.Messages("", to) {
			got = append(got, m.CallbackData)
		}
		if !slices.Equal(got, ids) {
			t.Fatalf("recipient %s got %v, want %v", to, got, ids)
		}
	}
}

func pgStore(t *testing.T) store.Store {
	dsn := pgtest.DSN()
	if dsn == "" {
		t.Skip("WAMUX_TEST_POSTGRES not set")
	}
	return pgtest.Open(t, dsn, "outbound_cluster_")
}

// onStores runs a cluster test over one SQLite store both nodes share,
// and over PostgreSQL.
func onStores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, nil) })
	t.Run("postgres", func(t *testing.T) { fn(t, pgStore(t)) })
}

// TestClusterZombieIsFenced: node a holds every partition and sends; then
// node b is assigned one of them and a is not told (a zombie). Messages of
// that partition's accounts submitted through either node, and of the
// other accounts too, reach the simulator once each and in client_seq
// order per recipient: a's next write for the partition is refused by
// the store's fence, so a calls the provider for none of them, drops the
// partition and stops working its accounts; each node finds in the store,
// at its reload, the messages submitted through the other for the
// accounts it holds.
func TestClusterZombieIsFenced(t *testing.T) {
	onStores(t, testClusterZombie)
}

func testClusterZombie(t *testing.T, st store.Store) {
	c := newCluster(t, st, nil)
	moved, kept := accountsIn(1, 1)
	x, y := moved[0], kept[0]
	c.addAccount(x, "7101")
	c.addAccount(y, "7102")
	xTos := []string{"15557100001", "15557100002"}
	yTos := []string{"15557100011", "15557100012"}
	if !c.a.d.Works(x) || c.b.d.Works(x) {
		t.Fatal("account x should be worked on by node a only")
	}

	first := append(seqBatch(t, x, xTos, 1, 6), seqBatch(t, y, yTos, 1, 6)...)
	c.a.submit(t, first)
	testwait.For(t, "the first batch accepted", 20*time.Second, func() bool {
		return c.sim.Stats().Totals.Accepted >= int64(len(first))
	})

	if err := c.b.own.Assign(context.Background(), []int{1}); err != nil {
		t.Fatal(err)
	}
	if !c.b.d.Works(x) || c.b.d.Works(y) {
		t.Fatal("node b should work on account x only")
	}
	if _, held := c.a.own.Lease(x); !held {
		t.Fatal("node a was told; it must not be for this test")
	}
	// Through the zombie: its sequencing step for x is refused, and so
	// would its sending writes be (messages without a client_seq).
	viaA := append(seqBatch(t, x, xTos, 7, 10), seqBatch(t, y, yTos, 7, 10)...)
	viaA = append(viaA, plainBatch(t, x, "15557100021", 3)...)
	c.a.submit(t, viaA)
	testwait.For(t, "node a fenced out of account x's partition", 10*time.Second, func() bool {
		_, held := c.a.own.Lease(x)
		return !held && !c.a.d.Works(x)
	})
	// Through the new holder, and for y through the node that does not
	// hold it.
	viaB := append(seqBatch(t, x, xTos, 11, 14), seqBatch(t, y, yTos, 11, 14)...)
	viaB = append(viaB, plainBatch(t, y, "15557100031", 3)...)
	c.b.submit(t, viaB)
	c.a.d.Reload()
	c.b.d.ReloadAccount(x)

	all := append(append(first, viaA...), viaB...)
	c.wantOnceInOrder(all)
	refused := c.a.st.refusals()
	if len(refused) == 0 {
		t.Fatal("the store refused none of node a's updates")
	}
	for _, u := range refused {
		if u.Fence == nil || u.Fence.Partition != 1 {
			t.Fatalf("refused update %+v is not under partition 1", u)
		}
	}
	late := map[string]bool{}
	for _, m := range append(viaA, viaB...) {
		late[m.ID] = m.AccountID == x
	}
	for _, id := range c.a.prov.sentIDs() {
		if late[id] {
			t.Fatalf("node a called the provider for %s after it lost the partition", id)
		}
	}
	for _, id := range c.b.prov.sentIDs() {
		if m, err := c.store.GetMessage(context.Background(), id); err != nil || m.AccountID != x {
			t.Fatalf("node b sent %s, not of the account it holds (%v)", id, err)
		}
	}
}

// TestClusterRevokeDrainsInFlight: node a is revoked a partition while
// provider calls of its account are open. The revoke returns only once
// they have ended and their outcomes are stored; a takes no new work for
// the account meanwhile. Node b, assigned the partition after, sends the
// rest: every message once, in order per recipient.
func TestClusterRevokeDrainsInFlight(t *testing.T) {
	onStores(t, testClusterRevokeDrains)
}

func testClusterRevokeDrains(t *testing.T, st store.Store) {
	c := newCluster(t, st, nil)
	moved, _ := accountsIn(2, 1)
	x := moved[0]
	c.addAccount(x, "7201")
	tos := []string{"15557200001", "15557200002", "15557200003"}
	release := c.a.prov.hold(nil)
	ms := seqBatch(t, x, tos, 1, 12)
	c.a.submit(t, ms)
	// One call per recipient: the rest waits behind them.
	testwait.For(t, "a call open per recipient", 10*time.Second, func() bool { return c.a.prov.entered.Load() == int32(len(tos)) })
	// A node starting now holds none of the partitions: the messages in
	// flight on a are not its to make unknown.
	c.node("node-c", c.a.prov.base, c.settings)
	for _, m := range ms[:len(tos)] {
		if s := statusOf(t, c.store, m.ID); s != wamux.StatusSending {
			t.Fatalf("message %d in flight on node a is %s after another node started, want sending", m.ClientSeq, s)
		}
	}

	revoked := make(chan struct{})
	go func() {
		c.a.own.Revoke([]int{2})
		close(revoked)
	}()
	testwait.For(t, "node a stops working the account", 10*time.Second, func() bool { return !c.a.d.Works(x) })
	select {
	case <-revoked:
		t.Fatal("the revoke returned with provider calls open")
	default:
	}
	release()
	select {
	case <-revoked:
	case <-time.After(10 * time.Second):
		t.Fatal("the revoke did not return after the calls ended")
	}
	if n := len(c.a.prov.sentIDs()); n != len(tos) {
		t.Fatalf("node a made %d provider calls, want %d: it took new work while revoked", n, len(tos))
	}
	for _, m := range ms[:len(tos)] {
		got, err := c.store.GetMessage(context.Background(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != wamux.StatusAccepted {
			t.Fatalf("message %d drained by the revoke is %s, want accepted", m.ClientSeq, got.Status)
		}
	}
	if err := c.b.own.Assign(context.Background(), []int{2}); err != nil {
		t.Fatal(err)
	}
	c.wantOnceInOrder(ms)
	if refused := c.a.st.refusals(); len(refused) != 0 {
		t.Fatalf("node a had %d updates refused; it stopped before b took over", len(refused))
	}
}

// TestClusterRevokeDrainTimesOut: a provider call outlives the revoke's
// drain bound. The revoke returns at the bound, the call's message stays
// sending, and its outcome, when it comes, is not written: as a crash
// would leave it. The next holder makes it unknown, compensates it after
// the quiet period and resends it: the simulator, which the stalled call
// never reached, gets it once.
func TestClusterRevokeDrainTimesOut(t *testing.T) {
	onStores(t, testClusterDrainTimeout)
}

func testClusterDrainTimeout(t *testing.T, st store.Store) {
	clk := fakeclock.New()
	c := newCluster(t, st, clk)
	moved, _ := accountsIn(3, 1)
	x := moved[0]
	c.addAccount(x, "7301")
	release := c.a.prov.hold(&cloudapi.Result{Outcome: cloudapi.Unknown, Reason: "timeout"})
	m := textMsg(t, admit.Request{AccountID: x, To: "15557300001"})
	c.a.submit(t, []wamux.Message{m})
	testwait.For(t, "the call open", 10*time.Second, func() bool { return c.a.prov.entered.Load() == 1 })

	revoked := make(chan struct{})
	go func() {
		c.a.own.Revoke([]int{3})
		close(revoked)
	}()
	testwait.For(t, "node a stops working the account", 10*time.Second, func() bool { return !c.a.d.Works(x) })
	// The drain's timer is armed once the worker is gone from the
	// dispatcher; moving the clock past it until the revoke returns.
	testwait.For(t, "the revoke returns at its bound", 10*time.Second, func() bool {
		clk.Advance(5 * time.Second)
		select {
		case <-revoked:
			return true
		default:
			return false
		}
	})
	release()
	testwait.For(t, "node a's call ended", 10*time.Second, func() bool { return c.a.d.AttemptsRunning(x) == 0 })
	if s := statusOf(t, c.store, m.ID); s != wamux.StatusSending {
		t.Fatalf("message is %s after the abandoned call, want sending", s)
	}
	if err := c.b.own.Assign(context.Background(), []int{3}); err != nil {
		t.Fatal(err)
	}
	if s := statusOf(t, c.store, m.ID); s != wamux.StatusUnknown {
		t.Fatalf("message is %s once node b took the account up, want unknown", s)
	}
	testwait.For(t, "the resend accepted", 10*time.Second, func() bool {
		clk.Advance(time.Second)
		c.b.d.Kick()
		return c.sim.Stats().Totals.Accepted >= 1
	})
	c.wantOnceInOrder([]wamux.Message{m})
	testwait.For(t, "the resend's outcome stored", 10*time.Second, func() bool {
		return statusOf(t, c.store, m.ID) == wamux.StatusAccepted
	})
}

func statusOf(t *testing.T, st store.Store, id string) wamux.Status {
	t.Helper()
	m, err := st.GetMessage(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m.Status
}

// ApplySeq records the sequencing steps the store refused, each update
// as refused.
func (s *fenceLog) ApplySeq(ctx context.Context, st store.SeqState, us []store.MessageUpdate) ([]bool, error) {
	ok, err := s.Store.ApplySeq(ctx, st, us)
	if errors.Is(err, store.ErrFenced) {
		s.mu.Lock()
		s.refused = append(s.refused, us...)
		s.mu.Unlock()
	}
	return ok, err
}

// TestClusterReloadFindsOtherNodesMessages: messages submitted through a
// node that does not hold their account are stored only; the holder finds
// them at its next ReloadInterval and sends them once, in order.
func TestClusterReloadFindsOtherNodesMessages(t *testing.T) {
	onStores(t, testClusterReload)
}

func testClusterReload(t *testing.T, st store.Store) {
	clk := fakeclock.New()
	c := newClusterReloading(t, st, clk, 2*time.Second)
	moved, _ := accountsIn(0, 1)
	x := moved[0]
	c.a.own.Revoke([]int{0})
	if err := c.b.own.Assign(context.Background(), []int{0}); err != nil {
		t.Fatal(err)
	}
	c.addAccount(x, "7401")
	if c.a.d.Works(x) || !c.b.d.Works(x) {
		t.Fatal("account x should be worked on by node b only")
	}
	tos := []string{"15557400001", "15557400002"}
	ms := append(seqBatch(t, x, tos, 1, 6), plainBatch(t, x, "15557400003", 3)...)
	c.a.submit(t, ms)
	c.b.d.Settle(x)
	if n := c.sim.Stats().Totals.Requests; n != 0 {
		t.Fatalf("%d sends before the holder reloaded", n)
	}
	clk.Advance(2 * time.Second)
	c.wantOnceInOrder(ms)
	if n := len(c.a.prov.sentIDs()); n != 0 {
		t.Fatalf("node a, which does not hold the account, sent %d messages", n)
	}
}

// TestClusterZombieCannotChangeTheAccount: node a's provider call for
// account x is open when node b acquires x's partition (a is not told).
// The provider's answer, a spam limit (cooldown) or a locked account
// (disable), is for the new holder to act on: the store refuses a's
// change of the account under its stale fence, the account stays active,
// and a stops working on x.
func TestClusterZombieCannotChangeTheAccount(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer cloudapi.Result
	}{
		{"cooldown", cloudapi.Result{Outcome: cloudapi.Cooldown, Code: 131048, Delay: cloudapi.SpamCooldown, HTTPStatus: 400, Reason: "131048: spam rate limit"}},
		{"disable", cloudapi.Result{Outcome: cloudapi.Disable, Code: 131031, HTTPStatus: 400, Reason: "131031: account locked"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, nil, nil)
			moved, _ := accountsIn(1, 1)
			x := moved[0]
			c.addAccount(x, "7201")
			release := c.a.prov.hold(&tc.answer)
			c.a.submit(t, plainBatch(t, x, "15557200001", 1))
			testwait.For(t, "node a's provider call", 10*time.Second, func() bool { return c.a.prov.entered.Load() == 1 })
			if err := c.b.own.Assign(context.Background(), []int{1}); err != nil {
				t.Fatal(err)
			}
			release()
			testwait.For(t, "node a fenced out of account x's partition", 10*time.Second, func() bool {
				_, held := c.a.own.Lease(x)
				return !held && !c.a.d.Works(x)
			})
			a, err := c.store.GetAccount(context.Background(), x)
			if err != nil {
				t.Fatal(err)
			}
			if a.State != wamux.AccountActive || !a.CooldownUntil.IsZero() {
				t.Fatalf("account x is %s (cooldown until %v) after the zombie's %s; want active, unchanged", a.State, a.CooldownUntil, tc.name)
			}
		})
	}
}
