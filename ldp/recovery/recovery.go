// Package recovery is the service side of local-DP rating collection
// (seed 003): it recovers a low-rank rating matrix from the randomized
// reports Z the clients sent.
//
// Two estimators are provided.
//
// Plain (the seed's Eq. 4): minimise ‖M‖_* subject to ‖P_Ω(M − Z)‖_F ≤ ρ,
// Ω the cells with a present report, ρ from Theorem 3 (Theorem3Laplace,
// Theorem3RR) or given. It is solved through its Lagrangian form
// min λ‖M‖_* + ½‖P_Ω(M − Z)‖²_F: for each λ an accelerated proximal
// gradient method (FISTA with adaptive restart; the proximal step is
// singular value soft-thresholding) finds M_λ, and a search on λ finds the
// λ whose residual ‖P_Ω(M_λ − Z)‖_F equals ρ (the residual is monotone in
// λ). When ρ ≥ ‖P_Ω(Z)‖_F the solution is M = 0.
//
// Debiased (beyond the paper): uses the known mechanism. A present report
// at a cell that the user rated θ has mean a₁ + b₁θ; at a cell she did not
// rate, mean a₀; and a cell is present with probability π₁ (rated) or π₀
// (missing). With p_ij the probability that user i rated item j (estimated
// from the presence rates per user and per item, debiased and shrunk), the
// posterior w_ij = p π₁ / (p π₁ + (1−p) π₀) gives
// E[Z_ij | present] = α_ij + β_ij θ_ij, α = w a₁ + (1−w) a₀, β = w b₁.
// The estimator fits θ = μ + b_u + b_i + L with
// min λ‖L‖_* + ½ Σ_Ω (Z − α − β(μ + b_u + b_i + L))², μ unpenalised and
// the biases ridge-damped. λ is chosen by one of two rules:
//
//   - NoiseNorm (default): λ = E‖N‖_op, N the gradient the mechanism's
//     noise alone produces at the truth (N_ij = β·e_ij, e the report noise
//     with the variances the mechanism and ρ0 imply), estimated by
//     simulating sign matrices with that variance profile. Singular
//     directions weaker than the noise are thresholded away. One solve by
//     continuation from λ_max.
//   - Discrepancy: the residual matches the expected noise
//     ‖P_Ω(Z − E[Z])‖_F (a search over λ).
//
// Options.Refit then re-estimates the kept singular values by least
// squares (undoing the shrinkage by λ); it helps when the signal is well
// above the noise and hurts when it is not, so it is off by default.
//
// Everything is on a factored representation: iterates are U·Vᵀ of low
// rank, the matrix the proximal step thresholds is low rank plus sparse,
// and its top singular triplets come from a warm-started randomized
// subspace iteration, so a step costs O(|Ω|·k) and never forms an m × n
// matrix. The proximal step is therefore inexact; convergence is monitored
// on the objective (restart when it increases), following the inexact
// proximal-gradient analysis of Schmidt, Le Roux and Bach (2011).
package recovery

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// Theorem3Laplace is the bound of seed 003, Theorem 3 (Eq. 6): with
// probability at least 1 − γ the modified Laplace reports satisfy
// ‖P_Ω(Θ − Z)‖_F ≤ ρ0·√s + (4/ε)·√(s/γ) + √(2mn(1 + 8/ε²)/((e^{ε/2}+1)γ)),
// s = |Ω_X| the number of true ratings, ratings normalised to [−1, 1] and
// ‖P_{Ω_X}(Θ − X)‖_F ≤ ρ0·√s.
func Theorem3Laplace(eps, rho0 float64, s, m, n int, gamma float64) float64 {
	sf, mn := float64(s), float64(m)*float64(n)
	return rho0*math.Sqrt(sf) + 4/eps*math.Sqrt(sf/gamma) +
		math.Sqrt(2*mn/((math.Exp(eps/2)+1)*gamma)*(1+8/(eps*eps)))
}

// Theorem3RR is the bound of seed 003, Theorem 3 (Eq. 7) for randomized
// response over {missing, 1…d} (ratings as levels 1…d):
// ‖P_Ω(Θ − Z)‖_F ≤ ρ0·√s + 2(d−1)·√(2mnd/((e^ε+d)γ)) with probability ≥ 1 − γ.
func Theorem3RR(eps float64, d int, rho0 float64, s, m, n int, gamma float64) float64 {
	df, mn := float64(d), float64(m)*float64(n)
	return rho0*math.Sqrt(float64(s)) + 2*(df-1)*math.Sqrt(2*mn*df/((math.Exp(eps)+df)*gamma))
}

