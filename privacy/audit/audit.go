// Package audit checks differential-privacy mechanisms empirically: it
// samples a mechanism on a worst-case pair of neighbouring inputs, counts
// a fixed family of likelihood-ratio-optimal events on each side, and
// turns the counts into a Clopper–Pearson lower bound on the privacy loss
// ε (for (ε, δ) mechanisms: ln((p_a − δ)/p_b)). The lower bound holds
// simultaneously over all events and both directions with the stated
// confidence (Bonferroni), so a bound above the claimed ε is a violation
// with false-alarm probability at most 1 − confidence.
//
// The same machinery runs in the tests of privacy/mechanism and behind
// `privrec audit`.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"gonum.org/v1/gonum/mathext"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/noise"
)

// Kind is the shape of an event on a scalar output.
type Kind int

const (
	// AtLeast is {y ≥ T}.
	AtLeast Kind = iota
	// AtMost is {y ≤ T}.
	AtMost
	// Equals is {y = T} (discrete outputs).
	Equals
	// IsMissing is {y is NaN}: the mechanism released "missing".
	IsMissing
	// Custom is {In(y)} for a caller-supplied predicate (e.g. a
	// floating-point artefact a precision attack looks for).
	Custom
)

// Event is one candidate event, fixed before sampling.
type Event struct {
	Kind Kind
	T    float64
	// In and Name define a Custom event.
	In   func(y float64) bool
	Name string
}

func (e Event) String() string { return e.describe("y") }

// describe renders the event on the statistic named y.
func (e Event) describe(y string) string {
	switch e.Kind {
	case AtLeast:
		return fmt.Sprintf("%s ≥ %.4g", y, e.T)
	case AtMost:
		return fmt.Sprintf("%s ≤ %.4g", y, e.T)
	case Equals:
		return fmt.Sprintf("%s = %.4g", y, e.T)
	case IsMissing:
		return y + " missing"
	case Custom:
		return e.Name
	}
	return "?"
}

// contains reports whether the output y lies in the event (NaN is only in
// IsMissing, or in a Custom event whose predicate accepts it).
func (e Event) contains(y float64) bool {
	switch e.Kind {
	case AtLeast:
		return y >= e.T
	case AtMost:
		return y <= e.T
	case Equals:
		return y == e.T
	case IsMissing:
		return math.IsNaN(y)
	case Custom:
		return e.In(y)
	}
	return false
}

// Spec describes one audit: a mechanism sampled on two neighbouring inputs
// (side 0 and side 1) producing a scalar (NaN = missing), the claimed
// guarantee, and the candidate events.
type Spec struct {
	Mechanism      string
	ClaimedEpsilon float64
	Delta          float64
	// Sample draws one output of the mechanism on input side (0 or 1). It
	// is called from two goroutines at once (one per side), each with its
	// own source, so it must not share mutable state between calls.
	Sample func(src *noise.Source, side int) float64
	// Statistic names what Sample returns when it is a statistic of the
	// mechanism's output rather than the output itself (e.g. the
	// likelihood-ratio statistic of a vector release); empty means "y".
	Statistic string
	Events    []Event
	// Samples is the number of samples per side the audit is designed
	// for: at it, For's instance built with 10 % too little noise is
	// caught at confidence 0.95 (the default of `privrec audit`). 0 means
	// DefaultSamples.
	Samples int
}

// DefaultSamples is the sample count per side of `privrec audit` for
// mechanisms whose Spec.Samples is 0.
const DefaultSamples = 1_000_000

// Result is the audit's finding; the JSON field names are the fixed
// contract of 'privrec audit --json'.
type Result struct {
	Mechanism         string  `json:"mechanism"`
	ClaimedEpsilon    float64 `json:"claimed_epsilon"`
	Delta             float64 `json:"delta,omitempty"`
	EpsilonLowerBound float64 `json:"epsilon_lower_bound"`
	Confidence        float64 `json:"confidence"`
	Samples           int     `json:"samples"`
	Violation         bool    `json:"violation"`
	// Event is the event that gave the bound, and EpsilonEstimate the
	// plain (point) estimate of the loss on it.
	Event           string  `json:"event"`
	EpsilonEstimate float64 `json:"epsilon_estimate"`
	Seconds         float64 `json:"seconds"`
}

// MarshalJSON writes the result with an infinite (or undefined) point
// estimate — an event never seen on the other input — as null, as the
// guarantee's JSON does for an infinite ε; JSON has no infinities.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	out := struct {
		plain
		EpsilonEstimate *float64 `json:"epsilon_estimate"`
	}{plain: plain(r), EpsilonEstimate: privacy.JSONNumber(r.EpsilonEstimate)}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("audit result: %w", err)
	}
	return b, nil
}

// ClopperPearson returns the exact two-sided-style one-sided bounds for k
// successes in n trials: lower is the largest p with P(Bin(n,p) ≥ k) ≤ α,
// upper the smallest p with P(Bin(n,p) ≤ k) ≤ α.
func ClopperPearson(k, n int, alpha float64) (lower, upper float64) {
	if n <= 0 || k < 0 || k > n {
		return 0, 1
	}
	nf := float64(n)
	// Both bounds are lower quantiles of a Beta distribution (the upper
	// bound by the symmetry k ↔ n−k), which InvRegIncBeta computes
	// accurately even for tiny α; k = 0 and k = n have closed forms.
	lowerOf := func(k int) float64 {
		switch k {
		case 0:
			return 0
		case n:
			return math.Exp(math.Log(alpha) / nf)
		}
		return mathext.InvRegIncBeta(float64(k), nf-float64(k)+1, alpha)
	}
	lower = lowerOf(k)
	if k == 0 {
		upper = -math.Expm1(math.Log(alpha) / nf)
	} else {
		upper = 1 - lowerOf(n-k)
	}
	if math.IsNaN(lower) || lower < 0 {
		lower = 0
	}
	if math.IsNaN(upper) || upper > 1 {
		upper = 1
	}
	return lower, upper
}

