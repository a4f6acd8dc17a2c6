package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// data convert --out naming a directory is refused before the data is
// read (exit 2), naming the path once, and nothing is written into it.
func TestDataConvertOutDirectory(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "r.tsv", func(u, i int) bool { return (u+i)%2 == 0 })
	outDir := filepath.Join(dir, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "data", "convert", "--data", data, "--format", "tsv", "--to", "tsv", "--out", outDir)
	if code != 2 || !strings.Contains(stderr, "--out "+outDir+" is a directory") || strings.Count(stderr, outDir) != 1 {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if entries, _ := os.ReadDir(outDir); len(entries) != 0 {
		t.Errorf("written into the directory: %v", entries)
	}
	out := filepath.Join(dir, "r.bin")
	if _, stderr, code := runCLI(t, "data", "convert", "--data", data, "--format", "tsv", "--to", "binary", "--out", out); code != 0 {
		t.Fatalf("a file --out: exit %d: %s", code, stderr)
	}
	if st, err := os.Stat(out); err != nil || st.Size() == 0 {
		t.Errorf("the converted file: %v", err)
	}
}
