package methods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/audit"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
)

// The whole-artefact audit's ε lower bound is computed on the raw noised
// releases, before any post-processing: every private method draws its
// privacy noise through privacy/mechanism, and the audit attaches a tap
// (Env.Tap) that sees each release's value before and after the noise.
// Post-processing can only lose the evidence a lower bound needs (a model
// fitted to noisy statistics shows their noise through a solver that
// averages it away); the raw releases carry all of it.
//
// On pilot runs of both inputs the tap gives each coordinate's clean value
// on each side (averaged over the runs: for a method whose releases do not
// depend on earlier noise they are the same in every run). The statistic
// of a run is then the log-likelihood ratio of its releases between the two
// sides, coordinate by coordinate, with the noise law each release states:
//
//	gaussian   (y − (c₀+c₁)/2)·(c₁ − c₀)/σ²
//	laplace    (|y − c₀| − |y − c₁|)/b
//	l2laplace  (‖y − c₀‖₂ − ‖y − c₁‖₂)/b        (per released vector)
//	rr         ln P(y | c₁)/P(y | c₀)            (flip probabilities p₁, p₂)
//
// summed over the coordinates where the sides differ. For releases that
// do not depend on earlier noise this is exactly the privacy loss of the
// instance run (the Neyman–Pearson statistic), so its tails are the most
// powerful events there are; for adaptive methods (Frank–Wolfe, DP-SGD,
// gradient perturbation) the averaged clean values make it an
// approximation, which costs power, never soundness: the events are fixed
// on the pilot runs before the fresh runs that are counted.

// errAuditStop stops a sampling run once the tap has seen every release the
// statistic needs (the rest of the training is post-processing).
var errAuditStop = errors.New("audit: every audited release seen; training stopped")

// tapRecorder collects the draws of one run.
type tapRecorder struct {
	mu    sync.Mutex
	draws []mechanism.Draw
	// stopAfter, when positive, makes the tap stop the run after that many
	// draws.
	stopAfter int
}

func (t *tapRecorder) tap(d mechanism.Draw) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := d
	c.Clean, c.Noised = slices.Clone(d.Clean), slices.Clone(d.Noised)
	t.draws = append(t.draws, c)
	if t.stopAfter > 0 && len(t.draws) >= t.stopAfter {
		return errAuditStop
	}
	return nil
}

// complete reports whether the run saw all the draws it was to see.
func (t *tapRecorder) complete() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopAfter > 0 && len(t.draws) >= t.stopAfter
}

// rawStatistic is the log-likelihood-ratio statistic of the raw releases,
// fixed from pilot runs.
type rawStatistic struct {
	// shape is each draw's (mechanism, length); a run must match it.
	mech  []string
	size  []int
	c0    [][]float64 // mean clean value per draw and coordinate, side 0
	c1    [][]float64
	scale []float64    // the draw's noise scale (pilot)
	flip  [][2]float64 // rr
	// active counts the coordinates that differ between the sides.
	active int
}

// sameShape reports whether two runs released the same sequence of draws.
func sameShape(a, b []mechanism.Draw) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Mechanism != b[i].Mechanism || len(a[i].Noised) != len(b[i].Noised) {
			return false
		}
	}
	return true
}

// commonDraws is the number of leading draws every run released alike
// (same mechanisms, same sizes). A method whose later releases depend on
// earlier noise (which items dpals' covariance covers, say) releases a
// varying sequence after them; the statistics use the common part.
func commonDraws(runs [2][][]mechanism.Draw) int {
	ref := runs[0][0]
	n := len(ref)
	for s := range 2 {
		for _, r := range runs[s] {
			k := 0
			for k < min(n, len(r)) && r[k].Mechanism == ref[k].Mechanism && len(r[k].Noised) == len(ref[k].Noised) {
				k++
			}
			n = k
		}
	}
	return n
}

// newRawStatistic builds the statistic from the pilot runs' draws (runs[s]
// the runs of side s) over their first n draws (commonDraws); it returns
// nil when there are none.
func newRawStatistic(runs [2][][]mechanism.Draw, n int) *rawStatistic {
	if n == 0 {
		return nil
	}
	ref := runs[0][0][:n]
	st := &rawStatistic{}
	for i, d := range ref {
		st.mech = append(st.mech, d.Mechanism)
		st.size = append(st.size, len(d.Noised))
		st.scale = append(st.scale, d.Scale)
		st.flip = append(st.flip, d.Flip)
		var mean [2][]float64
		for s := range 2 {
			mean[s] = make([]float64, len(d.Noised))
			for _, r := range runs[s] {
				for j, x := range r[i].Clean {
					mean[s][j] += x / float64(len(runs[s]))
				}
			}
		}
		st.c0, st.c1 = append(st.c0, mean[0]), append(st.c1, mean[1])
		for j := range mean[0] {
			if differs(mean[0][j], mean[1][j]) {
				st.active++
			}
		}
	}
	return st
}

