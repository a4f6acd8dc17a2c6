package jointdp

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
)

// MMOptions configures the McSherry–Mironov baseline ("Differentially
// private recommender systems", KDD 2009, "SVD after cleansing"), with
// Gaussian noise accounted in zCDP at user level.
type MMOptions struct {
	// Rank is the dimension of the cleansed covariance's eigenspace.
	Rank int
	// Min and Max are the public rating scale; ratings are clamped to it.
	Min, Max float64
	// B clamps the centred ratings entering the covariance to [−B, B]
	// (default 1, McSherry–Mironov's choice on a 1–5 scale).
	B float64
	// ItemDamping (β_m), UserDamping (β_p) and CovDamping are the damping
	// pseudo-counts of the item averages, user effects and covariance
	// (defaults 15, 20 and 20: weighted counts, see the code).
	ItemDamping, UserDamping, CovDamping float64
	// Ridge is the regularisation of each user's local least-squares fit
	// onto the (unit-norm) eigenvectors, relative to her expected Gram
	// (|Ω_i|/n)·I: the fit solves (V_ΩᵀV_Ω + Ridge·|Ω_i|/n·I)u = V_Ωᵀr
	// (default 0.1).
	Ridge float64
	// Epsilon and Delta are the target user-level joint-DP parameters;
	// Split divides the zCDP budget among the global average, the item
	// averages and the covariance (default 0.02, 0.18, 0.80).
	Epsilon, Delta float64
	Split          [3]float64
	Noise          *noise.Source
	Workers        int
}

// MMResult is the model: prediction = ItemAvg_j + UserEffect_i + U_i·V_j.
type MMResult struct {
	Factors
	GlobalAvg  float64
	ItemAvg    []float64 // public (noisy)
	UserEffect []float64 // local to each user
	Guarantee  privacy.Guarantee
	Sigmas     [3]float64
}

