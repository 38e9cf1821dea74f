package sim

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/wamux/wamux"
)

// faultsJSON is the body of PUT /sim/numbers/{id}/faults; durations are
// Go duration strings and codes map a Meta code to its probability.
type faultsJSON struct {
	ServerError            float64         `json:"server_error"`
	SlowAccept             float64         `json:"slow_accept"`
	SlowDelay              string          `json:"slow_delay"`
	Reset                  float64         `json:"reset"`
	ResetAfterAccept       float64         `json:"reset_after_accept"`
	ServerErrorAfterAccept float64         `json:"server_error_after_accept"`
	Codes                  map[int]float64 `json:"codes"`
	RetryAfter             string          `json:"retry_after"`
	LatencyMin             string          `json:"latency_min"`
	LatencyMax             string          `json:"latency_max"`
	Jitter                 string          `json:"jitter"`
	WebhookDuplicate       float64         `json:"webhook_duplicate"`
	WebhookReorder         float64         `json:"webhook_reorder"`
	Paced                  float64         `json:"paced"`
	PacedHold              string          `json:"paced_hold"`
	PacedDrop              float64         `json:"paced_drop"`
}

func (j faultsJSON) faults() (Faults, error) {
	f := Faults{
		ServerError: j.ServerError, SlowAccept: j.SlowAccept, Reset: j.Reset, ResetAfterAccept: j.ResetAfterAccept,
		ServerErrorAfterAccept: j.ServerErrorAfterAccept, Codes: j.Codes,
		WebhookDuplicate: j.WebhookDuplicate, WebhookReorder: j.WebhookReorder,
		Paced: j.Paced, PacedDrop: j.PacedDrop,
	}
	for _, d := range []struct {
		name string
		in   string
		out  *time.Duration
	}{
		{"slow_delay", j.SlowDelay, &f.SlowDelay}, {"retry_after", j.RetryAfter, &f.RetryAfter},
		{"latency_min", j.LatencyMin, &f.Latency.Min}, {"latency_max", j.LatencyMax, &f.Latency.Max},
		{"jitter", j.Jitter, &f.Jitter},
		{"paced_hold", j.PacedHold, &f.PacedHold},
	} {
		if d.in == "" {
			continue
		}
		v, err := time.ParseDuration(d.in)
		if err != nil {
			return Faults{}, wamux.Errorf(wamux.EInvalid, "%s: %v", d.name, err)
		}
		*d.out = v
	}
	if f.Latency.Max < f.Latency.Min {
		f.Latency.Max = f.Latency.Min
	}
	return f, nil
}

// handleSetFaults replaces one number's faults at run time (an empty body
// object clears them), so a demo or test can make one account misbehave.
func (s *Server) handleSetFaults(w http.ResponseWriter, r *http.Request) {
	var j faultsJSON
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		writeError(w, wamux.Errorf(wamux.EInvalid, "body is not a faults object: %v", err))
		return
	}
	f, err := j.faults()
	if err == nil {
		err = s.SetFaults(r.PathValue("id"), f)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"updated": true})
}
