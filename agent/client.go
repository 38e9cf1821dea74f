package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// verdict is what one attempt means for its batch.
type verdict int

const (
	verdictAcked  verdict = iota // 2xx: the gateway has the batch durably
	verdictRetry                 // network error, 408, 429, 5xx: try again later
	verdictReject                // any other 4xx: retrying cannot help
	// verdictConfig is an answer every batch gets alike until an operator
	// fixes the agent's configuration or the gateway's (see configHint):
	// retrying is what delivers the batch once that is done.
	verdictConfig
)

// attempt is the outcome of one POST.
type attempt struct {
	verdict    verdict
	status     int    // 0 when no response arrived
	code       string // the gateway's error code, if it sent one
	message    string
	hint       string // what to fix, for verdictConfig
	retryAfter time.Duration
	accepted   int
	duplicates int
	err        error // why no response arrived, or what was wrong with it
}

type batchRequest struct {
	AccountID string   `json:"account_id"`
	Receipts  []record `json:"receipts"`
}

type batchResponse struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
}

type errorResponse struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// maxResponseBody bounds what is read of an answer; a real one is tiny.
const maxResponseBody = 64 << 10

// post sends recs once and classifies the answer. Error values never carry
// the API key: it travels only in the request header.
func (a *Agent) post(ctx context.Context, recs []record) attempt {
	body, err := encodeBatch(a.cfg.AccountID, recs)
	if err != nil {
		return attempt{verdict: verdictReject, err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return attempt{verdict: verdictRetry, err: fmt.Errorf("agent: build request: %w", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.cfg.APIKey)
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return attempt{verdict: verdictRetry, err: fmt.Errorf("agent: post batch: %w", err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	// Drain what is left so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
	at := attempt{status: resp.StatusCode}
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		at.verdict = verdictAcked
		var br batchResponse
		if err != nil {
			at.err = fmt.Errorf("agent: read answer: %w", err)
		} else if jerr := json.Unmarshal(data, &br); jerr != nil {
			at.err = fmt.Errorf("agent: decode answer: %w", jerr)
		} else if br.Accepted < 0 || br.Duplicates < 0 || br.Accepted+br.Duplicates != len(recs) {
			at.err = fmt.Errorf("agent: answer counts %d accepted and %d duplicates for %d receipts", br.Accepted, br.Duplicates, len(recs))
		}
		if at.err != nil {
			// Not the gateway's answer to this batch (a proxy, a wrong
			// GatewayURL): nothing says the receipts are stored.
			at.verdict = verdictRetry
			return at
		}
		at.accepted, at.duplicates = br.Accepted, br.Duplicates
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500:
		at.verdict = verdictRetry
		at.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
		at.code, at.message = parseError(data)
	case s >= 400:
		at.verdict = verdictReject
		at.code, at.message = parseError(data)
		if at.hint = configHint(s, at.message); at.hint != "" {
			at.verdict = verdictConfig
		}
	default:
		// 1xx and 3xx are not answers this endpoint gives; a proxy in the
		// way may recover.
		at.verdict = verdictRetry
	}
	return at
}

// configHint says what to fix when a 4xx is a configuration error, and ""
// when it is not. These answers say nothing about the receipts: every
// batch gets the same one until the key, GatewayURL or the account on the
// gateway is fixed, and nothing replays dead letters, so dropping the
// batches meanwhile would lose every receipt reported in that time (a
// rotated key, an agent started before its account was created). Any other
// 4xx is bad input that retrying cannot fix.
func configHint(status int, message string) string {
	switch {
	case status == http.StatusUnauthorized:
		return "the gateway does not know APIKey: set the right key, or add it to the gateway's API keys"
	case status == http.StatusForbidden:
		return "the gateway does not let APIKey post receipts: use a key that may, or grant it on the gateway"
	case status == http.StatusNotFound:
		return "GatewayURL does not serve POST /v1/receipts:batch: point it at the gateway"
	case status == http.StatusBadRequest && strings.HasPrefix(message, "unknown account_id "):
		// httpapi's answer for an account_id it has no account for.
		return "the gateway has no account AccountID: create it there, or fix AccountID"
	}
	return ""
}

// encodeBatch is the request body for recs.
func encodeBatch(accountID string, recs []record) ([]byte, error) {
	wire := make([]record, len(recs))
	for i, r := range recs {
		r.Seq = 0 // spool bookkeeping, not part of the contract
		wire[i] = r
	}
	body, err := json.Marshal(batchRequest{AccountID: accountID, Receipts: wire})
	if err != nil {
		return nil, fmt.Errorf("agent: encode batch: %w", err)
	}
	return body, nil
}

func parseError(data []byte) (code, message string) {
	var er errorResponse
	if json.Unmarshal(data, &er) != nil {
		return "", ""
	}
	return er.Error.Code, er.Error.Message
}

// parseRetryAfter reads the delay-seconds form; the date form is rare for
// APIs and is ignored. Seconds past what a Duration holds are the longest
// Duration (the caller caps it), not a product that wrapped around.
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange), n <= 0:
		return 0
	case n > math.MaxInt64/int64(time.Second):
		return math.MaxInt64
	}
	return time.Duration(n) * time.Second
}
