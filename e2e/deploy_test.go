package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

var metricName = regexp.MustCompile(`wamux_[a-z0-9_]+`)

type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestDeployFiles: the alert rules and the Grafana dashboard in deploy/
// parse, the alerts the issue asks for are there with a summary and a
// runbook line, and every metric either file names is documented and
// registered by the real app.
func TestDeployFiles(t *testing.T) {
	docs := documented(t)
	reg := startApp(t).Registry()

	raw, rules := readAlerts(t)
	alerts := map[string]string{} // name → expr
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" {
				t.Errorf("alerts.yml: a rule without a name or an expression: %+v", r)
			}
			if r.Annotations["summary"] == "" || r.Annotations["runbook"] == "" {
				t.Errorf("alert %s lacks a summary or a runbook line", r.Alert)
			}
			if r.Labels["severity"] == "" {
				t.Errorf("alert %s has no severity", r.Alert)
			}
			alerts[r.Alert] = r.Expr
			if r.Alert == "WamuxThrottled" && (!strings.Contains(r.Expr, "> 0.01") || r.For != "5m") {
				t.Errorf("WamuxThrottled must fire above 1 %% for 5 minutes: expr %q, for %q", r.Expr, r.For)
			}
		}
	}
	for name, metric := range map[string]string{
		"WamuxThrottled":             "wamux_provider_throttled_total",
		"WamuxSeqGapsSkipped":        "wamux_seq_gaps_skipped_total",
		"WamuxReceiptLag":            "wamux_receipts_partition_lag_seconds",
		"WamuxDeadLetters":           "wamux_dead_letters_total",
		"WamuxAccountDisabled":       "wamux_account_state",
		"WamuxUnknownOutcomeBacklog": "wamux_unknown_outcomes",
	} {
		if !strings.Contains(alerts[name], metric) {
			t.Errorf("alert %s is missing or does not use %s", name, metric)
		}
	}
	checkNames(t, "alerts.yml", string(raw), docs, func(n string) bool { return registered(reg, n) })

	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "grafana", "wamux.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("wamux.json: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	if len(exprs) < 15 {
		t.Fatalf("wamux.json: only %d queries", len(exprs))
	}
	// Check every name in the file, queries and template variables alike.
	checkNames(t, "wamux.json", string(raw), docs, func(n string) bool { return registered(reg, n) })
}

// readAlerts reads deploy/prometheus/alerts.yml, unknown fields refused.
func readAlerts(t *testing.T) ([]byte, alertRules) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	return raw, rules
}

// alertExprs is alert name → expression of alerts.yml.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	_, rules := readAlerts(t)
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// checkNames finds every wamux_ metric named in text (a histogram's
// _bucket/_sum/_count series count as the histogram) and checks that it
// is documented and registered.
func checkNames(t *testing.T, file, text string, docs map[string]docMetric, isRegistered func(string) bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, n := range metricName.FindAllString(text, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && docs[base].kind == "histogram" {
				n = base
			}
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		_, ok := docs[n]
		if !ok {
			t.Errorf("%s names %s, which docs/metrics.md does not document", file, n)
			continue
		}
		if !isRegistered(n) {
			t.Errorf("%s names %s, which the app does not register", file, n)
		}
	}
	if len(seen) == 0 {
		t.Errorf("%s names no metric", file)
	}
	t.Logf("%s: %d metrics, all documented and registered", file, len(seen))
}

// promQuery is one PromQL expression of deploy/ and the text that refers
// to its result's labels: a panel's legend, an alert's annotations.
type promQuery struct {
	where, expr, labelText string
}

// deployQueries reads every expression of alerts.yml and wamux.json.
func deployQueries(t *testing.T) []promQuery {
	t.Helper()
	var out []promQuery
	_, rules := readAlerts(t)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, promQuery{"alert " + r.Alert, r.Expr, r.Annotations["summary"] + " " + r.Annotations["runbook"]})
		}
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "grafana", "wamux.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if expr, ok := v["expr"].(string); ok {
				legend, _ := v["legendFormat"].(string)
				out = append(out, promQuery{"wamux.json " + path, expr, legend})
			}
			if def, ok := v["definition"].(string); ok {
				out = append(out, promQuery{"wamux.json " + path + " variable", def, ""})
			}
			if title, ok := v["title"].(string); ok {
				path = title
			}
			for _, c := range v {
				walk(path, c)
			}
		case []any:
			for _, c := range v {
				walk(path, c)
			}
		}
	}
	walk("", dash)
	return out
}

