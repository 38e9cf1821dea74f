package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// verdict is what one attempt means for its batch.
type verdict int

const (
	verdictAcked  verdict = iota // 2xx: the gateway has the batch durably
	verdictRetry                 // network error, 408, 429, 5xx: try again later
	verdictReject                // any other 4xx: retrying cannot help
)

// attempt is the outcome of one POST.
type attempt struct {
	verdict    verdict
	status     int    // 0 when no response arrived
	code       string // the gateway's error code, if it sent one
	message    string
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
	default:
		// 1xx and 3xx are not answers this endpoint gives; a proxy in the
		// way may recover.
		at.verdict = verdictRetry
	}
	return at
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
// APIs and is ignored.
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