// Run samples n outputs per side (the two sides in parallel, each on its
// own stream split from src) and computes the lower bound at the given
// confidence (e.g. 0.95). The events are counted as the samples are drawn,
// so memory does not grow with n.
func Run(ctx context.Context, spec Spec, n int, confidence float64, src *noise.Source) (Result, error) {
	if spec.Sample == nil || len(spec.Events) == 0 {
		return Result{}, errors.New("audit: spec needs a sampler and at least one event")
	}
	for _, e := range spec.Events {
		if e.Kind == Custom && e.In == nil {
			return Result{}, errors.New("audit: custom event without a predicate")
		}
	}
	if n < 10 {
		return Result{}, fmt.Errorf("audit: %d samples per side are too few", n)
	}
	if !(confidence > 0 && confidence < 1) {
		return Result{}, fmt.Errorf("audit: confidence %v must be in (0, 1)", confidence)
	}
	start := time.Now()
	var counts [2][]int
	var errs [2]error
	srcs := [2]*noise.Source{src.Split(), src.Split()}
	var wg sync.WaitGroup
	for side := range 2 {
		wg.Go(func() {
			c := make([]int, len(spec.Events))
			for i := range n {
				if i&0xffff == 0 {
					if err := ctx.Err(); err != nil {
						errs[side] = err
						return
					}
				}
				y := spec.Sample(srcs[side], side)
				for j := range spec.Events {
					if spec.Events[j].contains(y) {
						c[j]++
					}
				}
			}
			counts[side] = c
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return Result{}, fmt.Errorf("audit %s: %w", spec.Mechanism, err)
		}
	}
	stat := spec.Statistic
	if stat == "" {
		stat = "y"
	}
	r := Result{Mechanism: spec.Mechanism, ClaimedEpsilon: spec.ClaimedEpsilon, Delta: spec.Delta,
		Confidence: confidence, Samples: n, EpsilonLowerBound: 0, EpsilonEstimate: 0}
	// Bonferroni over events × 2 directions × 2 bounds per comparison.
	alpha := (1 - confidence) / float64(4*len(spec.Events))
	best := math.Inf(-1)
	for i, ev := range spec.Events {
		for a := range 2 {
			b := 1 - a
			ka, kb := counts[a][i], counts[b][i]
			lo, _ := ClopperPearson(ka, n, alpha)
			_, hi := ClopperPearson(kb, n, alpha)
			lb := math.Inf(-1)
			if lo-spec.Delta > 0 && hi > 0 {
				lb = math.Log((lo - spec.Delta) / hi)
			}
			if lb > best {
				best = lb
				r.Event = fmt.Sprintf("%s (input %d vs %d)", ev.describe(stat), a, b)
				pa, pb := float64(ka)/float64(n), float64(kb)/float64(n)
				r.EpsilonEstimate = math.Log((pa - spec.Delta) / pb)
			}
		}
	}
	if best > 0 {
		r.EpsilonLowerBound = best
	}
	r.Violation = r.EpsilonLowerBound > spec.ClaimedEpsilon
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// MaxLowerBound is the largest ε lower bound Run can report with n samples
// per side at the confidence over k events and δ: an event seen in every
// sample of one side and in none of the other. A claim at or above it
// cannot be contradicted with n samples, whatever the mechanism does.
func MaxLowerBound(n int, confidence float64, k int, delta float64) float64 {
	alpha := (1 - confidence) / float64(4*max(k, 1))
	lo, _ := ClopperPearson(n, n, alpha)
	_, hi := ClopperPearson(0, n, alpha)
	if !(lo-delta > 0) || !(hi > 0) {
		return math.Inf(-1)
	}
	return math.Log((lo - delta) / hi)
}

// PilotEvents fixes a pipeline audit's events before its sampling: it draws
// n outputs of side 0 from src (a stream of its own, not the audit's) and
// returns {y ≥ q} and {y ≤ q} at the 1, 5, 20, 50, 80, 95 and 99 %
// quantiles of that pilot. For whole pipelines (docs/PRIVACY.md, test
// tier 6) whose output distribution is not known in closed form; NaN
// outputs (failed runs) are left out of the quantiles.
func PilotEvents(sample func(src *noise.Source, side int) float64, n int, src *noise.Source) []Event {
	pilot := make([]float64, 0, n)
	for range n {
		if y := sample(src, 0); !math.IsNaN(y) {
			pilot = append(pilot, y)
		}
	}
	if len(pilot) == 0 {
		return []Event{{Kind: IsMissing}}
	}
	slices.Sort(pilot)
	var ev []Event
	for _, q := range []float64{0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99} {
		t := pilot[int(q*float64(len(pilot)-1))]
		ev = append(ev, Event{Kind: AtLeast, T: t}, Event{Kind: AtMost, T: t})
	}
	return ev
}
