package storetest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/seal"
	"github.com/wamux/wamux/store"
)

// NewKeyring returns a keyring of fresh random keys, the first sealing.
func NewKeyring(t testing.TB, keys ...[]byte) *seal.Keyring {
	t.Helper()
	if len(keys) == 0 {
		keys = [][]byte{NewKey(t)}
	}
	k, err := seal.New(keys...)
	if err != nil {
		t.Fatalf("keyring: %v", err)
	}
	return k
}

// NewKey returns a random key for NewKeyring.
func NewKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, seal.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// Sealing is what RunSealing needs of a backend: one store location per
// subtest, opened as often as the test asks.
type Sealing struct {
	// Open opens the subtest's store with sealer (nil: plaintext) and
	// returns Open's error as it is. The test closes what it opens.
	Open func(t *testing.T, sealer store.Sealer) (store.Store, error)
	// RawToken reads the access_token column of account id around the
	// store.
	RawToken func(t *testing.T, id string) string
	// Files, when set, returns the bytes of every file the store keeps
	// (the SQLite database, its -wal and -shm), to search for plaintext.
	Files func(t *testing.T) []byte
}

// RunSealing checks that access tokens are sealed at rest with the store's
// Sealer: written sealed, read opened, plaintext ones sealed when the store
// opens, rotated keys honoured, a missing key reported by its id.
func RunSealing(t *testing.T, newSealing func(t *testing.T) Sealing) {
	t.Run("WrittenSealed", func(t *testing.T) { testWrittenSealed(t, newSealing(t)) })
	t.Run("PlaintextSealedAtOpen", func(t *testing.T) { testPlaintextSealedAtOpen(t, newSealing(t)) })
	t.Run("Rotation", func(t *testing.T) { testSealRotation(t, newSealing(t)) })
	t.Run("MissingKey", func(t *testing.T) { testSealMissingKey(t, newSealing(t)) })
	t.Run("HeldStoreOnlyChecked", func(t *testing.T) { testSealHeldStore(t, newSealing(t)) })
}

const (
	tokenA = "EAAGtokenAAAA0123456789abcdefSECRET"
	tokenB = "EAAGtokenBBBB9876543210fedcbaSECRET"
	tokenC = "EAAGtokenCCCC5555555555555555SECRET"
)

