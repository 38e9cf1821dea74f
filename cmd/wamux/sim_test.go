package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
)

func TestSimHelpDocumentsEveryFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runSim(context.Background(), []string{"--help"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d", code)
	}
	help := errOut.String()
	fs, _ := simFlags(io.Discard)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if !strings.Contains(help, "-"+f.Name+" ") && !strings.Contains(help, "-"+f.Name+"\n") {
			t.Errorf("--help does not document -%s", f.Name)
		}
		if f.Usage == "" {
			t.Errorf("-%s has no description", f.Name)
		}
	})
	if n < 30 {
		t.Fatalf("only %d flags", n)
	}
}

func TestSimBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--number", "nocolon"}, {"--fault-code", "x=1"}, {"--fault-5xx", "2"}, {"--fault-paced", "2"}, {"--paced-drop", "-1"}, {"--paced-hold", "-1s"}, {"extra"}} {
		if code := runSim(context.Background(), args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestSimRunsStandalone starts the command on a free port, sends one
// message through it and stops it by cancelling the context.
func TestSimRunsStandalone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- runSim(ctx, []string{"--listen", "127.0.0.1:0", "--number", "555:tok-1"}, pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var url string
	for lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), "wamux sim: listening on "); ok {
			url = u
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		t.Fatal("no listen line")
	}
	req, _ := http.NewRequest("POST", url+"/v24.0/555/messages", strings.NewReader(`{"messaging_product":"whatsapp","to":"15550001111","type":"text","text":{"body":"hi"}}`))
	req.Header.Set("Authorization", "Bearer tok-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("send: %d", resp.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop after cancellation")
	}
}

// Reference §6: Meta may send read without delivered, and sent and failed
// for one message. The sim can do both (sim.Webhooks), but `wamux sim` had
// no flag for either, so a gateway run against the command never met them.
func TestSimFlagsSetStatusShapes(t *testing.T) {
	fs, o := simFlags(io.Discard)
	if err := fs.Parse([]string{"--skip-delivered-prob", "0.3", "--fail-after-sent-prob", "0.7"}); err != nil {
		t.Fatal(err)
	}
	if w := o.cfg.Webhooks; w.SkipDeliveredProbability != 0.3 || w.FailAfterSentProbability != 0.7 {
		t.Fatalf("webhooks %+v", w)
	}
	for _, args := range [][]string{{"--skip-delivered-prob", "2"}, {"--fail-after-sent-prob", "-1"}} {
		if code := runSim(context.Background(), args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestSimBadNumberShowsNoToken: a --number without its "id:" part (or
// with an empty id) is refused with exit 2 without printing the value,
// which is, or holds, an access token; the flag promises that tokens are
// never printed.
func TestSimBadNumberShowsNoToken(t *testing.T) {
	for _, v := range []string{"EAAGs3cr3tT0ken", ":EAAGs3cr3tT0ken", "106540352242922:"} {
		var out, errOut bytes.Buffer
		code := runSim(context.Background(), []string{"--number", v}, &out, &errOut)
		if code != 2 {
			t.Errorf("--number %s: exit %d, want 2", v, code)
		}
		if strings.Contains(out.String()+errOut.String(), "s3cr3t") {
			t.Errorf("--number %s: the token is printed:\n%s", v, errOut.String())
		}
		if !strings.Contains(errOut.String(), "-number") {
			t.Errorf("--number %s: the error does not name the flag:\n%s", v, errOut.String())
		}
	}
}

// TestSimInboundFlags: --inbound-rate, --inbound-customers and
// --service-window reach the simulator's config (off by default), bad
// values are refused, and a running `wamux sim --inbound-rate` posts
// users' messages to the webhook URL on its own, signed.
func TestSimInboundFlags(t *testing.T) {
	fs, o := simFlags(io.Discard)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if o.cfg.Inbound.Rate != 0 || o.cfg.ServiceWindow {
		t.Fatalf("defaults: inbound %+v, service window %v; want no traffic and no window", o.cfg.Inbound, o.cfg.ServiceWindow)
	}
	fs, o = simFlags(io.Discard)
	if err := fs.Parse([]string{"--inbound-rate", "2.5", "--inbound-customers", "7", "--service-window"}); err != nil {
		t.Fatal(err)
	}
	if o.cfg.Inbound.Rate != 2.5 || o.cfg.Inbound.Customers != 7 || !o.cfg.ServiceWindow {
		t.Fatalf("parsed: inbound %+v, service window %v", o.cfg.Inbound, o.cfg.ServiceWindow)
	}
	for _, args := range [][]string{{"--inbound-rate", "-1"}, {"--inbound-customers", "-3"}} {
		if code := runSim(context.Background(), args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}

	const secret = "flag-secret"
	var mu sync.Mutex
	from := map[string]int{}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !cloudapi.VerifySignature(r.Header.Get(cloudapi.SignatureHeader), body, secret) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		hook, err := cloudapi.ParseWebhook(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, e := range hook.Entry {
			for _, c := range e.Changes {
				for _, m := range c.Value.Messages {
					from[c.Value.Metadata.PhoneNumberID+"/"+m.From]++
				}
			}
		}
	}))
	defer rcv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- runSim(ctx, []string{"--listen", "127.0.0.1:0", "--number", "555:tok-1", "--inbound-rate", "100",
			"--inbound-customers", "2", "--webhook-url", rcv.URL, "--app-secret", secret}, io.Discard, io.Discard)
	}()
	testwait.For(t, "20 users' messages at the webhook URL", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range from {
			n += c
		}
		return n >= 20
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(from) > 2 {
		t.Fatalf("senders %v; want at most the 2 users of --inbound-customers", from)
	}
}
