package completion

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/tensor"
)

// DP-SGD (beyond the seed). Each pass partitions the training entries into
// batches by a random permutation of their positions. For every entry of a
// batch the gradient of ½e² with respect to all the parameters it touches
// (a_i, b_j, c_k and, for Tucker, G) is clipped jointly to ℓ2 norm Clip; the
// batch's clipped gradients are summed and N(0, (σ·Clip)²) noise is added to
// every coordinate of every parameter (rows the batch did not touch
// included); then θ ← θ − η·(sum + noise). Regularisation is applied as a
// decay (1 − ηλ) per visit of a row, which depends only on positions.
//
// Privacy (neighbours: one rating's value changes, positions public). The
// permutation and batches depend only on positions, so in each pass the
// changed entry lies in exactly one batch, whose clipped sum moves by at
// most 2·Clip in ℓ2; every other batch sum is a function of the data it
// contains and of earlier noisy releases. One pass is therefore a Gaussian
// release with ρ = (2·Clip)²/(2σ²) (zCDP, adaptive parallel composition
// over disjoint batches; privacy/mechanism's lattice Gaussian, whose ρ also
// prices the rounding), τ passes compose to τ·ρ (privacy/accountant), and
// the whole trajectory — every factor and the core — is post-processing.
// σ is calibrated so that the τ passes' ρ converts to the requested (ε, δ)
// by the tight conversion.
func trainDPSGD(ctx context.Context, t *tensor.Tensor, cfg Config, cal *calibration, m *Model, rnd, nz *noise.Source, info *Info, progress func(done, total int)) error {
	mech := cal.sgd
	n := t.Len()
	batch := cfg.Batch
	if batch == 0 || batch > n {
		batch = n
	}
	info.Sigma, info.Batch = mech.Sigma()/cfg.Clip, batch
	info.Sensitivity = 2 * cfg.Clip
	info.NoiseScale = mech.Sigma()
	s := newDPSGD(t, cfg, m)
	steps := 0
	for pass := range cfg.Passes {
		perm := rnd.Perm(n)
		for lo := 0; lo < n; lo += batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := s.step(mech, nz, perm[lo:min(lo+batch, n)]); err != nil {
				return err
			}
			steps++
		}
		if progress != nil {
			progress(pass+1, cfg.Passes)
		}
	}
	info.Updates = steps
	info.Sweeps = cfg.Passes
	info.Lambda = cfg.Lambda
	return nil
}

// sgdLayout places every parameter in one vector: A, B, C, G, then (with
// biases) α, β, γ and μ.
type sgdLayout struct {
	d, nA, nB, nC, nG  int
	oA, oB, oC, oG     int
	oBias, nBias       int
	oBA, oBB, oBC, oMu int
	total              int
}

func newSGDLayout(m *Model, d int) sgdLayout {
	l := sgdLayout{d: d, nA: len(m.A), nB: len(m.B), nC: len(m.C), nG: len(m.G)}
	l.oA, l.oB, l.oC, l.oG = 0, l.nA, l.nA+l.nB, l.nA+l.nB+l.nC
	l.oBias = l.oG + l.nG
	if m.BA != nil {
		l.nBias = len(m.BA) + len(m.BB) + len(m.BC) + 1
	}
	l.oBA, l.oBB, l.oBC, l.oMu = l.oBias, l.oBias+len(m.BA), l.oBias+len(m.BA)+len(m.BB), l.oBias+l.nBias-1
	l.total = l.oBias + l.nBias
	return l
}

// entryGrad is scratch for one entry's partials ∂x̂/∂a_i, ∂x̂/∂b_j,
// ∂x̂/∂c_k and ∂x̂/∂G (then, scaled by −e, its gradient); tq is Tucker's
// d·d scratch.
type entryGrad struct{ a, b, c, g, tq []float64 }

