package atomicfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFiles makes the named files durable: an fsync each for a few, one
// syncfs(2) of their file system for many (they share a directory, as
// WriteAll's temporaries do when a caller writes a directory of files;
// files elsewhere are synced one by one).
func syncFiles(names []string) error {
	if len(names) < manyFiles {
		return syncEach(names)
	}
	f, err := os.Open(names[0])
	if err != nil {
		return err
	}
	defer f.Close()
	var first unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &first); err != nil {
		return err
	}
	var rest []string
	for _, n := range names[1:] {
		var st unix.Stat_t
		if err := unix.Stat(n, &st); err != nil {
			return err
		}
		if st.Dev != first.Dev {
			rest = append(rest, n)
		}
	}
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return err
	}
	return syncEach(rest)
}
