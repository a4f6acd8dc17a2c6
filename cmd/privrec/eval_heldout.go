package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
)

// defaultHeldOutKs are the cut-offs of the top-N protocol when -k is not
// given.
var defaultHeldOutKs = []int{10, 20, 50, 100}

// parseKs reads a -k list: "20" or "10,20,50,100" (each ≥ 1, no
// repeats; kept in the order given).
func parseKs(s string) ([]int, error) {
	var ks []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		k, err := strconv.Atoi(f)
		if err != nil || k < 1 {
			return nil, fmt.Errorf("-k %q: %q is not a whole number ≥ 1 (want e.g. 10 or 10,20,50,100)", s, f)
		}
		if slices.Contains(ks, k) {
			return nil, fmt.Errorf("-k %q: %d is listed twice", s, k)
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// checkPositive checks a --positive threshold against the declared rating
// scale (nil: undeclared, only finiteness is checked): a threshold above
// the scale's maximum would leave no interaction at all. privrec train
// calls it for --positive with --scale; eval and data split do the same.
func checkPositive(positive float64, scale *release.Scale) error {
	if math.IsNaN(positive) || math.IsInf(positive, 0) {
		return usagef("--positive %v: want a finite rating", positive)
	}
	if scale != nil && positive > scale.Max {
		return usagef("--positive %g is above the declared scale's maximum %g (--scale %g:%g): no rating could be an interaction", positive, scale.Max, scale.Min, scale.Max)
	}
	return nil
}

// heldOutArgs are eval's flags for the strong-generalisation protocol.
type heldOutArgs struct {
	modelPath, history, targets, train, popularityFrom string
	ks                                                 []int
	positive                                           *float64
	unknownItems                                       string
}

// heldOutResult is eval's --json report of the held-out users.
type heldOutResult struct {
	*methods.HeldOutReport
	History string `json:"history"`
	Targets string `json:"targets"`
	Ks      []int  `json:"ks"`
	// UnknownHistory counts history ratings of items outside the model's
	// catalogue (with --unknown-items skip); UnknownTargets counts target
	// items no list can hold (misses).
	UnknownHistory int `json:"unknown_history_items,omitempty"`
	UnknownTargets int `json:"unknown_target_items,omitempty"`
	// Positive is the rule applied to the targets (the model's, or --positive).
	Positive *float64 `json:"positive,omitempty"`
}

// evalHeldOut scores a model on held-out users: each user of --targets is
// scored from her own ratings in --history (fold-in through the public
// model), every item not in her history ranked, against her targets.
func evalHeldOut(ctx context.Context, d *dataFlags, a heldOutArgs) (*heldOutResult, error) {
	m, err := loadMatrixModel(a.modelPath, "held-out users are scored")
	if err != nil {
		return nil, err
	}
	if m.Dense != nil {
		return nil, fmt.Errorf("%s (%s) releases a dense users × items matrix: it cannot score a user it was not trained on", a.modelPath, m.Method)
	}
	positive, err := heldOutPositive(m, a.positive)
	if err != nil {
		return nil, err
	}
	read := func(flag, path string) (*ratings.Matrix, error) { return readFlagFile(ctx, d, flag, path) }
	hist, err := read("history", a.history)
	if err != nil {
		return nil, err
	}
	tgt, err := read("targets", a.targets)
	if err != nil {
		return nil, err
	}
	res := &heldOutResult{History: a.history, Targets: a.targets, Ks: a.ks, Positive: positive}
	if res.UnknownHistory, err = unknownHistory(m, hist, a); err != nil {
		return nil, err
	}
	if tgt, err = positiveTargets(tgt, positive, a.targets); err != nil {
		return nil, err
	}
	res.UnknownTargets = countUnknownItems(m, tgt)
	// A held-out user must not be a training user: the model's own users,
	// and those of --train.
	var train *ratings.Matrix
	if a.train != "" {
		if train, err = read("train", a.train); err != nil {
			return nil, err
		}
	}
	if err := checkHeldOutUsers(m, train, a, hist, tgt); err != nil {
		return nil, err
	}
	opt := methods.HeldOutOptions{Ks: a.ks}
	if opt.Popularity, err = heldOutPopularity(train, positive, a, read); err != nil {
		return nil, err
	}
	rep, err := methods.EvaluateHeldOut(ctx, m, hist, tgt, opt)
	if err != nil {
		return nil, fmt.Errorf("scoring %s from --history %s against --targets %s: %w", a.modelPath, a.history, a.targets, err)
	}
	res.HeldOutReport = rep
	return res, nil
}

// readFlagFile reads the ratings file given by --flag.
func readFlagFile(ctx context.Context, d *dataFlags, flag, path string) (*ratings.Matrix, error) {
	opt, err := d.options()
	if err != nil {
		return nil, err
	}
	r, err := ratingio.ReadFileContext(ctx, path, opt)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return r, nil
}

// heldOutPositive is the positive rule applied to the targets: the
// model's, or --positive (checked against the model's declared scale; it
// may not differ from the model's rule).
func heldOutPositive(m *model.Model, flag *float64) (*float64, error) {
	positive := m.Transform.Positive
	if flag == nil {
		return positive, nil
	}
	var sc *release.Scale
	if c := m.Transform.Clamp; c != nil {
		sc = &release.Scale{Min: c.Min, Max: c.Max}
	}
	if err := checkPositive(*flag, sc); err != nil {
		return nil, err
	}
	if positive != nil && *positive != *flag {
		return nil, usagef("--positive %g differs from the model's rule (it was trained on ratings ≥ %g)", *flag, *positive)
	}
	return flag, nil
}

// unknownHistory counts the history ratings of items outside the model's
// catalogue: an error naming the first (a device could not fold them in;
// the user's list would silently ignore part of her history), unless
// --unknown-items skip (then a warning).
func unknownHistory(m *model.Model, hist *ratings.Matrix, a heldOutArgs) (int, error) {
	n := 0
	for u := range int32(hist.NumUsers()) {
		items, _ := hist.UserRow(u)
		for _, it := range items {
			if _, ok := m.ItemIndex(hist.Items.Name(it)); ok {
				continue
			}
			n++
			if a.unknownItems == "error" {
				user, item := hist.Users.Name(u), hist.Items.Name(it)
				return n, fmt.Errorf("%s: user %q rated item %q, which is not in the model's catalogue of %d items (train the model with --items CATALOGUE declaring every item, or pass --unknown-items skip to ignore such ratings)",
					where(a.history, user, item), user, item, m.NumItems())
			}
		}
	}
	if n > 0 {
		slog.Warn("history ratings of items outside the model's catalogue ignored", "file", a.history, "ratings", n)
	}
	return n, nil
}

// positiveTargets drops the targets below the positive rule (nil: keeps
// all): they are not interactions.
func positiveTargets(tgt *ratings.Matrix, positive *float64, path string) (*ratings.Matrix, error) {
	if positive == nil {
		return tgt, nil
	}
	t := float32(*positive)
	tgt = tgt.Filter(func(e ratings.Entry) bool { return e.Value >= t })
	if tgt.Len() == 0 {
		return nil, fmt.Errorf("--targets %s: no target rating is ≥ %g (the positive rule)", path, *positive)
	}
	return tgt, nil
}

// countUnknownItems counts the ratings of r whose items are outside the
// model's catalogue.
func countUnknownItems(m *model.Model, r *ratings.Matrix) int {
	n := 0
	r.All(func(e ratings.Entry) bool {
		if _, ok := m.ItemIndex(r.Items.Name(e.Item)); !ok {
			n++
		}
		return true
	})
	return n
}

// checkHeldOutUsers refuses a held-out user (of the history or the
// targets) who is one of the model's users or of the training file.
func checkHeldOutUsers(m *model.Model, train *ratings.Matrix, a heldOutArgs, hist, tgt *ratings.Matrix) error {
	for _, f := range []struct {
		flag, path string
		m          *ratings.Matrix
	}{{"history", a.history, hist}, {"targets", a.targets, tgt}} {
		for u := range int32(f.m.NumUsers()) {
			if f.m.UserCount(u) == 0 {
				continue
			}
			id := f.m.Users.Name(u)
			if _, ok := m.UserIndex(id); ok {
				return fmt.Errorf("--%s %s: user %q is one of the model's training users: held-out users must be new to the model (split with privrec data split --users)", f.flag, f.path, id)
			}
			if train != nil {
				if tu, ok := train.Users.Lookup(id); ok && train.UserCount(tu) > 0 {
					items, _ := train.UserRow(tu)
					return fmt.Errorf("--%s %s: user %q is also in the training file: %s (held-out users must be disjoint from the training users; split with privrec data split --users)",
						f.flag, f.path, id, where(a.train, id, train.Items.Name(items[0])))
				}
			}
		}
	}
	return nil
}

// heldOutPopularity counts each item's interactions (ratings at or above
// the positive rule) in --popularity-from, else in --train; nil (then
// EvaluateHeldOut counts them in the histories) without either.
func heldOutPopularity(train *ratings.Matrix, positive *float64, a heldOutArgs, read func(flag, path string) (*ratings.Matrix, error)) (map[string]float64, error) {
	var pf *ratings.Matrix
	switch {
	case a.popularityFrom != "" && (a.train == "" || !sameFile(a.popularityFrom, a.train)):
		var err error
		if pf, err = read("popularity-from", a.popularityFrom); err != nil {
			return nil, err
		}
	case train != nil:
		pf = train
	}
	if pf == nil {
		return nil, nil
	}
	if positive != nil {
		t := float32(*positive)
		pf = pf.Filter(func(e ratings.Entry) bool { return e.Value >= t })
	}
	pop := make(map[string]float64, pf.NumItems())
	for i := range int32(pf.NumItems()) {
		pop[pf.Items.Name(i)] = float64(pf.ItemCount(i))
	}
	return pop, nil
}

// printHeldOut writes the held-out report as a table.
func printHeldOut(out io.Writer, r *heldOutResult) {
	fmt.Fprintf(out, "%s on %d held-out users (history %s, targets %s)", r.Method, r.Users, r.History, r.Targets)
	if r.Skipped > 0 {
		fmt.Fprintf(out, "; %d users with targets but no history skipped", r.Skipped)
	}
	fmt.Fprintln(out)
	if r.UnknownTargets > 0 {
		fmt.Fprintf(out, "  (%d target items are outside the model's catalogue: counted as misses)\n", r.UnknownTargets)
	}
	fmt.Fprintf(out, "  %6s  %9s  %8s  %8s  %10s\n", "k", "Recall@k", "NDCG@k", "coverage", "popularity")
	for _, k := range r.Ks {
		fmt.Fprintf(out, "  %6d  %9.4f  %8.4f  %8.4f  %10.1f\n", k, r.Recall[k], r.NDCG[k], r.Coverage[k], r.Popularity[k])
	}
	fmt.Fprintf(out, "  MRR %.4f (first hit within the top %d)\n", r.MRR, slices.Max(r.Ks))
}

// where names the line of path holding (user, item) as FILE:LINE, or
// FILE alone when it cannot be found (formats whose fields are not
// "user SEP item …": the item is still named in the message).
func where(path, user, item string) string {
	if n := findLine(path, user, item); n > 0 {
		return fmt.Sprintf("%s:%d", path, n)
	}
	return path
}

// findLine returns the 1-based number of the first line of path whose
// first two fields (tab, comma, "::", ';' or space separated) are user and
// item; 0 when none is.
func findLine(path, user, item string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var r io.Reader = f
	br := bufio.NewReader(f)
	if b, err := br.Peek(2); err == nil && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return 0
		}
		r = zr
	} else {
		r = br
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		for _, sep := range []string{"\t", "::", ",", ";", " "} {
			fs := strings.SplitN(line, sep, 3)
			if len(fs) >= 2 && strings.TrimSpace(fs[0]) == user && strings.TrimSpace(fs[1]) == item {
				return n
			}
		}
	}
	return 0
}