func newEntryGrad(d, nG int) entryGrad {
	s := make([]float64, 3*d+nG+d*d)
	return entryGrad{a: s[:d], b: s[d : 2*d], c: s[2*d : 3*d], g: s[3*d : 3*d+nG], tq: s[3*d+nG:]}
}

// dpsgd is one DP-SGD run's state. Accumulators: one per half of a
// batch, summed in a fixed order so the result does not depend on the
// number of goroutines. curv holds the diagonal Gauss–Newton curvature
// Σ (∂x̂/∂θ)² of the preconditioned update: it depends on the positions
// and the current (already released) parameters only, never on a rating
// value.
type dpsgd struct {
	t   *tensor.Tensor
	cfg Config
	m   *Model
	sgdLayout
	params  []float64
	acc     [2][]float64
	curv    [2][]float64
	scratch [2]entryGrad
}

func newDPSGD(t *tensor.Tensor, cfg Config, m *Model) *dpsgd {
	l := newSGDLayout(m, cfg.Rank)
	s := &dpsgd{t: t, cfg: cfg, m: m, sgdLayout: l, params: make([]float64, l.total)}
	s.acc = [2][]float64{make([]float64, l.total), make([]float64, l.total)}
	if cfg.Precondition {
		s.curv = [2][]float64{make([]float64, l.total), make([]float64, l.total)}
	}
	s.scratch = [2]entryGrad{newEntryGrad(l.d, l.nG), newEntryGrad(l.d, l.nG)}
	return s
}

// step is one noisy step on the batch idx: the statistic (the batch's
// clipped gradient sum) released once, then post-processing.
func (s *dpsgd) step(mech *mechanism.Gaussian, nz *noise.Source, idx []int) error {
	sum := s.clippedSum(idx)
	if err := mech.Release(nz, sum); err != nil {
		if errors.Is(err, mechanism.ErrData) {
			return errDiverged(s.cfg)
		}
		return fmt.Errorf("completion: DP-SGD noise: %w", err)
	}
	// Everything below is post-processing of the noisy sum.
	if s.cfg.Precondition {
		s.preconditionedStep(sum)
	} else {
		s.plainStep(sum, idx)
	}
	return nil
}

// clippedSum returns the sum of the batch's clipped gradients (and fills
// the curvature halves): two halves of the batch, by two goroutines
// unless Workers is 1, added in a fixed order.
func (s *dpsgd) clippedSum(idx []int) []float64 {
	half := len(idx) / 2
	for h := range 2 {
		clear(s.acc[h])
		if s.curv[h] != nil {
			clear(s.curv[h])
		}
	}
	if s.cfg.Workers != 1 {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); s.accumulate(1, idx[half:]) }()
		s.accumulate(0, idx[:half])
		wg.Wait()
	} else {
		s.accumulate(0, idx[:half])
		s.accumulate(1, idx[half:])
	}
	sum := s.acc[0]
	for x := range sum {
		sum[x] += s.acc[1][x]
	}
	return sum
}

// accumulate adds the clipped gradients of the entries idx (and their
// curvature) to half h's accumulators.
func (s *dpsgd) accumulate(h int, idx []int) {
	g, cv, eg := s.acc[h], s.curv[h], s.scratch[h]
	for _, e := range idx {
		i, j, k := int(s.t.I[e]), int(s.t.J[e]), int(s.t.K[e])
		pred := s.partials(i, j, k, eg)
		if cv != nil {
			s.addCurvature(cv, i, j, k, eg)
		}
		err := s.t.Val[e] - pred
		f := s.toClippedGradient(err, eg)
		s.addScaled(g, i, j, k, f, err, eg)
	}
}

