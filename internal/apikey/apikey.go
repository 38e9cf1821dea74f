// Package apikey parses the gateway's API keys and their scopes.
//
// An entry is a key, optionally followed by a colon and scopes joined by
// '+': "k1", "k2:send", "k3:read+send". A key without scopes has them all.
// Errors name an entry by its position, never by its text: an entry is a
// secret, and what follows a colon may be part of a key.
package apikey

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
)

// Scope is a set of rights over /v1.
type Scope uint8

// The scopes: Send submits messages and receipts, Read reads any state,
// Admin changes configuration and decides for others (accounts, settings,
// held messages, subscriptions, marking inbound messages read).
const (
	Send Scope = 1 << iota
	Read
	Admin

	// All is what a key without scopes has.
	All = Send | Read | Admin
)

// names orders the scopes as they are printed.
var names = []struct {
	s    Scope
	name string
}{{Send, "send"}, {Read, "read"}, {Admin, "admin"}}

// Has tells whether s holds every scope of need.
func (s Scope) Has(need Scope) bool { return s&need == need }

// String joins the names of the scopes in s with '+' ("send+read").
func (s Scope) String() string {
	var out []string
	for _, n := range names {
		if s&n.s != 0 {
			out = append(out, n.name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "+")
}

// ParseScope returns the scope named name.
func ParseScope(name string) (Scope, bool) {
	for _, n := range names {
		if n.name == name {
			return n.s, true
		}
	}
	return 0, false
}

// Key is one API key and what it may do.
type Key struct {
	Secret string
	Scopes Scope
}

// ID is a short name of the key that does not reveal it: the first 8 hex
// digits of the SHA-256 of its text (printf %s "$KEY" | sha256sum).
func (k Key) ID() string { return ID(k.Secret) }

// ID is the id of the key whose text is secret.
func ID(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:4])
}

// String shows the key's id and scopes, never its text.
func (k Key) String() string { return fmt.Sprintf("apikey.Key{ID:%s Scopes:%s}", k.ID(), k.Scopes) }

// LogValue shows the key's id and scopes, never its text.
func (k Key) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", k.ID()), slog.String("scopes", k.Scopes.String()))
}

// Parse reads the entries (already split at commas and trimmed); n-th
// entries are counted from 1 in errors. Two entries with the same key are
// an error: which scopes would it have?
func Parse(entries []string) ([]Key, error) {
	keys := make([]Key, 0, len(entries))
	seen := make(map[string]int, len(entries))
	for i, e := range entries {
		k, err := parseEntry(e)
		if err != nil {
			return nil, fmt.Errorf("API key %d of %d: %w", i+1, len(entries), err)
		}
		if j, dup := seen[k.Secret]; dup {
			return nil, fmt.Errorf("API keys %d and %d are the same key; give it once, with all its scopes", j, i+1)
		}
		seen[k.Secret] = i + 1
		keys = append(keys, k)
	}
	return keys, nil
}

func parseEntry(e string) (Key, error) {
	secret, scopes, hasScopes := strings.Cut(strings.TrimSpace(e), ":")
	secret = strings.TrimSpace(secret)
	if secret == "" {
		return Key{}, fmt.Errorf("the key before ':' is empty")
	}
	if !hasScopes {
		return Key{Secret: secret, Scopes: All}, nil
	}
	k := Key{Secret: secret}
	for _, name := range strings.Split(scopes, "+") {
		s, ok := ParseScope(strings.TrimSpace(name))
		if !ok {
			return Key{}, fmt.Errorf("unknown or empty scope after ':' (value hidden); scopes are send, read and admin, joined by '+'")
		}
		k.Scopes |= s
	}
	return k, nil
}
