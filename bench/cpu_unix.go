//go:build unix

package bench

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) the process has used, all
// threads together, or 0 when the system does not tell.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
