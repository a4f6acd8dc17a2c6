package ldp_test

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

func build(t *testing.T, rows [][3]string) *ratings.Matrix {
	t.Helper()
	b := ratings.NewBuilder(ratings.DupError)
	for k, r := range rows {
		v, err := strconv.ParseFloat(r[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Add(r[0], r[1], v, int64(k+1)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func header(t *testing.T, m *ratings.Matrix, mech ldp.Mechanism, sc ldp.Scale, cat []string) (ldp.Header, string) {
	t.Helper()
	r, err := ldp.New(mech, 1, sc)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := ldp.CollectOver(context.Background(), &buf, m, r, nil, cat, noise.Seeded(9), 1); err != nil {
		t.Fatal(err)
	}
	h, err := ldp.ParseHeader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	head := strings.Join(strings.SplitN(buf.String(), "\n", 6)[:5], "\n")
	return h, head
}

// TestHeaderDeclared (defect 5): the header is made of declared facts
// only. Removing the only rating of a user and of an item, or narrowing
// the data's range, changes nothing in it: the client stays a client (she
// still sends a report), the item stays in the catalogue, the scale is the
// declared one. The old collect took users, items and (without --scale)
// the scale from the data, so each of these changed its header.
func TestHeaderDeclared(t *testing.T) {
	full := [][3]string{{"ann", "a", "1"}, {"ann", "b", "5"}, {"bob", "a", "3"}, {"solo", "rare", "4"}}
	clients := []string{"ann", "bob", "solo"}
	cat := []string{"a", "b", "rare", "unrated"}
	for _, mech := range []ldp.Mechanism{ldp.Laplace, ldp.RR} {
		sc, err := ldp.DeclaredScale(1, 5, 0, mech)
		if err != nil {
			t.Fatal(err)
		}
		m := build(t, full)
		want, wantHead := header(t, m, mech, sc, cat)
		if want.Users != 3 || want.Items != 4 || want.Scale != sc {
			t.Errorf("%s: header %+v, want 3 clients, 4 catalogue items, scale %+v", mech, want, sc)
		}
		for name, rows := range map[string][][3]string{
			"solo's only rating removed":   full[:3],
			"a narrower range of ratings":  {{"ann", "a", "3"}, {"bob", "a", "3"}, {"solo", "rare", "4"}},
			"item b's only rating removed": {{"ann", "a", "1"}, {"bob", "a", "3"}, {"solo", "rare", "4"}},
		} {
			nb, err := ldp.WithClients(build(t, rows), clients)
			if err != nil {
				t.Fatal(err)
			}
			got, gotHead := header(t, nb, mech, sc, cat)
			if got != want || gotHead != wantHead {
				t.Errorf("%s, %s: header\n%s\nwant\n%s", mech, name, gotHead, wantHead)
			}
		}
	}
	// A user with ratings who is not a declared client is refused.
	if _, err := ldp.WithClients(build(t, full), clients[:2]); err == nil || !strings.Contains(err.Error(), "solo") {
		t.Errorf("WithClients without solo: %v, want an error naming her", err)
	}
}

// TestCatalogueCovered: every client reports over the whole catalogue, so
// an item nobody rated still receives invented reports, and ratings of
// items outside the catalogue are never reported. 40 clients at ε = 1:
// an unrated cell becomes a report w.p. 1/(e^{1/2}+1) ≈ 0.38 (Laplace) or
// 5/(e+5) ≈ 0.65 (RR), so no report at all on "unrated" has probability
// < 1e-8; the seeded run is deterministic anyway.
func TestCatalogueCovered(t *testing.T) {
	var rows [][3]string
	for u := range 40 {
		rows = append(rows, [3]string{"u" + strconv.Itoa(u), "a", "2"}, [3]string{"u" + strconv.Itoa(u), "outside", "5"})
	}
	m := build(t, rows)
	cat := []string{"a", "unrated"}
	for _, mech := range []ldp.Mechanism{ldp.Laplace, ldp.RR} {
		sc, _ := ldp.DeclaredScale(1, 5, 0, mech)
		r, _ := ldp.New(mech, 1, sc)
		var buf bytes.Buffer
		st, err := ldp.CollectOver(context.Background(), &buf, m, r, nil, cat, noise.Seeded(2), 2)
		if err != nil {
			t.Fatal(err)
		}
		if st.Outside != 40 || st.Ratings != 40 || st.Cells != 80 {
			t.Errorf("%s: stats %+v, want 40 ratings in the catalogue, 40 outside, 80 cells", mech, st)
		}
		_, z, err := ldp.ReadCollected(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := z.Items.Lookup("outside"); ok {
			t.Errorf("%s: an item outside the catalogue was reported", mech)
		}
		j, ok := z.Items.Lookup("unrated")
		if !ok || z.ItemCount(j) == 0 {
			t.Errorf("%s: no report on the unrated catalogue item", mech)
		}
	}
}

func TestDeclaredScale(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		levels int
		mech   ldp.Mechanism
		want   int
		err    string
	}{
		{1, 5, 0, ldp.RR, 5, ""},
		{0, 2, 0, ldp.RR, 3, ""},
		{-10, 10, 0, ldp.RR, 21, ""},
		{0.5, 5, 0, ldp.RR, 0, "--levels"},
		{0.5, 5, 10, ldp.RR, 10, ""},
		{1, 5, 1, ldp.RR, 0, "≥ 2"},
		{1, 5, 0, ldp.Laplace, 0, ""},
		{1, 5, 5, ldp.Laplace, 0, "randomized response only"},
		{5, 1, 0, ldp.Laplace, 0, "min < max"},
	} {
		sc, err := ldp.DeclaredScale(tc.lo, tc.hi, tc.levels, tc.mech)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want one mentioning %q", tc, err, tc.err)
		case tc.err == "" && (err != nil || sc.Levels != tc.want || sc.Min != tc.lo || sc.Max != tc.hi):
			t.Errorf("%v: %+v, %v; want %d levels", tc, sc, err, tc.want)
		}
	}
}

// TestSimulate: Simulate returns exactly what a collect file with the same
// seed holds (header and reports), and SimulateTo writes that file.
func TestSimulate(t *testing.T) {
	m := small(t)
	cat := smallCatalogue()
	for _, mech := range []ldp.Mechanism{ldp.Laplace, ldp.RR} {
		sc, _ := ldp.DeclaredScale(1, 5, 0, mech)
		r, _ := ldp.New(mech, 1.5, sc)
		var file bytes.Buffer
		if _, err := ldp.CollectOver(context.Background(), &file, m, r, nil, cat, noise.Seeded(6), 2); err != nil {
			t.Fatal(err)
		}
		wantH, wantZ, err := ldp.ReadCollected(bytes.NewReader(file.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		var copied bytes.Buffer
		c, err := ldp.SimulateTo(context.Background(), &copied, m, mech, 1.5, 0, sc, cat, noise.Seeded(6), 1)
		if err != nil {
			t.Fatal(err)
		}
		z, h := c.Reports, c.Header
		if h != wantH || !bytes.Equal(copied.Bytes(), file.Bytes()) || z.Len() != wantZ.Len() {
			t.Errorf("%s: Simulate differs from CollectOver + ReadCollected: header %+v vs %+v, %d vs %d reports", mech, h, wantH, z.Len(), wantZ.Len())
		}
		wantZ.All(func(e ratings.Entry) bool {
			u, _ := z.Users.Lookup(wantZ.Users.Name(e.User))
			i, _ := z.Items.Lookup(wantZ.Items.Name(e.Item))
			if v, ok := z.Get(u, i); !ok || v != e.Value {
				t.Errorf("%s: report (%s, %s) = %v, want %v", mech, wantZ.Users.Name(e.User), wantZ.Items.Name(e.Item), v, e.Value)
				return false
			}
			return true
		})
	}
	// Errors from the clients reach the caller: a rating off the scale.
	bad := build(t, [][3]string{{"u", "i0", "7"}})
	sc, _ := ldp.DeclaredScale(1, 5, 0, ldp.RR)
	if _, _, err := ldp.Simulate(context.Background(), bad, ldp.RR, 1, sc, cat, noise.Seeded(1), 1); err == nil || !strings.Contains(err.Error(), "outside the scale") {
		t.Errorf("a rating of 7 on the scale 1…5: %v", err)
	}
}

// TestFixedTimeSampler (defect 9): the client path of the modified Laplace
// mechanism draws its noise with the bounded-time sampler. It reports so
// (Sampler, the header's sampler=), and on the same seeded stream its cell
// equals mechanism.ModifiedLaplace.BoundedTime()'s output and differs from
// the variable-time sampler's (which would equal it if the client path
// called noise.SnapLaplace). Deterministic (fixed seeds).
func TestFixedTimeSampler(t *testing.T) {
	sc := ldp.Scale{Min: 1, Max: 5}
	r, err := ldp.NewModifiedLaplace(1, sc)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sampler() != ldp.SamplerFixedTime {
		t.Errorf("Sampler() = %q, want %q", r.Sampler(), ldp.SamplerFixedTime)
	}
	variable, err := mechanism.NewModifiedLaplace(1)
	if err != nil {
		t.Fatal(err)
	}
	bounded := variable.BoundedTime()
	differ := 0
	for seed := uint64(1); seed <= 50; seed++ {
		got, err := r.Cell(noise.Seeded(seed), 0.5)
		if err != nil {
			t.Fatal(err)
		}
		want, present, _ := bounded.Randomize(noise.Seeded(seed), 0.5, true)
		if !present {
			want = ldp.Missing
		}
		if !(got == want || ldp.IsMissing(got) && ldp.IsMissing(want)) {
			t.Fatalf("seed %d: client cell %v, bounded-time mechanism %v", seed, got, want)
		}
		v, vp, _ := variable.Randomize(noise.Seeded(seed), 0.5, true)
		if present && vp && v != want {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("the variable-time sampler gave the same values on every seed: the test cannot tell them apart")
	}
	m := build(t, [][3]string{{"u", "a", "3"}})
	if h, head := header(t, m, ldp.Laplace, sc, []string{"a"}); h.Sampler != ldp.SamplerFixedTime || !strings.Contains(head, "sampler=fixed-time") {
		t.Errorf("header %+v does not record the fixed-time sampler:\n%s", h, head)
	}
}

// TestFixedTimeDistribution (defect 9): collect's output with the
// bounded-time sampler has the same law as the mechanism with the
// variable-time sampler. n clients rate item "a" 4 on 1…5 (normalised 0.5)
// and leave "b" missing; their present reports on a (kept ratings) and on
// b (invented ones) are compared with n variable-time draws each by a
// two-sample Kolmogorov–Smirnov test at α = 1e-6 per comparison (critical
// D = c(α)·√(2/n), c(α) = √(−ln(α/2)/2) = 2.69; false-failure rate ≤ 2e-6
// for the two comparisons; the lattice is fine, 2⁻³⁸, so ties do not
// matter), and the presence rates by a 5σ binomial check (< 1e-6 each).
func TestFixedTimeDistribution(t *testing.T) {
	n := 12000
	if testing.Short() {
		n = 4000
	}
	const eps = 1.0
	var rows [][3]string
	for u := range n {
		rows = append(rows, [3]string{"u" + strconv.Itoa(u), "a", "4"})
	}
	m := build(t, rows)
	r, err := ldp.NewModifiedLaplace(eps, ldp.Scale{Min: 1, Max: 5})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := ldp.CollectOver(context.Background(), &buf, m, r, nil, []string{"a", "b"}, noise.Seeded(31), 2); err != nil {
		t.Fatal(err)
	}
	_, z, err := ldp.ReadCollected(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var fixed [2][]float64
	z.All(func(e ratings.Entry) bool {
		k := 0
		if z.Items.Name(e.Item) == "b" {
			k = 1
		}
		fixed[k] = append(fixed[k], float64(e.Value))
		return true
	})
	mech, _ := mechanism.NewModifiedLaplace(eps)
	src := noise.Seeded(32)
	var variable [2][]float64
	for k, observed := range []bool{true, false} {
		for range n {
			v, present, err := mech.Randomize(src, 0.5, observed)
			if err != nil {
				t.Fatal(err)
			}
			if present {
				// As written to the collect file (6 decimals) and read back.
				x, _ := strconv.ParseFloat(string(ldp.AppendReport(nil, v)), 32)
				variable[k] = append(variable[k], float64(float32(x)))
			}
		}
	}
	c := math.Sqrt(-math.Log(1e-6/2) / 2)
	for k, what := range []string{"kept ratings", "invented ratings"} {
		p := r.KeepProbability()
		if k == 1 {
			p = 1 - p
		}
		sd := math.Sqrt(float64(n) * p * (1 - p))
		if d := math.Abs(float64(len(fixed[k])) - float64(n)*p); d > 5*sd {
			t.Errorf("%s: %d present, want %.0f ± %.0f", what, len(fixed[k]), float64(n)*p, 5*sd)
		}
		a, b := fixed[k], variable[k]
		d := ksStatistic(a, b)
		crit := c * math.Sqrt(float64(len(a)+len(b))/float64(len(a)*len(b)))
		t.Logf("%s: KS D = %.4f (critical %.4f), %d vs %d reports", what, d, crit, len(a), len(b))
		if d > crit {
			t.Errorf("%s: KS D = %.4f > %.4f: the fixed-time collect's law differs from the mechanism's", what, d, crit)
		}
	}
}

// ksStatistic is the two-sample Kolmogorov–Smirnov D = sup |F_a − F_b|.
func ksStatistic(a, b []float64) float64 {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	var i, j int
	var d float64
	for i < len(a) && j < len(b) {
		x := min(a[i], b[j])
		for i < len(a) && a[i] == x {
			i++
		}
		for j < len(b) && b[j] == x {
			j++
		}
		d = max(d, math.Abs(float64(i)/float64(len(a))-float64(j)/float64(len(b))))
	}
	return d
}
