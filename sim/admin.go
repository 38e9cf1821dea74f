package sim

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/wamux/wamux"
)

// NumberStats is the ground truth for one phone number.
type NumberStats struct {
	// Requests counts every send request to the number, valid or not.
	Requests int64 `json:"requests"`
	Accepted int64 `json:"accepted"`
	// Rejected counts error answers by Meta error code; a message answered
	// 500 after being accepted (ServerErrorAfterAccept) counts as Accepted
	// and under Faults, not here.
	Rejected map[int]int64 `json:"rejected"`
	// OverLimit counts requests over the throughput limit (130429);
	// PairOverLimit those over the pair rate limit (131056).
	OverLimit     int64 `json:"over_limit"`
	PairOverLimit int64 `json:"pair_over_limit"`
	// Duplicates counts acceptances whose biz_opaque_callback_data had
	// already been accepted (by any number): messages sent twice.
	Duplicates int64 `json:"duplicates"`
	// Inbound counts messages users sent to the number (Server.Inbound),
	// each counted against its throughput as Meta does.
	Inbound int64 `json:"inbound"`
	// InboundByType splits Inbound by message type (text, image, ...).
	InboundByType map[string]int64 `json:"inbound_by_type"`
	// WindowClosed counts sends accepted outside the customer-service
	// window that then failed with 131047 (Config.ServiceWindow).
	WindowClosed int64 `json:"window_closed"`
	// Reads counts inbound messages marked as read; ReadsRejected the
	// mark-as-read requests answered with an error (code 100). Neither is
	// a send request.
	Reads         int64 `json:"reads"`
	ReadsRejected int64 `json:"reads_rejected"`
	// PeakRequestsPerSec and PeakAcceptedPerSec are the most requests and
	// acceptances seen within one clock second.
	PeakRequestsPerSec int64 `json:"peak_requests_per_sec"`
	PeakAcceptedPerSec int64 `json:"peak_accepted_per_sec"`
	// Faults counts injected faults by kind.
	Faults map[string]int64 `json:"faults"`
	Limits LimitsView       `json:"limits,omitzero"`
}

// LimitsView shows a number's limits with durations as Go strings.
type LimitsView struct {
	Rate         float64 `json:"rate"`
	Burst        int     `json:"burst"`
	PairInterval string  `json:"pair_interval"`
	PairBurst    int     `json:"pair_burst"`
}

// Stats is the whole ground truth.
type Stats struct {
	Numbers map[string]NumberStats `json:"numbers"`
	// Totals sums the numbers (peaks are the highest of any number).
	Totals        NumberStats  `json:"totals"`
	UnknownNumber int64        `json:"unknown_number"`
	Webhooks      WebhookStats `json:"webhooks"`
	// RecordsDropped counts accepted messages beyond MaxRecords, counted
	// but not kept for /sim/messages.
	RecordsDropped int64 `json:"records_dropped"`
}

// Stats returns a snapshot of the ground truth.
func (s *Server) Stats() Stats {
	st := Stats{
		Numbers:        map[string]NumberStats{},
		Totals:         NumberStats{Rejected: map[int]int64{}, Faults: map[string]int64{}, InboundByType: map[string]int64{}},
		UnknownNumber:  s.unknownNumber.Load(),
		RecordsDropped: s.recordsDropped.Load(),
	}
	for _, nb := range s.allNumbers() {
		nb.mu.Lock()
		ns := NumberStats{
			Requests: nb.st.requests, Accepted: nb.st.accepted, Rejected: map[int]int64{},
			OverLimit: nb.st.overLimit, PairOverLimit: nb.st.pairOverLimit, Duplicates: nb.st.duplicates, Inbound: nb.st.inbound,
			PeakRequestsPerSec: nb.st.peakRequests, PeakAcceptedPerSec: nb.st.peakAccepted,
			Faults: map[string]int64{}, InboundByType: map[string]int64{},
			WindowClosed: nb.st.windowClosed, Reads: nb.st.reads, ReadsRejected: nb.st.readsRejected,
			Limits: LimitsView{nb.limits.Rate, nb.limits.Burst, nb.limits.PairInterval.String(), nb.limits.PairBurst},
		}
		for k, v := range nb.st.rejected {
			ns.Rejected[k] = v
			st.Totals.Rejected[k] += v
		}
		for k, v := range nb.st.inboundByType {
			ns.InboundByType[k] = v
			st.Totals.InboundByType[k] += v
		}
		for k, v := range nb.st.faults {
			ns.Faults[k] = v
			st.Totals.Faults[k] += v
		}
		nb.mu.Unlock()
		t := &st.Totals
		t.Requests += ns.Requests
		t.Accepted += ns.Accepted
		t.OverLimit += ns.OverLimit
		t.PairOverLimit += ns.PairOverLimit
		t.Duplicates += ns.Duplicates
		t.Inbound += ns.Inbound
		t.WindowClosed += ns.WindowClosed
		t.Reads += ns.Reads
		t.ReadsRejected += ns.ReadsRejected
		t.PeakRequestsPerSec = max(t.PeakRequestsPerSec, ns.PeakRequestsPerSec)
		t.PeakAcceptedPerSec = max(t.PeakAcceptedPerSec, ns.PeakAcceptedPerSec)
		st.Numbers[nb.id] = ns
	}
	if s.hooks != nil {
		st.Webhooks = s.hooks.stats()
	}
	return st
}

