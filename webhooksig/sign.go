package webhooksig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Names of the headers every delivery carries.
const (
	HeaderID        = "webhook-id"        // the event's id, the same on every attempt
	HeaderTimestamp = "webhook-timestamp" // the attempt's time in Unix seconds
	HeaderSignature = "webhook-signature" // space-separated "version,signature" entries
)

// signatureVersion identifies an HMAC-SHA256 signature in HeaderSignature.
const signatureVersion = "v1"

// Sign returns the HeaderSignature entry for one key:
// "v1," + base64(HMAC-SHA256(key, id + "." + unix seconds of ts + "." + body)).
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	return signatureVersion + "," + base64.StdEncoding.EncodeToString(mac(key, id, strconv.FormatInt(ts.Unix(), 10), body))
}

// SignatureHeader returns the HeaderSignature value for a delivery: the
// signature of every key, space-separated, so that a receiver holding any one
// of the secrets (as during a rotation) verifies it.
func SignatureHeader(keys [][]byte, id string, ts time.Time, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = Sign(k, id, ts, body)
	}
	return strings.Join(sigs, " ")
}

// mac is the raw HMAC-SHA256 of the signed content; ts is the timestamp
// exactly as it appears in HeaderTimestamp.
func mac(key []byte, id, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}
