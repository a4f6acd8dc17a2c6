package dap

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/statistic"
)

// countsTask is a counts task over items a…f (weights capped at 2
// interactions, step 2⁻⁴, 5 bits).
func countsTask(t *testing.T) Task {
	t.Helper()
	c := &statistic.Counts{Items: 6, Cap: 2}
	plan, err := NewPlan(statistic.RowPlan{Catalogue: []string{"a", "b", "c", "d", "e", "f"}}, c)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := NewTask(Task{ID: "pop", Statistic: "counts", Plan: plan, Dimension: 6, Step: 1.0 / 16, Bits: 5, NormSq: 2 * 16 * 16,
		Relation: RelationReplace, Rho: 0.5, MinReports: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestPrepare: a device's report from her ratings verifies at both
// aggregators and their output shares add up to her quantized part
// (what the in-process statistic computes, on the lattice); bad input is
// refused.
func TestPrepare(t *testing.T) {
	tk := countsTask(t)
	a := newTestAggs(t, tk)
	lk, _ := a.lk.PublicBytes()
	hk, _ := a.hk.PublicBytes()
	// Three items rated, one off the catalogue: each rated item counts
	// min(1, √(2/3)) = 0.816…, i.e. 13 steps of 1/16 rounded down.
	r, err := Prepare(tk, lk, hk, []string{"b", "e", "zz", "a"}, []float64{4, 1, 5, 3})
	if err != nil {
		t.Fatal(err)
	}
	ol, oh, err := a.run(r)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := tk.Combine(ol, oh, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{13, 13, 0, 0, 13, 0}; !slices.Equal(got, want) {
		t.Errorf("her part on the lattice %v, want %v", got, want)
	}
	bad := []struct {
		name   string
		tk     Task
		lk, hk []byte
		ids    []string
		vals   []float64
		want   string
	}{
		{"lengths", tk, lk, hk, []string{"a"}, nil, "1 item IDs and 0 ratings"},
		{"NaN", tk, lk, hk, []string{"a"}, []float64{math.NaN()}, "not finite"},
		{"leader key", tk, []byte("short"), hk, nil, nil, "leader's key"},
		{"helper key", tk, lk, nil, nil, nil, "helper's key"},
		{"sigma", func() Task { x := tk; x.Sigma = 1; return x }(), lk, hk, nil, nil, "sigma 1 stated"},
	}
	for _, b := range bad {
		if _, err := Prepare(b.tk, b.lk, b.hk, b.ids, b.vals); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: error %v, want %q", b.name, err, b.want)
		}
	}
}

// TestReleasedModel: the device's model of a counts release ranks the
// items she has not rated by their released values; other statistics and
// malformed releases are refused.
func TestReleasedModel(t *testing.T) {
	tk := countsTask(t)
	vals := []float64{5, 1, 9, -2, 7, 3}
	m, err := ReleasedModel(tk, vals, map[string]string{"c": "Casablanca"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.FoldInUser("me", []string{"e"}, []float64{4})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range m.RecommendFor(st, 3) {
		got = append(got, r.Item+r.Title)
	}
	if want := []string{"cCasablanca", "a", "f"}; !slices.Equal(got, want) {
		t.Errorf("recommendations %v, want %v", got, want)
	}
	if _, err := ReleasedModel(tk, vals[:5], nil); err == nil {
		t.Error("a release of the wrong length was accepted")
	}
	if _, err := ReleasedModel(tk, []float64{0, 0, math.Inf(1), 0, 0, 0}, nil); err == nil {
		t.Error("a release with an infinite value was accepted")
	}
	bias := tk
	b := &statistic.Bias{Items: 6, Mid: 3, Half: 2, Clip: 2}
	if bias.Plan, err = NewPlan(statistic.RowPlan{Catalogue: []string{"a", "b", "c", "d", "e", "f"}, Clamp: &[2]float64{1, 5}}, b); err != nil {
		t.Fatal(err)
	}
	bias.Dimension = b.Spec().Dim
	if _, err := ReleasedModel(bias, make([]float64, bias.Dimension), nil); err == nil || !strings.Contains(err.Error(), "item counts only") {
		t.Errorf("a bias release: %v", err)
	}
}

// FuzzReadLedger: any input is either refused or a ledger that
// round-trips with a positive budget and no negative entry.
func FuzzReadLedger(f *testing.F) {
	f.Add(`{"leader":"http://l","budget_rho":2,"tasks_nano_rho":{"t1":1000000000}}`)
	f.Add(`{"leader":"","budget_rho":-1,"tasks_nano_rho":{}}`)
	f.Add(`{"budget_rho":1,"tasks_nano_rho":{"x":-5}}`)
	f.Add(`{"budget_rho":1,"tasks_nano_rho":null,"extra":1}`)
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ReadLedger(strings.NewReader(s), "fuzz")
		if err != nil {
			return
		}
		if !(l.BudgetRho > 0) || l.Tasks == nil {
			t.Fatalf("accepted %q as %+v", s, l)
		}
		for _, v := range l.Tasks {
			if v < 0 {
				t.Fatalf("accepted a negative entry: %q", s)
			}
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ReadLedger(strings.NewReader(string(b)), "again"); err != nil {
			t.Fatalf("round trip of %q: %v", s, err)
		}
	})
}
