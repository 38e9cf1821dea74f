package sim_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// inboundSeen is what the webhook sink got from the traffic: messages per
// number, senders, types, and the context ids of replies.
type inboundSeen struct {
	perNumber map[string]int
	senders   map[string]map[string]bool // by number
	types     map[string]int
	contexts  map[string]bool
}

func (rc *hookSink) inboundSeen(t *testing.T) inboundSeen {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := inboundSeen{map[string]int{}, map[string]map[string]bool{}, map[string]int{}, map[string]bool{}}
	for _, body := range rc.inbound {
		var hook struct {
			Entry []struct {
				Changes []struct {
					Value struct {
						Metadata struct {
							PhoneNumberID string `json:"phone_number_id"`
						} `json:"metadata"`
						Messages []struct {
							From    string `json:"from"`
							Type    string `json:"type"`
							Context *struct {
								ID string `json:"id"`
							} `json:"context"`
							Reaction *struct {
								MessageID string `json:"message_id"`
							} `json:"reaction"`
						} `json:"messages"`
					} `json:"value"`
				} `json:"changes"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(body, &hook); err != nil {
			t.Fatal(err)
		}
		v := hook.Entry[0].Changes[0].Value
		for _, m := range v.Messages {
			out.perNumber[v.Metadata.PhoneNumberID]++
			if out.senders[v.Metadata.PhoneNumberID] == nil {
				out.senders[v.Metadata.PhoneNumberID] = map[string]bool{}
			}
			out.senders[v.Metadata.PhoneNumberID][m.From] = true
			out.types[m.Type]++
			if m.Context != nil {
				out.contexts[m.Context.ID] = true
			}
			if m.Reaction != nil {
				out.contexts[m.Reaction.MessageID] = true
			}
		}
	}
	return out
}

// TestInboundTraffic: with Config.Inbound the users of each number write
// at the rate given, on the sim's clock (here a fake one, moved by the
// test), from a pool of Customers users, in a mix of types; once the
// business has written to them some reply to its messages; their
// messages open their customer-service windows.
func TestInboundTraffic(t *testing.T) {
	rc := newHookSink(t)
	const other = "206540352242922"
	var h *harness
	cfg := sim.Config{
		Numbers:       []sim.Number{{PhoneNumberID: num, AccessToken: token}, {PhoneNumberID: other, AccessToken: "t2"}},
		Inbound:       sim.InboundTraffic{Rate: 2, Customers: 3},
		ServiceWindow: true,
		Webhooks:      sim.Webhooks{URL: rc.url, AppSecret: hookSecret},
		Limits:        sim.Limits{Rate: 1000, PairBurst: 1000},
	}
	h = startWithAfter(t, cfg)
	// tick moves the fake clock by the traffic's tick (1/rate) n times,
	// each once the traffic waits on the clock, so every tick is seen.
	tick := func(n int) {
		for range n {
			testwait.For(t, "the traffic to wait on the clock", 10*time.Second, func() bool { return h.clk.Pending() > 0 })
			h.clk.Advance(500 * time.Millisecond)
		}
		testwait.For(t, "the traffic to wait on the clock", 10*time.Second, func() bool { return h.clk.Pending() > 0 })
	}
	tick(20) // 10 s at 2/s: 20 messages per number
	st := h.s.Stats()
	if st.Numbers[num].Inbound != 20 || st.Numbers[other].Inbound != 20 {
		t.Fatalf("inbound after 10 s at 2/s: %d and %d, want 20 each", st.Numbers[num].Inbound, st.Numbers[other].Inbound)
	}
	testwait.For(t, "40 inbound webhooks", 10*time.Second, func() bool { return sum(rc.inboundSeen(t).perNumber) == 40 })
	seen := rc.inboundSeen(t)
	if seen.perNumber[num] != 20 || len(seen.senders[num]) > 3 || len(seen.senders[num]) < 2 || len(seen.senders[other]) > 3 || rc.badSig != 0 {
		t.Fatalf("webhooks: %v per number, senders %v (pools of 3), %d bad signatures", seen.perNumber, seen.senders, rc.badSig)
	}
	for from := range seen.senders[num] {
		if seen.senders[other][from] {
			t.Fatalf("user %s writes to both numbers; pools are per number", from)
		}
	}
	if len(seen.types) < 3 || seen.types["text"] == 0 || len(seen.contexts) != 0 {
		t.Fatalf("types %v, contexts %v; want a mix, and no replies before the business wrote", seen.types, seen.contexts)
	}

	// The business answers every user of num: their windows are open.
	sent := map[string]bool{}
	for from := range seen.senders[num] {
		sent[h.sentWAMID(from)] = true
	}
	// A user of the other number never wrote to num: its window is closed.
	for from := range seen.senders[other] {
		if sts := finalStatus(t, rc, h.sentWAMID(from)); delivered(sts) {
			t.Fatalf("a free-form send from num to %s, who wrote only to the other number, was delivered", from)
		}
		break
	}
	for w := range sent {
		if sts := finalStatus(t, rc, w); !delivered(sts) {
			t.Fatalf("a reply to a user who wrote failed: %+v", sts)
		}
	}
	tick(40) // 20 s more: some users reply to those messages
	testwait.For(t, "the next 80 inbound webhooks", 10*time.Second, func() bool { return sum(rc.inboundSeen(t).perNumber) == 120 })
	seen = rc.inboundSeen(t)
	replies := 0
	for id := range seen.contexts {
		if !sent[id] {
			t.Fatalf("a reply to %s, which num did not send (sent %v)", id, sent)
		}
		replies++
	}
	if replies == 0 || st.Totals.Inbound+80 != h.s.Stats().Totals.Inbound {
		t.Fatalf("replies %d (types %v); totals %d", replies, seen.types, h.s.Stats().Totals.Inbound)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