// McSherryMironov trains the baseline on raw (uncentred) ratings:
//  1. a noisy global average G of the users' mean ratings;
//  2. noisy damped item averages (S_j + β_m G)/(C_j + β_m), each user
//     weighted 1/√|Ω_i| so her contribution has bounded norm;
//  3. locally, each user's damped effect and her centred ratings clamped to
//     [−B, B];
//  4. a noisy covariance Σ_i w_i r_iᵀr_i and noisy weights Σ_i w_i e_iᵀe_i
//     with w_i = 1/|Ω_i|, "cleansed" as Cov_jk/(Wgt_jk + damping);
//  5. its top-Rank eigenspace V, and locally for each user a ridge fit of
//     her centred ratings on the rows of V she rated.
//
// Sensitivities are for replacing one user's row: 2·max‖c_i‖ for the
// vector sums of steps 1–2 and √2·max‖c_i‖_F for the PSD sums of step 4.
func McSherryMironov(ctx context.Context, p *Problem, o MMOptions) (*MMResult, error) {
	if o.Rank < 1 || o.Rank > p.N {
		return nil, fmt.Errorf("jointdp: rank must lie in 1..%d, got %d", p.N, o.Rank)
	}
	if !(o.Max > o.Min) || math.IsInf(o.Max-o.Min, 0) {
		return nil, fmt.Errorf("jointdp: rating scale [%g, %g] is not a finite interval", o.Min, o.Max)
	}
	if o.Noise == nil {
		return nil, fmt.Errorf("jointdp: no noise source")
	}
	def := func(x *float64, d float64) {
		if *x == 0 {
			*x = d
		}
	}
	def(&o.B, 1)
	def(&o.ItemDamping, 15)
	def(&o.UserDamping, 20)
	def(&o.CovDamping, 20)
	def(&o.Ridge, 0.1)
	if o.Split == [3]float64{} {
		o.Split = [3]float64{0.02, 0.18, 0.80}
	}
	for _, x := range []float64{o.B, o.ItemDamping, o.UserDamping, o.CovDamping, o.Ridge} {
		if !(x > 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("jointdp: MM parameters must be positive and finite")
		}
	}
	rho, err := accountant.RhoForApprox(o.Epsilon, o.Delta)
	if err != nil {
		return nil, fmt.Errorf("jointdp: %w", err)
	}
	var ssum float64
	for _, s := range o.Split {
		if !(s > 0) {
			return nil, fmt.Errorf("jointdp: budget split must be positive, got %v", o.Split)
		}
		ssum += s
	}
	R := math.Max(math.Abs(o.Min), math.Abs(o.Max))
	sens := [3]float64{
		2 * math.Hypot(R, 1),                // (Σ_i mean_i, #users)
		2 * math.Hypot(R, 1),                // (S_j, C_j) with weights 1/√|Ω_i|
		math.Sqrt2 * math.Hypot(o.B*o.B, 1), // (Cov, Wgt) with weights 1/|Ω_i|
	}
	// Coordinates noised by each release (lattice rounding is accounted
	// per coordinate, mechanism.GaussianRho): (sum, count); (S, C); the
	// upper triangles of Cov and Wgt.
	dims := [3]int{2, 2 * p.N, 2 * symCoords(p.N)}
	res := &MMResult{}
	for k := range 3 {
		s, err := mechanism.GaussianSigma(rho*o.Split[k]/ssum, sens[k], dims[k])
		if err != nil {
			return nil, fmt.Errorf("jointdp: calibrating MM step %d: %w", k+1, err)
		}
		res.Sigmas[k] = s
	}
	clamp := func(v float32) float64 { return min(max(float64(v), o.Min), o.Max) }
	n := p.N
	// 1. Global average of user means.
	var num, den float64
	for i := range p.M {
		_, v := p.Row(i)
		if len(v) == 0 {
			continue
		}
		var s float64
		for _, x := range v {
			s += clamp(x)
		}
		num += s / float64(len(v))
		den++
	}
	nd := []float64{num, den}
	noise.AddGaussian(o.Noise, nd, res.Sigmas[0])
	num, den = nd[0], nd[1]
	G := (o.Min + o.Max) / 2
	if den > 1 {
		G = min(max(num/den, o.Min), o.Max)
	}
	res.GlobalAvg = G
	// 2. Item averages.
	S := make([]float64, n)
	C := make([]float64, n)
	for i := range p.M {
		items, v := p.Row(i)
		if len(v) == 0 {
			continue
		}
		w := 1 / math.Sqrt(float64(len(v)))
		for q, it := range items {
			S[it] += w * clamp(v[q])
			C[it] += w
		}
	}
	noise.AddGaussian(o.Noise, S, res.Sigmas[1])
	noise.AddGaussian(o.Noise, C, res.Sigmas[1])
	res.ItemAvg = make([]float64, n)
	for j := range n {
		d := math.Max(C[j], 0) + o.ItemDamping
		res.ItemAvg[j] = min(max((S[j]+o.ItemDamping*G)/d, o.Min), o.Max)
	}
	// 3. Local user effects and centred, clamped ratings.
	res.UserEffect = make([]float64, p.M)
	cent := make([]float64, p.Len())
	for i := range p.M {
		items, v := p.Row(i)
		a := p.Ptr[i]
		var s float64
		for q, it := range items {
			s += clamp(v[q]) - res.ItemAvg[it]
		}
		e := s / (float64(len(v)) + o.UserDamping)
		res.UserEffect[i] = e
		for q, it := range items {
			cent[a+int64(q)] = min(max(clamp(v[q])-res.ItemAvg[it]-e, -o.B), o.B)
		}
	}
	// 4. Noisy weighted covariance and weights (two n × n sums).
	ch := p.chunks(workers(o.Workers))
	cov := newAggregate(n, len(ch))
	wgt := newAggregate(n, len(ch))
	err = parallel(ctx, ch, func(w, lo, hi int) error {
		cu, wu := cov.parts[w].upper, wgt.parts[w].upper
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
	})
	if err != nil {
		return nil, err
	}
	Cov := cov.release(o.Noise, res.Sigmas[2])
	Wgt := wgt.release(o.Noise, res.Sigmas[2])
	clean := mat.NewSymDense(n, nil)
	for j := range n {
		for k := j; k < n; k++ {
			clean.SetSym(j, k, Cov.At(j, k)/(math.Max(Wgt.At(j, k), 0)+o.CovDamping))
		}
	}
	// 5. Eigenspace and local ridge fits.
	_, Vr, err := topEigenDense(clean, o.Rank)
	if err != nil {
		return nil, err
	}
	r := o.Rank
	f := Factors{M: p.M, N: n, Rank: r, U: make([]float64, p.M*r), V: make([]float64, n*r)}
	for j := range n {
		for c := range r {
			f.V[j*r+c] = Vr.At(j, c)
		}
	}
	err = parallel(ctx, ch, func(w, lo, hi int) error {
		A := mat.NewSymDense(r, nil)
		rhs := mat.NewVecDense(r, nil)
		var sol mat.VecDense
		var chol mat.Cholesky
		for i := lo; i < hi; i++ {
			items, _ := p.Row(i)
			if len(items) == 0 {
				continue
			}
			a := p.Ptr[i]
			ridge := o.Ridge * float64(len(items)) / float64(n)
			for x := range r {
				rhs.SetVec(x, 0)
				for y := x; y < r; y++ {
					d := 0.0
					if x == y {
						d = ridge
					}
					A.SetSym(x, y, d)
				}
			}
			for q, it := range items {
				vj := f.V[int(it)*r : int(it)*r+r]
				for x := range r {
					rhs.SetVec(x, rhs.AtVec(x)+vj[x]*cent[a+int64(q)])
					for y := x; y < r; y++ {
						A.SetSym(x, y, A.At(x, y)+vj[x]*vj[y])
					}
				}
			}
			if !chol.Factorize(A) {
				return fmt.Errorf("jointdp: MM local fit for user %d is not positive definite", i)
			}
			if err := chol.SolveVecTo(&sol, rhs); err != nil {
				return fmt.Errorf("jointdp: MM local fit: %w", err)
			}
			copy(f.U[i*r:(i+1)*r], sol.RawVector().Data)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.Factors = f
	var rhos [3]float64
	for k := range 3 {
		if rhos[k], err = mechanism.GaussianRho(sens[k], res.Sigmas[k], dims[k]); err != nil {
			return nil, fmt.Errorf("jointdp: accounting: %w", err)
		}
	}
	total, err := accountant.ZCDPCompose(rhos[:]...)
	if err != nil {
		return nil, fmt.Errorf("jointdp: accounting: %w", err)
	}
	eps, err := accountant.ZCDPToApprox(total, o.Delta)
	if err != nil {
		return nil, fmt.Errorf("jointdp: accounting: %w", err)
	}
	res.Guarantee = privacy.Guarantee{Epsilon: eps, Delta: o.Delta, Rho: total, Unit: privacy.UnitUser, Notion: privacy.Joint, Status: privacy.Proven}
	return res, nil
}
