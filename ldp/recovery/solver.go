package recovery

import (
	"context"
	"fmt"
	"math"
	"sync"

	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// factors is a low-rank matrix Σ_c s_c u_c v_cᵀ (U, V with orthonormal
// columns when produced by svt).
type factors struct {
	U, V *mat.Dense // nil when rank 0
	S    []float64
}

func (f factors) rank() int { return len(f.S) }

// scaledU returns U·diag(S) as a new matrix.
func (f factors) scaledU() *mat.Dense {
	r, c := f.U.Dims()
	a := mat.NewDense(r, c, nil)
	a.Copy(f.U)
	for j := range c {
		for i := range r {
			a.Set(i, j, a.At(i, j)*f.S[j])
		}
	}
	return a
}

type solver struct {
	p *Problem
	o Options
	// alpha, beta: per-entry affine model E[Z | present] = α + β·θ (nil
	// for the plain estimator: α = 0, β = 1).
	alpha, beta []float64
	mu          float64
	// bu, bi: user and item biases of the debiased model (nil for plain),
	// damped toward 0 by damping pseudo-observations.
	bu, bi  []float64
	damping float64

	step float64 // 1 / Lipschitz constant = 1 / max β²
	// rows per worker
	chunks [][2]int
	cur    factors
	iters  int
}

func newSolver(p *Problem, o Options) *solver {
	s := &solver{p: p, o: o, step: 1, damping: o.Damping}
	w := o.Workers
	per := (p.Rows + w - 1) / w
	for lo := 0; lo < p.Rows; lo += per {
		s.chunks = append(s.chunks, [2]int{lo, min(p.Rows, lo+per)})
	}
	return s
}

// parallel runs f on each row chunk.
func (s *solver) parallel(f func(w, lo, hi int)) {
	var wg sync.WaitGroup
	for w, c := range s.chunks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(w, c[0], c[1])
		}()
	}
	wg.Wait()
}

// ratedRates estimates, from the presence of reports, the probability that
// each user (row) and item (column) has a true rating, debiased for the
// mechanism's removals and inventions and shrunk toward the global rate by
// their sampling variance (empirical Bayes). It also returns the estimated
// number of true ratings.
func (s *solver) ratedRates() (pu, pi []float64, sHat float64) {
	p := s.p
	m := p.Model
	gap := m.PresentRated - m.PresentMissing
	rowCnt := make([]float64, p.Rows)
	colCnt := make([]float64, p.Cols)
	for i := range p.Rows {
		rowCnt[i] = float64(p.Ptr[i+1] - p.Ptr[i])
		for k := p.Ptr[i]; k < p.Ptr[i+1]; k++ {
			colCnt[p.Col[k]]++
		}
	}
	rowCells, colCells, total := p.cells()
	global := (float64(len(p.Z))/total - m.PresentMissing) / gap
	global = math.Min(1, math.Max(1/total, global))
	sHat = global * total
	shrink := func(cnt, cells []float64) []float64 {
		raw := make([]float64, len(cnt))
		nv := make([]float64, len(cnt))
		var mean, meanNV float64
		for i, c := range cnt {
			f := c / cells[i]
			raw[i] = (f - m.PresentMissing) / gap
			nv[i] = math.Max(f*(1-f), 1/cells[i]) / cells[i] / (gap * gap)
			mean += raw[i]
			meanNV += nv[i]
		}
		mean /= float64(len(cnt))
		meanNV /= float64(len(cnt))
		var v float64
		for _, r := range raw {
			v += (r - mean) * (r - mean)
		}
		v /= float64(max(1, len(cnt)-1))
		tau2 := math.Max(0, v-meanNV)
		out := make([]float64, len(cnt))
		for i, r := range raw {
			sh := global
			if tau2 > 0 {
				sh = global + tau2/(tau2+nv[i])*(r-global)
			}
			out[i] = math.Min(1, math.Max(1e-4, sh))
		}
		return out
	}
	return shrink(rowCnt, rowCells), shrink(colCnt, colCells), sHat
}

func (s *solver) setPlain() { s.alpha, s.beta, s.mu, s.step = nil, nil, 0, 1 }

