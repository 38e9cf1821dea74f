package app_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/internal/seal"
	"github.com/wamux/wamux/internal/testwait"
)

func randomKey(t *testing.T) string {
	t.Helper()
	k := make([]byte, seal.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k)
}

// dataFiles returns the bytes of the SQLite database and its -wal and -shm.
func dataFiles(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(filepath.Join(dir, app.SQLiteFile+suffix))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestAccessTokenSealedAtRest: an account's access token, given to the API,
// is in no file of the data dir, and the gateway still sends with it; a
// gateway started without the key that sealed it refuses to start, naming
// the key's id and not the token.
func TestAccessTokenSealedAtRest(t *testing.T) {
	s, simURL := startSim(t)
	key := randomKey(t)
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.APIKeys, cfg.SecretKey = "127.0.0.1:0", t.TempDir(), []string{testKey}, key
	cfg.ProviderBaseURLs = simURL
	a := newApp(cfg)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	const token = "tok-555001"
	call(t, a, "POST", "/v1/accounts", `{"id":"acc","phone_number_id":"555001","access_token":"`+token+`","base_url":"`+simURL+`","rate_per_sec":50}`)
	call(t, a, "POST", "/v1/messages", `{"biz_type":"t","account_id":"acc","client_seq":1,"to":"15550001","type":"text","text":{"body":"hi"}}`)
	testwait.For(t, "the message to reach the provider", 30*time.Second, func() bool {
		return s.Stats().Totals.Accepted >= 1 // the sim accepts only the number's own token
	})
	if b := dataFiles(t, cfg.DataDir); len(b) == 0 || bytes.Contains(b, []byte(token)) {
		t.Fatalf("the data files (%d bytes) hold the access token in plaintext", len(b))
	}
	stopApp(t, a)
	if bytes.Contains(dataFiles(t, cfg.DataDir), []byte(token)) {
		t.Fatal("after stop, the data files hold the access token in plaintext")
	}
	keys, err := seal.ParseKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := seal.New(keys...)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := ring.Seal("x")
	if err != nil {
		t.Fatal(err)
	}
	keyID, _ := seal.SealedKeyID(sealed)

	cfg.SecretKey = randomKey(t)
	b := newApp(cfg)
	err = b.Start(context.Background())
	if err == nil {
		stopApp(t, b)
		t.Fatal("a gateway without the sealing key started")
	}
	if !strings.Contains(err.Error(), keyID) || strings.Contains(err.Error(), token) {
		t.Fatalf("start without the key: %v, want an error naming key id %s and not the token", err, keyID)
	}

	cfg.SecretKey = randomKey(t) + "," + key // rotated: the old key still opens
	c := newApp(cfg)
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("start with a rotated key list: %v", err)
	}
	if got := call(t, c, "GET", "/v1/accounts/acc", ""); !strings.Contains(got, `"id":"acc"`) {
		t.Fatalf("GET account after rotation: %s", got)
	}
	stopApp(t, c)
}
