//go:build unix

package main

import "syscall"

// privateFiles makes the files and directories this process creates
// readable by its user only (umask 077: files 0600, directories 0700)
// until restore is called: the pipelines' un-noised sums and refused rows
// in a local --work directory.
func privateFiles() (restore func()) {
	old := syscall.Umask(0o077)
	return func() { syscall.Umask(old) }
}
