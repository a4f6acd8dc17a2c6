package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/topn"
)

// TestRecommendAllUsers: every user's batch list is her list from
// privrec recommend --user ID --ratings FILE, users come in file order,
// and the output does not depend on the number of workers (150 users:
// three chunks).
func TestRecommendAllUsers(t *testing.T) {
	dir := t.TempDir()
	in := writeInteractions(t, dir, 150)
	modelPath := filepath.Join(dir, "als.model")
	if _, errs, code := runCLI(t, "train", "--data", in, "--method", "als", "--seed", "3", "--scale", "1:5", "--out", modelPath); code != 0 {
		t.Fatalf("train: %s", errs)
	}
	cat := writeTitledCatalogue(t, dir) // titles for items 1–12
	base := []string{"recommend", "--model", modelPath, "--ratings", in, "--all-users", "-k", "4", "--items", cat}
	jsonl, errs, code := runCLI(t, append(base, "--json", "--workers", "3")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var recs []batchRec
	sc := bufio.NewScanner(strings.NewReader(jsonl))
	for sc.Scan() {
		var r batchRec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 150 {
		t.Fatalf("%d users, want 150", len(recs))
	}
	for j, r := range recs {
		if r.User != itoa(j+1) || len(r.Recommendations) != 4 {
			t.Fatalf("line %d: user %s with %d items", j+1, r.User, len(r.Recommendations))
		}
	}
	for _, u := range []int{0, 1, 77, 149} {
		one, errs, code := runCLI(t, "recommend", "--model", modelPath, "--ratings", in, "--user", recs[u].User, "-k", "4", "--items", cat, "--json")
		if code != 0 {
			t.Fatalf("recommend --user: %s", errs)
		}
		var single struct {
			Recommendations []struct {
				Item, Title string
				Score       float64
			}
		}
		if err := json.Unmarshal([]byte(one), &single); err != nil {
			t.Fatal(err)
		}
		for j, r := range single.Recommendations {
			b := recs[u].Recommendations[j]
			if b.Item != r.Item || b.Score != r.Score || b.Title != r.Title {
				t.Fatalf("user %s rank %d: batch %+v, single %+v", recs[u].User, j+1, b, r)
			}
		}
	}
	// TSV: a header, k lines per user, the same lists with one worker.
	tsv1, errs, code := runCLI(t, append(base, "--workers", "1")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	tsv2, _, _ := runCLI(t, append(base, "--workers", "2")...)
	if tsv1 != tsv2 {
		t.Fatal("the output depends on the number of workers")
	}
	lines := strings.Split(strings.TrimSuffix(tsv1, "\n"), "\n")
	if lines[0] != "user\trank\titem\tscore\ttitle" || len(lines) != 1+150*4 {
		t.Fatalf("header %q, %d lines", lines[0], len(lines))
	}
	f := strings.Split(lines[1], "\t")
	if len(f) != 5 || f[0] != "1" || f[1] != "1" || f[2] != recs[0].Recommendations[0].Item {
		t.Fatalf("first line %q", lines[1])
	}
}

func TestRecommendAllUsersErrors(t *testing.T) {
	dir := t.TempDir()
	in := writeInteractions(t, dir, 10)
	modelPath := filepath.Join(dir, "bias.model")
	if _, errs, code := runCLI(t, "train", "--data", in, "--method", "bias", "--out", modelPath); code != 0 {
		t.Fatalf("train: %s", errs)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no ratings", []string{"--model", modelPath, "--all-users"}, 2, "--data FILE"},
		{"with --user", []string{"--model", modelPath, "--ratings", in, "--all-users", "--user", "1"}, 2, "--user"},
		{"with --user-state", []string{"--model", modelPath, "--ratings", in, "--all-users", "--user-state", dir}, 2, "--user-state"},
		{"no model", []string{"--ratings", in, "--all-users"}, 2, "--model"},
		{"k 0", []string{"--model", modelPath, "--ratings", in, "--all-users", "-k", "0"}, 2, "-k"},
		{"missing ratings", []string{"--model", modelPath, "--ratings", filepath.Join(dir, "none"), "--all-users"}, 1, "none"},
		{"missing model", []string{"--model", filepath.Join(dir, "none.model"), "--ratings", in, "--all-users"}, 1, "none.model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCLI(t, append([]string{"recommend"}, tc.args...)...)
			if code != tc.code || out != "" || !strings.Contains(errs, tc.msg) {
				t.Fatalf("exit %d (want %d), stdout %q, stderr %q (want %q)", code, tc.code, out, errs, tc.msg)
			}
		})
	}
}

type failWriter struct{ left int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		return 0, errors.New("disk full")
	}
	w.left -= len(p)
	return len(p), nil
}

// TestRecommendAllStops: a failing output or Ctrl-C stops the batch with
// an error (the workers do not run on).
func TestRecommendAllStops(t *testing.T) {
	dir := t.TempDir()
	in := writeInteractions(t, dir, 400)
	modelPath := filepath.Join(dir, "bias.model")
	if _, errs, code := runCLI(t, "train", "--data", in, "--method", "bias", "--out", modelPath); code != 0 {
		t.Fatalf("train: %s", errs)
	}
	m, err := model.Load(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ratingio.ReadFile(in, ratingio.Options{Format: "tsv"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recommendAll(context.Background(), m, r, 5, nil, false, 2, &failWriter{left: 1000}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("failing writer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := recommendAll(ctx, m, r, 5, nil, false, 2, io.Discard); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	n, err := recommendAll(context.Background(), m, r, 5, nil, true, 3, io.Discard)
	if err != nil || n != 400 {
		t.Fatalf("%d users, %v", n, err)
	}
}

// BenchmarkRecommendAll: batch lists of 2 000 users (60 items each) from
// an item–item model over 3 000 items covering 2 000 of them (EASE's
// shape, fold-in "indicator"), top 20, written as TSV.
func BenchmarkRecommendAll(b *testing.B) {
	const nItems, covered, nUsers, perUser = 3000, 2000, 2000, 60
	m := &model.Model{Method: "bench", Output: model.Scores, Rank: covered, FoldIn: topn.FoldIndicator,
		V: make([]float64, nItems*covered), ItemBias: make([]float64, nItems)}
	for i := range nItems {
		m.Items = append(m.Items, strconv.Itoa(i))
	}
	for i := range m.V {
		m.V[i] = float64((i*2654435761)%1000) / 1000
	}
	bld := ratings.NewBuilder(ratings.DupError)
	for u := range nUsers {
		for j := range perUser {
			bld.Add(strconv.Itoa(u), strconv.Itoa((u*31+j*97)%nItems), 5, 0)
		}
	}
	r, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := recommendAll(context.Background(), m, r, 20, nil, false, 0, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
