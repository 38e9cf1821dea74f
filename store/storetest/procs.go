package storetest

import (
	"runtime"
	"syscall"
	"time"
)

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// cpuTime is the user plus system CPU time this process has used. The
// benchmarks report rows per CPU second next to rows per wall second,
// because on a shared machine the wall figure measures the neighbours too.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