// setDebiased computes α, β for every present report from the estimated
// rating probabilities.
func (s *solver) setDebiased(pu, pi []float64) {
	p := s.p
	m := p.Model
	glob := 0.0
	for _, v := range pu {
		glob += v
	}
	glob /= float64(len(pu))
	s.alpha = make([]float64, len(p.Z))
	s.beta = make([]float64, len(p.Z))
	maxB := 0.0
	var sb, sbz float64
	for i := range p.Rows {
		for k := p.Ptr[i]; k < p.Ptr[i+1]; k++ {
			pij := math.Min(1-1e-6, math.Max(1e-6, pu[i]*pi[p.Col[k]]/glob))
			w := pij * m.PresentRated / (pij*m.PresentRated + (1-pij)*m.PresentMissing)
			s.alpha[k] = w*m.MeanRatedA + (1-w)*m.MeanMissing
			s.beta[k] = w * m.MeanRatedB
			maxB = math.Max(maxB, s.beta[k])
			sb += s.beta[k] * s.beta[k]
			sbz += s.beta[k] * (p.Z[k] - s.alpha[k])
		}
	}
	s.mu = sbz / sb
	s.step = 1 / (maxB * maxB)
	s.bu = make([]float64, p.Rows)
	s.bi = make([]float64, p.Cols)
}

// reportVariances returns, for every present report, the variance of Z
// around E[Z | Θ] that the debiased model implies: the mechanism's noise
// variance, plus the true ratings' own deviation ρ0 from the low-rank Θ
// (the ρ0 of Theorem 3), plus the spread of the rated/missing mixture
// (estimated by moments), each weighted by the posterior probability w
// that the cell was rated.
func (s *solver) reportVariances(rho0 float64) []float64 {
	p := s.p
	m := p.Model
	var num, den float64
	ws := make([]float64, len(p.Z))
	for k, z := range p.Z {
		w := s.beta[k] / m.MeanRatedB
		ws[k] = w
		d := z - m.MeanMissing
		num += d*d - w*m.NoiseVar - (1-w)*m.NoiseVarMissing
		den += w
	}
	spread := math.Max(0, num/den) // E_w[(a1 + b1θ − a0)²]
	for k, w := range ws {
		ws[k] = w*(m.NoiseVar+m.MeanRatedB*m.MeanRatedB*rho0*rho0) + (1-w)*m.NoiseVarMissing + w*(1-w)*spread
	}
	return ws
}

// expectedNoiseNorm is the discrepancy principle's residual target: the
// expected ‖P_Ω(Z − E[Z | Θ])‖_F, the root of the summed report variances.
func expectedNoiseNorm(vars []float64) float64 {
	var v float64
	for _, x := range vars {
		v += x
	}
	return math.Sqrt(v)
}

// predict writes the value of the low-rank part f at every report to y
// (zeros for rank 0): O(|Ω|·rank), on all workers.
func (s *solver) predict(f factors, y []float64) {
	p := s.p
	if f.rank() == 0 {
		clear(y)
		return
	}
	A := f.scaledU()
	r := f.rank()
	ad, bd := A.RawMatrix().Data, f.V.RawMatrix().Data
	s.parallel(func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			ai := ad[i*r : i*r+r]
			for k := p.Ptr[i]; k < p.Ptr[i+1]; k++ {
				bj := bd[int(p.Col[k])*r : int(p.Col[k])*r+r]
				var v float64
				for c, a := range ai {
					v += a * bj[c]
				}
				y[k] = v
			}
		}
	})
}

// residual computes, at the low-rank values y of every report (from
// predict; nil: zero), the per-report gradient weights
// g = β(Z − α − β(μ + b_u + b_i + y)) and returns the loss
// ½Σ(Z − α − β(μ + b_u + b_i + y))². O(|Ω|): the low-rank values are
// cached per report, never recomputed from the factors here.
func (s *solver) residual(y, g []float64) float64 {
	p := s.p
	losses := make([]float64, len(s.chunks))
	s.parallel(func(w, lo, hi int) {
		var loss float64
		for i := lo; i < hi; i++ {
			for k := p.Ptr[i]; k < p.Ptr[i+1]; k++ {
				var yk float64
				if y != nil {
					yk = y[k]
				}
				var e float64
				if s.beta == nil {
					e = p.Z[k] - yk
					g[k] = e
				} else {
					e = p.Z[k] - s.alpha[k] - s.beta[k]*(s.mu+s.bu[i]+s.bi[p.Col[k]]+yk)
					g[k] = s.beta[k] * e
				}
				loss += e * e
			}
		}
		losses[w] = loss / 2
	})
	var l float64
	for _, v := range losses {
		l += v
	}
	return l
}

// op is G = A·Bᵀ + t·S, S the sparse matrix of g on Ω.
type op struct {
	s    *solver
	A, B *mat.Dense
	g    []float64
	t    float64
}

