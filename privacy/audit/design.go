package audit

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/privrec/privrec/privacy/accountant"
	"gonum.org/v1/gonum/mathext"
)

// The test point of a release check. An additive release y = x + z of a
// query of sensitivity Δ claims, for inputs x and x' with ‖x − x'‖ ≤ Δ,
// ρ-zCDP (Gaussian noise) or ε-DP (Laplace, ℓ2 Laplace). Its noise does
// not depend on x, so both sides of the check are sampled from the
// release's own runs: side 0 is z, side 1 is z + K·Δ·e₁. By group privacy
// the claim for a shift of K·Δ is K²ρ-zCDP, or K·ε-DP (Bun & Steinke,
// "Concentrated differential privacy: simplifications, extensions, and
// lower bounds", Proposition 27; Dwork & Roth, Theorem 2.2), so the check
// is sound at every K ≥ 1; a larger K moves a small claim (ρ ≈ 0.005 at
// ε = 0.5) to where a few thousand runs can contradict it.
//
// The claim is tested at one point of its privacy profile, (ε', δ') with
// δ' = δ(ε') of the tight zCDP conversion (accountant.ZCDPDelta), on one
// event {y ≥ s} (y in units of Δ) and its mirror image {y ≤ K − s}.
// DesignShift chooses K, s and ε' before any sampling, from the claim
// alone: where the claimed calibration and the same release with half the
// noise (the 2× under-noised or under-sensitised release an audit must
// catch) differ most for the number of runs afforded — the largest
// expected margin of the Clopper–Pearson test, in standard deviations.

// ReleaseLaw is the claim of one additive release, in units of its
// sensitivity: the mechanism ("gaussian", "laplace", "l2laplace"), its
// zCDP ρ (gaussian) or ε (the others), and the vector dimension of an ℓ2
// Laplace release.
type ReleaseLaw struct {
	Mechanism    string
	Rho, Epsilon float64
	Dim          int
}

// ShiftDesign is the chosen test point.
type ShiftDesign struct {
	// Group is K: side 1 is the output shifted by K·Δ·e₁.
	Group int `json:"group"`
	// Threshold is s: the events are {y ≥ s} and {y ≤ K − s} on the first
	// coordinate in units of Δ (for ℓ2 Laplace, on the likelihood-ratio
	// statistic ‖y‖ − ‖y − K·e₁‖ ∈ [−K, K]: {T ≥ s} and {T ≤ −s}).
	Threshold float64 `json:"threshold"`
	// Epsilon and Delta are the claim tested: (K·ε, 0) for a pure release,
	// (ε', δ(K²ρ, ε')) for a zCDP one.
	Epsilon float64 `json:"epsilon"`
	Delta   float64 `json:"delta"`
	// Margin is the expected margin of the test, in standard deviations,
	// against the release with half its noise at the design's sample count
	// (positive: that release is expected to be caught).
	Margin float64 `json:"margin"`
}

// Events returns the design's two events.
func (d ShiftDesign) Events(law ReleaseLaw) []Event {
	if law.Mechanism == "l2laplace" {
		return []Event{{Kind: AtLeast, T: d.Threshold}, {Kind: AtMost, T: -d.Threshold}}
	}
	return []Event{{Kind: AtLeast, T: d.Threshold}, {Kind: AtMost, T: float64(d.Group) - d.Threshold}}
}

// ShiftEventsCount is the number of events of a ShiftDesign (for the
// Bonferroni correction of Run).
const ShiftEventsCount = 2

// shiftAlternative is the noise factor of the alternative a design is
// tuned to catch: half the claimed noise.
const shiftAlternative = 0.5

// DesignShift chooses the test point of a release with law, for n runs
// per side at the given confidence (the Bonferroni correction of Run over
// the design's two events).
func DesignShift(law ReleaseLaw, n int, confidence float64) (ShiftDesign, error) {
	if n < 10 || !(confidence > 0 && confidence < 1) {
		return ShiftDesign{}, fmt.Errorf("design: %d runs at confidence %v", n, confidence)
	}
	alpha := (1 - confidence) / float64(4*ShiftEventsCount)
	sr := &shiftSearch{n: float64(n), z: -normQuantile(alpha), rare: newRareCounts(n, alpha), best: ShiftDesign{Margin: math.Inf(-1)}}
	var err error
	switch law.Mechanism {
	case "gaussian":
		err = sr.gaussian(law)
	case "laplace":
		err = sr.laplace(law)
	case "rr":
		err = sr.rr(law)
	case "l2laplace":
		err = sr.l2Laplace(law)
	default:
		err = fmt.Errorf("design: no release check for mechanism %q", law.Mechanism)
	}
	if err != nil {
		return ShiftDesign{}, err
	}
	if math.IsInf(sr.best.Margin, -1) {
		return ShiftDesign{}, errors.New("design: no test point has enough expected counts at this sample size")
	}
	return sr.best, nil
}