// partials fills eg with ∂x̂/∂θ at entry (i, j, k) and returns x̂.
func (s *dpsgd) partials(i, j, k int, eg entryGrad) float64 {
	d, m := s.d, s.m
	a, b, c := m.A[i*d:i*d+d], m.B[j*d:j*d+d], m.C[k*d:k*d+d]
	var pred float64
	if s.cfg.Kind == tensor.CP {
		for r := range d {
			eg.a[r], eg.b[r], eg.c[r] = b[r]*c[r], a[r]*c[r], a[r]*b[r]
			pred += a[r] * eg.a[r]
		}
	} else {
		tuckerPartials(d, m.G, a, b, c, eg.a, eg.b, eg.c, eg.g, eg.tq)
		for p := range d {
			pred += a[p] * eg.a[p]
		}
	}
	if s.nBias > 0 {
		pred += m.Offset + m.BA[i] + m.BB[j] + m.BC[k]
	}
	return pred
}

// addCurvature adds the squared partials at entry (i, j, k) to cv.
func (s *dpsgd) addCurvature(cv []float64, i, j, k int, eg entryGrad) {
	d := s.d
	for r := range d {
		cv[s.oA+i*d+r] += eg.a[r] * eg.a[r]
		cv[s.oB+j*d+r] += eg.b[r] * eg.b[r]
		cv[s.oC+k*d+r] += eg.c[r] * eg.c[r]
	}
	for x, v := range eg.g {
		cv[s.oG+x] += v * v
	}
	if s.nBias > 0 {
		cv[s.oBA+i]++
		cv[s.oBB+j]++
		cv[s.oBC+k]++
		cv[s.oMu]++
	}
}

// toClippedGradient turns the partials in eg into the gradient of ½e²
// (e the residual err) and returns the factor that clips the whole
// entry's gradient, biases included, to ℓ2 norm Clip.
func (s *dpsgd) toClippedGradient(err float64, eg entryGrad) float64 {
	var ss float64
	for r := range s.d {
		eg.a[r], eg.b[r], eg.c[r] = -err*eg.a[r], -err*eg.b[r], -err*eg.c[r]
		ss += eg.a[r]*eg.a[r] + eg.b[r]*eg.b[r] + eg.c[r]*eg.c[r]
	}
	for x := range eg.g {
		eg.g[x] *= -err
		ss += eg.g[x] * eg.g[x]
	}
	if s.nBias > 0 {
		ss += 4 * err * err // ∂/∂α_i, ∂/∂β_j, ∂/∂γ_k, ∂/∂μ are all −e
	}
	f := 1.0
	if clip := s.cfg.Clip; ss > clip*clip {
		f = clip / math.Sqrt(ss)
	}
	return f
}

// addScaled adds f times the entry's gradient in eg (biases: −e) to g.
func (s *dpsgd) addScaled(g []float64, i, j, k int, f, err float64, eg entryGrad) {
	d := s.d
	for r := range d {
		g[s.oA+i*d+r] += f * eg.a[r]
		g[s.oB+j*d+r] += f * eg.b[r]
		g[s.oC+k*d+r] += f * eg.c[r]
	}
	for x := range eg.g {
		g[s.oG+x] += f * eg.g[x]
	}
	if s.nBias > 0 {
		fe := -f * err
		g[s.oBA+i] += fe
		g[s.oBB+j] += fe
		g[s.oBC+k] += fe
		g[s.oMu] += fe
	}
}

// preconditionedStep divides each parameter's noisy sum by its curvature
// plus its ridge (the day rows shrunk toward dayPrior).
func (s *dpsgd) preconditionedStep(sum []float64) {
	cfg, d, params := s.cfg, s.d, s.params
	eta := cfg.LR
	cv := s.curv[0]
	for x := range cv {
		cv[x] += s.curv[1][x]
	}
	s.pack()
	update := func(from, to int, lam float64, prior func(x int) float64) {
		for x := from; x < to; x++ {
			p := params[x]
			if prior != nil {
				p -= prior(x)
			}
			params[x] -= eta * (sum[x] + lam*p) / (cv[x] + lam + 1e-12)
		}
	}
	update(s.oA, s.oB, cfg.Lambda, nil)
	update(s.oB, s.oC, cfg.Lambda, nil)
	update(s.oC, s.oG, cfg.Lambda, func(x int) float64 { return dayPrior(cfg.Kind, (x-s.oC)%d) })
	update(s.oG, s.oBias, cfg.LambdaG, nil)
	if s.nBias > 0 {
		update(s.oBA, s.oMu, cfg.BiasDamping, nil)
		update(s.oMu, s.oMu+1, 0, nil)
	}
	s.unpack()
}