// mul returns G·X (X is Cols × q).
func (o op) mul(X *mat.Dense) *mat.Dense {
	p := o.s.p
	_, q := X.Dims()
	out := mat.NewDense(p.Rows, q, nil)
	if o.A != nil {
		var C mat.Dense
		C.Mul(o.B.T(), X)
		out.Mul(o.A, &C)
	}
	od, xd := out.RawMatrix().Data, X.RawMatrix().Data
	o.s.parallel(func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			oi := od[i*q : i*q+q]
			for k := p.Ptr[i]; k < p.Ptr[i+1]; k++ {
				gk := o.t * o.g[k]
				xj := xd[int(p.Col[k])*q : int(p.Col[k])*q+q]
				for c, x := range xj {
					oi[c] += gk * x
				}
			}
		}
	})
	return out
}

// mulT returns Gᵀ·Y (Y is Rows × q).
func (o op) mulT(Y *mat.Dense) *mat.Dense {
	p := o.s.p
	_, q := Y.Dims()
	acc := make([][]float64, len(o.s.chunks))
	yd := Y.RawMatrix().Data
	o.s.parallel(func(w, lo, hi int) {
		a := make([]float64, p.Cols*q)
		for i := lo; i < hi; i++ {
			yi := yd[i*q : i*q+q]
			for k := p.Ptr[i]; k < p.Ptr[i+1]; k++ {
				gk := o.t * o.g[k]
				aj := a[int(p.Col[k])*q : int(p.Col[k])*q+q]
				for c, y := range yi {
					aj[c] += gk * y
				}
			}
		}
		acc[w] = a
	})
	out := mat.NewDense(p.Cols, q, acc[0])
	od := out.RawMatrix().Data
	for _, a := range acc[1:] {
		for k, v := range a {
			od[k] += v
		}
	}
	if o.A != nil {
		var D mat.Dense
		D.Mul(o.A.T(), Y)
		var BD mat.Dense
		BD.Mul(o.B, &D)
		out.Add(out, &BD)
	}
	return out
}

// orth returns an orthonormal basis of the columns of X (thin QR by
// Householder reflections, LAPACK's dgeqrf + dorgqr). mat.QR.QTo would form
// the full r × r factor — O(r²) memory and time for a Cols × q basis,
// which dominated the solver's profile.
func orth(X *mat.Dense) *mat.Dense {
	r, c := X.Dims()
	Q := mat.DenseCopyOf(X)
	a := Q.RawMatrix()
	k := min(r, c)
	tau := make([]float64, k)
	work := make([]float64, 1)
	lapack64.Geqrf(a, tau, work, -1)
	lwork := max(int(work[0]), c)
	lapack64.Orgqr(a, tau, work, -1)
	lwork = max(lwork, int(work[0]))
	work = make([]float64, lwork)
	lapack64.Geqrf(a, tau, work, lwork)
	lapack64.Orgqr(a, tau, work, lwork)
	return Q
}

// topSVD approximates the top q singular triplets of G by randomized
// subspace iteration started from warm (Cols × k, may be nil) plus random
// columns; power extra iterations refine it.
func (s *solver) topSVD(g op, warm *mat.Dense, q, power int) (U *mat.Dense, S []float64, V *mat.Dense) {
	p := s.p
	q = min(q, p.Rows, p.Cols)
	X := mat.NewDense(p.Cols, q, nil)
	k := 0
	if warm != nil {
		_, k = warm.Dims()
		k = min(k, q)
		X.Slice(0, p.Cols, 0, k).(*mat.Dense).Copy(warm.Slice(0, p.Cols, 0, k))
	}
	for i := range p.Cols {
		for c := k; c < q; c++ {
			X.Set(i, c, s.o.Rand.NormFloat64())
		}
	}
	Q := orth(g.mul(X))
	for range power {
		W := orth(g.mulT(Q))
		Q = orth(g.mul(W))
	}
	W := g.mulT(Q) // = Gᵀ Q = V Σ Uₛᵀ
	var svd mat.SVD
	if !svd.Factorize(W, mat.SVDThin) {
		return nil, nil, nil
	}
	var Uw, Vw mat.Dense
	svd.UTo(&Uw)
	svd.VTo(&Vw)
	S = svd.Values(nil)
	U = mat.NewDense(p.Rows, len(S), nil)
	U.Mul(Q, &Vw)
	return U, S, &Uw
}