var (
	selectorRe = regexp.MustCompile(`(wamux_[a-z0-9_]+)\s*\{([^}]*)\}`)
	matcherRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	// valueMatcherRe is an exact matcher (= or !=), not a regular one.
	valueMatcherRe = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(!=|=)\s*"([^"]*)"`)
	aggregatorRe   = regexp.MustCompile(`\b(sum|max|min|avg|count)\s*(?:by\s*\(([^)]*)\)\s*)?\(`)
	labelValues    = regexp.MustCompile(`label_values\((wamux_[a-z0-9_]+),\s*([a-z_]+)\)`)
	legendRe       = regexp.MustCompile(`\{\{\s*([a-z_]+)\s*\}\}|\$labels\.([a-z_]+)`)
)

// series is a metric name as a query uses it: its documented base (a
// histogram's _bucket/_sum/_count are the histogram's) and the label
// names a selector may use.
func series(docs map[string]docMetric, name string) (base string, labels []string, ok bool) {
	if d, ok := docs[name]; ok {
		return name, d.labels, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suffix); ok && docs[b].kind == "histogram" {
			if suffix == "_bucket" {
				return b, append(slices.Clone(docs[b].labels), "le"), true
			}
			return b, docs[b].labels, true
		}
	}
	return "", nil, false
}

// enclosing lists the functions and aggregations around position i of
// expr, innermost first ("by" for an aggregation with a by clause).
func enclosing(expr string, i int) []string {
	var out []string
	depth := 0
	for j := i - 1; j >= 0; j-- {
		switch expr[j] {
		case ')':
			depth++
		case '(':
			if depth > 0 {
				depth--
				continue
			}
			before := strings.TrimRight(expr[:j], " \n\t")
			if strings.HasSuffix(before, ")") { // "sum by (x) (": the by list
				out = append(out, "by")
				continue
			}
			k := len(before)
			for k > 0 && (before[k-1] == '_' || before[k-1] >= 'a' && before[k-1] <= 'z') {
				k--
			}
			out = append(out, before[k:])
		}
	}
	return out
}

