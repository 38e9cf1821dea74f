package e2e_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestMetricsDocumented: on the real app, every documented metric is
// registered (with the type the docs give it) and every registered wamux_
// metric that Gather shows is documented.
func TestMetricsDocumented(t *testing.T) {
	docs := documented(t)
	reg := startApp(t).Registry()
	wired := receiptsWired(reg)
	if !wired {
		t.Log("the receipt pipeline is not wired into app yet: its documented metrics are not checked")
	}
	for name, d := range docs {
		if d.section == receiptsSection && !wired {
			continue
		}
		if !registered(reg, name) {
			t.Errorf("docs/metrics.md documents %s, which the app does not register", name)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "wamux_") {
			continue
		}
		d, ok := docs[name]
		if !ok {
			t.Errorf("%s is registered but not documented in docs/metrics.md", name)
			continue
		}
		if got := strings.ToLower(f.GetType().String()); got != d.kind {
			t.Errorf("%s is a %s, docs/metrics.md says %s", name, got, d.kind)
		}
	}
}

// TestDemoMetrics: /metrics during a demo run carries every documented
// metric, with counters and histograms above zero — the demo posts the
// rarer webhook events (inbound message, stray number, late status) and
// runs a small Bloom filter and P2 bound so that every one moves — and
// nothing undocumented.
func TestDemoMetrics(t *testing.T) {
	docs := documented(t)
	wired := receiptsWired(startApp(t).Registry())
	d := sharedDemo(t)
	var last scrape
	// The demo withholds one seq early on: skipped after its 20 s
	// gap_timeout, held when it comes 30 s later.
	poll(t, 90*time.Second, func() error {
		s, err := getMetrics(d.url)
		if err != nil {
			return err
		}
		last = s
		var missing []string
		for name, m := range docs {
			if m.section == receiptsSection && !wired {
				continue
			}
			switch m.kind {
			case "gauge":
				if s.n[name] == 0 {
					missing = append(missing, name+" (no series)")
				}
			case "counter":
				if s.sum[name] <= 0 {
					missing = append(missing, name+" (zero)")
				}
			case "histogram":
				if s.sum[name+"_count"] <= 0 {
					missing = append(missing, name+" (no observations)")
				}
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return fmt.Errorf("not yet non-trivial: %s", strings.Join(missing, ", "))
		}
		return nil
	})
	for name := range last.types {
		if strings.HasPrefix(name, "wamux_") {
			if _, ok := docs[name]; !ok {
				t.Errorf("/metrics has %s, which docs/metrics.md does not document", name)
			}
		}
	}
}