// svt returns the singular value soft-thresholding of g's operator at tau.
func (s *solver) svt(g op, warm *mat.Dense, tau float64, power int) factors {
	q := max(s.cur.rank()+5, 8)
	q = min(q, s.o.MaxRank+5)
	U, S, V := s.topSVD(g, warm, q, power)
	if U == nil {
		return factors{}
	}
	k := 0
	for k < len(S) && S[k] > tau && k < s.o.MaxRank {
		k++
	}
	if k == 0 {
		return factors{}
	}
	f := factors{U: mat.DenseCopyOf(U.Slice(0, s.p.Rows, 0, k)), V: mat.DenseCopyOf(V.Slice(0, s.p.Cols, 0, k)), S: make([]float64, k)}
	for c := range k {
		f.S[c] = S[c] - tau
	}
	return f
}

func nuclear(f factors) float64 {
	var t float64
	for _, v := range f.S {
		t += v
	}
	return t
}

// updateMu sets the unpenalised offset and the damped biases to their
// exact block minimisers given the low-rank values y of the reports.
func (s *solver) updateMu(y, g []float64) {
	if s.beta == nil {
		return
	}
	// g = β(Z − α − β(μ + b_u + b_i + L)). Exact block minimisation:
	// μ (unpenalised), then the damped user and item biases.
	p := s.p
	for range 2 {
		s.residual(y, g)
		var sg, sb float64
		for k, b := range s.beta {
			sg += g[k]
			sb += b * b
		}
		s.mu += sg / sb
		s.residual(y, g)
		sgu := make([]float64, p.Rows)
		sbu := make([]float64, p.Rows)
		for i := range p.Rows {
			for k := p.Ptr[i]; k < p.Ptr[i+1]; k++ {
				b2 := s.beta[k] * s.beta[k]
				sgu[i] += g[k]
				sbu[i] += b2
			}
		}
		s.shrinkBiases(s.bu, sgu, sbu)
		s.residual(y, g)
		sgi := make([]float64, p.Cols)
		sbi := make([]float64, p.Cols)
		for k, c := range p.Col {
			b2 := s.beta[k] * s.beta[k]
			sgi[c] += g[k]
			sbi[c] += b2
		}
		s.shrinkBiases(s.bi, sgi, sbi)
	}
}

// shrinkBiases updates one set of biases (users or items) by exact block
// minimisation given the sums, per bias, of g = β·e (sg) and β² (sb) over
// its reports: ridge regression b = Σβ(e + βb_old) / (Σβ² + damping).
func (s *solver) shrinkBiases(b, sg, sb []float64) {
	for i := range b {
		b[i] = (sg[i] + sb[i]*b[i]) / (sb[i] + s.damping)
	}
}

// solve runs FISTA with adaptive restart for one λ from the current
// iterate, for at most maxIter steps or until the objective's relative
// change falls below tol.
func (s *solver) solve(ctx context.Context, lambda float64, g []float64, maxIter int, tol float64) (loss float64, err error) {
	n := len(s.p.Z)
	yCur := make([]float64, n)
	s.predict(s.cur, yCur)
	s.updateMu(yCur, g)
	tau := lambda * s.step
	prev := s.cur
	yPrev := append([]float64(nil), yCur...)
	yExt := make([]float64, n)
	yNext := make([]float64, n)
	loss = s.residual(yCur, g)
	F := lambda*nuclear(s.cur) + loss
	tk := 1.0
	restarts := 0
	for it := range maxIter {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		tn := (1 + math.Sqrt(1+4*tk*tk)) / 2
		theta := (tk - 1) / tn
		var A, B *mat.Dense
		switch {
		case s.cur.rank() > 0 && prev.rank() > 0 && theta > 0:
			a1, a0 := s.cur.scaledU(), prev.scaledU()
			a1.Scale(1+theta, a1)
			a0.Scale(-theta, a0)
			A, B = &mat.Dense{}, &mat.Dense{}
			A.Augment(a1, a0)
			B.Augment(s.cur.V, prev.V)
			for k := range yExt {
				yExt[k] = (1+theta)*yCur[k] - theta*yPrev[k]
			}
		case s.cur.rank() > 0:
			A, B = s.cur.scaledU(), s.cur.V
			copy(yExt, yCur)
		default:
			clear(yExt)
		}
		s.residual(yExt, g)
		power := 0
		if it == 0 {
			power = 2
		}
		var warm *mat.Dense
		if s.cur.rank() > 0 {
			warm = s.cur.V
		}
		next := s.svt(op{s: s, A: A, B: B, g: g, t: s.step}, warm, tau, power)
		s.predict(next, yNext)
		nloss := s.residual(yNext, g)
		nF := lambda*nuclear(next) + nloss
		s.iters++
		if nF > F*(1+1e-12) {
			// Adaptive restart (O'Donoghue & Candès): drop the momentum
			// and take a plain proximal-gradient step from the current point.
			tk = 1
			prev = s.cur
			copy(yPrev, yCur)
			restarts++
			if restarts > 3 {
				break
			}
			continue
		}
		restarts = 0
		prev, s.cur = s.cur, next
		yPrev, yCur, yNext = yCur, yNext, yPrev
		tk = tn
		done := F-nF <= tol*math.Max(nF, 1e-300)
		F, loss = nF, nloss
		if done && it > 2 {
			break
		}
	}
	return loss, nil
}

