package mechanism

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// Instrument is what an audit attaches to the mechanisms a release builds
// (`privrec audit --method M --noise-factor F`, methods.Env.NoiseFactor):
// a factor on the noise and a tap that sees every draw. An instrumented
// mechanism keeps its Guarantee — it claims the budget it was calibrated
// for — so a NoiseFactor below 1 makes it deliberately wrong, for showing
// that an audit catches that. A release made with an instrumented
// mechanism whose factor is not 1 is never private as claimed; the
// commands that publish releases never set one.
type Instrument struct {
	// NoiseFactor multiplies the standard deviation (or scale) of every
	// noise draw; for randomized response it divides the log-odds of
	// keeping a value (the mechanism is built for ε/NoiseFactor). 0 means
	// 1.
	NoiseFactor float64
	// SensitivityFactor re-calibrates every additive mechanism for
	// SensitivityFactor times its sensitivity Δ: the noise is multiplied
	// by it and the draw declares F·Δ, while the mechanism keeps claiming
	// its budget — a release calibrated to an understated sensitivity, for
	// showing that an audit deriving the sensitivity itself catches it.
	// Randomized response has no sensitivity and ignores it. 0 means 1.
	SensitivityFactor float64
	// Tap, when set, is called after every release with the value before
	// and after the noise (the draw's slices belong to the tap only for
	// the duration of the call; it must copy what it keeps). A non-nil
	// error aborts the release with it (an audit that has seen every draw
	// it needs stops the training that way).
	Tap func(Draw) error

	mu  sync.Mutex
	err error // the first error a tap returned to a release that cannot fail
}

// Err is the first error the tap returned on a release that cannot report
// one (RandomizedResponse.Randomize); a solver that randomizes through an
// instrumented RR checks it after its loop, as it would a Release error.
func (in *Instrument) Err() error {
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.err
}

// keep records err for Err.
func (in *Instrument) keep(err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.err == nil && err != nil {
		in.err = fmt.Errorf("rr release: %w", err)
	}
}

// Draw is one release seen by an Instrument's tap.
type Draw struct {
	// Mechanism is the Name of the mechanism ("laplace", "gaussian",
	// "l2laplace", "rr").
	Mechanism string
	// Clean is the input, Noised the released output (for rr: +1 or −1).
	Clean, Noised []float64
	// Scale is the noise actually added: the Laplace or ℓ2-Laplace scale,
	// the Gaussian σ (the requested ones, instrument factor included).
	Scale float64
	// Flip is rr's (p1, p2): the probabilities that +1 and −1 are flipped.
	Flip [2]float64
	// Sensitivity is the mechanism's declared sensitivity (ℓ1 for
	// laplace, ℓ2 for gaussian and l2laplace), and Epsilon or Rho what it
	// claims for one release (Epsilon for the pure-ε mechanisms, Rho for
	// gaussian): the claim the noise actually added must live up to.
	Sensitivity, Epsilon, Rho float64
	// Keys, when set, name the coordinates (one key each): a release whose
	// coordinates follow a data-dependent plan — dp-ease's Gram over the
	// items with the largest noised counts, in the order of those counts —
	// is labelled by its method so that an audit compares each coordinate
	// with the same one in other runs. Nil: coordinate j is the same
	// quantity in every run.
	Keys []string
}

// factor is the instrument's noise factor (1 when there is none).
func (in *Instrument) factor() float64 {
	if in == nil || in.NoiseFactor == 0 {
		return 1
	}
	return in.NoiseFactor
}

// sensFactor is the instrument's sensitivity factor (1 when there is none).
func (in *Instrument) sensFactor() float64 {
	if in == nil || in.SensitivityFactor == 0 {
		return 1
	}
	return in.SensitivityFactor
}

// additive is the factor on an additive mechanism's noise: the noise factor
// times the sensitivity factor.
func (in *Instrument) additive() float64 { return in.factor() * in.sensFactor() }

// Active reports whether the instrument changes or observes anything.
func (in *Instrument) Active() bool {
	return in != nil && (in.factor() != 1 || in.sensFactor() != 1 || in.Tap != nil)
}

// Check validates the noise and sensitivity factors.
func (in *Instrument) Check() error {
	if f := in.factor(); math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return fmt.Errorf("%w: noise factor %v must be positive and finite", ErrData, f)
	}
	if f := in.sensFactor(); math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return fmt.Errorf("%w: sensitivity factor %v must be positive and finite", ErrData, f)
	}
	return nil
}

// tap reports a draw; clean may be nil when there is no tap.
func (in *Instrument) tap(d Draw) error {
	if in == nil || in.Tap == nil {
		return nil
	}
	if err := in.Tap(d); err != nil {
		return fmt.Errorf("%s release: %w", d.Mechanism, err)
	}
	return nil
}

// before copies x for the tap (nil when nobody looks).
func (in *Instrument) before(x []float64) []float64 {
	if in == nil || in.Tap == nil {
		return nil
	}
	return slices.Clone(x)
}

// Instrumented returns a copy of m whose Release adds NoiseFactor times
// the noise and reports each release to the tap; the copy keeps m's
// Guarantee. A nil or inactive instrument returns m itself.
func (m *Laplace) Instrumented(in *Instrument) *Laplace {
	if !in.Active() {
		return m
	}
	c := *m
	c.inst = in
	return &c
}

// Instrumented: see Laplace.Instrumented.
func (m *Gaussian) Instrumented(in *Instrument) *Gaussian {
	if !in.Active() {
		return m
	}
	c := *m
	c.inst = in
	return &c
}

// Instrumented: see Laplace.Instrumented.
func (m *L2Laplace) Instrumented(in *Instrument) *L2Laplace {
	if !in.Active() {
		return m
	}
	c := *m
	c.inst = in
	return &c
}

// Instrumented returns a copy of m built for ε/NoiseFactor — each flip
// probability p becomes 1/(1 + ((1−p)/p)^(1/NoiseFactor)) — that keeps m's
// Guarantee and reports every randomized sign to the tap. A nil or inactive
// instrument returns m itself.
func (m *RandomizedResponse) Instrumented(in *Instrument) *RandomizedResponse {
	if !in.Active() {
		return m
	}
	c := *m
	c.inst = in
	if f := in.factor(); f != 1 {
		scale := func(p float64) float64 { return 1 / (1 + math.Pow((1-p)/p, 1/f)) }
		c.p1, c.p2 = scale(m.p1), scale(m.p2)
	}
	return &c
}
