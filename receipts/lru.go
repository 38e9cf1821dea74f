package receipts

import (
	"fmt"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/wamux/wamux"
)

// Defaults of LRUConfig.
const (
	// LRUPerAccountDefault covers the bursts of webhook retries for one
	// number: Meta resends a notification within minutes, not hours.
	LRUPerAccountDefault = 5000
	// LRUAccountsDefault bounds how many accounts keep a cache at once;
	// with LRUPerAccountDefault that is at most 1,280,000 ids.
	LRUAccountsDefault = 256
)

// ReceiptID names one receipt within its account: the provider message and
// the receipt type, the L3 uniqueness triple without the account.
type ReceiptID struct {
	MessageID string
	Type      wamux.ReceiptType
}

// LRUConfig sizes the L1 cache; zero fields take the defaults.
type LRUConfig struct {
	// PerAccount is how many receipt ids each account remembers.
	PerAccount int
	// Accounts is how many accounts have a cache at once; the one used
	// least recently loses its cache when another account needs one.
	Accounts int
}

// LRU is L1 of the dedup chain: per account, the ids of the receipts seen
// most recently, each with whether a copy carrying callback data was among
// them (Contains), kept in front of the stream so that a webhook retry
// storm never reaches it. It is exact — a key is reported seen only if it was
// recorded — so it never drops a new receipt; forgetting a key (eviction,
// restart, another node) only costs a trip to L2 and L3.
//
// Memory is bounded by Accounts × PerAccount ids. One id costs 48 bytes of
// entry and 8 to 16 of table (idset.go) plus the message_id it keeps alive
// (~60 bytes for a wamid), so the defaults' worst case is 256 × 5,000 ×
// ~125 B ≈ 160 MB; the real figure follows the accounts active recently.
// Size Accounts to the machine: 50 accounts with the default PerAccount
// take about 31 MB.
//
// LRU is safe for concurrent use. Each account has its own lock, so
// accounts do not contend with each other beyond a short map lookup.
type LRU struct {
	perAccount int

	mu       sync.Mutex
	accounts *simplelru.LRU[string, *accountLRU]
}

type accountLRU struct {
	mu   sync.Mutex
	seen *idSet
}

// NewLRU builds an L1 cache; negative sizes are an error.
func NewLRU(cfg LRUConfig) (*LRU, error) {
	if cfg.PerAccount < 0 || cfg.Accounts < 0 {
		return nil, fmt.Errorf("receipts: LRU sizes must not be negative: per account %d, accounts %d", cfg.PerAccount, cfg.Accounts)
	}
	if cfg.PerAccount == 0 {
		cfg.PerAccount = LRUPerAccountDefault
	}
	if cfg.Accounts == 0 {
		cfg.Accounts = LRUAccountsDefault
	}
	accounts, err := simplelru.NewLRU[string, *accountLRU](cfg.Accounts, nil)
	if err != nil {
		return nil, fmt.Errorf("receipts: account LRU: %w", err)
	}
	return &LRU{perAccount: cfg.PerAccount, accounts: accounts}, nil
}

// Seen records id, of a receipt without callback data, for accountID and
// reports whether it was already there. A hit makes id the most recent
// again, so a key that keeps being repeated is not evicted by the stream
// of new ones.
func (l *LRU) Seen(accountID string, id ReceiptID) bool {
	a := l.account(accountID)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen.get(id, false) {
		return true
	}
	a.seen.add(id, false)
	return false
}

// account returns the cache of accountID, creating it when absent.
func (l *LRU) account(accountID string) *accountLRU {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, ok := l.accounts.Get(accountID); ok {
		return a
	}
	a := &accountLRU{seen: newIDSet(l.perAccount)}
	l.accounts.Add(accountID, a)
	return a
}

// Contains reports whether a receipt of id that the receipt at hand
// repeats was recorded for accountID, without recording it: any copy of
// id, or, when the receipt at hand carries callback data (callback), a
// copy that carried some too. A copy without it (an agent's) cannot
// resolve the message the callback data names, so the one that names it
// must go on to the merge. The pipeline asks first and records (Add) only
// once the receipt is durable: a key recorded before a failed append
// would make the sender's retry look like a duplicate and lose the
// receipt.
func (l *LRU) Contains(accountID string, id ReceiptID, callback bool) bool {
	a := l.account(accountID)
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen.get(id, callback)
}

// Add records id for accountID, as a copy carrying callback data when
// callback.
func (l *LRU) Add(accountID string, id ReceiptID, callback bool) {
	a := l.account(accountID)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen.add(id, callback)
}
