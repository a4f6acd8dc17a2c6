package jointdp

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
)

// MMOptions configures the McSherry–Mironov baseline ("Differentially
// private recommender systems", KDD 2009, "SVD after cleansing"), with
// Gaussian noise accounted in zCDP at user level.
type MMOptions struct {
	// Rank is the dimension of the cleansed covariance's eigenspace.
	Rank int
	// Plan holds the three mechanisms and the public bounds they were
	// calibrated for: the rating scale [Min, Max] ratings are clamped to
	// and the bound B on the centred ratings entering the covariance
	// (PlanMM).
	Plan *MMPlan
	// ItemDamping (β_m), UserDamping (β_p) and CovDamping are the damping
	// pseudo-counts of the item averages, user effects and covariance
	// (defaults 15, 20 and 20: weighted counts, see the code).
	ItemDamping, UserDamping, CovDamping float64
	// Ridge is the regularisation of each user's local least-squares fit
	// onto the (unit-norm) eigenvectors, relative to her expected Gram
	// (|Ω_i|/n)·I: the fit solves (V_ΩᵀV_Ω + Ridge·|Ω_i|/n·I)u = V_Ωᵀr
	// (default 0.1).
	Ridge float64
	// Local, when set, holds the users' own rows for their local steps
	// (user effect and fit), e.g. all their ratings when p holds only a ξ
	// sample of each; it must have p's users and items. nil: p.
	Local   *Problem
	Noise   *noise.Source
	Workers int
	// Instrument, when set, is attached to every mechanism of the plan
	// (mechanism.Instrument: an audit's noise factor and tap); nil for
	// releases.
	Instrument *mechanism.Instrument
}

// MMResult is the model: prediction = ItemAvg_j + UserEffect_i + U_i·V_j.
type MMResult struct {
	Factors
	GlobalAvg  float64
	ItemAvg    []float64 // public (noisy)
	UserEffect []float64 // local to each user
	// Sigmas are the σ of the three releases (from the plan).
	Sigmas [3]float64
}

// McSherryMironov trains the baseline on raw (uncentred) ratings:
//  1. a noisy global average G of the users' mean ratings (released
//     centred at the scale's midpoint);
//  2. noisy damped item averages mid + (S_j + β_m (G − mid))/(C_j + β_m),
//     S_j the sum of the ratings minus the scale's midpoint mid, each user
//     weighted 1/√|Ω_i| so her contribution has bounded norm;
//  3. locally, each user's damped effect and her centred ratings clamped to
//     [−B, B];
//  4. a noisy covariance Σ_i w_i r_iᵀr_i and noisy weights Σ_i w_i e_iᵀe_i
//     with w_i = 1/|Ω_i|, "cleansed" as Cov_jk/(Wgt_jk + damping);
//  5. its top-Rank eigenspace V, and locally for each user a ridge fit of
//     her centred ratings on the rows of V she rated.
//
// Steps 1, 2 and 4 read p and release through the plan's mechanisms;
// steps 3 and 5 read each user's own row of o.Local (or p).
func McSherryMironov(ctx context.Context, p *Problem, o MMOptions) (*MMResult, error) {
	loc, err := o.check(p)
	if err != nil {
		return nil, err
	}
	t := &mmTrainer{p: p, loc: loc, o: o, pl: o.Plan, res: &MMResult{Sigmas: o.Plan.Sigmas()}}
	if err := t.globalAverage(); err != nil {
		return nil, err
	}
	if err := t.itemAverages(); err != nil {
		return nil, err
	}
	t.userEffects()
	cent := t.centre(p)
	clean, err := t.cleansedCovariance(ctx, cent)
	if err != nil {
		return nil, err
	}
	if err := t.localFits(ctx, clean, cent); err != nil {
		return nil, err
	}
	return t.res, nil
}