// Messages returns accepted messages in acceptance order, optionally only
// those of one number and/or one recipient (empty means any).
func (s *Server) Messages(phoneNumberID, to string) []Message {
	var nbs []*number
	if phoneNumberID != "" {
		if nb := s.number(phoneNumberID); nb != nil {
			nbs = append(nbs, nb)
		}
	} else {
		nbs = s.allNumbers()
	}
	to = waID(to)
	out := []Message{}
	for _, nb := range nbs {
		nb.mu.Lock()
		for _, chunk := range nb.msgs {
			for _, m := range chunk {
				if to == "" || waID(m.To) == to {
					out = append(out, m)
				}
			}
		}
		nb.mu.Unlock()
	}
	if len(nbs) > 1 {
		slices.SortFunc(out, func(a, b Message) int { return int(a.Seq - b.Seq) })
	}
	return out
}

func (s *Server) handleStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	writeJSON(w, http.StatusOK, map[string]any{"messages": s.Messages(q.Get("phone_number_id"), q.Get("to"))})
}

func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	s.Reset()
	writeJSON(w, http.StatusOK, map[string]bool{"reset": true})
}

// numberRequest is the body of POST /sim/numbers; durations are Go
// duration strings.
type numberRequest struct {
	PhoneNumberID      string  `json:"phone_number_id"`
	AccessToken        string  `json:"access_token"`
	DisplayPhoneNumber string  `json:"display_phone_number"`
	WABAID             string  `json:"waba_id"`
	Rate               float64 `json:"rate"`
	Burst              int     `json:"burst"`
	PairInterval       string  `json:"pair_interval"`
	PairBurst          int     `json:"pair_burst"`
}

func (s *Server) handleAddNumber(w http.ResponseWriter, r *http.Request) {
	var req numberRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, wamux.Errorf(wamux.EInvalid, "body is not a number: %v", err))
		return
	}
	n := Number{
		PhoneNumberID: req.PhoneNumberID, AccessToken: req.AccessToken,
		DisplayPhoneNumber: req.DisplayPhoneNumber, WABAID: req.WABAID,
		Limits: Limits{Rate: req.Rate, Burst: req.Burst, PairBurst: req.PairBurst},
	}
	if req.PairInterval != "" {
		d, err := time.ParseDuration(req.PairInterval)
		if err != nil {
			writeError(w, wamux.Errorf(wamux.EInvalid, "pair_interval: %v", err))
			return
		}
		n.Limits.PairInterval = d
	}
	if err := s.AddNumber(n); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.numberView(n.PhoneNumberID))
}

// numberView describes a number without its token.
type numberView struct {
	PhoneNumberID      string     `json:"phone_number_id"`
	DisplayPhoneNumber string     `json:"display_phone_number"`
	WABAID             string     `json:"waba_id"`
	Limits             LimitsView `json:"limits"`
}

func (s *Server) numberView(id string) numberView {
	nb := s.number(id)
	return numberView{nb.id, nb.display, nb.waba, LimitsView{nb.limits.Rate, nb.limits.Burst, nb.limits.PairInterval.String(), nb.limits.PairBurst}}
}

func (s *Server) handleListNumbers(w http.ResponseWriter, _ *http.Request) {
	out := []numberView{}
	for _, nb := range s.allNumbers() {
		out = append(out, s.numberView(nb.id))
	}
	slices.SortFunc(out, func(a, b numberView) int {
		if a.PhoneNumberID < b.PhoneNumberID {
			return -1
		}
		return 1
	})
	writeJSON(w, http.StatusOK, map[string]any{"numbers": out})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError answers /sim errors in the gateway's own shape. The
// simulator's own errors are bad input and unknown numbers.
func writeError(w http.ResponseWriter, err error) {
	code := wamux.ErrorCode(err)
	status := http.StatusInternalServerError
	switch code {
	case wamux.EInvalid:
		status = http.StatusBadRequest
	case wamux.ENotFound:
		status = http.StatusNotFound
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": wamux.ErrorMessage(err)}})
}
