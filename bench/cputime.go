package bench

import (
	"time"

	"github.com/wamux/wamux/internal/cputime"
)

// processCPU is the CPU time this process has used; 0 where it is not
// measured, so reports show 0.
func processCPU() time.Duration {
	d, _ := cputime.Process()
	return d
}
