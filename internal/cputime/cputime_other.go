//go:build !unix

package cputime

import "time"

// Process is not measured here: it always reports false.
func Process() (time.Duration, bool) { return 0, false }