// Problem is a set of collected reports in report units (normalised for
// Laplace, levels for RR), one row per user that sent anything.
type Problem struct {
	// Rows × Cols is the shape of the reports matrix; TotalRows × TotalCols
	// the shape of the whole population the clients covered (rows or
	// columns with no present report are absent from the matrix).
	Rows, Cols           int
	TotalRows, TotalCols int
	Ptr                  []int64
	Col                  []int32
	Z                    []float64
	Model                ldp.OutputModel
	Mechanism            ldp.Mechanism
	Epsilon              float64
	Levels               int
	// Range is the width of the rating scale in report units.
	Range float64
	// half is 0 for a whole problem, else 1 + the fold f (0 or 1) whose
	// cells (i, j), p.inFold(i, j) = f over the whole population, this
	// problem holds (see fold).
	half int
	// rowKey and colKey are the hashes of the rows' and columns' IDs, which
	// decide the folds (inFold).
	rowKey, colKey []uint64
}

// cells returns the number of cells each row and column of p covers
// (present or not) and their total: TotalCols and TotalRows for a whole
// problem, the fold's share of them for a fold — counted exactly over the
// rows and columns with reports (O(Rows · Cols), as cheap as the reports
// of a whole-catalogue collection), half of the rest, whose IDs p does not
// hold (none when the catalogue is declared and every client reported).
func (p *Problem) cells() (rows, cols []float64, total float64) {
	rows, cols = make([]float64, p.Rows), make([]float64, p.Cols)
	if p.half == 0 {
		for i := range rows {
			rows[i] = float64(p.TotalCols)
		}
		for j := range cols {
			cols[j] = float64(p.TotalRows)
		}
		return rows, cols, float64(p.TotalRows) * float64(p.TotalCols)
	}
	f := p.half - 1
	for i := range p.Rows {
		for j := range p.Cols {
			if p.inFold(i, j) == f {
				rows[i]++
				cols[j]++
				total++
			}
		}
	}
	restCols, restRows := float64(p.TotalCols-p.Cols)/2, float64(p.TotalRows-p.Rows)/2
	for i := range rows {
		rows[i] += restCols
	}
	for j := range cols {
		cols[j] += restRows
	}
	total += (float64(p.TotalRows)*float64(p.TotalCols) - float64(p.Rows)*float64(p.Cols)) / 2
	return rows, cols, total
}

// inFold is the fold (0 or 1) of cell (i, j): a fixed pseudo-random bit
// of the user's and the item's IDs (their FNV-1a hashes, mixed by
// SplitMix64's finalizer), so that which fold a cell is in depends on
// nothing the reports say — not even the order in which items first appear
// in them. (Indices stand in when p was built without IDs.) A structured
// split such as i + j mod 2 would not do: a checkerboard lets the nuclear
// norm move any low-rank L to D·L·D (D = diag(±1) alternating), equal on
// one fold and opposite on the other, so a fold's recovery would predict
// nothing on the other.
func (p *Problem) inFold(i, j int) int {
	a, b := uint64(i), uint64(j)
	if p.rowKey != nil {
		a, b = p.rowKey[i], p.colKey[j]
	}
	z := a ^ (b<<29 | b>>35) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return int(z >> 63)
}

// idKeys returns the FNV-1a hashes of ids' names, the fold keys.
func idKeys(ids *ratings.IDs) []uint64 {
	keys := make([]uint64, ids.Len())
	for k := range keys {
		h := fnv.New64a()
		h.Write([]byte(ids.Name(int32(k))))
		keys[k] = h.Sum64()
	}
	return keys
}

// Clean marks a Problem of true ratings (NewCleanProblem): no mechanism.
const Clean ldp.Mechanism = "none"

// NewCleanProblem wraps TRUE ratings on the scale sc as a Problem with an
// identity "mechanism" (every rating present, no noise, no invented
// cells): the same estimators then give the non-private reference to
// compare the local-DP recoveries with. Report units are the original
// scale.
func NewCleanProblem(m *ratings.Matrix, sc ldp.Scale) (*Problem, error) {
	if !(sc.Min < sc.Max) {
		return nil, fmt.Errorf("recovery: rating scale [%v, %v] must have min < max", sc.Min, sc.Max)
	}
	p := &Problem{Rows: m.NumUsers(), Cols: m.NumItems(), TotalRows: m.NumUsers(), TotalCols: m.NumItems(),
		Model:     ldp.OutputModel{PresentRated: 1, MeanRatedB: 1, ToReportB: 1},
		Mechanism: Clean, Levels: sc.Levels, Range: sc.Max - sc.Min}
	if err := p.setEntries(m, "ratings"); err != nil {
		return nil, err
	}
	return p, nil
}