// lambdaMax is the smallest λ for which L = 0 solves the penalised problem
// at the current μ: the largest singular value of the gradient at 0.
func (s *solver) lambdaMax(g []float64) float64 {
	s.residual(nil, g)
	_, S, _ := s.topSVD(op{s: s, g: g, t: 1}, nil, 4, 6)
	if len(S) == 0 {
		return 0
	}
	return S[0] * 1.0001
}

// noiseOpNorm estimates E‖N‖_op for the gradient the noise alone would
// produce at the truth, N_k = β_k·e_k, e_k independent with the
// per-report variances sd²_k the mechanism implies (reportVariances): the
// mean over draws of the top singular value of a Rademacher matrix with
// entries ±β_k·sd_k, by subspace iteration. The operator norm of a sparse
// random matrix with independent entries depends on little but its
// variance profile (Bandeira & van Handel, 2016), so the signs stand in
// for the mechanism's actual noise.
func (s *solver) noiseOpNorm(sd []float64, draws int) float64 {
	g := make([]float64, len(sd))
	var sum float64
	for range draws {
		for k, v := range sd {
			b := 1.0
			if s.beta != nil {
				b = s.beta[k]
			}
			if s.o.Rand.Uint64()&1 == 0 {
				g[k] = b * v
			} else {
				g[k] = -b * v
			}
		}
		_, S, _ := s.topSVD(op{s: s, g: g, t: 1}, nil, 4, 8)
		if len(S) > 0 {
			sum += S[0]
		}
	}
	return sum / float64(draws)
}

// search finds λ whose residual meets the target (or uses a fixed λ by
// continuation from λ_max).
func (s *solver) search(ctx context.Context, target, fixed float64, res *Result) error {
	g := make([]float64, len(s.p.Z))
	s.updateMu(nil, g)
	r0 := math.Sqrt(2 * s.residual(nil, g))
	res.ZNorm = r0
	finish := func(lambda, loss float64) {
		res.Lambda, res.Residual, res.Iterations, res.Offset = lambda, math.Sqrt(2*loss), s.iters, s.mu
		res.Rank = s.cur.rank()
		if res.Rank > 0 {
			U := s.cur.scaledU()
			res.U = append([]float64(nil), U.RawMatrix().Data...)
			res.V = append([]float64(nil), s.cur.V.RawMatrix().Data...)
		}
		res.Zero = res.Rank == 0
		res.UserBias, res.ItemBias = s.bu, s.bi
	}
	if fixed > 0 {
		// Continuation: a few loose solves on a geometric path from λ_max
		// warm-start the final one (far fewer iterations than a cold start
		// at a small λ).
		lmax := s.lambdaMax(g)
		for l := lmax / 2; l > fixed*1.5; l /= 2 {
			if _, err := s.solve(ctx, l, g, max(10, s.o.MaxIter/10), 1e-3); err != nil {
				return err
			}
			s.o.Log.Debug("recovery: continuation", "lambda", l, "rank", s.cur.rank())
		}
		loss, err := s.solve(ctx, fixed, g, s.o.MaxIter, s.o.Tol)
		if err != nil {
			return err
		}
		if s.o.Refit {
			loss = s.refit(g)
		}
		finish(fixed, loss)
		return nil
	}
	if target >= r0 {
		finish(s.lambdaMax(g), r0*r0/2)
		s.o.Log.Info("recovery: the residual target is met by the zero matrix", "target", target, "norm", r0)
		return nil
	}
	lmax := s.lambdaMax(g)
	hi, lo := lmax, 0.0
	var loLoss, loMu float64
	var loF factors
	var loBu, loBi []float64
	saveLo := func() {
		if s.bu != nil {
			loBu, loBi = append(loBu[:0], s.bu...), append(loBi[:0], s.bi...)
		}
	}
	restoreLo := func() {
		s.cur, s.mu = loF, loMu
		if s.bu != nil {
			copy(s.bu, loBu)
			copy(s.bi, loBi)
		}
	}
	lambda := lmax
	for lambda > lmax*1e-8 {
		lambda *= 0.5
		loss, err := s.solve(ctx, lambda, g, s.o.MaxIter, s.o.Tol)
		if err != nil {
			return err
		}
		r := math.Sqrt(2 * loss)
		s.o.Log.Debug("recovery: path", "lambda", lambda, "residual", r, "target", target, "rank", s.cur.rank())
		if r <= target {
			lo, loLoss, loF, loMu = lambda, loss, s.cur, s.mu
			saveLo()
			break
		}
		hi = lambda
	}
	if lo == 0 {
		return fmt.Errorf("recovery: no λ ≥ %.3g reaches the residual target %.4g (rank cap %d too low?)", lambda, target, s.o.MaxRank)
	}
	for range 8 {
		if math.Abs(math.Sqrt(2*loLoss)-target) <= 1e-3*target {
			break
		}
		mid := math.Sqrt(lo * hi)
		loss, err := s.solve(ctx, mid, g, s.o.MaxIter, s.o.Tol)
		if err != nil {
			return err
		}
		if math.Sqrt(2*loss) <= target {
			lo, loLoss, loF, loMu = mid, loss, s.cur, s.mu
			saveLo()
		} else {
			hi = mid
			restoreLo()
		}
	}
	restoreLo()
	finish(lo, loLoss)
	return nil
}

