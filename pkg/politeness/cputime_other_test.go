//go:build !unix

package politeness

import "time"

// processCPU is not available here.
func processCPU() (time.Duration, bool) { return 0, false }