// shiftSearch is the search of DesignShift over test points: n runs per
// side, the one-sided normal quantile z of each count's confidence, the
// rare-count regime's bounds, and the best point so far.
type shiftSearch struct {
	n, z float64
	rare rareCounts
	best ShiftDesign
}

// score is the expected margin of the test {y ≥ s} at claim (ε', δ')
// with probabilities p1 (side 1) and p0 (side 0) under the alternative.
func (sr *shiftSearch) score(p1, p0, eps, delta float64) float64 {
	nf := sr.n
	if nf*p1 < 5 {
		return math.Inf(-1) // the normal approximation does not hold
	}
	e := math.Exp(eps)
	if nf*p0 < 5 {
		return sr.rare.margin(p1, p0, e, delta, sr.z)
	}
	if nf*(1-p1) < 5 {
		return math.Inf(-1)
	}
	sd := math.Sqrt(p1*(1-p1)/nf) + e*math.Sqrt(p0*(1-p0)/nf)
	return (p1-delta-e*p0)/sd - sr.z
}

// consider keeps the test point (group k, threshold s, claim (ε', δ')) if
// its margin m is the best so far.
func (sr *shiftSearch) consider(k int, s, eps, delta, m float64) {
	if m > sr.best.Margin {
		sr.best = ShiftDesign{Group: k, Threshold: s, Epsilon: eps, Delta: delta, Margin: m}
	}
}

// gaussian searches the points of a Gaussian release claiming ρ: for
// each group K (K²ρ ≤ 16), claims ε' up to K²ρ + 4√(2K²ρ) with their
// δ(K²ρ, ε'), and thresholds over [−2σ, K + 4σ].
func (sr *shiftSearch) gaussian(law ReleaseLaw) error {
	if !(law.Rho > 0) || math.IsInf(law.Rho, 0) {
		return fmt.Errorf("design: gaussian release with ρ = %v", law.Rho)
	}
	sc := 1 / math.Sqrt(2*law.Rho) // claimed σ in units of Δ
	sa := shiftAlternative * sc
	for _, k := range groups(func(k int) bool { return float64(k*k)*law.Rho <= 16 }) {
		rk := float64(k*k) * law.Rho
		mu := math.Sqrt(2 * rk)
		for i := range 41 {
			eps := float64(i) / 40 * (rk + 4*mu)
			delta, err := accountant.ZCDPDelta(rk, eps)
			if err != nil {
				return err
			}
			if delta >= 1 {
				continue
			}
			for j := range 121 {
				s := -2*sc + float64(j)/120*(float64(k)+6*sc)
				p1, p0 := normSF((s-float64(k))/sa), normSF(s/sa)
				sr.consider(k, s, eps, delta, sr.score(p1, p0, eps, delta))
			}
		}
	}
	return nil
}

// laplace searches the points of a Laplace release claiming ε: for each
// group K (Kε ≤ 8), thresholds over [−2b, K + 6b].
func (sr *shiftSearch) laplace(law ReleaseLaw) error {
	if !(law.Epsilon > 0) || math.IsInf(law.Epsilon, 0) {
		return fmt.Errorf("design: laplace release with ε = %v", law.Epsilon)
	}
	bc := 1 / law.Epsilon
	ba := shiftAlternative * bc
	for _, k := range groups(func(k int) bool { return float64(k)*law.Epsilon <= 8 }) {
		eps := float64(k) * law.Epsilon
		for j := range 241 {
			s := -2*bc + float64(j)/240*(float64(k)+8*bc)
			sr.consider(k, s, eps, 0, sr.score(laplaceSF(s-float64(k), ba), laplaceSF(s, ba), eps, 0))
		}
	}
	return nil
}

// rr is the one point of randomized response claiming ε: side 1 is a sign
// released from +1, side 0 one released from −1, the event {y ≥ ½}
// (released +1) and its mirror. The alternative is the instrument's half
// noise, the mechanism built for 2ε.
func (sr *shiftSearch) rr(law ReleaseLaw) error {
	if !(law.Epsilon > 0) || math.IsInf(law.Epsilon, 0) {
		return fmt.Errorf("design: rr release with ε = %v", law.Epsilon)
	}
	e2 := law.Epsilon / shiftAlternative
	p1, p0 := 1/(1+math.Exp(-e2)), 1/(1+math.Exp(e2))
	sr.consider(1, 0.5, law.Epsilon, 0, sr.score(p1, p0, law.Epsilon, 0))
	return nil
}

