package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsDocumented: on the real app, every documented metric is
// registered (with the type the docs give it) and every registered wamux_
// metric that Gather shows is documented.
func TestMetricsDocumented(t *testing.T) {
	docs := documented(t)
	reg := startApp(t).Registry()
	for name := range docs {
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
	checkLabelValues(t, d.url, docs)
}

// freeLabels take values docs/metrics.md describes rather than lists:
// account ids, partition numbers, priorities (named in its introduction),
// route patterns, status and error codes, histogram bounds, subscription
// ids.
var freeLabels = []string{"account", "partition", "priority", "route", "code", "le", "subscription"}

var (
	seriesLine = regexp.MustCompile(`^(wamux_[a-z0-9_]+)\{(.*)\} `)
	labelPair  = regexp.MustCompile(`([a-z_]+)="((?:[^"\\]|\\.)*)"`)
)

// checkLabelValues: every value /metrics shows for a label with a fixed
// set of values is one the metric's row in docs/metrics.md names, so that
// an alert or a panel written from the docs matches what is exported.
func checkLabelValues(t *testing.T, url string, docs map[string]docMetric) {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	n := 0
	for _, line := range strings.Split(string(raw), "\n") {
		m := seriesLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := m[1]
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && docs[base].kind == "histogram" {
				name = base
			}
		}
		d, ok := docs[name]
		if !ok {
			continue // reported above
		}
		for _, l := range labelPair.FindAllStringSubmatch(m[2], -1) {
			if slices.Contains(freeLabels, l[1]) || seen[name+l[1]+l[2]] {
				continue
			}
			seen[name+l[1]+l[2]] = true
			n++
			if !strings.Contains(d.text, "`"+l[2]+"`") {
				t.Errorf("/metrics has %s{%s=%q}; its row in docs/metrics.md does not name that value", name, l[1], l[2])
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d label values checked", n)
	}
}

// descLabels reads every metric descriptor registered on reg, series or
// not: name → variable label names, and the wamux_ names that carry
// constant labels. The registry offers them only as Desc strings.
func descLabels(t *testing.T, reg *prometheus.Registry) (labels map[string][]string, constant []string) {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	labels = map[string][]string{}
	for d := range ch {
		m := descString.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read descriptor %s", d)
		}
		var ls []string
		if m[3] != "" {
			ls = strings.Split(m[3], ",")
		}
		labels[m[1]] = ls
		if m[2] != "" && strings.HasPrefix(m[1], "wamux_") {
			constant = append(constant, m[1])
		}
	}
	return labels, constant
}

var descString = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}\}$`)

// unboundedLabels are label names that would carry a value per message,
// per customer or a secret: none may be a metric label.
var unboundedLabels = []string{"msg_id", "message_id", "wamid", "id", "to", "recipient", "phone", "phone_number",
	"phone_number_id", "from", "user", "client_seq", "error", "message", "token", "access_token", "secret",
	"app_secret", "api_key", "key", "verify_token", "url", "path", "request_id"}

// TestMetricLabelsDocumented: every registered wamux_ metric has exactly the
// label names docs/metrics.md gives it (vectors without series included),
// no constant labels, and no label that names a message, a customer or a
// secret.
func TestMetricLabelsDocumented(t *testing.T) {
	docs := documented(t)
	labels, constant := descLabels(t, startApp(t).Registry())
	if len(constant) > 0 {
		t.Errorf("metrics with constant labels: %v", constant)
	}
	n := 0
	for name, got := range labels {
		if !strings.HasPrefix(name, "wamux_") {
			continue
		}
		n++
		for _, l := range got {
			if slices.Contains(unboundedLabels, l) {
				t.Errorf("%s has label %q: unbounded or secret", name, l)
			}
		}
		d, ok := docs[name]
		if !ok {
			continue // TestMetricsDocumented reports it
		}
		g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(d.labels))
		if !slices.Equal(g, w) {
			t.Errorf("%s has labels %v, docs/metrics.md says %v", name, g, w)
		}
	}
	if n < len(docs) {
		t.Errorf("only %d wamux_ metrics registered, %d documented", n, len(docs))
	}
}

// TestDocsAlertsExist: an alert docs/metrics.md names in a metric's row is
// a rule in deploy/prometheus/alerts.yml, and that rule's expression uses
// the metric of the row.
func TestDocsAlertsExist(t *testing.T) {
	rules := alertExprs(t)
	n := 0
	for name, d := range documented(t) {
		for _, m := range alertMention.FindAllStringSubmatch(d.text, -1) {
			n++
			expr, ok := rules[m[1]]
			switch {
			case !ok:
				t.Errorf("docs/metrics.md (%s) names alert %s, which alerts.yml does not have", name, m[1])
			case !strings.Contains(expr, name):
				t.Errorf("docs/metrics.md names alert %s for %s, but its expression does not use it: %s", m[1], name, expr)
			}
		}
	}
	if n == 0 {
		t.Fatal("docs/metrics.md names no alert")
	}
}

var alertMention = regexp.MustCompile("alert `(Wamux[A-Za-z]+)`")
