//go:build !unix

package main

// privateFiles is a no-op where files have no Unix modes.
func privateFiles() (restore func()) { return func() {} }
