//go:build unix

package completion

import (
	"syscall"
	"time"
)

// cpuTime is the process's user + system CPU time, reported next to wall
// time by the benchmarks because the development machine is shared: on a
// loaded machine the wall time of a run says little, its CPU time does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
