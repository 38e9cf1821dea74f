package e2e_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
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
	wired := receiptsWired(reg)

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
	checkNames(t, "alerts.yml", string(raw), docs, wired, func(n string) bool { return registered(reg, n) })

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
	checkNames(t, "wamux.json", string(raw), docs, wired, func(n string) bool { return registered(reg, n) })
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
func checkNames(t *testing.T, file, text string, docs map[string]docMetric, wired bool, isRegistered func(string) bool) {
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
		d, ok := docs[n]
		if !ok {
			t.Errorf("%s names %s, which docs/metrics.md does not document", file, n)
			continue
		}
		if d.section == receiptsSection && !wired {
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
