package sim

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// trafficMix weighs the message types of the inbound traffic: mostly
// text, some media, and replies to the business's messages. Types that
// need a message to reply to are sent as text while the user has none.
var trafficMix = []struct {
	typ    string
	weight int
}{
	{"text", 40}, {"image", 10}, {"audio", 6}, {"video", 4}, {"document", 6}, {"sticker", 4},
	{"location", 4}, {"contacts", 2}, {"interactive", 10}, {"button", 6}, {"reaction", 8},
}

var trafficTexts = []string{
	"Does it come in another color?", "Where is my order?", "Can I change the delivery address?",
	"Thanks!", "Is this still available?", "Hallo, ich habe eine Frage zu meiner Bestellung.",
}

// replyScan bounds how many recent records are searched for a message to
// the user to reply to.
const replyScan = 4096

// runTraffic has the users of every number write at Config.Inbound.Rate,
// on the sim's clock: at each tick every number gets the messages due
// since it was first seen (the server's start for the numbers it starts
// with), at most a second's worth at once, so that a clock moved far
// ahead does not bring a flood. It stops when the server closes.
func (s *Server) runTraffic(start time.Time) {
	defer close(s.trafficDone)
	rate := s.cfg.Inbound.Rate
	tick := min(max(time.Duration(float64(time.Second)/rate), 10*time.Millisecond), time.Second)
	perTick := int64(math.Ceil(rate)) + 1
	type numberTraffic struct {
		start time.Time
		sent  int64
	}
	seen := map[string]*numberTraffic{}
	for _, nb := range s.allNumbers() {
		seen[nb.id] = &numberTraffic{start: start}
	}
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0x1b0d))
	total := 0
	for _, m := range trafficMix {
		total += m.weight
	}
	for {
		select {
		case <-s.done:
			return
		case <-s.cfg.After(tick):
		}
		now := s.cfg.Clock()
		nbs := s.allNumbers()
		slices.SortFunc(nbs, func(a, b *number) int {
			if a.id < b.id {
				return -1
			}
			return 1
		})
		for _, nb := range nbs {
			nt := seen[nb.id]
			if nt == nil {
				seen[nb.id] = &numberTraffic{start: now}
				continue
			}
			due := int64(float64(now.Sub(nt.start)) * rate / float64(time.Second))
			if due-nt.sent > perTick {
				nt.sent = due - perTick // skipped: the clock jumped
			}
			for ; nt.sent < due; nt.sent++ {
				req := s.trafficMessage(nb, rng, total)
				s.inbound(nb, &req)
			}
		}
	}
}

// trafficMessage draws one user message: a user of the number's pool and
// a type of trafficMix.
func (s *Server) trafficMessage(nb *number, rng *rand.Rand, total int) InboundRequest {
	req := InboundRequest{From: customerID(nb.id, rng.IntN(s.cfg.Inbound.Customers))}
	n := rng.IntN(total)
	for _, m := range trafficMix {
		if n < m.weight {
			req.Type = m.typ
			break
		}
		n -= m.weight
	}
	switch req.Type {
	case "interactive", "button", "reaction":
		nb.mu.Lock()
		m, ok := nb.lastSentToLocked(req.From, replyScan)
		nb.mu.Unlock()
		if !ok {
			req.Type = "text"
			break
		}
		req.Context = m.WAMID
		if req.Type == "interactive" && rng.IntN(2) == 0 {
			req.Interactive = "list_reply"
		}
	}
	if req.Type == "text" {
		req.Text = trafficTexts[rng.IntN(len(trafficTexts))]
	}
	return req
}

// customerID is the wa_id of user i of a number's pool: 12 digits, the
// same for a number across runs.
func customerID(numberID string, i int) string {
	h := fnv.New32a()
	h.Write([]byte(numberID))
	id := strconv.AppendUint([]byte("447"), uint64(100+h.Sum32()%900), 10)
	tail := strconv.Itoa(1_000_000 + i%1_000_000)[1:]
	return string(append(id, tail...))
}
