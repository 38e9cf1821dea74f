package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAPIKeyScopes: WAMUX_API_KEYS and the file's api_keys take scopes
// after a colon; a bad entry stops the start with an error that names its
// position and never its text.
func TestAPIKeyScopes(t *testing.T) {
	c, err := Load(nil, envOf(map[string]string{"WAMUX_API_KEYS": "key-one-1,key-two-2:send,key-three:read+send"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.APIKeys, ",") != "key-one-1,key-two-2:send,key-three:read+send" {
		t.Errorf("api keys = %q", c.APIKeys)
	}
	path := filepath.Join(t.TempDir(), "wamux.yaml")
	if err := os.WriteFile(path, []byte("api_keys: [file-key-1:admin, file-key-2]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load([]string{"--config", path}, envOf(nil), io.Discard); err != nil {
		t.Errorf("file keys with scopes refused: %v", err)
	}

	bad := map[string]string{
		"unknown scope":     "good-key-1,s3cret-key-9:write",
		"empty scope":       "s3cret-key-9:",
		"empty key":         "good-key-1,:send",
		"same key twice":    "s3cret-key-9:send,s3cret-key-9:read",
		"short with scopes": "s3cret:send",
	}
	for name, v := range bad {
		_, err := Load(nil, envOf(map[string]string{"WAMUX_API_KEYS": v}), io.Discard)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "good-key") || strings.Contains(err.Error(), "write") {
			t.Errorf("%s: the error shows a key: %v", name, err)
		}
		if !strings.Contains(err.Error(), "API key") {
			t.Errorf("%s: the error does not say which setting: %v", name, err)
		}
	}
}
