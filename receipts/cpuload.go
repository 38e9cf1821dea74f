package receipts

import (
	"runtime"
	"sync"
	"time"

	"github.com/wamux/wamux/internal/cputime"
)

// loadWindow is the shortest interval cpuLoad measures over: shorter ones
// say more about the scheduler's last tick than about the load.
const loadWindow = 20 * time.Millisecond

// cpuLoad tells the appender and the partition processors how busy the
// process's CPUs have been lately: the CPU time the process used between
// its last two samples, as a share of what GOMAXPROCS CPUs could have done
// in that time (1: all of them all the time). It is safe for concurrent
// use; whoever asks after loadWindow takes the next sample for everyone.
type cpuLoad struct {
	now   func() time.Time
	cpu   func() (time.Duration, bool)
	procs func() int

	mu    sync.Mutex
	at    time.Time     // when the last sample was taken
	used  time.Duration // the process's CPU time then
	share float64       // between the last two samples
}

func newCPULoad() *cpuLoad {
	return &cpuLoad{now: time.Now, cpu: cputime.Process, procs: func() int { return runtime.GOMAXPROCS(0) }}
}

// busy returns the share measured between the last two samples, taking a
// new sample when the last one is at least loadWindow old. It is 0 before
// two samples exist and wherever the process's CPU time is not known.
func (l *cpuLoad) busy() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.at.IsZero() && now.Sub(l.at) < loadWindow {
		return l.share
	}
	used, ok := l.cpu()
	if !ok {
		return 0
	}
	if !l.at.IsZero() {
		l.share = float64(used-l.used) / (float64(now.Sub(l.at)) * float64(max(l.procs(), 1)))
	}
	l.at, l.used = now, used
	return l.share
}
