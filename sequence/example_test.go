package sequence_test

import (
	"fmt"
	"time"

	"github.com/wamux/wamux/sequence"
)

func ExampleBuffer() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := sequence.NewBuffer[string]("acct", 0)
	show := func(seq int64) {
		r, _ := b.Offer(start, seq, fmt.Sprint("msg", seq))
		fmt.Println(seq, r.Outcome, len(r.Released), "released")
	}
	show(1)
	show(3) // 2 is missing
	show(1) // a late repeat: dropped, blocks nothing
	ex := b.Expire(start.Add(5*time.Minute), 5*time.Minute)
	fmt.Println("skipped", ex.Skipped, "released", len(ex.Released), "gaps", ex.State.GapsSkipped)
	show(2) // arrives after its gap was skipped
	// Output:
	// 1 released 1 released
	// 3 waiting 0 released
	// 1 duplicate 0 released
	// skipped [{2 2}] released 1 gaps 1
	// 2 held 0 released
}