// refit re-estimates the singular values of the current low-rank part by
// least squares on the selected subspaces (U, V fixed), alternating with
// the offset and biases: nuclear-norm shrinkage selects the subspaces at
// the noise level but also shrinks every kept singular value by λ; the
// refit removes that shrinkage (the "relaxed" estimator, as the relaxed
// lasso refits the lasso's support). Cost O(|Ω|·k²) per round.
func (s *solver) refit(g []float64) float64 {
	p := s.p
	k := s.cur.rank()
	y := make([]float64, len(p.Z))
	if k == 0 {
		return s.residual(nil, g)
	}
	ud, vd := s.cur.U.RawMatrix().Data, s.cur.V.RawMatrix().Data
	for range 3 {
		s.predict(s.cur, y)
		s.updateMu(y, g)
		s.residual(nil, g) // g = β(Z − α − β(μ + b)): the part L must explain, times β
		hs := make([][]float64, len(s.chunks))
		rs := make([][]float64, len(s.chunks))
		s.parallel(func(w, lo, hi int) {
			h := make([]float64, k*k)
			r := make([]float64, k)
			f := make([]float64, k)
			for i := lo; i < hi; i++ {
				ui := ud[i*k : i*k+k]
				for e := p.Ptr[i]; e < p.Ptr[i+1]; e++ {
					vj := vd[int(p.Col[e])*k : int(p.Col[e])*k+k]
					b := 1.0
					if s.beta != nil {
						b = s.beta[e]
					}
					for c := range k {
						f[c] = ui[c] * vj[c]
						r[c] += g[e] * f[c]
					}
					b2 := b * b
					for c := range k {
						fc := b2 * f[c]
						hc := h[c*k : c*k+k]
						for d := c; d < k; d++ {
							hc[d] += fc * f[d]
						}
					}
				}
			}
			hs[w], rs[w] = h, r
		})
		H := mat.NewSymDense(k, nil)
		rhs := mat.NewVecDense(k, nil)
		for w := range hs {
			for c := range k {
				rhs.SetVec(c, rhs.AtVec(c)+rs[w][c])
				for d := c; d < k; d++ {
					H.SetSym(c, d, H.At(c, d)+hs[w][c*k+d])
				}
			}
		}
		var ch mat.Cholesky
		if !ch.Factorize(H) {
			break // singular: keep the shrunk values
		}
		var sv mat.VecDense
		if err := ch.SolveVecTo(&sv, rhs); err != nil {
			break
		}
		for c := range k {
			s.cur.S[c] = sv.AtVec(c)
		}
	}
	s.predict(s.cur, y)
	s.updateMu(y, g)
	return s.residual(y, g)
}
