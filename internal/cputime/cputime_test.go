package cputime

import (
	"testing"
	"time"
)

func TestProcessGrowsWithWork(t *testing.T) {
	start, ok := Process()
	if !ok {
		t.Skip("this system does not report the process's CPU time")
	}
	deadline := time.Now().Add(time.Minute)
	sum := 0
	for {
		if d, _ := Process(); d > start {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time still %v after a minute of work (%d)", start, sum)
		}
		for i := range 1 << 20 {
			sum += i
		}
	}
}
