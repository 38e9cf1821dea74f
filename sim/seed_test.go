package sim_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/wamux/wamux/sim"
)

// run sends the same sequence to a fresh sim and returns the answers.
func run(t *testing.T, seed uint64) []int {
	h := start(t, sim.Config{Seed: seed, Faults: sim.Faults{ServerError: 0.3, Codes: map[int]float64{131048: 0.2, 4: 0.2}}})
	var codes []int
	for i := range 30 {
		code, _, _ := h.send(num, token, text(fmt.Sprint("155500", 10000+i), ""))
		codes = append(codes, code)
	}
	return codes
}

func TestSeedReplays(t *testing.T) {
	a, b := run(t, 42), run(t, 42)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed, different runs:\n%v\n%v", a, b)
	}
	seen := map[int]bool{}
	for _, c := range a {
		seen[c] = true
	}
	if !seen[200] || (!seen[500] && !seen[503]) || !seen[400] {
		t.Fatalf("faults not mixed: %v", a)
	}
}

func TestStartAndClose(t *testing.T) {
	s, err := sim.New(sim.Config{Numbers: []sim.Number{{PhoneNumberID: num, AccessToken: token}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	url, err := s.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", err, resp)
	}
	resp.Body.Close()
	cancel() // cancelling ctx closes the server
	s.Close()
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Fatal("still serving after Close")
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []sim.Config{
		{Faults: sim.Faults{ServerError: 1.5}},
		{Faults: sim.Faults{Codes: map[int]float64{4: -1}}},
		{Webhooks: sim.Webhooks{Delay: sim.Range{Min: 2, Max: 1}}},
		{Numbers: []sim.Number{{PhoneNumberID: "x"}}},
	} {
		if _, err := sim.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
