//go:build unix

package dap

import "syscall"

// cpuSeconds is the process's user and system CPU time (the benchmarks
// report it beside wall time: on a shared machine it is the figure that
// does not depend on the load).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
