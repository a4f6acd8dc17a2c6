package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/transform"
)

// The files of a held-out-users split, in --out DIR.
const (
	splitTrainFile   = "train.tsv"
	splitValHistory  = "validation-history.tsv"
	splitValTargets  = "validation-targets.tsv"
	splitTestHistory = "test-history.tsv"
	splitTestTargets = "test-targets.tsv"
)

type userSplitArgs struct {
	users    string
	positive float64
	minPos   int
	frac     float64
	seed     uint64
	out      string
	json     bool
}

// userSplitPart is one written file of the split.
type userSplitPart struct {
	File    string `json:"file"`
	Users   int    `json:"users"`
	Ratings int    `json:"ratings"`
}

// userSplitReport is the --json summary of data split --users.
type userSplitReport struct {
	In           string   `json:"in"`
	Out          string   `json:"out"`
	Seed         uint64   `json:"seed"`
	Positive     *float64 `json:"positive,omitempty"`
	MinPositives int      `json:"min_positives"`
	TargetFrac   float64  `json:"target_frac"`
	// Ratings and Users of the input; Interactions and KeptUsers after
	// --positive and --min-positives.
	Ratings      int `json:"ratings"`
	Users        int `json:"users"`
	Items        int `json:"items"`
	Interactions int `json:"interactions"`
	KeptUsers    int `json:"kept_users"`
	// The five files (the validation pair only when VAL > 0: an empty
	// ratings file could not be read back).
	Train             *userSplitPart `json:"train"`
	ValidationHistory *userSplitPart `json:"validation_history,omitempty"`
	ValidationTargets *userSplitPart `json:"validation_targets,omitempty"`
	TestHistory       *userSplitPart `json:"test_history"`
	TestTargets       *userSplitPart `json:"test_targets"`
}

// parseUserCounts reads "VAL,TEST".
func parseUserCounts(s string) (val, test int, err error) {
	a, b, ok := strings.Cut(s, ",")
	v, err1 := strconv.Atoi(strings.TrimSpace(a))
	t, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || v < 0 || t < 1 {
		return 0, 0, usagef("--users %q: want VAL,TEST, two whole numbers of users (e.g. 600,600; VAL may be 0, TEST ≥ 1)", s)
	}
	return v, t, nil
}

