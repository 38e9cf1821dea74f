package notify_test

import (
	"testing"

	"github.com/wamux/wamux/notify"
	"github.com/wamux/wamux/notify/notifytest"
)

func TestLocalConformance(t *testing.T) {
	notifytest.Run(t, func(t *testing.T) notify.Notifier {
		l := notify.NewLocal()
		t.Cleanup(l.Close)
		return l
	}, notifytest.Options{})
}

func TestLocalAccountChanges(t *testing.T) {
	l := notify.NewLocal()
	t.Cleanup(l.Close)
	notifytest.RunAccountChanges(t, func(*testing.T) notify.Notifier { return l }, notifytest.Options{})
}
