package agent

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wamux/wamux/store"
)

const otherAccount = "acct-2"

// wantStoredAs fails unless the gateway's store holds exactly want, each
// receipt once and under the account the map gives it.
func wantStoredAs(t *testing.T, g *gateway, want map[string][]Receipt) {
	t.Helper()
	got := g.storedKeys(t)
	n := 0
	for account, rs := range want {
		n += len(rs)
		for _, r := range rs {
			k := store.ReceiptKey{MessageID: r.MessageID, AccountID: account, Type: r.Type}
			if got[k] != 1 {
				t.Errorf("store holds %v %d times, want once", k, got[k])
			}
		}
	}
	if len(got) != n {
		t.Errorf("store holds %d receipts, want %d: %v", len(got), n, got)
	}
}

func readAccountFile(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, accountFile))
	if err != nil {
		t.Fatalf("read account file: %v", err)
	}
	return strings.TrimSpace(string(data))
}

// newAgentErr is New on dir against g as account, for a New expected to
// fail; an agent it starts anyway is closed at once, without waiting for
// delivery.
func newAgentErr(t *testing.T, g *gateway, dir, account string) error {
	t.Helper()
	a, err := New(Config{GatewayURL: g.srv.URL, APIKey: testKey, AccountID: account, SpoolDir: dir,
		Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		_ = a.Close(canceledContext())
	}
	return err
}

// Spool records carry no account: the batch takes Config.AccountID. An
// agent restarted on the same SpoolDir with another AccountID must not
// send the receipts left there as the other account's.
func TestRestartWithOtherAccountRefusedWhileUnacked(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.setMode(gwFail)
	dir := t.TempDir()
	rs := testReceipts("acct", 10)
	a := newTestAgent(t, g, dir, nil)
	reportAll(t, a, rs)
	closeCanceled(t, a)

	g.setMode(gwOK)
	sent := g.counts().accepted
	err := newAgentErr(t, g, dir, otherAccount)
	if !errors.Is(err, ErrSpoolAccount) {
		t.Fatalf("New with another AccountID on a spool holding unacked receipts = %v, want ErrSpoolAccount", err)
	}
	msg := err.Error()
	for _, want := range []string{`"` + testAccount + `"`, `"` + otherAccount + `"`, "10 unacknowledged", "SpoolDir"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %s", msg, want)
		}
	}
	if strings.Contains(msg, testKey) {
		t.Errorf("error %q shows the API key", msg)
	}
	if got := g.counts().accepted; got != sent {
		t.Errorf("the refused agent sent %d receipts", got-sent)
	}
	if got := readAccountFile(t, dir); got != testAccount {
		t.Errorf("account file = %q after the refused New, want %q", got, testAccount)
	}

	// The failed New released the dir: the right account drains it.
	b := newTestAgent(t, g, dir, nil)
	closeAgent(t, b)
	wantStoredAs(t, g, map[string][]Receipt{testAccount: rs})
}

// Once everything is acked the spool may change hands; from then on it
// belongs to the new account, and the old one is refused while the new
// one's receipts wait.
func TestRestartWithOtherAccountAfterDrain(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	dir := t.TempDir()
	first := testReceipts("first", 6)
	a := newTestAgent(t, g, dir, nil)
	reportAll(t, a, first)
	closeAgent(t, a)

	second := testReceipts("second", 8)
	b := newTestAgent(t, g, dir, func(c *Config) { c.AccountID = otherAccount })
	if got := readAccountFile(t, dir); got != otherAccount {
		t.Errorf("account file = %q after the spool changed hands, want %q", got, otherAccount)
	}
	g.setMode(gwFail)
	reportAll(t, b, second)
	closeCanceled(t, b)

	g.setMode(gwOK)
	if err := newAgentErr(t, g, dir, testAccount); !errors.Is(err, ErrSpoolAccount) {
		t.Fatalf("New with the first AccountID while the second's receipts wait = %v, want ErrSpoolAccount", err)
	}
	c := newTestAgent(t, g, dir, func(c *Config) { c.AccountID = otherAccount })
	closeAgent(t, c)
	if st := c.Stats(); st.Replayed != 8 || st.Acked != 8 {
		t.Errorf("Stats = %+v, want 8 replayed and acked", st)
	}
	wantStoredAs(t, g, map[string][]Receipt{testAccount: first, otherAccount: second})
}

// A spool written by an agent from before the account file is adopted by
// the configured account, receipts and all, and named after it from then
// on.
func TestPreMarkerSpoolIsAdopted(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	dir := t.TempDir()
	recs := spoolRecords(5)
	data, _ := encodeRecords(t, recs)
	for name, content := range map[string][]byte{
		"00000000000000000001.seg": data,
		ackFile:                    []byte("2\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a := newTestAgent(t, g, dir, nil)
	if got := readAccountFile(t, dir); got != testAccount {
		t.Errorf("account file = %q, want the adopting %q", got, testAccount)
	}
	closeAgent(t, a)
	if st := a.Stats(); st.Replayed != 3 || st.Acked != 3 {
		t.Errorf("Stats = %+v, want 3 replayed and acked", st)
	}
	wantStoredAs(t, g, map[string][]Receipt{testAccount: testReceipts("spool", 5)[2:]})
}

// The account file is replaced by rename only, so an unreadable one is
// outside damage: a spool with receipts waiting is refused rather than
// guessed, an empty one is taken over.
func TestUnreadableAccountFile(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.setMode(gwFail)
	dir := t.TempDir()
	a := newTestAgent(t, g, dir, nil)
	reportAll(t, a, testReceipts("unread", 2))
	closeCanceled(t, a)
	if err := os.WriteFile(filepath.Join(dir, accountFile), []byte("not an id!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := newAgentErr(t, g, dir, testAccount); !errors.Is(err, ErrSpoolAccount) {
		t.Fatalf("New on a spool with receipts and a damaged account file = %v, want ErrSpoolAccount", err)
	}

	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, accountFile), []byte("not an id!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newTestAgent(t, g, empty, nil)
	closeAgent(t, b)
	if got := readAccountFile(t, empty); got != testAccount {
		t.Errorf("account file = %q, want %q", got, testAccount)
	}
}
