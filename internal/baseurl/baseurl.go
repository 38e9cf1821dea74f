// Package baseurl is the allow-list of provider base URLs an account's
// base_url must fall under (WAMUX_PROVIDER_BASE_URLS): the gateway sends an
// account's access token to its base_url, so whoever may change that URL
// must not be able to point it at a host of their choosing.
//
// A URL falls under an entry when it has the entry's scheme and host, the
// entry's port if the entry names one (any port of the host otherwise; a
// missing port is the scheme's default), and, if the entry has a path, a
// path equal to it or below it.
package baseurl

import (
	"fmt"
	"net/url"
	"strings"
)

// List is a parsed allow-list; the zero List allows nothing.
type List struct {
	entries []entry
}

type entry struct {
	scheme, host, port, path string
	text                     string
}

// Parse reads comma-separated base URLs; blanks around and between them
// are ignored. Errors name an entry by its position and show it unless it
// carries credentials.
func Parse(s string) (List, error) {
	var l List
	parts := strings.Split(s, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		e, err := parseEntry(p)
		if err != nil {
			return List{}, fmt.Errorf("entry %d: %w", i+1, err)
		}
		l.entries = append(l.entries, e)
	}
	return l, nil
}

// MustParse is Parse for lists known to be valid.
func MustParse(s string) List {
	l, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return l
}

func parseEntry(s string) (entry, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return entry{}, fmt.Errorf("not a URL")
	case u.User != nil:
		return entry{}, fmt.Errorf("must not hold credentials (value hidden)")
	case u.Scheme != "http" && u.Scheme != "https":
		return entry{}, fmt.Errorf("%q: must be an http or https URL", s)
	case u.Host == "" || u.Hostname() == "":
		return entry{}, fmt.Errorf("%q: has no host", s)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return entry{}, fmt.Errorf("%q: must not have a query or fragment", s)
	case hasDotSegment(u.Path):
		return entry{}, fmt.Errorf("%q: must not have '.' or '..' in its path", s)
	}
	return entry{scheme: u.Scheme, host: normHost(u.Hostname()), port: u.Port(),
		path: strings.TrimRight(u.Path, "/"), text: strings.TrimRight(s, "/")}, nil
}

// Len is the number of entries.
func (l List) Len() int { return len(l.entries) }

// String is the list as given, comma-separated.
func (l List) String() string {
	texts := make([]string, len(l.entries))
	for i, e := range l.entries {
		texts[i] = e.text
	}
	return strings.Join(texts, ",")
}

// Allows tells whether the base URL raw falls under an entry. A URL that
// does not parse, holds credentials or has '.' or '..' path segments
// falls under none.
func (l List) Allows(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Hostname() == "" || hasDotSegment(u.Path) {
		return false
	}
	host, path := normHost(u.Hostname()), strings.TrimRight(u.Path, "/")
	for _, e := range l.entries {
		if e.scheme != u.Scheme || e.host != host {
			continue
		}
		if e.port != "" && effectivePort(e.scheme, e.port) != effectivePort(u.Scheme, u.Port()) {
			continue
		}
		if e.path != "" && path != e.path && !strings.HasPrefix(path, e.path+"/") {
			continue
		}
		return true
	}
	return false
}

func normHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

func effectivePort(scheme, port string) string {
	if port != "" {
		return port
	}
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// hasDotSegment tells whether a (decoded) path has a "." or ".." segment,
// which a server may resolve to outside the entry's path.
func hasDotSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
