//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time (user and system) this process has used, and
// false where the system did not say.
func Process() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
