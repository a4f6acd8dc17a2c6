package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		write   func(io.Writer) error
		wantErr bool
		want    string // file content afterwards
	}{
		{"first write", func(w io.Writer) error { _, err := io.WriteString(w, "one"); return err }, false, "one"},
		{"replaces", func(w io.Writer) error { _, err := io.WriteString(w, "two"); return err }, false, "two"},
		{"failure keeps the old file", func(w io.Writer) error { io.WriteString(w, "partial"); return boom }, true, "two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Write(path, 0o644, tc.write)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %v", err, tc.wantErr)
			}
			if tc.wantErr && (!errors.Is(err, boom) || !strings.Contains(err.Error(), path)) {
				t.Fatalf("error %v should wrap the cause and name the file", err)
			}
			b, err := os.ReadFile(path)
			if err != nil || string(b) != tc.want {
				t.Fatalf("content %q (%v), want %q", b, err, tc.want)
			}
			st, _ := os.Stat(path)
			if st.Mode().Perm() != 0o644 {
				t.Fatalf("mode %v, want 0644", st.Mode().Perm())
			}
			assertNoTemps(t, dir)
		})
	}
}

func TestWriteAllIsAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	ok := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if err := WriteAll(0o600, File{a, ok("a1")}, File{b, ok("b1")}); err != nil {
		t.Fatal(err)
	}
	err := WriteAll(0o600, File{a, ok("a2")}, File{b, func(io.Writer) error { return errors.New("disk full") }})
	if err == nil {
		t.Fatal("want an error")
	}
	for p, want := range map[string]string{a: "a1", b: "b1"} {
		if got, _ := os.ReadFile(p); string(got) != want {
			t.Errorf("%s = %q after a failed WriteAll, want %q", filepath.Base(p), got, want)
		}
	}
	assertNoTemps(t, dir)
	if err := Write(filepath.Join(dir, "no-such-dir", "x"), 0o644, ok("x")); err == nil {
		t.Fatal("writing into a missing directory should fail")
	}
}

// TestWriteAllMany covers the path that writes many files in parallel and
// syncs them with one file-system sync: every file lands with its content
// and mode, and one failing file among many leaves all of them unchanged.
func TestWriteAllMany(t *testing.T) {
	dir := t.TempDir()
	const n = 3 * manyFiles
	files := func(round int, fail int) []File {
		fs := make([]File, n)
		for k := range fs {
			fs[k] = File{filepath.Join(dir, fmt.Sprintf("user-%d", k)), func(w io.Writer) error {
				if k == fail {
					return errors.New("disk full")
				}
				_, err := fmt.Fprintf(w, "round %d file %d", round, k)
				return err
			}}
		}
		return fs
	}
	if err := WriteAll(0o600, files(1, -1)...); err != nil {
		t.Fatal(err)
	}
	if err := WriteAll(0o600, files(2, n-3)...); err == nil {
		t.Fatal("want an error when one file fails")
	}
	for k := range n {
		p := filepath.Join(dir, fmt.Sprintf("user-%d", k))
		got, err := os.ReadFile(p)
		if want := fmt.Sprintf("round 1 file %d", k); err != nil || string(got) != want {
			t.Fatalf("%s = %q (%v), want %q", filepath.Base(p), got, err, want)
		}
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v, want 0600", filepath.Base(p), st.Mode().Perm())
		}
	}
	assertNoTemps(t, dir)
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if strings.HasPrefix(e.Name(), ".privrec-") {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}

// A directory as the target is refused before anything is written, with
// an error that names it and no temporary file's name.
func TestWriteDirectoryRefused(t *testing.T) {
	dir := t.TempDir()
	called := false
	err := Write(dir, 0o644, func(w io.Writer) error { called = true; return nil })
	if err == nil || !strings.Contains(err.Error(), dir+" is a directory") || strings.Contains(err.Error(), ".privrec-") {
		t.Fatalf("err = %v", err)
	}
	if called {
		t.Error("the content was computed for a target that cannot be written")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
	if err := CheckTarget(filepath.Join(dir, "new.model")); err != nil {
		t.Errorf("a new file in a directory: %v", err)
	}
}
