package wamux_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"testing"

	"github.com/google/uuid"

	"github.com/wamux/wamux"
)

func TestDeriveMsgID(t *testing.T) {
	got := wamux.DeriveMsgID("order", "acme-1", 42)
	sum := sha256.Sum256([]byte("order:acme-1:42"))
	if want := hex.EncodeToString(sum[:])[:24]; got != want {
		t.Fatalf("DeriveMsgID = %s, want %s", got, want)
	}
	if wamux.DeriveMsgID("order", "acme-1", 42) != got {
		t.Fatal("DeriveMsgID is not stable: a retry must get the same id")
	}
	for _, other := range []string{
		wamux.DeriveMsgID("order", "acme-1", 43),
		wamux.DeriveMsgID("promo", "acme-1", 42),
		wamux.DeriveMsgID("order", "acme-2", 42),
	} {
		if other == got {
			t.Fatalf("different inputs gave the same msg_id %s", got)
		}
	}
}

func TestNewMsgIDIsUUIDv7(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := wamux.NewMsgID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 {
			t.Fatalf("NewMsgID() = %q: not a UUIDv7 (%v)", id, err)
		}
		if seen[id] {
			t.Fatalf("NewMsgID repeated %s", id)
		}
		seen[id] = true
	}
}

func TestParsePriority(t *testing.T) {
	for in, want := range map[string]wamux.Priority{"": wamux.P1, "P0": wamux.P0, "P1": wamux.P1, "P2": wamux.P2} {
		got, err := wamux.ParsePriority(in)
		if err != nil || got != want {
			t.Errorf("ParsePriority(%q) = %v, %v; want %v", in, got, err, want)
		}
		if in != "" && got.String() != in {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	for _, bad := range []string{"p1", "P3", "high", "1"} {
		if _, err := wamux.ParsePriority(bad); wamux.ErrorCode(err) != wamux.EInvalid {
			t.Errorf("ParsePriority(%q) err = %v, want invalid", bad, err)
		}
	}
}

func TestReceiptVersionOrder(t *testing.T) {
	order := []wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptFailed, wamux.ReceiptDelivered, wamux.ReceiptRead}
	for i := 1; i < len(order); i++ {
		if order[i-1].Version() >= order[i].Version() {
			t.Fatalf("%s must be weaker than %s", order[i-1], order[i])
		}
	}
	if _, err := wamux.ParseReceiptType("seen"); err == nil {
		t.Fatal("ParseReceiptType accepted an unknown type")
	}
}

func TestErrorCodes(t *testing.T) {
	wrapped := fmt.Errorf("create account: %w", wamux.Errorf(wamux.EConflict, "account %s exists", "a"))
	if wamux.ErrorCode(wrapped) != wamux.EConflict || wamux.ErrorMessage(wrapped) != "account a exists" {
		t.Fatalf("wrapped domain error lost: %s / %s", wamux.ErrorCode(wrapped), wamux.ErrorMessage(wrapped))
	}
	infra := fmt.Errorf("sqlite: INSERT INTO accounts …: %w", http.ErrHandlerTimeout)
	if wamux.ErrorCode(infra) != wamux.EInternal || regexp.MustCompile(`(?i)insert|sqlite`).MatchString(wamux.ErrorMessage(infra)) {
		t.Fatalf("infrastructure error leaks: %s", wamux.ErrorMessage(infra))
	}
}

func TestAccountStringHidesToken(t *testing.T) {
	a := wamux.Account{ID: "a", AccessToken: "EAAG-secret"}
	if s := fmt.Sprintf("%v %+v %s", a, a, a); regexp.MustCompile("EAAG-secret").MatchString(s) {
		t.Fatalf("formatted account shows the token: %s", s)
	}
}