// NewProblem wraps a reports matrix (values in report units) and the
// collection header.
func NewProblem(reports *ratings.Matrix, h ldp.Header) (*Problem, error) {
	r, err := ldp.New(h.Mechanism, h.Epsilon, h.Scale)
	if err != nil {
		return nil, err
	}
	p := &Problem{Range: r.Model().ToReportB * (h.Scale.Max - h.Scale.Min), Rows: reports.NumUsers(), Cols: reports.NumItems(), TotalRows: max(h.Users, reports.NumUsers()),
		TotalCols: max(h.Items, reports.NumItems()), Model: r.Model(), Mechanism: h.Mechanism, Epsilon: h.Epsilon, Levels: h.Scale.Levels}
	if err := p.setEntries(reports, "reports"); err != nil {
		return nil, err
	}
	return p, nil
}

// setEntries sets the problem's observed entries from m, and refuses a
// matrix without any (what names them in the error).
func (p *Problem) setEntries(m *ratings.Matrix, what string) error {
	ptr, col, val, _ := m.CSR()
	p.Ptr, p.Col = ptr, col
	p.rowKey, p.colKey = idKeys(m.Users), idKeys(m.Items)
	p.Z = make([]float64, len(val))
	for k, v := range val {
		p.Z[k] = float64(v)
	}
	if len(p.Z) == 0 {
		return fmt.Errorf("recovery: no %s", what)
	}
	return nil
}

// LambdaRule names a rule for the debiased estimator's multiplier λ.
type LambdaRule string

const (
	// Discrepancy searches for the λ whose residual ‖P_Ω(Z − E[Z | M])‖_F
	// equals its expected value under the mechanism's noise.
	Discrepancy LambdaRule = "discrepancy"
	// NoiseNorm sets λ to the expected operator norm of the gradient the
	// mechanism's noise alone produces at the truth (estimated by
	// simulation from the per-report variances): singular values of the
	// data below the noise's own are thresholded away. One solve by
	// continuation, no search.
	NoiseNorm LambdaRule = "noise-norm"
)

// ParseLambdaRule accepts "discrepancy" and "noise-norm".
func ParseLambdaRule(s string) (LambdaRule, error) {
	switch r := LambdaRule(s); r {
	case Discrepancy, NoiseNorm:
		return r, nil
	}
	return "", fmt.Errorf("recovery: unknown λ rule %q (want discrepancy or noise-norm)", s)
}

// Options control the estimators.
type Options struct {
	// Debias selects the debiased estimator.
	Debias bool
	// Rho is the constraint level of the plain estimator (report units);
	// 0 computes it from Theorem 3 with Gamma, Rho0 and S.
	Rho float64
	// Gamma is Theorem 3's tolerance (default 0.05) and Rho0 the RMS
	// deviation of the true ratings X from the low-rank Θ, in report units
	// (Theorem 3's ρ0; also used by the debiased estimator's target).
	// Default: 0.225 of the rating range — 0.9 star on a 1…5 scale, about
	// the RMSE of good non-private predictors on MovieLens (public
	// knowledge, not read from the private data): 0.45 normalised, 0.9
	// levels for d = 5.
	Gamma, Rho0 float64
	// S is the number of true ratings |Ω_X| if known; 0 estimates it from
	// the presence rate (the service does not know it).
	S int
	// Lambda, when positive, fixes the multiplier (no search).
	Lambda float64
	// LambdaRule picks the debiased estimator's λ when Lambda is 0:
	// NoiseNorm (the default) or Discrepancy.
	LambdaRule LambdaRule
	// Refit re-estimates the kept singular values by least squares after
	// a fixed-λ solve (NoiseNorm rule or Lambda), undoing the shrinkage.
	Refit bool
	// MaxRank bounds the rank of the iterates (default 60).
	MaxRank int
	// MaxIter bounds proximal-gradient iterations per λ (default 300);
	// Tol is the relative objective change that stops them (default 1e-5).
	MaxIter int
	Tol     float64
	// Damping shrinks the debiased estimator's user and item biases toward
	// 0: pseudo-observations of weight β² = 1. Default (0): the expected
	// noise variance per report over a prior bias variance (ρ0/2)², i.e.
	// ridge regression with that prior.
	Damping float64
	// Workers bounds parallelism (0 = 2).
	Workers int
	Rand    *noise.Source
	Log     *slog.Logger
}

