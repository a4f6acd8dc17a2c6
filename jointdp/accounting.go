package jointdp

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/mechanism"
)

// This file is the accounting layer of package jointdp: it turns a budget
// (ε, δ) and the public sizes (clip L, catalogue size n, iterations T,
// rating scale) into privacy/mechanism values and the composed guarantee.
// The solvers (PrivateFrankWolfe, PrivateSVD, McSherryMironov) take these
// plans and add noise only through the mechanisms in them; they compute no
// noise scale and no ε themselves.

// Noise calibrations for the Gaussian releases of DPFW and DPSVD.
const (
	// CalPaper uses the paper's σ = L²·√(64·T·ln(1/δ))/ε for every
	// release; the guarantee is what the accountant proves for it.
	CalPaper = "paper"
	// CalZCDP splits the zCDP budget of the requested (ε, δ) equally over
	// the T releases (equal ρ_t; each σ_t for its release's sensitivity):
	// together they are exactly (ε, δ).
	CalZCDP = "zcdp"
	// CalDecay gives release t the share ∝ t of the same zCDP budget
	// (σ_t ∝ 1/√t: less noise as the residual shrinks), as the seed's
	// experiments rescale σ per iteration.
	CalDecay = "zcdp-decay"
)

// GramPlan is the noise of the Gram releases of DPFW (T of them) or DPSVD
// (one): each user's row is clipped to ℓ2 norm L, and Mechs[t] is the
// Gaussian mechanism of release t, calibrated to the Gram sum's ℓ2
// sensitivity for that L over the n(n+1)/2 noised coordinates of an n × n
// symmetric matrix.
type GramPlan struct {
	// L is the clip the sensitivities were computed for; the solver clips
	// with it.
	L float64
	// N is the number of items (the Gram matrix is N × N).
	N int
	// Mechs holds one mechanism per release, in order.
	Mechs []*mechanism.Gaussian
	// Guarantee is the composition of all the releases (user-level,
	// joint; the method states the relation).
	Guarantee privacy.Guarantee
}

// Sigmas lists the requested σ of each release.
func (p *GramPlan) Sigmas() []float64 {
	s := make([]float64, len(p.Mechs))
	for t, m := range p.Mechs {
		s[t] = m.Sigma()
	}
	return s
}

// check validates a plan against the problem it is used on.
func (p *GramPlan) check(n int) error {
	if p == nil || len(p.Mechs) == 0 {
		return fmt.Errorf("jointdp: no noise plan")
	}
	if !(p.L > 0) || math.IsInf(p.L, 0) {
		return fmt.Errorf("jointdp: clip bound L must be positive and finite, got %g", p.L)
	}
	if p.N != n {
		return fmt.Errorf("jointdp: noise plan is for %d items, the problem has %d", p.N, n)
	}
	for t, m := range p.Mechs {
		if m == nil {
			return fmt.Errorf("jointdp: noise plan has no mechanism for release %d", t+1)
		}
	}
	return nil
}

// DPFWSensitivity is the ℓ2 (Frobenius) sensitivity of Σ_i A_iᵀA_i when
// one user's row is replaced, at iterations t ≥ 2: ‖aaᵀ − bbᵀ‖_F² =
// ‖a‖⁴ + ‖b‖⁴ − 2(a·b)² with ‖a‖, ‖b‖ ≤ 2L (‖P_Ω Y_i‖ ≤ L by Π_{L,Ω},
// ‖P_Ω Y*_i‖ ≤ L by Π_L), so Δ = √2·(2L)². (Add/remove-one gives (2L)², the
// paper's 4L².) The upper triangle that is actually noised has norm at most
// the Frobenius norm. The first release is smaller (DPFWFirstSensitivity).
func DPFWSensitivity(L float64) float64 { return math.Sqrt2 * 4 * L * L }