// l2Laplace searches the points of an ℓ2 Laplace release claiming ε: for
// each group K (Kε ≤ 8), thresholds of the likelihood-ratio statistic over
// [0.2K, K].
func (sr *shiftSearch) l2Laplace(law ReleaseLaw) error {
	if !(law.Epsilon > 0) || math.IsInf(law.Epsilon, 0) || law.Dim < 1 {
		return fmt.Errorf("design: l2laplace release with ε = %v in dimension %d", law.Epsilon, law.Dim)
	}
	tails := newL2Tails(law.Dim, shiftAlternative/law.Epsilon)
	for _, k := range groups(func(k int) bool { return float64(k)*law.Epsilon <= 8 }) {
		eps, kf := float64(k)*law.Epsilon, float64(k)
		for j := range 101 {
			s := kf * (0.2 + 0.8*float64(j)/100)
			sr.consider(k, s, eps, 0, sr.score(tails.side1(kf, s), tails.side0(kf, s), eps, 0))
		}
	}
	return nil
}

// rareCounts scores a test point whose side-0 event is rare (expected
// count n·p₀ < 5), where the normal approximation of that count fails: the
// count k₀ is Poisson(n·p₀) (a binomial with a tiny p₀) and the test's
// upper bound on p₀ is the exact Clopper–Pearson bound of k₀, tabulated
// here for small k₀. A large claim ε is contradicted exactly there: at
// ε = 8 the event must be seen on side 1 with probability p₁ against an
// upper bound on p₀ below p₁·e⁻⁸, which a count of 0 or a few on side 0
// gives from ≈ ln(1/α)·e⁸/p₁ runs — a third of what a design that needs
// n·p₀ ≥ 5 uses.
type rareCounts struct {
	nf float64
	hi []float64 // hi[k] is the Clopper–Pearson upper bound of k in n
	// all is the Clopper–Pearson lower bound of n in n, α^(1/n): where
	// side 1's event is almost sure (n·(1 − p₁) < 5) its lower bound is
	// taken as at most this.
	all float64
}

func newRareCounts(n int, alpha float64) rareCounts {
	r := rareCounts{nf: float64(n), hi: make([]float64, 40), all: math.Pow(alpha, 1/float64(n))}
	for k := range r.hi {
		_, r.hi[k] = ClopperPearson(k, n, alpha)
	}
	return r
}

// margin is the test's margin in standard deviations, −Φ⁻¹ of the
// probability that it misses: over the Poisson count k₀ (mean n·p₀ < 5;
// counts beyond the table have probability below 10⁻¹⁵), the test rejects
// when the side-1 frequency's lower bound, ≈ k₁/n − z·sd₁ with sd₁ its
// standard deviation, exceeds δ + e^ε·hi(k₀); k₁/n is taken as normal.
func (r rareCounts) margin(p1, p0, e, delta, z float64) float64 {
	lambda := r.nf * p0
	sd1 := math.Max(math.Sqrt(p1*(1-p1)/r.nf), 1e-12)
	if r.nf*(1-p1) < 5 {
		p1 = math.Min(p1, r.all)
	}
	pmf := math.Exp(-lambda)
	var miss float64
	for k, hi := range r.hi {
		if k > 0 {
			pmf *= lambda / float64(k)
		}
		need := delta + e*hi // the side-1 lower bound must exceed this
		miss += pmf * normSF((p1-need)/sd1-z)
	}
	// The tail beyond the table (< 10⁻¹⁵ for λ < 5) counts as missed.
	miss = math.Min(1, miss+1e-15)
	return -normQuantile(miss)
}

// l2Tails gives the tail probabilities of the ℓ2 Laplace design's
// statistic exactly (by quadrature, not simulation: the rare-count regime
// needs p₀ of order 10⁻⁶). The noise is z = r·u with r ~ Gamma(d, b) and u
// uniform on the unit sphere, whose first coordinate c has (c + 1)/2 ~
// Beta((d−1)/2, (d−1)/2) (uniform for d = 3). For a shift K:
//
//	side 0: T = ‖z‖ − ‖z − K·e₁‖ ≥ s  ⇔  r ≥ s and c ≥ (K² − s² + 2rs)/(2Kr)
//	side 1: T = ‖z + K·e₁‖ − ‖z‖ ≥ s  ⇔  r + s ≤ 0 or c ≥ (2rs + s² − K²)/(2Kr)
//
// (squaring √(r² ∓ 2Krc + K²) against r ∓ s), averaged over r by the
// midpoint rule on [0, (d + 60)·b] (the Gamma tail beyond is below e⁻⁵⁰).
type l2Tails struct {
	d    int
	r, w []float64
}