// check validates the options and the plan against p, sets the damping
// and ridge defaults, and returns the users' local rows (o.Local, or p).
func (o *MMOptions) check(p *Problem) (*Problem, error) {
	if o.Rank < 1 || o.Rank > p.N {
		return nil, fmt.Errorf("jointdp: rank must lie in 1..%d, got %d", p.N, o.Rank)
	}
	pl := o.Plan
	if pl == nil || pl.Global == nil || pl.Items == nil || pl.Cov == nil {
		return nil, fmt.Errorf("jointdp: no MM noise plan")
	}
	if pl.N != p.N {
		return nil, fmt.Errorf("jointdp: MM noise plan is for %d items, the problem has %d", pl.N, p.N)
	}
	if !(pl.Max > pl.Min) || math.IsInf(pl.Max-pl.Min, 0) {
		return nil, fmt.Errorf("jointdp: rating scale [%g, %g] is not a finite interval", pl.Min, pl.Max)
	}
	if o.Noise == nil {
		return nil, fmt.Errorf("jointdp: no noise source")
	}
	loc := o.Local
	if loc == nil {
		loc = p
	}
	if loc.M != p.M || loc.N != p.N {
		return nil, fmt.Errorf("jointdp: local rows are %d × %d, the problem is %d × %d", loc.M, loc.N, p.M, p.N)
	}
	def := func(x *float64, d float64) {
		if *x == 0 {
			*x = d
		}
	}
	def(&o.ItemDamping, 15)
	def(&o.UserDamping, 20)
	def(&o.CovDamping, 20)
	def(&o.Ridge, 0.1)
	for _, x := range []float64{pl.B, o.ItemDamping, o.UserDamping, o.CovDamping, o.Ridge} {
		if !(x > 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("jointdp: MM parameters must be positive and finite")
		}
	}
	return loc, nil
}

// mmTrainer is one McSherry–Mironov training as it goes: the problem p
// (read by the releases), the users' local rows loc, the options and
// plan, and the model being built.
type mmTrainer struct {
	p, loc *Problem
	o      MMOptions
	pl     *MMPlan
	res    *MMResult
}

// clamp clamps a rating to the declared scale.
func (t *mmTrainer) clamp(v float32) float64 { return min(max(float64(v), t.pl.Min), t.pl.Max) }

// mid is the scale's midpoint.
func (t *mmTrainer) mid() float64 { return (t.pl.Min + t.pl.Max) / 2 }

// globalAverage releases the global average of the users' means, each
// centred at the scale's midpoint (MMSensitivities: replacing a user
// moves the pair by at most max(Max − Min, ‖((Max − Min)/2, 1)‖)).
func (t *mmTrainer) globalAverage() error {
	p, pl := t.p, t.pl
	var num, den float64
	for i := range p.M {
		_, v := p.Row(i)
		s, c := mmGlobalPart(v, pl.Min, pl.Max)
		num += s
		den += c
	}
	nd := []float64{num, den}
	if err := pl.Global.Instrumented(t.o.Instrument).Release(t.o.Noise, nd); err != nil {
		return fmt.Errorf("jointdp: MM global average: %w", err)
	}
	num, den = nd[0], nd[1]
	G := t.mid()
	if den > 1 {
		G = min(max(t.mid()+num/den, pl.Min), pl.Max)
	}
	t.res.GlobalAvg = G
	return nil
}

// itemAverages releases the item sums, centred at the scale's midpoint,
// and counts (MMSensitivities) in one release, and damps them toward the
// global average (post-processing).
func (t *mmTrainer) itemAverages() error {
	p, pl, n := t.p, t.pl, t.p.N
	SC := make([]float64, 2*n) // item sums, then item counts: one release
	S, C := SC[:n], SC[n:]
	for i := range p.M {
		items, v := p.Row(i)
		mmItemPart(items, v, pl.Min, pl.Max, S, C)
	}
	if err := pl.Items.Instrumented(t.o.Instrument).Release(t.o.Noise, SC); err != nil {
		return fmt.Errorf("jointdp: MM item averages: %w", err)
	}
	mid, G, damp := t.mid(), t.res.GlobalAvg, t.o.ItemDamping
	t.res.ItemAvg = make([]float64, n)
	for j := range n {
		d := math.Max(C[j], 0) + damp
		t.res.ItemAvg[j] = min(max(mid+(S[j]+damp*(G-mid))/d, pl.Min), pl.Max)
	}
	return nil
}

// userEffects computes each user's damped effect from her own row (a
// local step).
func (t *mmTrainer) userEffects() {
	t.res.UserEffect = make([]float64, t.p.M)
	for i := range t.loc.M {
		items, v := t.loc.Row(i)
		var s float64
		for q, it := range items {
			s += t.clamp(v[q]) - t.res.ItemAvg[it]
		}
		t.res.UserEffect[i] = s / (float64(len(v)) + t.o.UserDamping)
	}
}

