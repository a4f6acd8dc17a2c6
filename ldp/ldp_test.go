package ldp_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

func small(t *testing.T) *ratings.Matrix {
	b := ratings.NewBuilder(ratings.DupError)
	for u := range 20 {
		for i := range 10 {
			if (u+i)%3 == 0 {
				if err := b.Add(fmt.Sprint("u", u), fmt.Sprint("i", i), float64(1+(u*i)%5), 0); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// smallCatalogue is the declared catalogue for small: its ten items plus
// one nobody rated (its cells are randomized from "missing" too).
func smallCatalogue() []string {
	c := []string{"never-rated"}
	for i := range 10 {
		c = append(c, fmt.Sprint("i", i))
	}
	return c
}

// TestCollectRoundTrip: the header parses back, counts add up, and a
// seeded collection is identical whatever the number of workers.
func TestCollectRoundTrip(t *testing.T) {
	m := small(t)
	for _, mech := range []ldp.Mechanism{ldp.Laplace, ldp.RR} {
		r, err := ldp.New(mech, 1, ldp.Scale{Min: 1, Max: 5, Levels: 5})
		if err != nil {
			t.Fatal(err)
		}
		var a, b bytes.Buffer
		cat := smallCatalogue()
		st, err := ldp.CollectOver(context.Background(), &a, m, r, nil, cat, noise.Seeded(4), 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ldp.CollectOver(context.Background(), &b, m, r, nil, cat, noise.Seeded(4), 2); err != nil {
			t.Fatal(err)
		}
		if a.String() != b.String() {
			t.Errorf("%s: seeded output depends on the number of workers", mech)
		}
		h, err := ldp.ParseHeader(strings.NewReader(a.String()))
		if err != nil {
			t.Fatal(err)
		}
		if h.Mechanism != mech || h.Epsilon != 1 || h.Users != m.NumUsers() || h.Items != len(cat) || !h.Reproducible || h.Sampler != ldp.SamplerFixedTime {
			t.Errorf("%s: header %+v", mech, h)
		}
		if st.Kept+st.Removed != st.Ratings || st.Reported != st.Kept+st.Invented {
			t.Errorf("%s: counts %+v", mech, st)
		}
		lines := 0
		for _, l := range strings.Split(strings.TrimSpace(a.String()), "\n") {
			if !strings.HasPrefix(l, "#") {
				lines++
			}
		}
		if int64(lines) != st.Reported {
			t.Errorf("%s: %d data lines, %d reported", mech, lines, st.Reported)
		}
	}
}

// TestRates: the modified Laplace mechanism removes a rating and invents
// one at a missing cell with probability 1/(e^{ε/2}+1) each. With 50 000
// cells of each kind (each present one costs a bounded-time Laplace draw,
// ≈ 10–40 µs), a count more than 5 standard deviations from its mean fails
// (false-failure rate < 1e-6 per check).
func TestRates(t *testing.T) {
	const n = 50000
	r, _ := ldp.NewModifiedLaplace(1, ldp.Scale{Min: 1, Max: 5})
	in := make([]float64, n)
	out := make([]float64, n)
	src := noise.Seeded(8)
	p := 1 / (math.Exp(0.5) + 1)
	check := func(what string, fill float64) {
		for j := range in {
			in[j] = fill
		}
		if err := r.Randomize(src, in, out); err != nil {
			t.Fatal(err)
		}
		flips := 0
		for _, v := range out {
			if ldp.IsMissing(v) != ldp.IsMissing(fill) {
				flips++
			}
		}
		sd := math.Sqrt(n * p * (1 - p))
		if math.Abs(float64(flips)-n*p) > 5*sd {
			t.Errorf("%s: %d flips, want %.0f ± %.0f", what, flips, n*p, 5*sd)
		}
	}
	check("removed", 3)
	check("invented", ldp.Missing)
}

func TestBadInput(t *testing.T) {
	rr, _ := ldp.New(ldp.RR, 1, ldp.Scale{Min: 1, Max: 5, Levels: 5})
	lap, _ := ldp.New(ldp.Laplace, 1, ldp.Scale{Min: 1, Max: 5})
	src := noise.Seeded(1)
	out := make([]float64, 1)
	for _, tc := range []struct {
		r ldp.Randomizer
		v float64
	}{{rr, 2.5}, {rr, 6}, {lap, 0}, {lap, math.Inf(1)}} {
		if err := tc.r.Randomize(src, []float64{tc.v}, out); err == nil {
			t.Errorf("%s accepted %v", tc.r.Mechanism(), tc.v)
		}
	}
	if _, err := ldp.New(ldp.RR, 1, ldp.Scale{Min: 1, Max: 5}); err == nil {
		t.Error("RR accepted a continuous scale")
	}
	if _, err := ldp.New(ldp.Laplace, 0, ldp.Scale{Min: 1, Max: 5}); err == nil {
		t.Error("ε = 0 accepted")
	}
}

// One user's vector over five items (two rated) randomized on her device.
func Example() {
	r, err := ldp.New(ldp.RR, 1, ldp.Scale{Min: 1, Max: 5, Levels: 5})
	if err != nil {
		panic(err)
	}
	in := []float64{4, ldp.Missing, ldp.Missing, 2, ldp.Missing}
	out := make([]float64, len(in))
	if err := r.Randomize(noise.Secure(), in, out); err != nil {
		panic(err)
	}
	fmt.Printf("per rating ε = %.4g, per user ε = %.4g\n", r.PerRating().Epsilon, r.PerUser(len(in)).Epsilon)
	// Output: per rating ε = 1, per user ε = 5
}