func newL2Tails(d int, b float64) l2Tails {
	const nodes = 3000
	top := (float64(d) + 60) * b
	h := top / nodes
	t := l2Tails{d: d, r: make([]float64, nodes), w: make([]float64, nodes)}
	lg, _ := math.Lgamma(float64(d))
	for i := range nodes {
		r := (float64(i) + 0.5) * h
		t.r[i] = r
		t.w[i] = h * math.Exp(float64(d-1)*math.Log(r)-r/b-lg-float64(d)*math.Log(b))
	}
	return t
}

// capAbove is P(c ≥ x) for c the first coordinate of a uniform unit vector.
func (t l2Tails) capAbove(x float64) float64 {
	switch {
	case x <= -1:
		return 1
	case x > 1:
		return 0
	case t.d == 1:
		return 0.5
	case t.d == 3:
		return (1 - x) / 2
	}
	a := float64(t.d-1) / 2
	return mathext.RegIncBeta(a, a, (1-x)/2)
}

func (t l2Tails) side0(k, s float64) float64 {
	var p float64
	for i, r := range t.r {
		if r >= s {
			p += t.w[i] * t.capAbove((k*k-s*s+2*r*s)/(2*k*r))
		}
	}
	return math.Min(p, 1)
}

func (t l2Tails) side1(k, s float64) float64 {
	var p float64
	for i, r := range t.r {
		if r+s <= 0 {
			p += t.w[i]
		} else {
			p += t.w[i] * t.capAbove((2*r*s+s*s-k*k)/(2*k*r))
		}
	}
	return math.Min(p, 1)
}

// ShiftStatistic is the ℓ2 Laplace statistic of a design: ‖z + a·e₁‖ −
// ‖z + a·e₁ − K·e₁‖ for the noise z (in units of Δ) shifted by a (0 on
// side 0, K on side 1).
func ShiftStatistic(z []float64, a float64, k int) float64 { return l2Stat(z, a, float64(k)) }

func l2Stat(z []float64, a, k float64) float64 {
	var n0, n1 float64
	for j, v := range z {
		if j == 0 {
			v += a
		}
		n0 += v * v
		if j == 0 {
			v -= k
		}
		n1 += v * v
	}
	return math.Sqrt(n0) - math.Sqrt(n1)
}

// tailFrac is the fraction of sorted xs at least s.
func tailFrac(xs []float64, s float64) float64 {
	i, _ := slices.BinarySearch(xs, s)
	return float64(len(xs)-i) / float64(len(xs))
}

// groups lists the candidate group factors K (1, 2, …, then sparser) for
// which ok holds, at least K = 1.
func groups(ok func(int) bool) []int {
	ks := []int{1}
	for k := 2; k <= 4096 && ok(k); {
		ks = append(ks, k)
		switch {
		case k < 12:
			k++
		default:
			k += k / 6
		}
	}
	return ks
}

func normSF(x float64) float64 { return 0.5 * math.Erfc(x/math.Sqrt2) }

// normQuantile is Φ⁻¹(p).
func normQuantile(p float64) float64 { return -math.Sqrt2 * math.Erfcinv(2*p) }

// laplaceSF is P(Z ≥ x) for Laplace noise of scale b.
func laplaceSF(x, b float64) float64 {
	if x >= 0 {
		return 0.5 * math.Exp(-x/b)
	}
	return 1 - 0.5*math.Exp(x/b)
}

// ShiftPowerMargin is the expected margin (standard deviations) a planned
// release check must reach against the release with half its noise: a
// check planned at it misses that release with probability ≈ Φ(−4) ≈
// 3·10⁻⁵.
const ShiftPowerMargin = 4

// shiftLadder are the run counts PlanShift tries, smallest first.
var shiftLadder = []int{600, 1200, 2400, 5000, 10000, 20000, 30000, 50000, 70000, 100000, 150000}

// PlanShift designs the test point at the smallest run count of a fixed
// ladder (600 … 150 000 per side, at most maxRuns) whose expected margin
// reaches ShiftPowerMargin; ok is false when none does (the best design at
// the largest count allowed is returned: the check then has no power
// against 2× too little noise).
func PlanShift(law ReleaseLaw, confidence float64, maxRuns int) (d ShiftDesign, runs int, ok bool, err error) {
	best, bestN := ShiftDesign{Margin: math.Inf(-1)}, 0
	for _, n := range shiftLadder {
		if n > maxRuns {
			break
		}
		d, err := DesignShift(law, n, confidence)
		if err != nil {
			continue // too few runs for any test point
		}
		if d.Margin >= ShiftPowerMargin {
			return d, n, true, nil
		}
		best, bestN = d, n
	}
	if bestN == 0 {
		return ShiftDesign{}, 0, false, fmt.Errorf("design: no test point for a %s release (ρ %g, ε %g) with at most %d runs", law.Mechanism, law.Rho, law.Epsilon, maxRuns)
	}
	return best, bestN, false, nil
}
