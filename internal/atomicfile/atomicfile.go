// Package atomicfile writes files so that no reader ever sees a partial
// one: each file is written to a temporary file in its target directory,
// synced, and renamed into place only when everything was written. A
// failure leaves the previous file (or none) and no temporary behind.
//
// It is the one place privrec writes output files atomically (model files,
// per-user states, experiment results, figures, data files, collected
// reports). It lives apart from package model because plots, the command
// line's data files and collected reports are not models, and a figure
// writer should not depend on the model format.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sync/errgroup"
)

// File is one file of a WriteAll: its path and what to write into it.
type File struct {
	Path  string
	Write func(io.Writer) error
}

// Write writes path atomically with permission mode: write fills a
// temporary file in the same directory, which is synced and renamed onto
// path only when write and the close succeeded.
func Write(path string, mode fs.FileMode, write func(io.Writer) error) error {
	return WriteAll(mode, File{Path: path, Write: write})
}

// WriteAll writes every file to a temporary file in its target directory
// and renames them into place only when all writes succeeded and were
// synced, so a failed write leaves none of them changed. (Should a rename
// itself fail, the files renamed before it are complete and the rest are
// removed.) Many files are written in parallel and synced together (see
// syncFiles): thousands of per-user files cost one file-system sync, not
// one journal commit each.
func WriteAll(mode fs.FileMode, files ...File) (err error) {
	for _, f := range files {
		if err := CheckTarget(f.Path); err != nil {
			return err
		}
	}
	tmps := make([]string, len(files))
	defer func() {
		if err != nil {
			for _, t := range tmps {
				if t != "" {
					os.Remove(t)
				}
			}
		}
	}()
	var g errgroup.Group
	g.SetLimit(writers)
	for k, f := range files {
		g.Go(func() error {
			tmp, err := writeTemp(f, mode)
			tmps[k] = tmp
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := syncFiles(tmps); err != nil {
		return fmt.Errorf("writing %s: %w", files[0].Path, err)
	}
	for k, f := range files {
		if err := os.Rename(tmps[k], f.Path); err != nil {
			tmps = tmps[k:]
			// The temporary file's name means nothing to the reader.
			var le *os.LinkError
			if errors.As(err, &le) {
				err = le.Err
			}
			return fmt.Errorf("writing %s: %w", f.Path, err)
		}
	}
	return syncDirs(files)
}

// CheckTarget refuses a path that cannot be written as a file because it
// names a directory (or is empty): callers check their output paths with it
// before doing work, and WriteAll before writing anything.
func CheckTarget(path string) error {
	if path == "" {
		return errors.New("no output file named")
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory, not a file: name the file to write (one inside it, for instance)", path)
	}
	return nil
}

// syncDirs syncs the directories of files so that their renames survive a
// crash too (where the platform allows a directory to be synced).
func syncDirs(files []File) error {
	seen := map[string]bool{}
	for _, f := range files {
		dir := filepath.Dir(f.Path)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		d, err := os.Open(dir)
		if err != nil {
			return fmt.Errorf("syncing %s: %w", dir, err)
		}
		serr := d.Sync()
		d.Close()
		if serr != nil && !errors.Is(serr, errors.ErrUnsupported) && runtime.GOOS != "windows" {
			return fmt.Errorf("syncing %s: %w", dir, serr)
		}
	}
	return nil
}

// writers is how many files WriteAll fills at once.
const writers = 8

// manyFiles is the count from which syncFiles may sync the file system
// once (Linux's syncfs(2)) rather than each file: each fsync waits for a
// journal commit of its own.
const manyFiles = 16

// writeTemp writes one file's content into a temporary file beside it with
// the final mode and returns its name (removed on failure). The caller
// syncs it.
func writeTemp(f File, mode fs.FileMode) (string, error) {
	t, err := os.CreateTemp(filepath.Dir(f.Path), ".privrec-*")
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", f.Path, err)
	}
	werr := f.Write(t)
	cerr := t.Close()
	if werr == nil && cerr == nil {
		// CreateTemp makes the file 0600; the result gets the asked mode.
		cerr = os.Chmod(t.Name(), mode)
	}
	if werr != nil || cerr != nil {
		os.Remove(t.Name())
		return "", fmt.Errorf("writing %s: %w", f.Path, errors.Join(werr, cerr))
	}
	return t.Name(), nil
}

// syncEach syncs each named file: the portable way, one fsync per file.
func syncEach(names []string) error {
	for _, n := range names {
		f, err := os.OpenFile(n, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		serr := f.Sync()
		if cerr := f.Close(); serr == nil {
			serr = cerr
		}
		if serr != nil {
			return serr
		}
	}
	return nil
}
