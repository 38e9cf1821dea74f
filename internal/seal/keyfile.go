package seal

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// maxKeyFileSize bounds what is read of a key file; a key in base64 with a
// line break is 45 bytes.
const maxKeyFileSize = 1 << 10

// FromEnvOrFile builds the keyring of a deployment: from env, the value of
// WAMUX_SECRET_KEY, when it is not empty; otherwise from the key file at path,
// created on first use. With both empty there is no key to use.
func FromEnvOrFile(env, path string) (*Keyring, error) {
	if strings.TrimSpace(env) != "" {
		keys, err := ParseKeys(env)
		if err != nil {
			return nil, fmt.Errorf("WAMUX_SECRET_KEY: %w", err)
		}
		return New(keys...)
	}
	if path == "" {
		return nil, errors.New("seal: WAMUX_SECRET_KEY is required: set it to the base64 of 32 random bytes (openssl rand -base64 32)")
	}
	key, err := LoadOrCreateKeyFile(path)
	if err != nil {
		return nil, err
	}
	return New(key)
}

// LoadOrCreateKeyFile returns the key held at path as base64 text, first
// creating the file with a random key when it does not exist. The file must
// be a regular file closed to group and others (mode 0600 or narrower).
// Concurrent callers, in one process or several, all get the same key: the
// file appears complete under path or not at all, and never replaces one
// that exists.
func LoadOrCreateKeyFile(path string) ([]byte, error) {
	key, err := readKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createKeyFile(path)
	}
	return key, err
}

// readKeyFile reads and checks the key file at path. Its errors wrap
// fs.ErrNotExist when the file is absent and never contain the file's text.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("seal: open key file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("seal: key file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("seal: key file %s is not a regular file", path)
	}
	if perm := info.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, fmt.Errorf("seal: key file %s has mode %#o, which lets group or others read it; run chmod 600 %s", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("seal: read key file %s: %w", path, err)
	}
	if len(b) > maxKeyFileSize {
		return nil, fmt.Errorf("seal: key file %s is larger than a key; want the base64 of %d bytes", path, KeySize)
	}
	key, err := parseKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("seal: key file %s: %v; want the base64 of %d bytes", path, err, KeySize)
	}
	return key, nil
}

// createKeyFile writes a random key to a temporary file in the directory of
// path, syncs it, and links it to path. The link fails when path exists, and
// then the key of whoever created it first is read back.
func createKeyFile(path string) ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("seal: generate key: %w", err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("seal: create key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return nil, fmt.Errorf("seal: write key file: %w", err)
	}
	err = os.Link(tmp.Name(), path)
	if errors.Is(err, fs.ErrExist) {
		return readKeyFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("seal: create key file: %w", err)
	}
	if err := os.Remove(tmp.Name()); err != nil {
		return nil, fmt.Errorf("seal: create key file: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("seal: create key file: %w", err)
	}
	return key, nil
}

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	return errors.Join(serr, d.Close())
}
