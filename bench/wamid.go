package bench

import (
	"encoding/base64"
	"fmt"
	mrand "math/rand/v2"
)

// How the receipt benchmarks name their provider messages. The order of
// the ids decides where each insert lands in the stores' indexes keyed by
// wamid, so it changes the rates measured by about a factor of two.
const (
	// WAMIDsRandom ids are shaped like the Cloud API's: "wamid." and the
	// base64 of a few framing bytes, the recipient's number and a random
	// hex id. Like real ones, consecutive messages' ids sort far apart, so
	// a large table takes each insert on a different page. The default.
	WAMIDsRandom = "random"
	// WAMIDsSequential ids are "wamid.HBgL" and a zero-padded counter:
	// they sort in sending order, so inserts land next to each other and
	// a commit writes few pages, which flatters index inserts.
	WAMIDsSequential = "sequential"
)

// checkWAMIDs validates a --wamids value; "" means the default.
func checkWAMIDs(kind string) (string, error) {
	switch kind {
	case "":
		return WAMIDsRandom, nil
	case WAMIDsRandom, WAMIDsSequential:
		return kind, nil
	}
	return "", fmt.Errorf("--wamids must be %q or %q, not %q", WAMIDsRandom, WAMIDsSequential, kind)
}

// wamids returns n distinct ids of the kind, the same for the same seed.
func wamids(kind string, n int, seed uint64) []string {
	out := make([]string, n)
	if kind == WAMIDsSequential {
		for i := range out {
			out[i] = fmt.Sprintf("wamid.HBgL%010d", i)
		}
		return out
	}
	rng := mrand.New(mrand.NewPCG(seed, 0x3a41d))
	for i := range out {
		phone := fmt.Sprintf("1%010d", rng.IntN(10_000_000_000))
		// mix64 is a bijection, so the ids are distinct whatever the
		// random parts draw.
		id := fmt.Sprintf("%016X%02X", mix64(uint64(i)^seed), rng.IntN(256))
		raw := append([]byte{0x1c, 0x18, byte(len(phone))}, phone...)
		raw = append(raw, 0x15, 0x02, 0x00, 0x11, 0x18, byte(len(id)))
		raw = append(raw, id...)
		raw = append(raw, 0x00)
		out[i] = "wamid." + base64.StdEncoding.EncodeToString(raw)
	}
	return out
}

// mix64 is SplitMix64's finalizer: a bijection on 64-bit values that
// scatters consecutive inputs.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
