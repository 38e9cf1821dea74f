package seal_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wamux/wamux/internal/seal"
)

// assertOnlyFile fails unless dir holds exactly the file name.
func assertOnlyFile(t *testing.T, dir, name string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != name {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only %s", names, name)
	}
}

func TestKeyFileCreatedPrivateAndReused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret.key")
	key, err := seal.LoadOrCreateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(key) != seal.KeySize || bytes.Equal(key, make([]byte, seal.KeySize)) {
		t.Fatalf("created key %d bytes, all zero or wrong size", len(key))
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Fatalf("key file mode %#o, want 0600", perm)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(text))); err != nil || !bytes.Equal(got, key) {
		t.Fatalf("file does not hold the returned key in standard base64")
	}
	assertOnlyFile(t, dir, "secret.key")

	again, err := seal.LoadOrCreateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, key) {
		t.Fatal("second call returned another key")
	}
	if other, err := seal.LoadOrCreateKeyFile(filepath.Join(dir, "other.key")); err != nil || bytes.Equal(other, key) {
		t.Fatalf("a second key file got the same key or failed: %v", err)
	}
}

func TestKeyFileWrittenByOperatorIsRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	for _, text := range []string{b64(testKey(4)) + "\n", base64.RawURLEncoding.EncodeToString(testKey(4))} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		key, err := seal.LoadOrCreateKeyFile(path)
		if err != nil || !bytes.Equal(key, testKey(4)) {
			t.Fatalf("LoadOrCreateKeyFile(%q) = %x, %v", text, key, err)
		}
	}
}

func TestKeyFileOpenToOthersIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	text := b64(testKey(5)) + "\n"
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		key, err := seal.LoadOrCreateKeyFile(path)
		if err == nil {
			t.Fatalf("mode %#o: key accepted", mode)
		}
		if key != nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
			t.Errorf("mode %#o: error %q does not tell to chmod 600 the file", mode, err)
		}
		assertNoKeyText(t, err.Error(), testKey(5))
		if got, _ := os.ReadFile(path); string(got) != text {
			t.Fatalf("mode %#o: refused key file was rewritten", mode)
		}
	}
}

func TestKeyFileWithoutAKeyIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret.key")
	for _, text := range []string{"", "\n", "not a key", b64(testKey(6)[:16]), b64(testKey(6)) + "," + b64(testKey(7)), strings.Repeat("A", 4096)} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := seal.LoadOrCreateKeyFile(path); err == nil {
			t.Fatalf("content %.20q accepted as a key", text)
		} else {
			assertNoKeyText(t, err.Error(), testKey(6), testKey(7))
		}
		if got, _ := os.ReadFile(path); string(got) != text {
			t.Fatalf("content %.20q was rewritten", text)
		}
	}
	if _, err := seal.LoadOrCreateKeyFile(dir); err == nil {
		t.Fatal("a directory accepted as a key file")
	}
	if _, err := seal.LoadOrCreateKeyFile(filepath.Join(dir, "missing", "secret.key")); err == nil {
		t.Fatal("key file created in a missing directory")
	}
}

func TestConcurrentKeyFileCreationAgrees(t *testing.T) {
	const callers = 12
	for round := range 20 {
		dir := t.TempDir()
		path := filepath.Join(dir, "secret.key")
		start := make(chan struct{})
		keys := make([][]byte, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				<-start
				keys[i], errs[i] = seal.LoadOrCreateKeyFile(path)
			})
		}
		close(start)
		wg.Wait()
		stored, err := seal.LoadOrCreateKeyFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range callers {
			if errs[i] != nil {
				t.Fatalf("round %d caller %d: %v", round, i, errs[i])
			}
			if !bytes.Equal(keys[i], stored) {
				t.Fatalf("round %d: caller %d got a key other than the stored one", round, i)
			}
		}
		assertOnlyFile(t, dir, "secret.key")
	}
}

func TestFromEnvOrFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret.key")

	k, err := seal.FromEnvOrFile(b64(testKey(1))+","+b64(testKey(2)), path)
	if err != nil {
		t.Fatal(err)
	}
	if id := sealedID(t, mustSeal(t, k, "x")); id != idOf(testKey(1)) {
		t.Fatalf("keyring from the environment seals with %s, want %s", id, idOf(testKey(1)))
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a key file was made although the environment has keys: %v", err)
	}

	first, err := seal.FromEnvOrFile("", path)
	if err != nil {
		t.Fatal(err)
	}
	sealed := mustSeal(t, first, "kept across restarts")
	second, err := seal.FromEnvOrFile(" ", path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := second.Open(sealed); err != nil || got != "kept across restarts" {
		t.Fatalf("keyring from the same key file opens %q, %v", got, err)
	}

	if _, err := seal.FromEnvOrFile("", ""); err == nil || !strings.Contains(err.Error(), "WAMUX_SECRET_KEY is required") {
		t.Fatalf("no environment and no file: error %v, want one saying WAMUX_SECRET_KEY is required", err)
	}
	bad := b64(testKey(3)[:20])
	if _, err := seal.FromEnvOrFile(bad, path); err == nil || !strings.Contains(err.Error(), "WAMUX_SECRET_KEY: seal: key 1 of 1") || strings.Contains(err.Error(), bad) {
		t.Fatalf("bad environment: error %v, want one naming WAMUX_SECRET_KEY and the key's position only", err)
	}
	if _, err := seal.FromEnvOrFile(b64(testKey(1))+","+b64(testKey(1)), ""); err == nil {
		t.Fatal("the same key listed twice was accepted")
	}
}