// closing returns the index of the parenthesis closing the one at open.
func closing(expr string, open int) int {
	depth := 0
	for j := open; j < len(expr); j++ {
		switch expr[j] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return len(expr)
}

// TestDeployQueries: each expression of alerts.yml and wamux.json uses its
// metrics as their type and labels allow: counters and histogram buckets
// only under rate()/increase(), gauges never, buckets inside
// histogram_quantile aggregated by le; label matchers, by clauses,
// label_values and the labels legends and annotations print exist on the
// metrics (as docs/metrics.md gives them, which TestMetricLabelsDocumented
// ties to the registry), and exact matcher values are values the
// metric's row names.
func TestDeployQueries(t *testing.T) {
	docs := documented(t)
	qs := deployQueries(t)
	if len(qs) < 20 {
		t.Fatalf("only %d queries in deploy/", len(qs))
	}
	rateFns := []string{"rate", "increase", "irate"}
	for _, q := range qs {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Errorf("%s: %s\n\t%s", q.where, fmt.Sprintf(format, args...), q.expr)
		}
		for _, m := range labelValues.FindAllStringSubmatch(q.expr, -1) {
			if _, labels, ok := series(docs, m[1]); !ok || !slices.Contains(labels, m[2]) {
				fail("label_values of %s by %s: no such label", m[1], m[2])
			}
		}
		if labelValues.MatchString(q.expr) {
			continue
		}
		var metricLabels [][]string
		for _, loc := range metricName.FindAllStringIndex(q.expr, -1) {
			name := q.expr[loc[0]:loc[1]]
			base, labels, ok := series(docs, name)
			if !ok {
				fail("%s is not a documented metric or histogram series", name)
				continue
			}
			metricLabels = append(metricLabels, labels)
			fns := enclosing(q.expr, loc[0])
			inner := ""
			if len(fns) > 0 {
				inner = fns[0]
			}
			switch kind := docs[base].kind; {
			case kind == "counter" && !slices.Contains(rateFns, inner):
				fail("counter %s outside rate()/increase()", name)
			case kind == "gauge" && slices.Contains(rateFns, inner):
				fail("gauge %s under %s()", name, inner)
			case kind == "histogram" && name == base:
				fail("histogram %s used without _bucket/_sum/_count", name)
			case kind == "histogram" && !slices.Contains(rateFns, inner):
				fail("histogram series %s outside rate()/increase()", name)
			case strings.HasSuffix(name, "_bucket") && !slices.Contains(fns, "histogram_quantile"):
				fail("%s outside histogram_quantile()", name)
			}
		}
		for _, m := range selectorRe.FindAllStringSubmatch(q.expr, -1) {
			base, labels, _ := series(docs, m[1])
			for _, l := range matcherRe.FindAllStringSubmatch(m[2], -1) {
				if !slices.Contains(labels, l[1]) {
					fail("%s has no label %s", m[1], l[1])
				}
			}
			// A value no series has (state="disable") makes an alert
			// that never fires and a panel that stays empty, with no
			// error anywhere: an exact value must be one the metric's
			// row names.
			for _, v := range valueMatcherRe.FindAllStringSubmatch(m[2], -1) {
				if !strings.Contains(v[3], "$") && !strings.Contains(docs[base].text, "`"+v[3]+"`") {
					fail("%s%s%q: docs/metrics.md names no such value of %s for %s", v[1], v[2], v[3], v[1], m[1])
				}
			}
		}
		// Aggregations: a by label exists on every metric aggregated, and
		// the result's labels are what legends and annotations may print.
		var out []string
		aggs := aggregatorRe.FindAllStringSubmatchIndex(q.expr, -1)
		for n, a := range aggs {
			var by []string
			if a[4] >= 0 {
				for _, l := range strings.Split(q.expr[a[4]:a[5]], ",") {
					by = append(by, strings.TrimSpace(l))
				}
			}
			body := q.expr[a[1]-1 : closing(q.expr, a[1]-1)+1]
			for _, name := range metricName.FindAllString(body, -1) {
				_, labels, _ := series(docs, name)
				for _, l := range by {
					if !slices.Contains(labels, l) {
						fail("aggregated by %s, which %s does not have", l, name)
					}
				}
				if strings.HasSuffix(name, "_bucket") && !slices.Contains(by, "le") {
					fail("%s aggregated without le: histogram_quantile needs it", name)
				}
			}
			if slices.Contains(enclosing(q.expr, a[0]), "histogram_quantile") {
				by = slices.DeleteFunc(by, func(l string) bool { return l == "le" })
			}
			if n == 0 {
				out = by
			} else {
				out = slices.DeleteFunc(out, func(l string) bool { return !slices.Contains(by, l) })
			}
		}
		if len(aggs) == 0 {
			for n, labels := range metricLabels {
				if n == 0 {
					out = slices.Clone(labels)
				} else {
					out = slices.DeleteFunc(out, func(l string) bool { return !slices.Contains(labels, l) })
				}
			}
			if strings.Contains(q.expr, "rate(") || strings.Contains(q.expr, "increase(") {
				out = slices.DeleteFunc(out, func(l string) bool { return l == "le" })
			}
		}
		for _, m := range legendRe.FindAllStringSubmatch(q.labelText, -1) {
			if l := m[1] + m[2]; !slices.Contains(out, l) {
				fail("prints label %s; the result has only %v", l, out)
			}
		}
	}
}

// TestDeployAccountVariable: the dashboard's account variable lists an
// account as soon as it exists, before it has sent anything. It is read
// with label_values, which lists only series Prometheus has; an account
// that has not sent since the gateway started (idle, or disabled after a
// restart, the one WamuxAccountDisabled points at) must still be there to
// pick.
func TestDeployAccountVariable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "grafana", "wamux.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	source := ""
	for _, v := range dash.Templating.List {
		if v.Name == "account" {
			m := labelValues.FindStringSubmatch(v.Definition)
			if m == nil || m[2] != "account" {
				t.Fatalf("account variable %q is not label_values(<metric>, account)", v.Definition)
			}
			source = m[1]
		}
	}
	if source == "" {
		t.Fatal("wamux.json has no account variable")
	}
	a := startApp(t)
	var created map[string]any
	doJSON(t, a, "POST", "/v1/accounts",
		`{"id":"idle-1","phone_number_id":"106540352242933","access_token":"EAAGidleTOKEN0123456789","rate_per_sec":10}`, &created)
	poll(t, 10*time.Second, func() error {
		fams, err := a.Registry().Gather()
		if err != nil {
			return err
		}
		for _, f := range fams {
			if f.GetName() != source {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "account" && l.GetValue() == "idle-1" {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("%s, the account variable's source, has no series for a new account that has sent nothing", source)
	})
}
