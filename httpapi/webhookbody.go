package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/provider/cloudapi"
)

// Bounds on the unauthenticated webhook bodies held at once: a body is
// only known to come from Meta once all of it has been read and hashed,
// so until then it is held against these budgets. Past either, the
// request is answered 503 without reading its body; Meta retries.
const (
	WebhookMaxBodiesDefault    = 64
	WebhookBodyBudgetDefault   = 48 << 20 // bytes of bodies being read at once
	webhookBodyReadTimeout     = 15 * time.Second
	webhookRetryAfterSeconds   = "5"
	webhookSignaturePrefix     = "sha256="
	webhookSignatureHexLength  = 2 * sha256.Size
	webhookUnknownLengthCharge = MaxBodyWebhook
)

// bodyGate admits at most maxBodies bodies and budget bytes of them at
// once. A body of unknown length (chunked) is charged the endpoint's
// limit.
type bodyGate struct {
	mu        sync.Mutex
	bodies    int
	bytes     int64
	maxBodies int
	budget    int64
}

func newBodyGate(maxBodies int, budget int64) *bodyGate {
	if maxBodies <= 0 {
		maxBodies = WebhookMaxBodiesDefault
	}
	if budget <= 0 {
		budget = WebhookBodyBudgetDefault
	}
	return &bodyGate{maxBodies: maxBodies, budget: budget}
}

// acquire takes n bytes and one body, or reports false and takes nothing.
func (g *bodyGate) acquire(n int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bodies >= g.maxBodies || g.bytes+n > g.budget {
		return false
	}
	g.bodies++
	g.bytes += n
	return true
}

func (g *bodyGate) release(n int64) {
	g.mu.Lock()
	g.bodies--
	g.bytes -= n
	g.mu.Unlock()
}

// signatureOf decodes an X-Hub-Signature-256 value ("sha256=" and 64 hex
// digits); false for anything else.
func signatureOf(header string) ([]byte, bool) {
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(header), webhookSignaturePrefix)
	if !ok || len(hexSig) != webhookSignatureHexLength {
		return nil, false
	}
	sig, err := hex.DecodeString(hexSig)
	return sig, err == nil
}

// readSignedBody reads the body of a webhook while computing its
// HMAC-SHA256 under every app secret, and returns it only if it is signed
// under one of them. What cannot be signed (no secret, no well-formed
// header, a declared length over the limit) and what finds the gate full
// are refused before a byte of the body is read, with Connection: close
// so the server does not read it either.
func (s *Server) readSignedBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	refuse := func(reason string, err error) ([]byte, error) {
		w.Header().Set("Connection", "close")
		s.metrics.webhookRefused.WithLabelValues(reason).Inc()
		return nil, err
	}
	sig, ok := signatureOf(r.Header.Get(cloudapi.SignatureHeader))
	if len(s.appSecrets) == 0 {
		s.logger(r).Warn("webhook refused: no app secret is configured (WAMUX_APP_SECRET)")
		ok = false
	}
	if !ok {
		return refuse(refusedSignature, wamux.Errorf(wamux.EUnauthorized, "missing or invalid %s", cloudapi.SignatureHeader))
	}
	if r.ContentLength > MaxBodyWebhook {
		return refuse(refusedTooLarge, wamux.Errorf(wamux.ETooLarge, "webhook body exceeds %d bytes", MaxBodyWebhook))
	}
	charge := r.ContentLength
	if charge < 0 {
		charge = webhookUnknownLengthCharge
	}
	if !s.webhookGate.acquire(charge) {
		w.Header().Set("Retry-After", webhookRetryAfterSeconds)
		return refuse(refusedBusy, wamux.Errorf(wamux.EUnavailable, "too many webhook bodies are being read; retry later"))
	}
	defer s.webhookGate.release(charge)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(webhookBodyReadTimeout))

	macs := make([]hash.Hash, len(s.appSecrets))
	writers := make([]io.Writer, len(s.appSecrets))
	for i, secret := range s.appSecrets {
		macs[i] = hmac.New(sha256.New, []byte(secret))
		writers[i] = macs[i]
	}
	size := r.ContentLength
	if size < 0 {
		size = 32 << 10
	}
	body, err := readHashing(http.MaxBytesReader(w, r.Body, MaxBodyWebhook), size, io.MultiWriter(writers...))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return refuse(refusedTooLarge, wamux.Errorf(wamux.ETooLarge, "webhook body exceeds %d bytes", MaxBodyWebhook))
		}
		return refuse(refusedUnreadable, wamux.Errorf(wamux.EInvalid, "webhook body could not be read"))
	}
	for _, m := range macs {
		if hmac.Equal(sig, m.Sum(nil)) {
			return body, nil
		}
	}
	s.metrics.webhookRefused.WithLabelValues(refusedSignature).Inc()
	return nil, wamux.Errorf(wamux.EUnauthorized, "missing or invalid %s", cloudapi.SignatureHeader)
}

// readHashing reads r to its end into a buffer of capacity size (the
// declared length; it grows past it only as far as r yields), writing
// every byte read to h as well.
func readHashing(r io.Reader, size int64, h io.Writer) ([]byte, error) {
	buf := make([]byte, 0, size+1) // +1: EOF is seen without a regrowth
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		if n > 0 {
			_, _ = h.Write(buf[len(buf) : len(buf)+n])
			buf = buf[:len(buf)+n]
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