// centre is q's ratings centred by the item averages and the users'
// effects and clamped to [−B, B], in q's entry order.
func (t *mmTrainer) centre(q *Problem) []float64 {
	c := make([]float64, q.Len())
	for i := range q.M {
		items, v := q.Row(i)
		a, e := q.Ptr[i], t.res.UserEffect[i]
		for k, it := range items {
			c[a+int64(k)] = min(max(t.clamp(v[k])-t.res.ItemAvg[it]-e, -t.pl.B), t.pl.B)
		}
	}
	return c
}

// cleansedCovariance releases the weighted covariance Σ_i w_i r_iᵀr_i and
// weights Σ_i w_i e_iᵀe_i (w_i = 1/|Ω_i|) of the centred ratings cent,
// and cleanses them as Cov_jk/(Wgt_jk + damping) (post-processing).
func (t *mmTrainer) cleansedCovariance(ctx context.Context, cent []float64) (*mat.SymDense, error) {
	p, n := t.p, t.p.N
	ch := p.chunks(workers(t.o.Workers))
	cov := newAggregate(n, len(ch))
	wgt := newAggregate(n, len(ch))
	err := parallel(ctx, ch, func(w, lo, hi int) error {
		return mmCovPart(ctx, p, cent, lo, hi, cov.parts[w].upper, wgt.parts[w].upper)
	})
	if err != nil {
		return nil, err
	}
	// One mechanism releases both triangles (it is calibrated for the
	// 2·n(n+1)/2 coordinates of the pair and the pair's sensitivity):
	// independent noise of the same σ on each, in two calls.
	Cov, err := cov.release(t.o.Noise, t.pl.Cov.Instrumented(t.o.Instrument))
	if err != nil {
		return nil, err
	}
	Wgt, err := wgt.release(t.o.Noise, t.pl.Cov.Instrumented(t.o.Instrument))
	if err != nil {
		return nil, err
	}
	clean := mat.NewSymDense(n, nil)
	for j := range n {
		for k := j; k < n; k++ {
			clean.SetSym(j, k, Cov.At(j, k)/(math.Max(Wgt.At(j, k), 0)+t.o.CovDamping))
		}
	}
	return clean, nil
}

// mmCovPart adds the users lo … hi−1's parts of the covariance and the
// weights to the upper triangles cu and wu (n × n, row-major).
func mmCovPart(ctx context.Context, p *Problem, cent []float64, lo, hi int, cu, wu []float64) error {
	n := p.N
	for i := lo; i < hi; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		a, b := p.Ptr[i], p.Ptr[i+1]
		if a == b {
			continue
		}
		wi := 1 / float64(b-a)
		for k := a; k < b; k++ {
			rk := wi * cent[k]
			base := int(p.Cols[k]) * n
			for l := k; l < b; l++ {
				c := base + int(p.Cols[l])
				cu[c] += rk * cent[l]
				wu[c] += wi
			}
		}
	}
	return nil
}

// localFits takes the cleansed covariance's top-Rank eigenspace V
// (post-processing) and fits, locally for each user, her centred ratings
// on the rows of V she rated (cent: p's centred ratings, reused when the
// local rows are p's).
func (t *mmTrainer) localFits(ctx context.Context, clean *mat.SymDense, cent []float64) error {
	p, loc, n, r := t.p, t.loc, t.p.N, t.o.Rank
	_, Vr, err := topEigenDense(clean, r)
	if err != nil {
		return err
	}
	f := Factors{M: p.M, N: n, Rank: r, U: make([]float64, p.M*r), V: make([]float64, n*r)}
	for j := range n {
		for c := range r {
			f.V[j*r+c] = Vr.At(j, c)
		}
	}
	lcent := cent
	if loc != p {
		lcent = t.centre(loc)
	}
	err = parallel(ctx, loc.chunks(workers(t.o.Workers)), func(w, lo, hi int) error {
		fit := newMMFitter(r)
		for i := lo; i < hi; i++ {
			items, _ := loc.Row(i)
			if len(items) == 0 {
				continue
			}
			a := loc.Ptr[i]
			u, err := fit.fit(f.V, n, t.o.Ridge, items, lcent[a:a+int64(len(items))])
			if err != nil {
				return fmt.Errorf("jointdp: MM local fit for user %d: %w", i, err)
			}
			copy(f.U[i*r:(i+1)*r], u)
		}
		return nil
	})
	if err != nil {
		return err
	}
	t.res.Factors = f
	return nil
}

