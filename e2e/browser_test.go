package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds the headless browser. Without one the test is skipped,
// unless WAMUX_TEST_BROWSER=1 (CI installs Debian's chromium), when a
// missing browser is a failure rather than a silent skip.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("WAMUX_TEST_BROWSER") == "1" {
		t.Fatal("WAMUX_TEST_BROWSER=1 but no chromium found: apt-get install -y chromium")
	}
	t.Skip("no chromium installed (apt-get install -y chromium); set WAMUX_TEST_BROWSER=1 to make this a failure")
	return ""
}

// pageView is what the test reads out of the running page.
type pageView struct {
	Rows        int      `json:"rows"`
	IDs         []string `json:"ids"`
	Live        string   `json:"live"`
	Submitted   string   `json:"submitted"`
	Receipts    string   `json:"receipts"`
	Lines       int      `json:"lines"`        // drawn series across all charts
	SendLines   int      `json:"send_lines"`   // series in the sends chart
	ReceiptLine int      `json:"receipt_line"` // series in the receipts chart
	Promo429    string   `json:"promo_429"`    // 429 total of the throttled account
	Subs        int      `json:"subs"`         // event subscription rows
	Events      int      `json:"events"`       // latest-event rows
}

const readPage = `JSON.stringify({
  rows: document.querySelectorAll("#accounts tbody tr").length,
  ids: [...document.querySelectorAll("#accounts tbody tr")].map(r => r.dataset.id),
  live: document.getElementById("live").textContent,
  submitted: document.getElementById("t-submitted").textContent,
  receipts: document.getElementById("t-receipts").textContent,
  lines: document.querySelectorAll("svg.chart polyline.line").length,
  send_lines: document.querySelectorAll("#c-sends polyline.line").length,
  receipt_line: document.querySelectorAll("#c-receipts polyline.line").length,
  subs: document.querySelectorAll("#subscriptions tbody tr").length,
  events: document.querySelectorAll("#events tbody tr").length,
  promo_429: (() => { const r = document.querySelector('#accounts tbody tr[data-id="promo-overdriven"]');
    return r ? r.children[8].textContent : ""; })(),
})`

// polls reads the poll counter from the page's "live · time · #N" badge.
func polls(live string) int {
	i := strings.LastIndex(live, "#")
	if i < 0 {
		return 0
	}
	n, _ := strconv.Atoi(live[i+1:])
	return n
}

// TestDashboardInBrowser loads the dashboard in headless Chromium while
// demo traffic runs, waits for the live numbers to change, checks that the
// account table and the charts are filled, that the filter works, and saves
// a screenshot in the test's artifact directory.
func TestDashboardInBrowser(t *testing.T) {
	exe := chromium(t)
	d := sharedDemo(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(ctx, chromedp.WithLogf(t.Logf))
	defer cancelTab()

	if err := chromedp.Do(ctx, chromedp.Navigate(d.url+"/"), chromedp.WaitVisible("#accounts")); err != nil {
		t.Fatalf("load dashboard: %v", err)
	}
	read := func() (pageView, error) {
		var v pageView
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](readPage))
		if err != nil {
			return v, err
		}
		return v, json.Unmarshal([]byte(raw), &v)
	}

	// Live: the same numbers read twice must differ once the page has
	// polled a few times (the demo keeps submitting and receiving).
	var first pageView
	poll(t, 30*time.Second, func() error {
		v, err := read()
		if err != nil {
			return err
		}
		if v.Rows < 4 || v.Submitted == "–" {
			return fmt.Errorf("page not filled yet: %+v", v)
		}
		first = v
		return nil
	})
	var last pageView
	poll(t, 40*time.Second, func() error {
		v, err := read()
		if err != nil {
			return err
		}
		last = v
		switch {
		case v.Live == first.Live:
			return fmt.Errorf("the page stopped polling: %q", v.Live)
		case v.Submitted == first.Submitted && v.Receipts == first.Receipts:
			return fmt.Errorf("live numbers do not change: submitted %s, receipts %s", v.Submitted, v.Receipts)
		case v.SendLines < 2 || v.ReceiptLine < 1 || v.Lines < 8:
			return fmt.Errorf("charts not drawn yet: %d lines (sends %d, receipts %d)", v.Lines, v.SendLines, v.ReceiptLine)
		case polls(v.Live) < 8:
			return fmt.Errorf("only %d polls so far: wait for a few seconds of history", polls(v.Live))
		case v.Promo429 == "" || v.Promo429 == "0":
			return fmt.Errorf("the throttled account shows no 429s yet (%q)", v.Promo429)
		case v.Subs < 1 || v.Events < 1:
			return fmt.Errorf("the events part is empty: %d subscriptions, %d events", v.Subs, v.Events)
		}
		return nil
	})
	want := map[string]bool{"shop-eu": true, "shop-us": true, "support": true, "promo-overdriven": true}
	for _, id := range last.IDs {
		delete(want, id)
	}
	if len(want) > 0 {
		t.Errorf("account table lacks %v (has %v)", want, last.IDs)
	}

	// The filter narrows the table without waiting for the next poll.
	if err := chromedp.Do(ctx, chromedp.SendKeys("#filter", "shop")); err != nil {
		t.Fatal(err)
	}
	filtered, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#accounts tbody tr").length`))
	if err != nil {
		t.Fatal(err)
	}
	if filtered != 2 {
		t.Errorf("filter \"shop\" shows %d rows, want 2", filtered)
	}
	all, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => { const f = document.getElementById("filter");
		f.value = ""; f.dispatchEvent(new Event("input"));
		return document.querySelectorAll("#accounts tbody tr").length })()`))
	if err != nil || all != len(last.IDs) {
		t.Fatalf("clearing the filter shows %d rows, want %d (%v)", all, len(last.IDs), err)
	}

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 means PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.ArtifactDir(), "dashboard.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard screenshot: %s (%d bytes; kept with go test -artifacts)", path, len(png))
	t.Logf("page: %d accounts, %d chart lines, promo-overdriven 429s %s, %d subscriptions, %d events, %s",
		last.Rows, last.Lines, last.Promo429, last.Subs, last.Events, last.Live)
}
