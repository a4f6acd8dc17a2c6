//go:build !linux

package atomicfile

// syncFiles makes the named files durable, one fsync per file (syncfs(2)
// is Linux's).
func syncFiles(names []string) error { return syncEach(names) }
