//go:build !unix

package dap

func cpuSeconds() float64 { return 0 }