func (o *Options) defaults(p *Problem) {
	if o.Gamma == 0 {
		o.Gamma = 0.05
	}
	if o.LambdaRule == "" {
		o.LambdaRule = NoiseNorm
	}
	if o.Rho0 == 0 {
		switch {
		case p.Mechanism == Clean:
			o.Rho0 = 0.225 * p.Range
		case p.Mechanism == ldp.RR:
			o.Rho0 = 0.225 * float64(max(p.Levels-1, 1))
		default:
			o.Rho0 = 0.45
		}
	}
	if o.MaxRank == 0 {
		o.MaxRank = 60
	}
	if o.MaxIter == 0 {
		o.MaxIter = 300
	}
	if o.Tol == 0 {
		o.Tol = 1e-5
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Rand == nil {
		o.Rand = noise.Seeded(1)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Result is a recovered matrix μ + b_u + b_i + U·Vᵀ in report units (the
// biases only for the debiased estimator).
type Result struct {
	Offset             float64
	UserBias, ItemBias []float64
	Rank               int
	// U is Rows × Rank (scaled by the singular values), V is Cols × Rank.
	U, V []float64
	// Lambda is the multiplier used; Rho the residual target; Residual the
	// achieved ‖P_Ω(E[Z | M] − Z)‖_F; ZNorm is ‖P_Ω(Z − base)‖_F at L = 0.
	Lambda, Rho, Residual, ZNorm float64
	// Iterations counts proximal-gradient steps over the whole search.
	Iterations int
	// SEstimate is the estimated number of true ratings |Ω_X|.
	SEstimate float64
	// Zero is true when the constraint is met by L = 0.
	Zero bool
	// NoiseOpNorm is the simulated noise operator norm (NoiseNorm rule).
	NoiseOpNorm float64
	// Rule is the λ rule the debiased estimator used ("" for plain or a
	// fixed λ).
	Rule LambdaRule
}

// At returns the recovered value of cell (i, j) in report units.
func (r *Result) At(i, j int) float64 {
	v := r.Offset
	if r.UserBias != nil {
		v += r.UserBias[i] + r.ItemBias[j]
	}
	for c := range r.Rank {
		v += r.U[i*r.Rank+c] * r.V[j*r.Rank+c]
	}
	return v
}

// Recover runs the chosen estimator.
func Recover(ctx context.Context, p *Problem, o Options) (*Result, error) {
	o.defaults(p)
	if _, err := ParseLambdaRule(string(o.LambdaRule)); err != nil {
		return nil, err
	}
	if p.Rows <= 0 || p.Cols <= 0 || len(p.Ptr) != p.Rows+1 || int64(len(p.Z)) != p.Ptr[p.Rows] || len(p.Col) != len(p.Z) {
		return nil, fmt.Errorf("recovery: malformed problem")
	}
	s := newSolver(p, o)
	pu, pi, sHat := s.ratedRates()
	res := &Result{SEstimate: sHat}
	var target float64
	lambda := o.Lambda
	if o.Debias {
		s.setDebiased(pu, pi)
		vars := s.reportVariances(o.Rho0)
		target = expectedNoiseNorm(vars)
		if lambda == 0 && o.LambdaRule == NoiseNorm {
			sd := make([]float64, len(vars))
			for k, v := range vars {
				sd[k] = math.Sqrt(v)
			}
			lambda = s.noiseOpNorm(sd, 2)
			res.NoiseOpNorm = lambda
		}
		if o.Lambda == 0 {
			res.Rule = o.LambdaRule
		}
		if o.Damping == 0 {
			// Ridge for the biases: noise variance per report over a prior
			// bias variance (ρ0/2)², so they shrink to 0 as noise grows.
			// (Empirical-Bayes shrinkage with the prior variance estimated
			// by moments was tried: better on synthetic data without
			// biases, worse on MovieLens-100K held-out ratings; not kept.)
			perReport := target * target / float64(len(p.Z))
			s.damping = perReport / (o.Rho0 * o.Rho0 / 4)
		}
	} else {
		s.setPlain()
		target = o.Rho
		if target == 0 {
			sInt := o.S
			if sInt == 0 {
				sInt = int(math.Round(sHat))
			}
			m, n := p.TotalRows, p.TotalCols
			switch p.Mechanism {
			case Clean:
				// No mechanism: only the ratings' own deviation ρ0 per rating.
				target = o.Rho0 * math.Sqrt(float64(len(p.Z)))
			case ldp.RR:
				target = Theorem3RR(p.Epsilon, p.Levels, o.Rho0, sInt, m, n, o.Gamma)
			default:
				target = Theorem3Laplace(p.Epsilon, o.Rho0, sInt, m, n, o.Gamma)
			}
		}
	}
	res.Rho = target
	if err := s.search(ctx, target, lambda, res); err != nil {
		return nil, err
	}
	return res, nil
}
