package sim

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/wamux/wamux/provider/cloudapi"
)

func (h *webhooker) work() {
	defer h.wg.Done()
	for {
		select {
		case <-h.done:
			return
		case b := <-h.out:
			h.deliver(b)
		}
	}
}

// deliver makes one POST attempt and decides what happens to the batch.
func (h *webhooker) deliver(b *batch) {
	b.attempt++
	if b.attempt == 1 {
		b.first = time.Now()
	}
	ok := h.post(b.body)
	switch {
	case ok:
		h.posts.Add(1)
		h.delivered.Add(int64(b.n))
		h.finish(b.n)
	case h.ctx.Err() != nil:
		h.finish(b.n)
	case h.cfg.MaxAttempts > 0 && b.attempt >= h.cfg.MaxAttempts,
		time.Since(b.first) >= h.cfg.RetryFor:
		h.postFailures.Add(1)
		h.gaveUp.Add(int64(b.n))
		h.finish(b.n)
		h.log.Warn("sim: webhook given up", "attempts", b.attempt, "statuses", b.n)
	default:
		h.postFailures.Add(1)
		h.requeue(b, time.Now().Add(h.backoff(b.attempt)))
	}
}

// backoff doubles from RetryBase up to RetryMax: Meta retries "with
// decreasing frequency".
func (h *webhooker) backoff(attempt int) time.Duration {
	d := h.cfg.RetryBase
	for i := 1; i < attempt && d < h.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, h.cfg.RetryMax)
}

// post reports whether the receiver answered exactly 200, the only answer
// Meta treats as delivered.
func (h *webhooker) post(body []byte) bool {
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		h.log.Error("sim: webhook request", "err", err)
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "facebookexternalua")
	if h.cfg.AppSecret != "" {
		req.Header.Set(cloudapi.SignatureHeader, cloudapi.Sign(body, h.cfg.AppSecret))
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.log.Debug("sim: webhook post failed", "err", err)
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
