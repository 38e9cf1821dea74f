package notifytest

import (
	"slices"
	"testing"

	"github.com/wamux/wamux/notify"
)

// RunAccountChanges checks notify.AccountChanges over the Notifiers
// newNotifier builds: an announcement on one node reaches the other's
// subscriber (and its own) as the account id, in order; the message
// carries the id only; a malformed message is skipped.
func RunAccountChanges(t *testing.T, newNotifier NewNotifier, opts Options) {
	a := newNotifier(t)
	b := a
	if opts.Nodes {
		b = newNotifier(t)
	}
	there, here, raw := newInbox(), newInbox(), newInbox()
	for _, s := range []struct {
		n   notify.Notifier
		box *inbox
	}{{b, there}, {a, here}} {
		stop, err := notify.NewAccountChanges(s.n, nil).Subscribe(t.Context(), func(id string) { s.box.fn([]byte(id)) }, nil)
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		t.Cleanup(stop)
	}
	subscribe(t, b, notify.AccountsTopic, raw)
	announce := notify.NewAccountChanges(a, nil)
	if err := announce.Announce(t.Context(), ""); err == nil {
		t.Fatal("an announcement without an account id was sent")
	}
	if err := announce.Announce(t.Context(), "acc-1"); err != nil {
		t.Fatal(err)
	}
	publish(t, a, notify.AccountsTopic, "not json")
	publish(t, a, notify.AccountsTopic, `{"token":"x"}`)
	if err := announce.Announce(t.Context(), "acc-2"); err != nil {
		t.Fatal(err)
	}
	want := []string{"acc-1", "acc-2"}
	if got := there.waitFor(t, 2); !slices.Equal(got, want) {
		t.Fatalf("the other node heard %q, want %q", got, want)
	}
	if got := here.waitFor(t, 2); !slices.Equal(got, want) {
		t.Fatalf("the announcing node heard %q, want %q", got, want)
	}
	if got := raw.waitFor(t, 4); got[0] != `{"account_id":"acc-1"}` {
		t.Fatalf("the announcement reads %q, want the account id only", got[0])
	}
}
