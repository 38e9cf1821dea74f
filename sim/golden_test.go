package sim_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wamux/wamux/sim"
)

// The files in testdata/reference are the JSON samples of
// shared/reference/cloudapi.md (Meta's examples). The simulator's bodies
// must have the same shape: the same key paths with the same JSON types.

// shape lists "path:type" for every value in a JSON document; array
// elements share the path "[]", so a batch and a single status compare.
func shape(t *testing.T, data []byte) map[string]bool {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	out := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			out[path+":object"] = true
			for k, e := range x {
				walk(path+"."+k, e)
			}
		case []any:
			out[path+":array"] = true
			for _, e := range x {
				walk(path+"[]", e)
			}
		case string:
			out[path+":string"] = true
		case float64:
			out[path+":number"] = true
		case bool:
			out[path+":bool"] = true
		case nil:
			out[path+":null"] = true
		}
	}
	walk("", v)
	return out
}

func reference(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "reference", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sameShape(t *testing.T, what string, got, want []byte) {
	t.Helper()
	g, w := shape(t, got), shape(t, want)
	if !maps.Equal(g, w) {
		t.Fatalf("%s shape differs\n got only: %v\nwant only: %v\nbody: %s", what, diff(g, w), diff(w, g), got)
	}
}

func diff(a, b map[string]bool) []string {
	var out []string
	for k := range a {
		if !b[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func TestGoldenSendBodies(t *testing.T) {
	h := start(t, sim.Config{Limits: sim.Limits{Rate: 1, PairBurst: 1}})
	for _, name := range []string{"request_text.json", "request_template.json"} {
		h.clk.Advance(10 * 1e9) // fresh tokens for both limits
		code, body, _ := h.send(num, token, string(reference(t, name)))
		if code != 200 {
			t.Fatalf("%s: %d %s", name, code, body)
		}
		sameShape(t, "success for "+name, body, reference(t, "success.json"))
		if !contains(body, `"input":"15551234567"`) || !contains(body, `"wa_id":"15551234567"`) || !contains(body, `"id":"wamid.`) {
			t.Fatalf("success body %s", body)
		}
	}
	// Over the throughput limit: Meta's 130429 sample.
	code, body, _ := h.send(num, token, text("15550009999", ""))
	if code != 400 {
		t.Fatalf("throughput: %d %s", code, body)
	}
	sameShape(t, "130429", body, reference(t, "error_130429.json"))
	if !contains(body, `"message":"(#130429) Rate limit hit"`) || !contains(body, `"error_subcode":2494055`) {
		t.Fatalf("130429 body %s", body)
	}
	// Pair limit: the 131056 sample. One second refills the throughput
	// limit but not the pair limit of the template's recipient.
	h.clk.Advance(1e9)
	code, body, _ = h.send(num, token, string(reference(t, "request_text.json")))
	if code != 400 {
		t.Fatalf("pair: %d %s", code, body)
	}
	sameShape(t, "131056", body, reference(t, "error_131056.json"))
	if !contains(body, `"type":"OAuthException"`) || !contains(body, "pair rate limit hit") {
		t.Fatalf("131056 body %s", body)
	}
}

func TestGoldenCallbackDataEchoed(t *testing.T) {
	h := start(t, sim.Config{})
	h.send(num, token, string(reference(t, "request_template.json")))
	m := h.s.Messages(num, "")
	if len(m) != 1 || !strings.HasPrefix(m[0].CallbackData, "gw:acct42:msg:") {
		t.Fatalf("messages %+v", m)
	}
}

// TestReferenceSamplesCurrent checks that testdata/reference still holds
// the samples of the shared reference, when the reference is beside the
// repository (as in CI and the developers' trees).
func TestReferenceSamplesCurrent(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", "shared", "reference", "cloudapi.md"))
	if err != nil {
		t.Skipf("reference not beside the repository: %v", err)
	}
	var blocks []any
	for _, part := range strings.Split(string(md), "```json\n")[1:] {
		var v any
		if json.Unmarshal([]byte(strings.SplitN(part, "```", 2)[0]), &v) == nil {
			blocks = append(blocks, v)
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "reference", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	for _, f := range files {
		var v any
		if err := json.Unmarshal(reference(t, filepath.Base(f)), &v); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(blocks, func(b any) bool { return reflect.DeepEqual(b, v) }) {
			t.Errorf("%s is no longer a sample of the reference", f)
		}
	}
}