// differs reports whether two clean values differ beyond float noise.
func differs(a, b float64) bool {
	return math.Abs(a-b) > 1e-12*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// of returns the statistic of one run's draws (NaN if the run does not
// match the pilot runs); draws beyond the pilot runs' common ones are
// ignored.
func (st *rawStatistic) of(draws []mechanism.Draw) float64 {
	if len(draws) < len(st.mech) {
		return math.NaN()
	}
	draws = draws[:len(st.mech)]
	var t float64
	for i, d := range draws {
		if d.Mechanism != st.mech[i] || len(d.Noised) != st.size[i] {
			return math.NaN()
		}
		c0, c1, b := st.c0[i], st.c1[i], st.scale[i]
		switch d.Mechanism {
		case "gaussian":
			for j, y := range d.Noised {
				if differs(c0[j], c1[j]) {
					t += (y - (c0[j]+c1[j])/2) * (c1[j] - c0[j]) / (b * b)
				}
			}
		case "laplace":
			for j, y := range d.Noised {
				if differs(c0[j], c1[j]) {
					t += (math.Abs(y-c0[j]) - math.Abs(y-c1[j])) / b
				}
			}
		case "l2laplace":
			var n0, n1 float64
			for j, y := range d.Noised {
				n0 += (y - c0[j]) * (y - c0[j])
				n1 += (y - c1[j]) * (y - c1[j])
			}
			t += (math.Sqrt(n0) - math.Sqrt(n1)) / b
		case "rr":
			// P(+1 | +1) = 1 − p1, P(+1 | −1) = p2.
			p1, p2 := st.flip[i][0], st.flip[i][1]
			prob := func(y, c float64) float64 {
				plus := p2
				if c > 0 {
					plus = 1 - p1
				}
				if y > 0 {
					return plus
				}
				return 1 - plus
			}
			for j, y := range d.Noised {
				if math.Signbit(c0[j]) != math.Signbit(c1[j]) {
					t += math.Log(prob(y, c1[j]) / prob(y, c0[j]))
				}
			}
		default:
			return math.NaN()
		}
	}
	return t
}

// rawEvents are the events of the raw statistic, fixed from its pilot
// values on each side: {T ≥ m₀ + c·s} and {T ≤ m₁ − c·s} for c = 0.5 …
// 3 (m_s the pilot mean on side s, s the pooled standard deviation; for
// one Gaussian coordinate these are {y ≥ c} in units of its noise, measured
// from input 0), and {T ≥ q·M}, {T ≤ −q·M} for q = 0.5, 0.9, 1 − 10⁻⁹ with M
// the largest |T| seen (the atoms of a Laplace release's statistic sit at
// ±M, where its likelihood ratio is largest).
func rawEvents(pilot [2][]float64) []audit.Event {
	var m [2]float64
	var v, big float64
	n := 0
	for s := range 2 {
		k := 0
		for _, x := range pilot[s] {
			if !math.IsNaN(x) {
				m[s] += x
				k++
				big = math.Max(big, math.Abs(x))
			}
		}
		if k > 0 {
			m[s] /= float64(k)
		}
		for _, x := range pilot[s] {
			if !math.IsNaN(x) {
				v += (x - m[s]) * (x - m[s])
				n++
			}
		}
	}
	if n < 3 {
		return []audit.Event{{Kind: audit.IsMissing}}
	}
	sd := math.Sqrt(v / float64(n-2))
	var ev []audit.Event
	for _, c := range []float64{0.5, 1, 1.5, 2, 2.5, 3} {
		ev = append(ev, audit.Event{Kind: audit.AtLeast, T: m[0] + c*sd}, audit.Event{Kind: audit.AtMost, T: m[1] - c*sd})
	}
	for _, q := range []float64{0.5, 0.9, 1 - 1e-9} {
		ev = append(ev, audit.Event{Kind: audit.AtLeast, T: q * big}, audit.Event{Kind: audit.AtMost, T: -q * big})
	}
	return ev
}

// AuditDesigner is an optional interface of a Config: a method whose
// privacy noise is not drawn through privacy/mechanism during training
// (the local-DP methods, whose noise is drawn on the users' devices), or
// whose releases the generic statistic of the raw draws does not fit,
// declares the audit's neighbouring pair, claim and statistic itself.
// Without it the audit uses the default pair of the method's relation,
// the guarantee's claim and the raw-release statistic (or, when a method
// releases nothing through an instrumented mechanism, the public field
// that differs most between the sides — which has little power).
type AuditDesigner interface {
	AuditDesign(eps, delta float64) (*AuditDesign, error)
}

// AuditDesign is a method's declared audit (AuditDesigner).
type AuditDesign struct {
	// Config, when set, is the configuration audited instead of the one
	// given (the same code with other settings: e.g. one release instead
	// of T adaptive ones, whose raw statistic would need the other input's
	// clean values under the same history).
	Config Config
	// Sides, when set, replaces the default neighbouring pair of the
	// method's relation; side 1 must hold the canary user (CanaryUser).
	Sides func(relation string) ([2]release.Input, error)
	// Epsilon and Delta, when Epsilon > 0, are the claim between the two
	// sides when it is tighter than the guarantee's (e.g. per rating for a
	// pair that differs in one rating).
	Epsilon, Delta float64
	// Name describes the statistic in reports.
	Name string
	// Statistic is the audited value of one run, from what the run's
	// devices produced (prepared: the input the method trained on), the
	// draws tapped and the release (nil when Prepared is set: the run is
	// not trained).
	Statistic func(prepared release.Input, draws []mechanism.Draw, r *release.Release) float64
	// Prepared says the statistic reads the prepared input only: sampling
	// runs stop before training.
	Prepared bool
	// Device, when set, is the devices' step for Prepared statistics at
	// per-rating ε: the same randomization as AuditOptions.Prepare without
	// the collect file a trainer would read.
	Device func(ctx context.Context, in release.Input, src *noise.Source, eps float64) (release.Input, error)
}

// valueEvents are the events of a declared statistic, from its pilot
// values: {missing} and {y = v} for each value seen when there are at most
// 12 of them (a categorical release), else {y ≥ q} and {y ≤ q} at the 5,
// 10, 20, 30, 50, 70, 80, 90 and 95 % quantiles of the pooled values seen.
func valueEvents(pilot [2][]float64) []audit.Event {
	seen := map[float64]bool{}
	var all []float64
	for s := range 2 {
		for _, x := range pilot[s] {
			if !math.IsNaN(x) {
				seen[x] = true
				all = append(all, x)
			}
		}
	}
	ev := []audit.Event{{Kind: audit.IsMissing}}
	if len(seen) > 12 {
		slices.Sort(all)
		for _, q := range []float64{0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95} {
			t := all[int(q*float64(len(all)-1))]
			ev = append(ev, audit.Event{Kind: audit.AtLeast, T: t}, audit.Event{Kind: audit.AtMost, T: t})
		}
		return ev
	}
	vals := make([]float64, 0, len(seen))
	for x := range seen {
		vals = append(vals, x)
	}
	slices.Sort(vals)
	for _, x := range vals {
		ev = append(ev, audit.Event{Kind: audit.Equals, T: x})
	}
	return ev
}

// The release check. The data-level bound above compares two neighbouring
// inputs, so it can only show a loss the method's releases actually reach
// on them; where a method's sensitivity analysis is loose (dpfw's first
// Gram release reaches at most a quarter of the ρ its Δ₂ = 4√2·L² prices),
// even a 2× under-noised release stays under the claim there. The release
// check audits the noise instead: every release a method makes goes
// through an additive mechanism that declares its sensitivity Δ and its
// claim for one release (ε, or ρ for Gaussian noise), and the composition
// of those claims is what the method's accounting adds up (the check takes
// a run's leading releases up to a summed ρ of releaseCheckRho). Its neighbouring
// pair is, for every release of a run, the release's own input x and
// x + Δ·e₁ — the worst case its mechanism is calibrated for. Additive
// noise does not depend on the input, so the second side is sampled as a
// fresh run's releases shifted by Δ·e₁: each run's draws come from the
// method's own Release calls on the audit data, the code path a release
// takes. The statistic is the log-likelihood ratio of the pair (per release
// (|z₁| − |z₁ − Δ|)/b, (‖z‖₂ − ‖z − Δe₁‖₂)/b or (z₁ − Δ/2)·Δ/σ² of its noise
// z = y − x), summed over the run; the claim is the sum of the releases'
// ε (all pure) or of their ρ (pure ε counted as ε²/2), tested at
// (ε'(ρ, δ'), δ').

// releaseCheck is the release check's statistic, fixed from one pilot run.
type releaseCheck struct {
	mech        []string
	size        []int
	sens, scale []float64
	// eps is the claim of a single pure-ε release; rho the summed ρ
	// otherwise.
	eps, rho float64
	// stop is the number of draws (of any kind) up to the last one checked.
	stop int
}

// releaseCheckRho is the largest summed ρ the release check takes on: the
// leading releases of a run are checked together as long as their claims
// sum to at most this (at least one release). Near ρ ≈ 0.5–1 a claim is
// tested most efficiently (a few hundred runs per side catch 2× too little
// noise); a run of thousands of releases (the GP tensor variants update a
// row of C per rating) would sum to a claim no feasible sample count can
// contradict.
const releaseCheckRho = 1

// newReleaseCheck builds the check from a pilot run's draws: its leading
// additive releases up to releaseCheckRho (nil when the run made none).
// A leading pure-ε release with ε ≥ 0.5 is checked alone against its ε
// (its loss is bounded by ε, which events near the bound test directly;
// summed as ε²/2-zCDP the claim of an ℓ2 Laplace release is far above its
// actual loss); otherwise the claim is the summed ρ (a pure ε-DP release is
// ε²/2-zCDP).
func newReleaseCheck(ref []mechanism.Draw) *releaseCheck {
	rc := &releaseCheck{}
	pure := true
	var rho float64
	for i, d := range ref {
		if d.Mechanism == "rr" {
			continue
		}
		r := d.Rho
		if d.Mechanism != "gaussian" {
			r = d.Epsilon * d.Epsilon / 2
		}
		if len(rc.mech) > 0 && (rho+r > releaseCheckRho || rc.eps >= 0.5 && len(rc.mech) == 1 && pure) {
			break
		}
		rc.mech = append(rc.mech, d.Mechanism)
		rc.size = append(rc.size, len(d.Noised))
		rc.sens = append(rc.sens, d.Sensitivity)
		rc.scale = append(rc.scale, d.Scale)
		rc.stop = i + 1
		rho += r
		if d.Mechanism == "gaussian" {
			pure = false
		} else {
			rc.eps += d.Epsilon
		}
	}
	if len(rc.mech) == 0 {
		return nil
	}
	if !pure || len(rc.mech) > 1 {
		rc.eps, rc.rho = 0, rho
	}
	return rc
}

// maxLoss is the largest value the statistic can take on a single pure
// release: Δ/b (∞ for Gaussian or several releases).
func (rc *releaseCheck) maxLoss() float64 {
	if rc.rho > 0 || len(rc.mech) != 1 {
		return math.Inf(1)
	}
	return rc.sens[0] / rc.scale[0]
}

// releaseEvents are the release check's events: rawEvents, and for a single
// pure release {T ≥ q·M}, {T ≤ −q·M} at q = 0.6, 0.8, 0.9, 0.95 of its
// largest possible value M = Δ/b (an ℓ2 Laplace release exceeds its claim
// only near the bound, in a cone around the shift that the pilot runs
// rarely reach).
func releaseEvents(pilot [2][]float64, m float64) []audit.Event {
	ev := rawEvents(pilot)
	if !math.IsInf(m, 0) {
		for _, q := range []float64{0.6, 0.8, 0.9, 0.95} {
			ev = append(ev, audit.Event{Kind: audit.AtLeast, T: q * m}, audit.Event{Kind: audit.AtMost, T: -q * m})
		}
	}
	return ev
}

// of is the statistic of a run's draws, their noise shifted by Δ·e₁ when
// shifted (NaN when the run does not match the pilot run); draws beyond
// the pilot's are ignored.
func (rc *releaseCheck) of(draws []mechanism.Draw, shifted bool) float64 {
	var t float64
	k := 0
	for _, d := range draws {
		if d.Mechanism == "rr" {
			continue
		}
		if k == len(rc.mech) {
			break
		}
		if d.Mechanism != rc.mech[k] || len(d.Noised) != rc.size[k] || len(d.Clean) != len(d.Noised) || len(d.Noised) == 0 {
			return math.NaN()
		}
		delta, b := rc.sens[k], rc.scale[k]
		z0 := d.Noised[0] - d.Clean[0]
		if shifted {
			z0 += delta
		}
		switch d.Mechanism {
		case "gaussian":
			t += (z0 - delta/2) * delta / (b * b)
		case "laplace":
			t += (math.Abs(z0) - math.Abs(z0-delta)) / b
		case "l2laplace":
			var n0, n1 float64
			for j := range d.Noised {
				z := d.Noised[j] - d.Clean[j]
				if j == 0 {
					z = z0
				}
				n0 += z * z
				if j == 0 {
					z -= delta
				}
				n1 += z * z
			}
			t += (math.Sqrt(n0) - math.Sqrt(n1)) / b
		}
		k++
	}
	if k != len(rc.mech) {
		return math.NaN()
	}
	return t
}

// MarshalJSON writes an infinite claimed ε (a guarantee with status none)
// as null, as the guarantee's own JSON does; JSON has no infinities.
func (r AuditReport) MarshalJSON() ([]byte, error) {
	type plain AuditReport
	out := struct {
		plain
		ClaimedEpsilon *float64 `json:"claimed_epsilon"`
	}{plain: plain(r), ClaimedEpsilon: privacy.JSONNumber(r.ClaimedEpsilon)}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("audit report: %w", err)
	}
	return b, nil
}
