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

// TestProviderBaseURLs: Meta's Graph API by default; the environment or
// the file replace the list; a bad or empty list stops the start.
func TestProviderBaseURLs(t *testing.T) {
	c, err := Load(nil, envOf(nil), io.Discard)
	if err != nil || c.ProviderBaseURLs != "https://graph.facebook.com" {
		t.Fatalf("default = %q, %v", c.ProviderBaseURLs, err)
	}
	c, err = Load(nil, envOf(map[string]string{"WAMUX_PROVIDER_BASE_URLS": "https://graph.facebook.com,http://127.0.0.1:8090"}), io.Discard)
	if err != nil || c.ProviderBaseURLs != "https://graph.facebook.com,http://127.0.0.1:8090" {
		t.Fatalf("from the environment = %q, %v", c.ProviderBaseURLs, err)
	}
	path := filepath.Join(t.TempDir(), "wamux.yaml")
	if err := os.WriteFile(path, []byte("provider_base_urls: http://10.0.0.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := Load([]string{"--config", path}, envOf(nil), io.Discard); err != nil || c.ProviderBaseURLs != "http://10.0.0.5" {
		t.Fatalf("from the file = %q, %v", c.ProviderBaseURLs, err)
	}
	for _, bad := range []string{"ftp://x.example", "https://x.example/?q", " , "} {
		if err := os.WriteFile(path, []byte("provider_base_urls: '"+bad+"'\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load([]string{"--config", path}, envOf(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "provider_base_urls") {
			t.Errorf("%q: %v, want an error naming provider_base_urls", bad, err)
		}
	}
}
