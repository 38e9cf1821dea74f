package config

import (
	"io"
	"strings"
	"testing"
)

// TestListenMustBeAnAddress: a listen value that is no host:port is a
// configuration error at Load (exit 2, naming the setting), not found
// only after the store was opened and claimed and the dispatcher started.
func TestListenMustBeAnAddress(t *testing.T) {
	for _, v := range []string{"nonsense", "8080", "127.0.0.1", "[::1", "127.0.0.1:8080:1"} {
		_, err := Load([]string{"--listen", v}, envOf(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "listen") {
			t.Errorf("--listen %q: error %v, want one naming listen", v, err)
		}
	}
	for _, v := range []string{"127.0.0.1:8080", ":8080", "[::1]:0", "localhost:9000"} {
		if _, err := Load([]string{"--listen", v}, envOf(nil), io.Discard); err != nil {
			t.Errorf("--listen %q: %v", v, err)
		}
	}
}
