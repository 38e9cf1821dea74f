package seal_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/wamux/wamux/internal/seal"
)

func TestParseKeysAcceptsBase64Variants(t *testing.T) {
	// 0xfb 0xff encode to characters that differ between the alphabets.
	odd := bytes.Repeat([]byte{0xfb, 0xff}, seal.KeySize/2)
	for _, env := range []string{
		base64.StdEncoding.EncodeToString(odd),
		base64.RawStdEncoding.EncodeToString(odd),
		base64.URLEncoding.EncodeToString(odd),
		base64.RawURLEncoding.EncodeToString(odd),
		" " + base64.StdEncoding.EncodeToString(odd) + "\n",
	} {
		keys, err := seal.ParseKeys(env)
		if err != nil {
			t.Errorf("ParseKeys(%q): %v", env, err)
			continue
		}
		if len(keys) != 1 || !bytes.Equal(keys[0], odd) {
			t.Errorf("ParseKeys(%q) = %x", env, keys)
		}
	}

	keys, err := seal.ParseKeys(b64(testKey(1)) + " , " + base64.RawURLEncoding.EncodeToString(testKey(2)) + "," + b64(testKey(3)))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || !bytes.Equal(keys[0], testKey(1)) || !bytes.Equal(keys[1], testKey(2)) || !bytes.Equal(keys[2], testKey(3)) {
		t.Fatalf("ParseKeys kept %d keys or reordered them", len(keys))
	}
}

func TestParseKeysErrorsNamePositionNotText(t *testing.T) {
	good := b64(testKey(1))
	badChar := good[:40] + "*" + good[41:]
	short := b64(testKey(2)[:16])
	long := b64(append(testKey(3), 0))
	for _, tc := range []struct {
		env, want string
		hidden    []string
	}{
		{"", "no keys", nil},
		{" , ", "key 1 of 2: empty entry", nil},
		{good + ",," + good, "key 2 of 3: empty entry", []string{good}},
		{good + ",", "key 2 of 2: empty entry", []string{good}},
		{badChar, "key 1 of 1: not base64", []string{badChar[:12]}},
		{good + "," + short, "key 2 of 2: decodes to 16 bytes, want 32", []string{good[:12], short[:12]}},
		{long + "," + good, "key 1 of 2: decodes to 33 bytes, want 32", []string{good[:12], long[:12]}},
	} {
		keys, err := seal.ParseKeys(tc.env)
		if err == nil {
			t.Errorf("ParseKeys(%q) = %d keys, want an error", tc.env, len(keys))
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseKeys(%q) error %q does not say %q", tc.env, err, tc.want)
		}
		for _, h := range tc.hidden {
			if strings.Contains(err.Error(), h) {
				t.Errorf("ParseKeys error %q shows key text", err)
			}
		}
		assertNoKeyText(t, err.Error(), testKey(1), testKey(2), testKey(3))
	}
}
