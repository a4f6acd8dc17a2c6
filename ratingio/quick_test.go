package ratingio

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestQuickRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "u.data")
	os.WriteFile(p, []byte("1\t10\t3\t100\n2\t10\t4.5\t200\n1\t20\t1\t300\n"), 0o644)
	m, err := ReadFile(p, Options{Format: "movielens-100k"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteTSV(&buf, m); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "1\t10\t3\t100\n1\t20\t1\t300\n2\t10\t4.5\t200\n"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}