// DPFWFirstSensitivity is the sensitivity of DPFW's first Gram release:
// every iterate starts at Y_i = 0, so A_i = −Π_L(P_Ω Y*_i) has ‖A_i‖ ≤ L
// and, as for DPSVD, a replacement moves Σ_i A_iᵀA_i by at most √2·L².
func DPFWFirstSensitivity(L float64) float64 { return DPSVDSensitivity(L) }

// DPSVDSensitivity is the Frobenius sensitivity of Σ_i Π_L(x_i)ᵀΠ_L(x_i)
// when one user's row is replaced: √2·L² (L² for add/remove).
func DPSVDSensitivity(L float64) float64 { return math.Sqrt2 * L * L }

// PaperSigma is Algorithm 1's σ = L²·√(64·T·ln(1/δ))/ε.
func PaperSigma(L float64, T int, eps, delta float64) float64 {
	return L * L * math.Sqrt(64*float64(T)*math.Log(1/delta)) / eps
}

func userSens(v float64) mechanism.Sensitivity {
	return mechanism.Sensitivity{Value: v, Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}
}

// PlanDPFW builds the T Gram mechanisms of Algorithm 1 for clip L on n
// items with the chosen calibration.
func PlanDPFW(cal string, eps, delta float64, T int, L float64, n int) (*GramPlan, error) {
	if cal == "" {
		cal = CalZCDP
	}
	sens := make([]float64, max(T, 0))
	for t := range sens {
		sens[t] = DPFWSensitivity(L)
	}
	if T > 0 {
		sens[0] = DPFWFirstSensitivity(L)
	}
	return planGram(cal, eps, delta, T, L, n, sens, PaperSigma(L, T, eps, delta))
}

// PlanDPSVD builds the one Gram mechanism of Algorithm 3 (CalZCDP or
// CalPaper: σ = L²√(64 ln(1/δ))/ε).
func PlanDPSVD(cal string, eps, delta float64, L float64, n int) (*GramPlan, error) {
	if cal == "" {
		cal = CalZCDP
	}
	if cal == CalDecay {
		return nil, fmt.Errorf("jointdp: private SVD makes one release; use %s or %s", CalZCDP, CalPaper)
	}
	return planGram(cal, eps, delta, 1, L, n, []float64{DPSVDSensitivity(L)}, PaperSigma(L, 1, eps, delta))
}

