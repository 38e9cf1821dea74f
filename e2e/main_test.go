package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/bench"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/internal/testwait"
)

// repoRoot is where docs/ and deploy/ are; tests run in e2e/.
const repoRoot = ".."

// The demo is shared by the tests that only watch it (metrics, browser):
// one gateway + simulator + traffic, started by the first of them and
// stopped once every one of them has ended (or by TestMain, when a run
// selects only some), so that its traffic does not load the machine under
// the package's other tests.
var demoWatchers = []string{"TestDashboardInBrowser", "TestDemoMetrics"}

var (
	demoMu   sync.Mutex
	theDemo  *demoRun
	demoDone map[string]bool // the watchers that ended since theDemo started
)

type demoRun struct {
	url, key string
	cancel   context.CancelFunc
	done     chan error
}

// TestMain stops the shared demo after the tests, then fails the run when
// a goroutine of the gateway, the simulator or a test is still running.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := stopDemo(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "demo ended with:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// stopDemo stops the shared demo, if one runs, and returns how it ended.
func stopDemo() error {
	demoMu.Lock()
	d := theDemo
	theDemo = nil
	demoMu.Unlock()
	if d == nil {
		return nil
	}
	d.cancel()
	return <-d.done
}

// sharedDemo starts `wamux demo` (bench.RunDemo) in process on a free port
// when none runs and returns it; t, one of demoWatchers, marks itself
// ended when it ends, and the last of them stops the demo.
func sharedDemo(t *testing.T) *demoRun {
	t.Helper()
	if !slices.Contains(demoWatchers, t.Name()) {
		t.Fatalf("%s watches the shared demo but is not one of demoWatchers", t.Name())
	}
	t.Cleanup(func() {
		demoMu.Lock()
		demoDone[t.Name()] = true
		last := len(demoDone) == len(demoWatchers)
		demoMu.Unlock()
		if last {
			if err := stopDemo(); err != nil {
				t.Errorf("demo ended with: %v", err)
			}
		}
	})
	demoMu.Lock()
	defer demoMu.Unlock()
	if theDemo != nil {
		return theDemo
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		_, err := bench.RunDemo(ctx, bench.DemoConfig{Listen: "127.0.0.1:0", Seed: 7,
			Started: func(url, key string) { started <- [2]string{url, key} }})
		done <- err
	}()
	select {
	case s := <-started:
		theDemo = &demoRun{url: s[0], key: s[1], cancel: cancel, done: done}
		demoDone = map[string]bool{}
		return theDemo
	case err := <-done:
		cancel()
		t.Fatalf("demo ended before it started: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		<-done
		t.Fatal("demo did not start within 60 s")
	}
	return nil
}

// startAppKey is the API key of the gateway startApp runs.
const startAppKey = "e2e-key-0123456789"

// startApp runs the real gateway on a free port with a temporary data dir.
func startApp(t *testing.T) *app.App {
	t.Helper()
	return startAppWithKey(t, startAppKey)
}

// startAppWithKey is startApp with key as the one API key.
func startAppWithKey(t *testing.T, key string) *app.App {
	t.Helper()
	return startAppWith(t, func(c *config.Config) { c.APIKeys = []string{key} })
}

// startAppWith is startApp with the configuration changed by configure.
func startAppWith(t *testing.T, configure func(*config.Config)) *app.App {
	t.Helper()
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.APIKeys = "127.0.0.1:0", t.TempDir(), []string{startAppKey}
	configure(&cfg)
	a := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Stop(ctx)
	})
	return a
}

// registered reports whether reg holds a collector of that name, including
// vectors that have no series yet (which Gather does not show): a probe of
// the same name registers only when the name is free.
func registered(reg *prometheus.Registry, name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "e2e registration probe"})
	if err := reg.Register(probe); err != nil {
		return true
	}
	reg.Unregister(probe)
	return false
}

var docRow = regexp.MustCompile("^\\| `(wamux_[a-z0-9_]+)` \\| (counter|gauge|histogram) \\| ([^|]*) \\|(.*)$")

// docMetric is one row of docs/metrics.md.
type docMetric struct {
	section, kind string
	// labels are the label names of the labels cell ("—": none).
	labels []string
	// text is the rest of the row: meaning and what to do.
	text string
}

// documented reads docs/metrics.md: every metric row, by name.
func documented(t *testing.T) map[string]docMetric {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]docMetric{}
	section := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = strings.TrimSpace(h)
			continue
		}
		if m := docRow.FindStringSubmatch(line); m != nil {
			if _, dup := out[m[1]]; dup {
				t.Errorf("docs/metrics.md documents %s twice", m[1])
			}
			d := docMetric{section: section, kind: m[2], text: m[4]}
			for _, l := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[3], -1) {
				d.labels = append(d.labels, l[1])
			}
			if len(d.labels) == 0 && strings.TrimSpace(m[3]) != "—" {
				t.Errorf("docs/metrics.md: %s: labels cell %q is neither label names nor —", m[1], m[3])
			}
			out[m[1]] = d
		}
	}
	if len(out) < 20 {
		t.Fatalf("docs/metrics.md: only %d metric rows parsed", len(out))
	}
	return out
}

// scrape is one read of /metrics: series values summed by sample name
// (so name_count of a histogram is its own entry), and each family's type.
type scrape struct {
	sum   map[string]float64
	n     map[string]int
	types map[string]string
}

func getMetrics(url string) (scrape, error) {
	s := scrape{sum: map[string]float64{}, n: map[string]int{}, types: map[string]string{}}
	res, err := http.Get(url + "/metrics")
	if err != nil {
		return s, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if f := strings.Fields(rest); len(f) == 2 {
				s.types[f[0]] = f[1]
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		// Label values may hold spaces (route="GET /metrics"): the name
		// ends at '{' or ' ', the value is the last field.
		name := line[:strings.IndexAny(line, "{ ")]
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return s, fmt.Errorf("parse %q: %w", line, err)
		}
		s.sum[name] += v
		s.n[name]++
	}
	return s, sc.Err()
}

// poll calls check until it returns nil or the deadline passes; the last
// error is the failure.
func poll(t *testing.T, within time.Duration, check func() error) {
	t.Helper()
	testwait.ForNil(t, within, check)
}
