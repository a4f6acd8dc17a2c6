package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDataStatsAndConvert(t *testing.T) {
	dir := t.TempDir()
	in := writeRatings(t, dir, "u.data", func(u, i int) bool { return true })
	out, errs, code := runCLI(t, "data", "stats", "--in", in, "--json")
	if code != 0 {
		t.Fatalf("stats exit %d: %s", code, errs)
	}
	var s struct {
		Format                string
		Users, Items, Ratings int
		Density               float64
		RatingMin             float64 `json:"rating_min"`
		RatingMax             float64 `json:"rating_max"`
		Histogram             []struct {
			Lo, Hi float64
			Count  int
		}
		PerUser map[string]float64 `json:"per_user"`
		PerItem map[string]float64 `json:"per_item"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	// 30 users × 12 items minus the (u+i)%3 == 0 cells: 240 ratings.
	if s.Format != "movielens-100k" || s.Users != 30 || s.Items != 12 || s.Ratings != 240 {
		t.Fatalf("stats = %+v", s)
	}
	total := 0
	for _, h := range s.Histogram {
		total += h.Count
	}
	if total != 240 || s.RatingMin != 2 || s.RatingMax != 5 || s.PerUser["median"] != 8 || s.PerItem["max"] != 20 {
		t.Fatalf("stats = %+v", s)
	}
	if !strings.Contains(out, `"rating_min"`) || !strings.Contains(out, `"per_user"`) {
		t.Fatalf("JSON field names: %s", out)
	}

	// convert to binary and back to TSV; stats agree.
	bin, tsv := filepath.Join(dir, "x.bin"), filepath.Join(dir, "x.tsv")
	if _, errs, code := runCLI(t, "data", "convert", "--in", in, "--to", "binary", "--out", bin); code != 0 {
		t.Fatalf("convert exit %d: %s", code, errs)
	}
	if _, errs, code := runCLI(t, "data", "convert", "--in", bin, "--to", "tsv", "--out", tsv); code != 0 {
		t.Fatalf("convert exit %d: %s", code, errs)
	}
	out2, _, code := runCLI(t, "data", "stats", "--in", tsv, "--format", "tsv", "--json")
	if code != 0 || !strings.Contains(out2, `"ratings": 240`) {
		t.Fatalf("after convert: %d %s", code, out2)
	}
}

func TestDataStatsBadLine(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "u.data")
	os.WriteFile(in, []byte("1\t1\t5\t1\n1\t2\t4\t1\n2\t1\tfive\t1\n2\t2\t3\t1\n"), 0o644)
	_, errs, code := runCLI(t, "data", "stats", "--in", in)
	if code != 1 || !strings.Contains(errs, "u.data:3: column 3 (rating)") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

func TestDataConvertWritesNothingOnError(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "x.tsv")
	os.WriteFile(in, []byte("1\t1\t5\n1\t1\t4\n"), 0o644) // duplicate
	out := filepath.Join(dir, "out.bin")
	_, errs, code := runCLI(t, "data", "convert", "--in", in, "--to", "binary", "--out", out)
	if code != 1 || !strings.Contains(errs, "duplicate") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("files left behind: %v", ents)
	}
	if _, _, code := runCLI(t, "data", "convert", "--in", in, "--to", "xml", "--out", out); code != 2 {
		t.Fatalf("bad --to: exit %d", code)
	}
}
