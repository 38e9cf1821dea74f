package seal

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// ParseKeys decodes a WAMUX_SECRET_KEY value: comma-separated keys, each the
// base64 of KeySize bytes (standard or URL-safe alphabet, padded or not),
// spaces around an entry ignored. Errors name the entry's position, never its
// text.
func ParseKeys(env string) ([][]byte, error) {
	if strings.TrimSpace(env) == "" {
		return nil, errors.New("seal: no keys given")
	}
	parts := strings.Split(env, ",")
	keys := make([][]byte, len(parts))
	for i, p := range parts {
		key, err := parseKey(p)
		if err != nil {
			return nil, fmt.Errorf("seal: key %d of %d: %w", i+1, len(parts), err)
		}
		keys[i] = key
	}
	return keys, nil
}

// keyEncodings are the base64 variants a key may be written in.
var keyEncodings = []*base64.Encoding{
	base64.StdEncoding,
	base64.RawStdEncoding,
	base64.URLEncoding,
	base64.RawURLEncoding,
}

// parseKey decodes one key. Its errors never contain s.
func parseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty entry")
	}
	for _, enc := range keyEncodings {
		key, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("decodes to %d bytes, want %d", len(key), KeySize)
		}
		return key, nil
	}
	return nil, errors.New("not base64")
}