// plainStep takes the step −η·sum, then the regularisation: a
// data-independent decay per visit of a row.
func (s *dpsgd) plainStep(sum []float64, idx []int) {
	m, d := s.m, s.d
	eta := s.cfg.LR
	s.pack()
	for x := range s.params {
		s.params[x] -= eta * sum[x]
	}
	s.unpack()
	decay := 1 - eta*s.cfg.Lambda
	for _, e := range idx {
		for _, row := range [][]float64{m.A[int(s.t.I[e])*d:][:d], m.B[int(s.t.J[e])*d:][:d], m.C[int(s.t.K[e])*d:][:d]} {
			for r := range row {
				row[r] *= decay
			}
		}
	}
	if m.G != nil {
		gd := math.Pow(1-eta*s.cfg.LambdaG, float64(len(idx)))
		for x := range m.G {
			m.G[x] *= gd
		}
	}
}

// pack copies the model into the parameter vector.
func (s *dpsgd) pack() {
	m, p := s.m, s.params
	copy(p[s.oA:], m.A)
	copy(p[s.oB:], m.B)
	copy(p[s.oC:], m.C)
	copy(p[s.oG:], m.G)
	if s.nBias > 0 {
		copy(p[s.oBA:], m.BA)
		copy(p[s.oBB:], m.BB)
		copy(p[s.oBC:], m.BC)
		p[s.oMu] = m.Offset
	}
}

// unpack copies the parameter vector into the model.
func (s *dpsgd) unpack() {
	m, p := s.m, s.params
	copy(m.A, p[s.oA:s.oA+s.nA])
	copy(m.B, p[s.oB:s.oB+s.nB])
	copy(m.C, p[s.oC:s.oC+s.nC])
	copy(m.G, p[s.oG:s.oG+s.nG])
	if s.nBias > 0 {
		copy(m.BA, p[s.oBA:s.oBA+len(m.BA)])
		copy(m.BB, p[s.oBB:s.oBB+len(m.BB)])
		copy(m.BC, p[s.oBC:s.oBC+len(m.BC)])
		m.Offset = p[s.oMu]
	}
}

// tuckerPartials fills ga, gb, gc with ∂x̂/∂a, ∂x̂/∂b, ∂x̂/∂c and gg with
// ∂x̂/∂G = a ⊗ b ⊗ c at one entry; tq is d·d scratch.
func tuckerPartials(d int, G, a, b, c, ga, gb, gc, gg, tq []float64) {
	for pq := range d * d {
		var s float64
		row := G[pq*d : pq*d+d]
		for r := range d {
			s += row[r] * c[r]
		}
		tq[pq] = s
	}
	contractCore(d, tq, a, b, ga, gb)
	clear(gc)
	for p := range d {
		for q := range d {
			ab := a[p] * b[q]
			row := G[(p*d+q)*d : (p*d+q)*d+d]
			grow := gg[(p*d+q)*d : (p*d+q)*d+d]
			for r := range d {
				gc[r] += ab * row[r]
				grow[r] = ab * c[r]
			}
		}
	}
}

// contractCore sets ga[p] = Σ_q T[p,q]·b[q] and gb[q] = Σ_p a[p]·T[p,q]
// for the d×d matrix T in tq (row-major): the partials of aᵀ·T·b in a and
// b, shared by the SGD steps of Tucker completion.
func contractCore(d int, tq, a, b, ga, gb []float64) {
	for p := range d {
		var s float64
		for q := range d {
			s += tq[p*d+q] * b[q]
		}
		ga[p] = s
	}
	for q := range d {
		var s float64
		for p := range d {
			s += a[p] * tq[p*d+q]
		}
		gb[q] = s
	}
}
