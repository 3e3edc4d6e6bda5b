//go:build unix

package politeness

import (
	"syscall"
	"time"
)

// processCPU returns the user and system CPU time the process has used, so
// that benchmarks on a shared machine can report CPU cost beside wall time.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