// mmGlobalPart is one user's part of MM's global release: her mean rating
// (clamped to [lo, hi]) minus the scale's midpoint, and 1; (0, 0) if she
// has no rating.
func mmGlobalPart(v []float32, lo, hi float64) (sum, count float64) {
	if len(v) == 0 {
		return 0, 0
	}
	for _, x := range v {
		sum += min(max(float64(x), lo), hi)
	}
	return sum/float64(len(v)) - (lo+hi)/2, 1
}

// mmItemPart adds one user's part of MM's item release to the sums S and
// counts C: for each item she rated, w·(rating − mid) and w, w = 1/√|Ω_i|,
// ratings clamped to [lo, hi] and mid = (lo+hi)/2.
func mmItemPart(items []int32, v []float32, lo, hi float64, S, C []float64) {
	if len(v) == 0 {
		return
	}
	w, mid := 1/math.Sqrt(float64(len(v))), (lo+hi)/2
	for q, it := range items {
		S[it] += w * (min(max(float64(v[q]), lo), hi) - mid)
		C[it] += w
	}
}

// mmFitter is MM's local step for one user at a time: the ridge fit
// (V_ΩᵀV_Ω + ridge·|Ω_i|/n·I)u = V_Ωᵀc of her centred, clamped ratings c
// on the rows of V (n × r, row-major) she rated.
type mmFitter struct {
	r    int
	A    *mat.SymDense
	rhs  *mat.VecDense
	sol  mat.VecDense
	chol mat.Cholesky
}

func newMMFitter(r int) *mmFitter {
	return &mmFitter{r: r, A: mat.NewSymDense(r, nil), rhs: mat.NewVecDense(r, nil)}
}

// fit returns her row (valid until the next call).
func (m *mmFitter) fit(V []float64, n int, ridge float64, items []int32, c []float64) ([]float64, error) {
	r := m.r
	rel := ridge * float64(len(items)) / float64(n)
	for x := range r {
		m.rhs.SetVec(x, 0)
		for y := x; y < r; y++ {
			d := 0.0
			if x == y {
				d = rel
			}
			m.A.SetSym(x, y, d)
		}
	}
	for q, it := range items {
		vj := V[int(it)*r : int(it)*r+r]
		for x := range r {
			m.rhs.SetVec(x, m.rhs.AtVec(x)+vj[x]*c[q])
			for y := x; y < r; y++ {
				m.A.SetSym(x, y, m.A.At(x, y)+vj[x]*vj[y])
			}
		}
	}
	if !m.chol.Factorize(m.A) {
		return nil, fmt.Errorf("the system is not positive definite")
	}
	if err := m.chol.SolveVecTo(&m.sol, m.rhs); err != nil {
		return nil, err
	}
	return m.sol.RawVector().Data, nil
}

// FoldMM is the fold-in rule of mm models: a user's row is MM's own local
// fit (mmFitter) of her ratings minus the public item averages and her
// damped effect, clamped to [−B, B] (model parameter "bound"), with the
// relative ridge of model parameter "ridge".
const FoldMM model.FoldIn = "mm-fit"

func init() { model.RegisterFoldIn(FoldMM, foldMM) }

// foldMM is model.FoldRule for FoldMM.
func foldMM(m *model.Model, items []int32, res []float64) ([]float64, error) {
	B, err := modelNumber(m, "bound")
	if err != nil {
		return nil, err
	}
	ridge, err := modelNumber(m, "ridge")
	if err != nil {
		return nil, err
	}
	if !(B > 0) || !(ridge > 0) || math.IsInf(B+ridge, 0) {
		return nil, fmt.Errorf("jointdp: mm model has bound %g and ridge %g", B, ridge)
	}
	n, r := m.NumItems(), m.Rank
	if len(m.V) != n*r {
		return nil, fmt.Errorf("jointdp: mm model has %d factor values for %d items × rank %d", len(m.V), n, r)
	}
	c := make([]float64, len(res))
	for k, x := range res {
		c[k] = min(max(x, -B), B)
	}
	u, err := newMMFitter(r).fit(m.V, n, ridge, items, c)
	if err != nil {
		return nil, err
	}
	return slices.Clone(u), nil
}
