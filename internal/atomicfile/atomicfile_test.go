package atomicfile

import (
	"errors"
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

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if strings.HasPrefix(e.Name(), ".privrec-") {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}
