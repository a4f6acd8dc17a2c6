package methods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

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
	// keyed holds, for a draw with keyed coordinates (mechanism.Draw.Keys),
	// each key's mean clean value on each side (nil for other draws): its
	// coordinates are compared by key, whatever their position in a run.
	keyed [][2]map[string]float64
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
			for k < min(n, len(r)) && alike(r[k], ref[k]) {
				k++
			}
			n = k
		}
	}
	return n
}

// alike reports whether two runs' draws at the same position are the same
// release: the same mechanism and size, or the same mechanism with keyed
// coordinates (mechanism.Draw.Keys: a plan that may cover other items in
// another run, compared key by key).
func alike(a, b mechanism.Draw) bool {
	if a.Mechanism != b.Mechanism {
		return false
	}
	return len(a.Noised) == len(b.Noised) || (a.Keys != nil && b.Keys != nil)
}

// keyedMeans is the mean clean value of each key of draw i over runs (the
// runs of one side), averaged over the runs whose release has the key.
func keyedMeans(runs [][]mechanism.Draw, i int) map[string]float64 {
	sum, n := map[string]float64{}, map[string]int{}
	for _, r := range runs {
		for j, k := range r[i].Keys {
			sum[k] += r[i].Clean[j]
			n[k]++
		}
	}
	for k := range sum {
		sum[k] /= float64(n[k])
	}
	return sum
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
		if d.Keys != nil {
			km := [2]map[string]float64{keyedMeans(runs[0], i), keyedMeans(runs[1], i)}
			st.keyed = append(st.keyed, km)
			st.c0, st.c1 = append(st.c0, nil), append(st.c1, nil)
			for k, a := range km[0] {
				if b, ok := km[1][k]; ok && differs(a, b) {
					st.active++
				}
			}
			continue
		}
		st.keyed = append(st.keyed, [2]map[string]float64{})
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
		if km := st.keyed[i]; km[0] != nil {
			if d.Mechanism != st.mech[i] || len(d.Keys) != len(d.Noised) {
				return math.NaN()
			}
			t += st.keyedTerm(i, d, km)
			continue
		}
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

// keyedTerm is draw i's part of the statistic, coordinate by key: the
// Gaussian or Laplace log-likelihood ratio over the keys whose mean clean
// values on the two sides (km) differ; keys the pilot runs did not see on
// both sides add nothing.
func (st *rawStatistic) keyedTerm(i int, d mechanism.Draw, km [2]map[string]float64) float64 {
	var t float64
	b := st.scale[i]
	for j, k := range d.Keys {
		c0, ok0 := km[0][k]
		c1, ok1 := km[1][k]
		if !ok0 || !ok1 || !differs(c0, c1) {
			continue
		}
		y := d.Noised[j]
		switch d.Mechanism {
		case "gaussian":
			t += (y - (c0+c1)/2) * (c1 - c0) / (b * b)
		case "laplace":
			t += (math.Abs(y-c0) - math.Abs(y-c1)) / b
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
	// PerCoordinate says the method accounts each coordinate of its first
	// release as a release of its own (its guarantee composes them): the
	// release check measures the pair's sensitivity in ℓ∞.
	PerCoordinate bool
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
		// The far tails of each side (where a large ε is contradicted),
		// where the pilot has at least 5 values beyond them.
		for s := range 2 {
			side := slices.DeleteFunc(slices.Clone(pilot[s]), math.IsNaN)
			slices.Sort(side)
			for _, q := range []float64{1e-4, 1e-3, 1e-2} {
				if k := int(q * float64(len(side))); k >= 5 {
					ev = append(ev, audit.Event{Kind: audit.AtMost, T: side[k]}, audit.Event{Kind: audit.AtLeast, T: side[len(side)-1-k]})
				}
			}
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
// inputs through every release at once, so it can only show a loss the
// releases reach on them together. The release check audits one release —
// a run's first additive one, whose input does not depend on earlier noise
// — against its own accounted claim (ρ or ε, what the method's composition
// adds up), with a sensitivity the audit derives itself:
//
//   - from the pilot runs it reads the release's clean values on both
//     inputs (the coordinates must be the same in every run on each side:
//     a release whose coordinates move with earlier noise cannot be
//     compared, and the check says it has no power) and measures how far
//     the pair moves it, ‖c₁ − c₀‖ in the mechanism's norm (ℓ1 Laplace, ℓ2
//     Gaussian and ℓ2 Laplace; ℓ∞ for a method that accounts each
//     coordinate as its own release, AuditDesign.PerCoordinate);
//   - the sensitivity tested is Δ̂ = max(Δ, ‖c₁ − c₀‖), Δ the mechanism's
//     declared one: a method that calibrates to less than its pair
//     realises is tested at what the pair realises (the claim covers that
//     pair), and a correct one at its declared Δ (its mechanism claims it);
//   - its reach ‖c₁ − c₀‖/Δ says how much understatement the check can see:
//     a calibration to F·Δ shows only for F < reach. For a proven guarantee
//     a reach below auditReach is "no power" (AuditReport.NoPower), never a
//     pass.
//
// The additive noise does not depend on the input, so both sides are
// sampled from runs on the audit's first input: side 0 is the release's
// noise z/Δ̂, side 1 the same shifted by K (a group of K neighbours, whose
// claim is K²ρ or Kε), and the test point — K, the event {y ≥ s} and its
// mirror, the point (ε', δ') of the claim's profile, the number of runs —
// is planned from the claim alone (audit.PlanShift) where the claimed and
// the 2× under-noised release differ most for the runs afforded.

// auditReach is the smallest reach (realised over declared sensitivity)
// with which the release check of a proven method counts as having power
// against an understated sensitivity: at it, a calibration to half the
// sensitivity is tested as 0.55× the noise.
const auditReach = 0.9

// auditMaxReleaseRuns caps the planned runs per side of a release check
// (a pure ε = 8 release needs ≈ 10⁵: its events must resolve e⁸).
const auditMaxReleaseRuns = 150000

// releaseCheck is the release check of one release, fixed from the pilot
// runs.
type releaseCheck struct {
	index    int // the release's position among a run's draws
	mech     string
	size     int
	declared float64
	// realised is ‖c₁ − c₀‖ (NaN when the coordinates vary between runs);
	// derived is Δ̂ = max(declared, realised).
	realised, derived float64
	law               audit.ReleaseLaw
	design            audit.ShiftDesign
	runs              int
	power             bool
	// maxRuns caps the planned runs per side; perRun is the comparison
	// runs' time per run it was derived from (0: not derived).
	maxRuns int
	perRun  time.Duration
	// pool is the number of samples one training gives: every coordinate
	// of a Laplace or Gaussian release (their noise is independent and
	// identically distributed across coordinates, so each coordinate's
	// noise, shifted along its own axis, is a sample of the same test), one
	// for an ℓ2 Laplace vector (its coordinates are dependent).
	pool int
}

// trainings is the number of trainings per side that give n samples.
func (rc *releaseCheck) trainings(n int) int { return (n + rc.pool - 1) / rc.pool }

// newReleaseCheck builds the check of the pilot runs' additive release
// whose pair reaches the most of its declared sensitivity (the first
// additive release on a tie or when none is measurable; nil when they made
// none), measuring its sensitivity on the pair; perCoord measures it in
// ℓ∞. Every release among the common draws the runs make alike
// (commonDraws, common of them) is a candidate: a
// later release whose input the pair moves beyond its declared
// sensitivity — dp-ease's Gram without its per-user normalisation — is
// the one to test.
func newReleaseCheck(runs [2][][]mechanism.Draw, common int, perCoord bool) *releaseCheck {
	ref := runs[0][0]
	first := slices.IndexFunc(ref, func(d mechanism.Draw) bool { return d.Mechanism != "rr" })
	if first < 0 {
		return newRRCheck(ref[:min(common, len(ref))])
	}
	best := releaseCheckOf(runs, first, perCoord)
	for idx := first + 1; idx < common; idx++ {
		if ref[idx].Mechanism == "rr" {
			continue
		}
		if rc := releaseCheckOf(runs, idx, perCoord); rc.reach() > best.reach()*(1+1e-9) {
			best = rc
		}
	}
	return best
}

// newRRCheck is the check of a method whose only releases are randomized
// response (onebit-inp's signs): every sign a run randomizes (its draws,
// the common ones of the pilot runs) is a sample — released from +1 on
// side 1, from −1 on side 0 — against the mechanism's claim ε; nil when
// there are none. Randomized response has no sensitivity to derive.
func newRRCheck(draws []mechanism.Draw) *releaseCheck {
	last := -1
	for i, d := range draws {
		if d.Mechanism == "rr" && d.Epsilon > 0 && len(d.Noised) == 1 {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	d := draws[last]
	return &releaseCheck{index: last, mech: "rr", size: 1, realised: math.NaN(),
		law: audit.ReleaseLaw{Mechanism: "rr", Epsilon: d.Epsilon}, pool: max(1, (last+1)/2)}
}

// rrSamples appends the released signs of a run's randomized-response
// draws (up to rc.index) whose input was +1 (shifted: side 1) or −1.
func (rc *releaseCheck) rrSamples(dst []float64, draws []mechanism.Draw, shifted bool) []float64 {
	n := len(dst)
	for _, d := range draws[:min(len(draws), rc.index+1)] {
		if d.Mechanism == "rr" && len(d.Clean) == 1 && len(d.Noised) == 1 && (d.Clean[0] > 0) == shifted {
			dst = append(dst, d.Noised[0])
		}
	}
	if len(dst) == n {
		return append(dst, math.NaN())
	}
	return dst
}

// releaseCheckOf is the check of the pilot runs' release idx.
func releaseCheckOf(runs [2][][]mechanism.Draw, idx int, perCoord bool) *releaseCheck {
	d := runs[0][0][idx]
	rc := &releaseCheck{index: idx, mech: d.Mechanism, size: len(d.Noised), declared: d.Sensitivity,
		law: audit.ReleaseLaw{Mechanism: d.Mechanism, Rho: d.Rho, Epsilon: d.Epsilon, Dim: len(d.Noised)}, pool: 1}
	if d.Mechanism != "l2laplace" {
		rc.pool = max(1, len(d.Noised))
	}
	var clean [2][]float64
	fixed := true
	for s := range 2 {
		for k, r := range runs[s] {
			if len(r) <= idx || r[idx].Mechanism != rc.mech || len(r[idx].Clean) != rc.size {
				fixed = false
				continue
			}
			c := byKey(r[idx])
			if k == 0 {
				clean[s] = c
			} else if !slices.EqualFunc(clean[s], c, func(a, b float64) bool { return !differs(a, b) }) {
				fixed = false
			}
		}
	}
	if d.Keys != nil && fixed {
		// Keyed coordinates: the same keys on both sides, or the pair's
		// releases cover different items and cannot be compared.
		fixed = slices.Equal(sortedKeys(runs[0][0][idx]), sortedKeys(runs[1][0][idx]))
	}
	rc.realised = math.NaN()
	if fixed && clean[0] != nil && clean[1] != nil {
		rc.realised = pairDistance(rc.mech, clean[0], clean[1], perCoord)
	}
	rc.derived = rc.declared
	if rc.realised > rc.declared {
		rc.derived = rc.realised
	}
	return rc
}

// byKey is a draw's clean values in the order of its sorted keys (as they
// are for a draw without keys): a keyed release covering the same items in
// another order gives the same list.
func byKey(d mechanism.Draw) []float64 {
	if d.Keys == nil || len(d.Keys) != len(d.Clean) {
		return d.Clean
	}
	idx := make([]int, len(d.Keys))
	for j := range idx {
		idx[j] = j
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(d.Keys[a], d.Keys[b]) })
	out := make([]float64, len(idx))
	for j, i := range idx {
		out[j] = d.Clean[i]
	}
	return out
}

// sortedKeys is a draw's keys, sorted.
func sortedKeys(d mechanism.Draw) []string {
	return slices.Sorted(slices.Values(d.Keys))
}

// pairDistance is ‖b − a‖ in the mechanism's norm (ℓ∞ when perCoord).
func pairDistance(mech string, a, b []float64, perCoord bool) float64 {
	var l1, l2, inf float64
	for j := range a {
		d := math.Abs(b[j] - a[j])
		l1 += d
		l2 += d * d
		inf = math.Max(inf, d)
	}
	switch {
	case perCoord:
		return inf
	case mech == "laplace":
		return l1
	}
	return math.Sqrt(l2)
}

// reach is realised over declared sensitivity (0 when unmeasured).
func (rc *releaseCheck) reach() float64 {
	if math.IsNaN(rc.realised) || !(rc.declared > 0) {
		return 0
	}
	return rc.realised / rc.declared
}

// plan fixes the test point for confidence; runs > 0 imposes that many
// runs per side instead of the planned count.
func (rc *releaseCheck) plan(confidence float64, runs int) error {
	if runs > 0 {
		d, err := audit.DesignShift(rc.law, runs, confidence)
		if err != nil {
			return err
		}
		rc.design, rc.runs, rc.power = d, runs, d.Margin >= audit.ShiftPowerMargin
		return nil
	}
	limit := rc.maxRuns
	if limit <= 0 {
		limit = auditMaxReleaseRuns
	}
	d, n, ok, err := audit.PlanShift(rc.law, confidence, limit)
	rc.design, rc.runs, rc.power = d, n, ok
	return err
}

// of is the check's statistic of a run's draws: the release's noise in
// units of Δ̂ on its first coordinate, plus K when shifted (for ℓ2 Laplace
// the likelihood-ratio statistic of the whole vector); NaN when the run
// does not match the pilot runs.
func (rc *releaseCheck) of(draws []mechanism.Draw, shifted bool) float64 {
	return rc.samples(nil, draws, shifted)[0]
}

// samples appends to dst the run's rc.pool samples of the check's
// statistic: the noise of each coordinate in units of Δ̂, plus K when
// shifted (for ℓ2 Laplace one sample, the likelihood-ratio statistic of
// the whole vector); one NaN when the run does not match the pilot runs.
func (rc *releaseCheck) samples(dst []float64, draws []mechanism.Draw, shifted bool) []float64 {
	if len(draws) <= rc.index {
		return append(dst, math.NaN())
	}
	if rc.mech == "rr" {
		return rc.rrSamples(dst, draws, shifted)
	}
	d := draws[rc.index]
	if d.Mechanism != rc.mech || len(d.Noised) != rc.size || len(d.Clean) != rc.size || rc.size == 0 {
		return append(dst, math.NaN())
	}
	k := rc.design.Group
	a := 0.0
	if shifted {
		a = float64(k)
	}
	if rc.mech == "l2laplace" {
		z := make([]float64, rc.size)
		for j := range z {
			z[j] = (d.Noised[j] - d.Clean[j]) / rc.derived
		}
		return append(dst, audit.ShiftStatistic(z, a, k))
	}
	for j := range rc.pool {
		dst = append(dst, (d.Noised[j]-d.Clean[j])/rc.derived+a)
	}
	return dst
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