func runUserSplit(ctx context.Context, d *dataFlags, set map[string]bool, a userSplitArgs, out io.Writer) error {
	val, test, err := checkUserSplitArgs(d, set, a)
	if err != nil {
		return err
	}
	m, err := d.read()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	rep := userSplitReport{In: d.path, Out: a.out, Seed: a.seed, MinPositives: a.minPos, TargetFrac: a.frac,
		Ratings: m.Len(), Users: m.NumUsers(), Items: m.NumItems()}
	pos, err := userSplitInteractions(m, d.path, set["positive"], a, &rep)
	if err != nil {
		return err
	}
	split, err := transform.SplitUsers(pos, val, test, a.frac, a.seed)
	if err != nil {
		return fmt.Errorf("%s: %d users have ≥ %d interactions: %w", d.path, rep.KeptUsers, a.minPos, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := writeUserSplit(a.out, split, &rep); err != nil {
		return err
	}
	if a.json {
		return writeJSON(out, rep)
	}
	printUserSplit(out, &rep)
	return nil
}

// userSplitFiles is the split's file names, in the order of
// userSplitParts.
var userSplitFiles = []string{splitTrainFile, splitValHistory, splitValTargets, splitTestHistory, splitTestTargets}

// checkUserSplitArgs refuses the flags of the other splits and values out
// of range, before anything is read; it returns VAL and TEST.
func checkUserSplitArgs(d *dataFlags, set map[string]bool, a userSplitArgs) (val, test int, err error) {
	for _, f := range []string{"holdout", "per-user", "train", "test", "top-items", "cap"} {
		if set[f] {
			return 0, 0, usagef("--%s cannot be combined with --users (the held-out-users split writes its five files into --out DIR)", f)
		}
	}
	if val, test, err = parseUserCounts(a.users); err != nil {
		return 0, 0, err
	}
	switch {
	case a.out == "":
		return 0, 0, usagef("--users needs --out DIR for its five files")
	case !(a.frac > 0 && a.frac < 1):
		return 0, 0, usagef("--target-frac %v: want a fraction in (0, 1)", a.frac)
	case a.minPos < 2:
		return 0, 0, usagef("--min-positives %d: want N ≥ 2 (a held-out user needs a history and a target)", a.minPos)
	case set["positive"] && (math.IsNaN(a.positive) || math.IsInf(a.positive, 0)):
		return 0, 0, usagef("--positive %v: want a finite rating", a.positive)
	}
	if set["positive"] && d.scale != "" {
		o, err := d.options()
		if err != nil {
			return 0, 0, err
		}
		if a.positive > o.Max {
			return 0, 0, usagef("--positive %g is above the declared scale's maximum %g (--scale %s): no rating could be an interaction", a.positive, o.Max, d.scale)
		}
	}
	for _, n := range userSplitFiles {
		if d.path != "" && sameFile(d.path, filepath.Join(a.out, n)) {
			return 0, 0, usagef("--out %s would overwrite the input %s", a.out, d.path)
		}
	}
	return val, test, nil
}

// userSplitInteractions is the interactions of m: its ratings ≥ --positive
// (all without it) of the users with at least --min-positives of them.
func userSplitInteractions(m *ratings.Matrix, path string, positive bool, a userSplitArgs, rep *userSplitReport) (*ratings.Matrix, error) {
	pos := m
	if positive {
		p := a.positive
		rep.Positive = &p
		pos = transform.Positives(m, p)
		if pos.Len() == 0 {
			lo, hi := m.Range()
			return nil, fmt.Errorf("--positive %g: no rating of %s is ≥ %g (its ratings lie in [%g, %g])", p, path, p, lo, hi)
		}
	}
	pos = transform.MinPerUser(pos, a.minPos)
	rep.Interactions = pos.Len()
	rep.KeptUsers = countUsers(pos)
	return pos, nil
}

// writeUserSplit writes the split's non-empty files into dir, all or
// nothing (a directory it created is removed again on failure), and
// records each in rep.
func writeUserSplit(dir string, split *transform.UserSplit, rep *userSplitReport) error {
	parts := []*ratings.Matrix{split.Train, split.ValHistory, split.ValTargets, split.TestHistory, split.TestTargets}
	reps := []**userSplitPart{&rep.Train, &rep.ValidationHistory, &rep.ValidationTargets, &rep.TestHistory, &rep.TestTargets}
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	var files []atomicfile.File
	for k, p := range parts {
		if p.Len() == 0 {
			continue // the validation pair with VAL = 0
		}
		f := atomicfile.File{Path: filepath.Join(dir, userSplitFiles[k]), Write: func(w io.Writer) error { return ratingio.WriteTSV(w, p) }}
		files = append(files, f)
		*reps[k] = &userSplitPart{File: f.Path, Users: countUsers(p), Ratings: p.Len()}
	}
	if err := atomicfile.WriteAll(0o644, files...); err != nil {
		if statErr != nil {
			os.Remove(dir) // the directory this command created, still empty
		}
		return err
	}
	return nil
}

// printUserSplit prints the split's summary and one line per file.
func printUserSplit(out io.Writer, rep *userSplitReport) {
	fmt.Fprintf(out, "%d ratings (%d users × %d items) → %d interactions of %d users", rep.Ratings, rep.Users, rep.Items, rep.Interactions, rep.KeptUsers)
	if rep.Positive != nil {
		fmt.Fprintf(out, " (ratings ≥ %g, users with ≥ %d)", *rep.Positive, rep.MinPositives)
	} else {
		fmt.Fprintf(out, " (users with ≥ %d)", rep.MinPositives)
	}
	fmt.Fprintln(out)
	for _, p := range []*userSplitPart{rep.Train, rep.ValidationHistory, rep.ValidationTargets, rep.TestHistory, rep.TestTargets} {
		if p != nil {
			fmt.Fprintf(out, "  %-40s %6d users %9d ratings\n", p.File, p.Users, p.Ratings)
		}
	}
}

// countUsers is the number of users with at least one rating.
func countUsers(m *ratings.Matrix) int {
	n := 0
	for u := range int32(m.NumUsers()) {
		if m.UserCount(u) > 0 {
			n++
		}
	}
	return n
}
