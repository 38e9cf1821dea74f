package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/notify"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/ownership"
	"github.com/wamux/wamux/store"
)

// In cluster mode any node takes a submission, but only the holder of the
// account's partition queues and sends it. The node that stored a message
// for an account it does not hold announces the account on outboundTopic;
// the holder then looks in the store at once (Dispatcher.Reload) instead
// of at its next periodic look (clusterReload). Announcements are at most
// once; the periodic look is what guarantees the message is found.
const outboundTopic = "outbound"

// clusterOutbound is the dispatcher as the API sees it on a cluster node:
// what it stores for an account held elsewhere is announced to the holder,
// and an account change to every node.
type clusterOutbound struct {
	httpapi.Outbound
	own      ownership.Ownership
	notifier notify.Notifier
	accounts *notify.AccountChanges
	log      *slog.Logger
}

// Submit implements httpapi.Outbound.
func (o *clusterOutbound) Submit(ctx context.Context, msgs []wamux.Message) ([]outbound.SubmitResult, error) {
	res, err := o.Outbound.Submit(ctx, msgs)
	if err != nil {
		return res, err
	}
	seen := map[string]bool{}
	for _, r := range res {
		if r.Err != nil || r.Duplicate || seen[r.Message.AccountID] {
			continue
		}
		seen[r.Message.AccountID] = true
		o.nudge(ctx, r.Message.AccountID)
	}
	return res, nil
}

// Release implements httpapi.Outbound.
func (o *clusterOutbound) Release(ctx context.Context, msgID string) (wamux.Message, error) {
	m, err := o.Outbound.Release(ctx, msgID)
	if err == nil {
		o.nudge(ctx, m.AccountID)
	}
	return m, err
}

// AccountChanged implements httpapi.Outbound.
func (o *clusterOutbound) AccountChanged(ctx context.Context, a wamux.Account) error {
	if err := o.Outbound.AccountChanged(ctx, a); err != nil {
		return err
	}
	o.announce(ctx, a.ID)
	return nil
}

// AccountReactivated implements httpapi.Outbound.
func (o *clusterOutbound) AccountReactivated(ctx context.Context, a wamux.Account) error {
	if err := o.Outbound.AccountReactivated(ctx, a); err != nil {
		return err
	}
	o.announce(ctx, a.ID)
	return nil
}

// nudge tells the holder of accountID, when that is another node, that the
// account has new messages in the store.
func (o *clusterOutbound) nudge(ctx context.Context, accountID string) {
	if accountID == "" {
		return
	}
	if _, held := o.own.Lease(accountID); held {
		return
	}
	if err := o.notifier.Publish(ctx, outboundTopic, []byte(accountID)); err != nil {
		o.log.Warn("cluster: announcing new messages to the account's holder failed; it finds them at its next reload",
			"account_id", accountID, "reload_every", clusterReload, "err", err)
	}
}

func (o *clusterOutbound) announce(ctx context.Context, accountID string) {
	if err := o.accounts.Announce(ctx, accountID); err != nil {
		o.log.Warn("cluster: announcing an account change failed; other nodes apply it at their next reload",
			"account_id", accountID, "err", err)
	}
}

// followCluster subscribes the dispatcher to the announcements of other
// nodes: new messages of an account this node holds make it look in the
// store, and a changed account is read again and applied (each node
// routes over every account, and the holder limits it). stop ends both.
func followCluster(ctx context.Context, disp *outbound.Dispatcher, st store.Store, own ownership.Ownership,
	n notify.Notifier, accounts *notify.AccountChanges, log *slog.Logger) (stop func(), err error) {
	stopNudges, err := n.Subscribe(ctx, outboundTopic, func(payload []byte) {
		if _, held := own.Lease(string(payload)); held {
			disp.ReloadAccount(string(payload))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("app: subscribe to new-message announcements: %w", err)
	}
	apply := func(id string) {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a, err := st.GetAccount(c, id)
		if err == nil {
			err = disp.AccountChanged(c, a)
		}
		if err != nil {
			log.Warn("cluster: applying an account changed on another node failed", "account_id", id, "err", err)
		}
	}
	stopAccounts, err := accounts.Subscribe(ctx, apply, func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		all, err := st.ListAccounts(c)
		cancel()
		if err != nil {
			log.Warn("cluster: reading the accounts again after a break in announcements failed", "err", err)
			return
		}
		for _, a := range all {
			apply(a.ID)
		}
		disp.Reload()
	})
	if err != nil {
		stopNudges()
		return nil, fmt.Errorf("app: subscribe to account announcements: %w", err)
	}
	return func() { stopNudges(); stopAccounts() }, nil
}