func openSealed(t *testing.T, h Sealing, sealer store.Sealer) store.Store {
	t.Helper()
	s, err := h.Open(t, sealer)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func closeStore(t *testing.T, s store.Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func createWithToken(t *testing.T, s store.Store, id, phone, token string) {
	t.Helper()
	a := testAccount(id, phone)
	a.AccessToken = token
	got, err := s.CreateAccount(ctx(t), a)
	must(t, err)
	if got.AccessToken != token {
		t.Fatalf("CreateAccount returned token %q, want the plaintext %q", got.AccessToken, token)
	}
}

// wantTokens reads every account through each read of the store and wants
// the plaintext tokens.
func wantTokens(t *testing.T, s store.Store, want map[string]string) {
	t.Helper()
	list, err := s.ListAccounts(ctx(t))
	must(t, err)
	if len(list) != len(want) {
		t.Fatalf("ListAccounts has %d accounts, want %d", len(list), len(want))
	}
	for _, a := range list {
		if a.AccessToken != want[a.ID] {
			t.Fatalf("ListAccounts: account %s token %q, want %q", a.ID, a.AccessToken, want[a.ID])
		}
		got, err := s.GetAccount(ctx(t), a.ID)
		must(t, err)
		if got.AccessToken != want[a.ID] {
			t.Fatalf("GetAccount(%s) token %q, want %q", a.ID, got.AccessToken, want[a.ID])
		}
		got, err = s.GetAccountByPhoneNumberID(ctx(t), a.PhoneNumberID)
		must(t, err)
		if got.AccessToken != want[a.ID] {
			t.Fatalf("GetAccountByPhoneNumberID(%s) token %q, want %q", a.PhoneNumberID, got.AccessToken, want[a.ID])
		}
	}
}

// wantRawSealed wants account id's stored token sealed under keyID and
// free of its plaintext.
func wantRawSealed(t *testing.T, h Sealing, id, plain, keyID string) {
	t.Helper()
	raw := h.RawToken(t, id)
	if !seal.IsSealed(raw) || strings.Contains(raw, plain) {
		t.Fatalf("account %s stores its token as %q, want it sealed", id, raw)
	}
	if got, _ := seal.SealedKeyID(raw); got != keyID {
		t.Fatalf("account %s token sealed under key %s, want %s", id, got, keyID)
	}
}

// wantNoPlaintext searches the store's files for the tokens.
func wantNoPlaintext(t *testing.T, h Sealing, tokens ...string) {
	t.Helper()
	if h.Files == nil {
		return
	}
	b := h.Files(t)
	if len(b) == 0 {
		t.Fatal("the store's files are empty")
	}
	for _, tok := range tokens {
		if bytes.Contains(b, []byte(tok)) {
			t.Fatalf("the store's files hold the access token %q in plaintext", tok)
		}
	}
}

// keyIDOf is the id of the key that seals for k.
func keyIDOf(t *testing.T, k *seal.Keyring) string {
	t.Helper()
	s, err := k.Seal("x")
	must(t, err)
	id, _ := seal.SealedKeyID(s)
	return id
}

func testWrittenSealed(t *testing.T, h Sealing) {
	k := NewKeyring(t)
	s := openSealed(t, h, k)
	createWithToken(t, s, "acc1", "1001", tokenA)
	createWithToken(t, s, "acc2", "1002", tokenB)
	tok := tokenC
	got, err := s.UpdateAccount(ctx(t), "acc2", store.AccountPatch{AccessToken: &tok})
	must(t, err)
	if got.AccessToken != tokenC {
		t.Fatalf("UpdateAccount returned token %q, want %q", got.AccessToken, tokenC)
	}
	burst := 7
	got, err = s.UpdateAccount(ctx(t), "acc1", store.AccountPatch{Burst: &burst})
	must(t, err)
	if got.AccessToken != tokenA {
		t.Fatalf("UpdateAccount without a token returned %q, want %q", got.AccessToken, tokenA)
	}
	id := keyIDOf(t, k)
	wantRawSealed(t, h, "acc1", tokenA, id)
	wantRawSealed(t, h, "acc2", tokenC, id)
	wantTokens(t, s, map[string]string{"acc1": tokenA, "acc2": tokenC})
	wantNoPlaintext(t, h, tokenA, tokenB, tokenC)
	closeStore(t, s)
	wantNoPlaintext(t, h, tokenA, tokenB, tokenC)
}

func testPlaintextSealedAtOpen(t *testing.T, h Sealing) {
	s := openSealed(t, h, nil)
	createWithToken(t, s, "acc1", "1001", tokenA)
	createWithToken(t, s, "acc2", "1002", tokenB)
	if raw := h.RawToken(t, "acc1"); raw != tokenA {
		t.Fatalf("a store without a sealer stores %q, want the plaintext", raw)
	}
	wantTokens(t, s, map[string]string{"acc1": tokenA, "acc2": tokenB})
	closeStore(t, s)
	if h.Files != nil && !bytes.Contains(h.Files(t), []byte(tokenA)) {
		t.Fatal("the store's files do not show a token stored in plaintext: Files reads the wrong files")
	}

	k := NewKeyring(t)
	s = openSealed(t, h, k)
	id := keyIDOf(t, k)
	wantNoPlaintext(t, h, tokenA, tokenB) // sealed in place by Open
	wantRawSealed(t, h, "acc1", tokenA, id)
	wantRawSealed(t, h, "acc2", tokenB, id)
	wantTokens(t, s, map[string]string{"acc1": tokenA, "acc2": tokenB})
	closeStore(t, s)
	wantNoPlaintext(t, h, tokenA, tokenB)
}

func testSealRotation(t *testing.T, h Sealing) {
	oldKey, newKey := NewKey(t), NewKey(t)
	oldRing := NewKeyring(t, oldKey)
	s := openSealed(t, h, oldRing)
	createWithToken(t, s, "acc1", "1001", tokenA)
	createWithToken(t, s, "acc2", "1002", tokenB)
	wantRawSealed(t, h, "acc1", tokenA, keyIDOf(t, oldRing))
	closeStore(t, s)

	rotated := NewKeyring(t, newKey, oldKey)
	newID := keyIDOf(t, rotated)
	s = openSealed(t, h, rotated)
	wantTokens(t, s, map[string]string{"acc1": tokenA, "acc2": tokenB})
	wantRawSealed(t, h, "acc1", tokenA, newID) // sealed again when the store opened
	wantRawSealed(t, h, "acc2", tokenB, newID)
	tok := tokenC
	_, err := s.UpdateAccount(ctx(t), "acc2", store.AccountPatch{AccessToken: &tok})
	must(t, err)
	createWithToken(t, s, "acc3", "1003", tokenA)
	wantRawSealed(t, h, "acc2", tokenC, newID)
	wantRawSealed(t, h, "acc3", tokenA, newID)
	closeStore(t, s)

	// Every token is under the new key: the old one can be dropped.
	s = openSealed(t, h, NewKeyring(t, newKey))
	wantTokens(t, s, map[string]string{"acc1": tokenA, "acc2": tokenC, "acc3": tokenA})
	closeStore(t, s)
	wantNoPlaintext(t, h, tokenA, tokenB, tokenC)

	_, err = h.Open(t, oldRing)
	if !errors.Is(err, seal.ErrUnknownKey) || !strings.Contains(err.Error(), newID) {
		t.Fatalf("open with only the dropped key: %v, want an unknown key error naming %s", err, newID)
	}
}

func testSealMissingKey(t *testing.T, h Sealing) {
	k := NewKeyring(t)
	id := keyIDOf(t, k)
	s := openSealed(t, h, k)
	createWithToken(t, s, "acc1", "1001", tokenA)
	closeStore(t, s)

	for name, sealer := range map[string]store.Sealer{"no sealer": nil, "another key": NewKeyring(t)} {
		s, err := h.Open(t, sealer)
		if err == nil {
			closeStore(t, s)
			t.Fatalf("%s: open succeeded over a token sealed under key %s", name, id)
		}
		msg := err.Error()
		if !strings.Contains(msg, id) || !strings.Contains(msg, "acc1") || strings.Contains(msg, tokenA) {
			t.Fatalf("%s: open error %q must name the account and key id %s, and not the token", name, msg, id)
		}
		if wamux.ErrorCode(err) != wamux.EInternal {
			t.Fatalf("%s: open error %q has domain code %q", name, msg, wamux.ErrorCode(err))
		}
	}
	s = openSealed(t, h, k) // the right key still opens it
	wantTokens(t, s, map[string]string{"acc1": tokenA})
	closeStore(t, s)
}

// testSealHeldStore: a store opened while a gateway holds it (Claim) seals
// nothing, since that gateway may lack the new key, but still checks that
// every token opens; once free, the next open seals.
func testSealHeldStore(t *testing.T, h Sealing) {
	oldKey, newKey := NewKey(t), NewKey(t)
	oldRing := NewKeyring(t, oldKey)
	running := openSealed(t, h, oldRing)
	owner, ok := running.(store.Owner)
	if !ok {
		closeStore(t, running)
		t.Skip("the store cannot be claimed")
	}
	createWithToken(t, running, "acc1", "1001", tokenA)
	claim, err := owner.Claim(ctx(t))
	must(t, err)

	rotated := NewKeyring(t, newKey, oldKey)
	second := openSealed(t, h, rotated)
	wantRawSealed(t, h, "acc1", tokenA, keyIDOf(t, oldRing)) // left for the running gateway to read
	wantTokens(t, second, map[string]string{"acc1": tokenA})
	closeStore(t, second)
	if s, err := h.Open(t, NewKeyring(t)); err == nil {
		closeStore(t, s)
		t.Fatal("a store whose tokens the keys do not open opened while held")
	}
	wantTokens(t, running, map[string]string{"acc1": tokenA})
	must(t, claim.Release())
	closeStore(t, running)

	s := openSealed(t, h, rotated)
	wantRawSealed(t, h, "acc1", tokenA, keyIDOf(t, rotated))
	closeStore(t, s)
}