// planGram calibrates T Gaussian releases, release t of ℓ2 sensitivity
// sens[t] (under replace-one-user neighbours), over the n(n+1)/2
// coordinates of an n × n symmetric matrix. For the zCDP calibrations
// release t gets the share w_t of ρ = RhoForApprox(ε, δ) (Σ w_t ≤ 1) and
// its σ_t is the smallest for sens[t] with the lattice rounding accounted
// (mechanism.GaussianSigma); every share is charged to an
// accountant.RhoBudget, which refuses to overspend. The guarantee is the
// (adaptive) zCDP composition of the ρ_t (accountant.Compose).
func planGram(cal string, eps, delta float64, T int, L float64, n int, sens []float64, paperSigma float64) (*GramPlan, error) {
	if err := accountant.CheckEpsilon(eps); err != nil {
		return nil, fmt.Errorf("jointdp: %w", err)
	}
	if err := accountant.CheckDelta(delta); err != nil {
		return nil, fmt.Errorf("jointdp: %w", err)
	}
	if T < 1 {
		return nil, fmt.Errorf("jointdp: iterations T must be ≥ 1, got %d", T)
	}
	if !(L > 0) || math.IsInf(L, 0) {
		return nil, fmt.Errorf("jointdp: clip bound L must be positive and finite, got %g", L)
	}
	if n < 1 {
		return nil, fmt.Errorf("jointdp: %d items", n)
	}
	if len(sens) != T {
		return nil, fmt.Errorf("jointdp: %d sensitivities for %d releases", len(sens), T)
	}
	dim := symCoords(n)
	plan := &GramPlan{L: L, N: n, Mechs: make([]*mechanism.Gaussian, T)}
	switch cal {
	case CalPaper:
		for t := range T {
			m, err := mechanism.NewGaussianSigma(paperSigma, delta, userSens(sens[t]), dim)
			if err != nil {
				return nil, fmt.Errorf("jointdp: release %d: %w", t+1, err)
			}
			plan.Mechs[t] = m
		}
	case CalZCDP, CalDecay:
		w := make([]float64, T)
		var sum float64
		for t := range w {
			w[t] = 1
			if cal == CalDecay {
				w[t] = float64(t + 1)
			}
			sum += w[t]
		}
		budget, err := accountant.NewRhoBudgetFor(eps, delta)
		if err != nil {
			return nil, fmt.Errorf("jointdp: %w", err)
		}
		for t := range T {
			// Rounded down so that the shares sum to at most ρ.
			share := math.Nextafter(budget.Total()*w[t]/sum*(1-1e-12), 0)
			sg, err := mechanism.GaussianSigma(share, sens[t], dim)
			if err != nil {
				return nil, fmt.Errorf("jointdp: calibrating release %d: %w", t+1, err)
			}
			m, err := mechanism.NewGaussianSigma(sg, delta, userSens(sens[t]), dim)
			if err != nil {
				return nil, fmt.Errorf("jointdp: release %d: %w", t+1, err)
			}
			if err := budget.Spend(m.Rho()); err != nil {
				return nil, fmt.Errorf("jointdp: release %d: %w", t+1, err)
			}
			plan.Mechs[t] = m
		}
	default:
		return nil, fmt.Errorf("jointdp: unknown noise calibration %q (want %s, %s or %s)", cal, CalZCDP, CalDecay, CalPaper)
	}
	g, err := composeJoint(delta, plan.Mechs...)
	if err != nil {
		return nil, err
	}
	if cal == CalPaper && math.Abs(g.Epsilon-eps) > 1e-9*eps {
		g.ClaimedEpsilon = eps
	}
	plan.Guarantee = g
	return plan, nil
}

// composeJoint composes the mechanisms' guarantees in zCDP and states the
// result as user-level joint DP (the notion of the whole method: the
// mechanisms release aggregates centrally, each user's own output is
// computed from them and her own data).
func composeJoint(delta float64, mechs ...*mechanism.Gaussian) (privacy.Guarantee, error) {
	parts := make([]privacy.Guarantee, len(mechs))
	for i, m := range mechs {
		parts[i] = m.Guarantee()
	}
	g, err := accountant.Compose(delta, parts...)
	if err != nil {
		return privacy.Guarantee{}, fmt.Errorf("jointdp: accounting: %w", err)
	}
	g.Notion, g.Unit, g.Note = privacy.Joint, privacy.UnitUser, ""
	return g, nil
}

// MMPlan is the noise of the McSherry–Mironov baseline: ratings are
// clamped to the declared scale [Min, Max], the centred ratings entering
// the covariance to [−B, B], and three Gaussian mechanisms release the
// global average, the item sums and counts, and the weighted covariance
// and its weights.
type MMPlan struct {
	Min, Max, B float64
	// N is the number of items.
	N int
	// Global releases (Σ_i (mean_i − mid), #users with a rating), mid the
	// scale's midpoint (2 coordinates), Items the item (centred)
	// sums and counts (2N), Cov the upper triangles of the covariance and
	// of its weights (2·N(N+1)/2).
	Global, Items, Cov *mechanism.Gaussian
	Guarantee          privacy.Guarantee
}

// Sigmas lists the σ of the three releases.
func (p *MMPlan) Sigmas() [3]float64 {
	return [3]float64{p.Global.Sigma(), p.Items.Sigma(), p.Cov.Sigma()}
}

