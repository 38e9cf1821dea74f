package chaos

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/wamux/wamux/provider/cloudapi"
)

// tap stands between the simulator's status webhooks and the gateway. It
// forwards each POST to whichever gateway process is running, refuses
// some with 503 without forwarding (the simulator redelivers them), loses
// some for good, and records the statuses of every POST the gateway
// answered 200: what the gateway promised to keep, the input of the
// expected final statuses.
//
// A POST is lost only the first time its body is seen, never on a
// redelivery: a POST forwarded once may have been stored by a gateway
// killed before it answered, and only its redelivery, answered 200, puts
// its statuses in the expectation. Losing that redelivery would leave a
// status stored that no expectation knows of.
type tap struct {
	srv    *http.Server
	URL    string
	target func() string // the running gateway's base URL, "" while down
	client *http.Client

	mu      sync.Mutex
	rng     *rand.Rand
	refuse  float64
	drop    float64
	dropRng *rand.Rand
	bodies  map[[sha256.Size]byte]bool // every body seen: true when it was lost
	acked   map[string][]ackedStatus   // by msg_id (biz_opaque_callback_data)
	posts   int64
	refused int64
	dropped int64 // POSTs lost for good: answered 200, never forwarded
	failed  int64 // forwards not answered 200 (gateway down or refusing)
}

func startTap(seed uint64, refuse, drop float64, target func() string) (*tap, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &tap{URL: "http://" + ln.Addr().String() + "/webhook", target: target, refuse: refuse, drop: drop,
		rng:     rand.New(rand.NewPCG(seed, 0x7a9)),
		dropRng: rand.New(rand.NewPCG(seed, 0xd40)),
		bodies:  map[[sha256.Size]byte]bool{},
		acked:   map[string][]ackedStatus{},
		client:  &http.Client{Timeout: 10 * time.Second}}
	t.srv = &http.Server{Handler: t, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

func (t *tap) Close() error {
	t.client.CloseIdleConnections()
	return t.srv.Close()
}

type hookBody struct {
	Entry []struct {
		Changes []struct {
			Value struct {
				Statuses []cloudapi.Status `json:"statuses"`
			} `json:"value"`
		} `json:"changes"`
	} `json:"entry"`
}

func (t *tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256(body)
	t.mu.Lock()
	t.posts++
	lost, seen := t.bodies[sum]
	if !seen {
		lost = t.dropRng.Float64() < t.drop
		t.bodies[sum] = lost
	}
	if lost {
		t.dropped++
		t.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	}
	refuse := t.rng.Float64() < t.refuse
	if refuse {
		t.refused++
	}
	t.mu.Unlock()
	base := t.target()
	if refuse || base == "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, base+"/webhook", bytes.NewReader(body))
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(cloudapi.SignatureHeader, r.Header.Get(cloudapi.SignatureHeader))
	res, err := t.client.Do(req)
	if err != nil {
		t.mu.Lock()
		t.failed++
		t.mu.Unlock()
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.mu.Lock()
		t.failed++
		t.mu.Unlock()
		w.WriteHeader(res.StatusCode)
		return
	}
	var hb hookBody
	_ = json.Unmarshal(body, &hb)
	t.mu.Lock()
	for _, e := range hb.Entry {
		for _, c := range e.Changes {
			for _, s := range c.Value.Statuses {
				if s.BizOpaqueCallbackData != "" {
					t.acked[s.BizOpaqueCallbackData] = append(t.acked[s.BizOpaqueCallbackData], ackedStatus{s.Status, s.ID})
				}
			}
		}
	}
	t.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// strength is the merge order of receipt statuses (DESIGN.md, guarantee
// 4): failed beats sent, delivered or read beat failed.
var strength = map[string]int{"sent": 1, "failed": 2, "delivered": 3, "read": 4}

// ackedStatus is one status the gateway answered 200 for, and the
// provider message (wamid) it is about.
type ackedStatus struct {
	status, wamid string
}

// expected is the status a message must end in given the statuses the
// gateway acknowledged for it, computed apart from the gateway's merge:
// the strongest one, or "" when none was acknowledged. A message the
// provider accepted twice (a resend after an ambiguous send) follows the
// copy whose wamid the gateway holds: with wamid set, only its statuses
// count.
func (t *tap) expected(msgID, wamid string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	best := ""
	for _, s := range t.acked[msgID] {
		if (wamid == "" || s.wamid == wamid) && strength[s.status] > strength[best] {
			best = s.status
		}
	}
	return best
}