// MMSensitivities are the ℓ2 sensitivities of MM's three releases for one
// user's ratings replaced (the number of users is fixed by the relation),
// with W = Max − Min the width of the scale:
//
//   - global, (Σ_i (mean_i − mid), #users with a rating), mid = (Min+Max)/2:
//     max(W, ‖(W/2, 1)‖). Proof: ratings are clamped to [Min, Max], so a
//     user's mean lies in [Min, Max]. If the replaced user and her
//     replacement both have ratings, the count is unchanged and the sum
//     moves by |mean − mean'| ≤ W; if exactly one of them has none, the
//     count moves by 1 and the sum by |mean − mid| ≤ W/2; if neither, by 0.
//     (Centring at mid is what keeps the second case below W on the usual
//     scales: 4 on 1–5, where the uncentred (mean_i, 1) needed ‖(5, 1)‖.)
//   - items, the sums of (rating − mid) and the counts, weighted
//     1/√|Ω_i|: a user's part has norm² Σ_j ((r_j − mid)² + 1)/|Ω_i| ≤
//     (W/2)² + 1, so a replacement moves them by at most 2·‖(W/2, 1)‖
//     (triangle inequality; 2√5 ≈ 4.47 on 1–5, where the uncentred sums
//     needed 2·‖(R, 1)‖ ≈ 10.2);
//   - covariance and weights (PSD sums weighted 1/|Ω_i|): √2·‖(B², 1)‖.
func MMSensitivities(min, max, B float64) [3]float64 {
	W := max - min
	return [3]float64{math.Max(W, math.Hypot(W/2, 1)), 2 * math.Hypot(W/2, 1), math.Sqrt2 * math.Hypot(B*B, 1)}
}

// PlanMM splits the zCDP budget of (ε, δ) over MM's three releases in the
// proportions split (default 0.02, 0.18, 0.80) and builds their
// mechanisms for the scale [min, max], covariance clamp B and n items.
func PlanMM(eps, delta float64, split [3]float64, min, max, B float64, n int) (*MMPlan, error) {
	if !(max > min) || math.IsInf(max-min, 0) || math.IsNaN(max-min) {
		return nil, fmt.Errorf("jointdp: rating scale [%g, %g] is not a finite interval", min, max)
	}
	if !(B > 0) || math.IsInf(B, 0) {
		return nil, fmt.Errorf("jointdp: covariance bound B must be positive and finite, got %g", B)
	}
	if n < 1 {
		return nil, fmt.Errorf("jointdp: %d items", n)
	}
	if split == [3]float64{} {
		split = [3]float64{0.02, 0.18, 0.80}
	}
	var ssum float64
	for _, s := range split {
		if !(s > 0) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("jointdp: budget split must be positive and finite, got %v", split)
		}
		ssum += s
	}
	budget, err := accountant.NewRhoBudgetFor(eps, delta)
	if err != nil {
		return nil, fmt.Errorf("jointdp: %w", err)
	}
	if err := accountant.CheckDelta(delta); err != nil {
		return nil, fmt.Errorf("jointdp: %w", err)
	}
	sens := MMSensitivities(min, max, B)
	dims := [3]int{2, 2 * n, 2 * symCoords(n)}
	var mechs [3]*mechanism.Gaussian
	for k := range 3 {
		share := math.Nextafter(budget.Total()*split[k]/ssum*(1-1e-12), 0)
		sg, err := mechanism.GaussianSigma(share, sens[k], dims[k])
		if err != nil {
			return nil, fmt.Errorf("jointdp: calibrating MM release %d: %w", k+1, err)
		}
		m, err := mechanism.NewGaussianSigma(sg, delta, userSens(sens[k]), dims[k])
		if err != nil {
			return nil, fmt.Errorf("jointdp: MM release %d: %w", k+1, err)
		}
		if err := budget.Spend(m.Rho()); err != nil {
			return nil, fmt.Errorf("jointdp: MM release %d: %w", k+1, err)
		}
		mechs[k] = m
	}
	g, err := composeJoint(delta, mechs[:]...)
	if err != nil {
		return nil, err
	}
	return &MMPlan{Min: min, Max: max, B: B, N: n, Global: mechs[0], Items: mechs[1], Cov: mechs[2], Guarantee: g}, nil
}

// symCoords is the number of coordinates noised in an n × n symmetric
// release (the upper triangle, diagonal included).
func symCoords(n int) int { return n * (n + 1) / 2 }
