// Package completion fits CP and Tucker models to a sparse 3-way tensor by
// stochastic gradient descent, as in seed 004 ("differentially private
// tensor completion"), with the seed's three mechanisms — input
// perturbation (IP), gradient perturbation (GP) and output perturbation
// (OP) — and a sound DP-SGD variant. Guarantee describes, honestly, what
// each configuration provably gives.
//
// Updates. For an observed entry x_ijk with error e = x_ijk − x̂_ijk, every
// parameter row touched moves against the gradient of
// ½e² + ½λ‖row‖² (the seed's per-entry SGD; the factor 2 of the squared
// loss is absorbed in the learning rate):
//
//	CP:     a_i ← a_i + η(e·(b_j ∘ c_k) − λ a_i), likewise b_j, c_k
//	Tucker: a_i ← a_i + η(e·∂x̂/∂a_i − λ_o a_i), likewise b_j, c_k;
//	        G ← G + η(e·(a_i ⊗ b_j ⊗ c_k) − λ_g G)
//
// Order and parallelism. Each pass visits every training entry once, in a
// stratified order (Gemulla et al.'s DSGD): every mode's indices are split
// in two halves of about equal entry count, giving 8 blocks; the 4 pairs of
// blocks that share no index in any mode are visited in a random order, and
// the two blocks of a pair are processed at the same time by two goroutines
// (each in its own random order). The two blocks touch disjoint factor rows,
// so the result does not depend on the number of workers: a seed gives the
// same model with one goroutine or two. The Tucker core, shared by all
// entries, is updated on a private copy per block and the two copies'
// changes are added after each pair.
package completion

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/tensor"
)

// Mechanism names a privacy mechanism.
type Mechanism string

const (
	// NoMechanism trains without noise.
	NoMechanism Mechanism = ""
	// IP perturbs the observed entries with Laplace noise of scale
	// (Hi − Lo)/ε before training (seed Algorithm 1).
	IP Mechanism = "ip"
	// GP clips each gradient row of C to norm Clip and adds ℓ2-Laplace noise
	// with Δ = 2·Clip at every update (seed Algorithm 2).
	GP Mechanism = "gp"
	// OP adds ℓ2-Laplace noise with Δ = 2·τ·L·η to every row of the trained
	// C (seed Algorithm 3); L = Clip, enforced by clipping C's gradient rows.
	OP Mechanism = "op"
	// DPSGD clips each entry's whole gradient to norm Clip, sums a batch,
	// and adds Gaussian noise to every parameter (sound, zCDP-accounted).
	DPSGD Mechanism = "dpsgd"
)

// Config holds the solver's and the mechanism's parameters.
type Config struct {
	Kind tensor.Kind
	// Rank is d: CP components, or the Tucker core's side.
	Rank   int
	Passes int
	// LR is the per-entry learning rate η.
	LR float64
	// Lambda is λ (CP) or λ_o (Tucker factors); LambdaG is λ_g (core).
	Lambda, LambdaG float64
	// InitScale is the standard deviation of the N(0, InitScale²) initial
	// factor (and core) entries.
	InitScale float64
	// Workers is 1 or 2 goroutines (0: 2). Results do not depend on it.
	Workers int

	Mechanism      Mechanism
	Epsilon, Delta float64
	// Clip is m for GP, L for OP, the per-entry clip for DP-SGD.
	Clip float64
	// Lo and Hi bound the data values (IP's sensitivity is Hi − Lo; values
	// are clamped into [Lo, Hi] before noise so that the bound holds).
	Lo, Hi float64
	// ClampNoisy clamps IP's noisy values back into [Lo, Hi] (the seed's
	// optional clamp; post-processing).
	ClampNoisy bool
	// Batch is DP-SGD's batch size (0: all training entries, one step per pass).
	Batch int
}

// Defaults returns the seed's synthetic-data settings for a decomposition:
// rank 3, 100 passes, CP λ = 0.01, η = 0.005; Tucker λ_o = 0.001,
// λ_g = 0.0001, η = 0.005.
func Defaults(kind tensor.Kind) Config {
	c := Config{Kind: kind, Rank: 3, Passes: 100, LR: 0.005, Lambda: 0.01, InitScale: 0.5, Workers: 2, Clip: 1, Lo: 0, Hi: 1}
	if kind == tensor.Tucker {
		c.Lambda, c.LambdaG = 0.001, 0.0001
	}
	return c
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if _, err := tensor.ParseKind(string(c.Kind)); err != nil {
		return err
	}
	bad := func(name string, v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }
	switch {
	case c.Rank <= 0 || c.Rank > 64:
		return fmt.Errorf("completion: rank %d not in 1..64", c.Rank)
	case c.Passes <= 0:
		return fmt.Errorf("completion: passes %d must be positive", c.Passes)
	case bad("lr", c.LR) || c.LR == 0:
		return fmt.Errorf("completion: learning rate %v must be positive and finite", c.LR)
	case bad("lambda", c.Lambda) || bad("lambda-g", c.LambdaG):
		return fmt.Errorf("completion: regularisation λ = %v, λ_g = %v must be ≥ 0 and finite", c.Lambda, c.LambdaG)
	case bad("init", c.InitScale) || c.InitScale == 0:
		return fmt.Errorf("completion: init scale %v must be positive", c.InitScale)
	case c.Workers < 0 || c.Workers > 2:
		return fmt.Errorf("completion: workers %d not in 0..2", c.Workers)
	}
	switch c.Mechanism {
	case NoMechanism:
		return nil
	case IP, GP, OP, DPSGD:
	default:
		return fmt.Errorf("completion: unknown mechanism %q", c.Mechanism)
	}
	if !(c.Epsilon >= 0x1p-50) || math.IsInf(c.Epsilon, 0) {
		return fmt.Errorf("completion: ε = %v must be finite and at least 2^-50", c.Epsilon)
	}
	switch c.Mechanism {
	case IP:
		if math.IsNaN(c.Lo) || math.IsNaN(c.Hi) || math.IsInf(c.Lo, 0) || math.IsInf(c.Hi, 0) || !(c.Lo < c.Hi) {
			return fmt.Errorf("completion: IP needs a finite value range Lo < Hi, got [%v, %v]", c.Lo, c.Hi)
		}
	case GP, OP, DPSGD:
		if bad("clip", c.Clip) || c.Clip == 0 {
			return fmt.Errorf("completion: clip %v must be positive and finite", c.Clip)
		}
	}
	if c.Mechanism == DPSGD && !(c.Delta > 0 && c.Delta < 1) {
		return fmt.Errorf("completion: DP-SGD needs 0 < δ < 1, got %v", c.Delta)
	}
	if c.Batch < 0 {
		return fmt.Errorf("completion: batch %d must be ≥ 0", c.Batch)
	}
	return nil
}

// Model is a fitted CP or Tucker model: factor matrices A (n1 × d),
// B (n2 × d), C (n3 × d), row-major, and for Tucker the core G
// (d × d × d, index (p·d + q)·d + t).
type Model struct {
	Kind    tensor.Kind
	Rank    int
	Dims    [3]int
	A, B, C []float64
	G       []float64
}

// Predict is the model value at (i, j, k).
func (m *Model) Predict(i, j, k int) float64 {
	d := m.Rank
	return tensor.Eval(m.Kind, d, m.A[i*d:i*d+d], m.B[j*d:j*d+d], m.C[k*d:k*d+d], m.G)
}

// RMSE is the root mean squared error of the model on t's entries.
func (m *Model) RMSE(t *tensor.Tensor) float64 {
	if t.Len() == 0 {
		return math.NaN()
	}
	var s float64
	for e := range t.Len() {
		r := t.Val[e] - m.Predict(int(t.I[e]), int(t.J[e]), int(t.K[e]))
		s += r * r
	}
	return math.Sqrt(s / float64(t.Len()))
}

// Info reports what a training run did.
type Info struct {
	// Updates is the number of per-entry updates (passes × entries), or for
	// DP-SGD the number of noisy batch steps.
	Updates int `json:"updates"`
	// NoiseScale is IP's Laplace scale, GP's and OP's ℓ2-Laplace scale
	// (Δ/ε), or DP-SGD's noise standard deviation (σ·Clip).
	NoiseScale float64 `json:"noise_scale,omitempty"`
	// Sensitivity is the Δ the noise was calibrated to.
	Sensitivity float64 `json:"sensitivity,omitempty"`
	// Sigma is DP-SGD's noise multiplier, Rho its total zCDP.
	Sigma float64 `json:"sigma,omitempty"`
	Rho   float64 `json:"rho,omitempty"`
	Batch int     `json:"batch,omitempty"`
	// ClippedFraction is the share of gradients the clip shortened.
	ClippedFraction float64 `json:"clipped_fraction,omitempty"`
	// TrainRMSE is the fit to the (possibly noisy) training values.
	TrainRMSE float64 `json:"train_rmse"`
}

// Train fits a model to t. rnd drives initialisation and shuffling, nz the
// privacy noise (it must be noise.Secure() for a real release). progress,
// when non-nil, is called after each pass.
func Train(ctx context.Context, t *tensor.Tensor, cfg Config, rnd, nz *noise.Source, progress func(done, total int)) (*Model, *Info, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if t.Len() == 0 {
		return nil, nil, fmt.Errorf("completion: no training entries")
	}
	if err := t.Validate(); err != nil {
		return nil, nil, err
	}
	if rnd == nil || (cfg.Mechanism != NoMechanism && nz == nil) {
		return nil, nil, fmt.Errorf("completion: missing random source")
	}
	m := initModel(cfg, t.Dims, rnd)
	info := &Info{}
	data := t
	if cfg.Mechanism == IP {
		data, info.NoiseScale = PerturbInput(t, cfg.Lo, cfg.Hi, cfg.Epsilon, cfg.ClampNoisy, nz)
		info.Sensitivity = cfg.Hi - cfg.Lo
	}
	var err error
	if cfg.Mechanism == DPSGD {
		err = trainDPSGD(ctx, data, cfg, m, rnd, nz, info, progress)
	} else {
		err = trainSGD(ctx, data, cfg, m, rnd, nz, info, progress)
	}
	if err != nil {
		return nil, nil, err
	}
	if cfg.Mechanism == OP {
		info.Sensitivity = OPSensitivity(cfg)
		info.NoiseScale = info.Sensitivity / cfg.Epsilon
		PerturbOutput(m, info.Sensitivity, cfg.Epsilon, nz)
	}
	for _, f := range [][]float64{m.A, m.B, m.C, m.G} {
		for _, v := range f {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, nil, fmt.Errorf("completion: SGD diverged (non-finite parameters); lower the learning rate%s", map[bool]string{true: " or raise ε", false: ""}[cfg.Mechanism != NoMechanism])
			}
		}
	}
	info.TrainRMSE = m.RMSE(data)
	return m, info, nil
}

func initModel(cfg Config, dims [3]int, rnd *noise.Source) *Model {
	d := cfg.Rank
	m := &Model{Kind: cfg.Kind, Rank: d, Dims: dims}
	fill := func(n int) []float64 {
		f := make([]float64, n)
		for x := range f {
			f[x] = cfg.InitScale * rnd.NormFloat64()
		}
		return f
	}
	m.A, m.B, m.C = fill(dims[0]*d), fill(dims[1]*d), fill(dims[2]*d)
	if cfg.Kind == tensor.Tucker {
		m.G = fill(d * d * d)
	}
	return m
}

// PerturbInput is IP (seed Algorithm 1): every observed value is clamped
// into [lo, hi] (so one value can change by at most Δ = hi − lo) and gets
// independent Laplace noise of scale Δ/ε; with clamp, the noisy value is
// clamped back into [lo, hi]. It returns the noisy copy and the scale.
//
// TODO(privacy-core): draw from privacy/mechanism's snapped Laplace once it
// lands; noise.Laplace is a plain floating-point sampler (Mironov 2012).
func PerturbInput(t *tensor.Tensor, lo, hi, eps float64, clamp bool, nz *noise.Source) (*tensor.Tensor, float64) {
	scale := (hi - lo) / eps
	out := t.Clone()
	for e, v := range out.Val {
		v = min(max(v, lo), hi) + noise.Laplace(nz, scale)
		if clamp {
			v = min(max(v, lo), hi)
		}
		out.Val[e] = v
	}
	return out, scale
}

// OPSensitivity is the seed's output-perturbation sensitivity
// Δ = 2·τ·L·η (Lemma 3 with τ passes, L = Clip, η = LR).
func OPSensitivity(cfg Config) float64 { return 2 * float64(cfg.Passes) * cfg.Clip * cfg.LR }

// PerturbOutput is OP's release step (seed Algorithm 3): ℓ2-Laplace noise
// with density ∝ exp(−ε‖n‖/Δ) is added to every row of C.
func PerturbOutput(m *Model, delta, eps float64, nz *noise.Source) {
	d := m.Rank
	dir := make([]float64, d)
	for k := range m.Dims[2] {
		addL2Laplace(nz, m.C[k*d:k*d+d], dir, delta/eps)
	}
}

// addL2Laplace adds noise with density ∝ exp(−‖n‖₂/scale): a Gamma(d, scale)
// radius in a uniform direction. It is noise.AddL2Laplace with a caller
// buffer, because GP draws one vector per update (millions per run).
// TODO(privacy-core): switch to privacy/mechanism's ℓ2 Laplace once it has
// an allocation-free form.
func addL2Laplace(nz *noise.Source, x, dir []float64, scale float64) {
	noise.Sphere(nz, dir)
	r := noise.Gamma(nz, float64(len(x)), scale)
	for i := range x {
		x[i] += r * dir[i]
	}
}

// clipTo shortens g to ℓ2 norm at most c (g ← g / max(1, ‖g‖/c)) and
// reports whether it did.
func clipTo(g []float64, c float64) bool {
	var s float64
	for _, v := range g {
		s += v * v
	}
	if s <= c*c {
		return false
	}
	f := c / math.Sqrt(s)
	for i := range g {
		g[i] *= f
	}
	return true
}

// plan is the stratified visiting order: blocks[b] lists entry indices of
// block b = 4·g1 + 2·g2 + g3, where g_m is the half of mode m.
type plan struct{ blocks [8][]int32 }

// strata pairs blocks that share no index in any mode.
var strata = [4][2]int{{0, 7}, {1, 6}, {2, 5}, {3, 4}}

func makePlan(t *tensor.Tensor) *plan {
	var cut [3]int32
	for mode, idx := range [3][]int32{t.I, t.J, t.K} {
		counts := make([]int, t.Dims[mode])
		for _, i := range idx {
			counts[i]++
		}
		// first index where the cumulative count reaches half
		half, acc := (t.Len()+1)/2, 0
		cut[mode] = int32(t.Dims[mode])
		for i, c := range counts {
			acc += c
			if acc >= half {
				cut[mode] = int32(i + 1)
				break
			}
		}
	}
	p := &plan{}
	for e := range t.Len() {
		b := 0
		if t.I[e] >= cut[0] {
			b += 4
		}
		if t.J[e] >= cut[1] {
			b += 2
		}
		if t.K[e] >= cut[2] {
			b++
		}
		p.blocks[b] = append(p.blocks[b], int32(e))
	}
	return p
}

// worker holds one goroutine's scratch space.
type worker struct {
	cfg      Config
	t        *tensor.Tensor
	m        *Model
	g        []float64 // this block's copy of the core (Tucker)
	ga, gb   []float64
	gc, dir  []float64
	tq       []float64
	rnd, nz  *noise.Source
	clipped  int
	gpScale  float64
	clipRows bool
}

func newWorker(cfg Config, t *tensor.Tensor, m *Model) *worker {
	d := cfg.Rank
	w := &worker{cfg: cfg, t: t, m: m, ga: make([]float64, d), gb: make([]float64, d), gc: make([]float64, d),
		dir: make([]float64, d), tq: make([]float64, d*d)}
	if cfg.Kind == tensor.Tucker {
		w.g = make([]float64, d*d*d)
	}
	w.clipRows = cfg.Mechanism == GP || cfg.Mechanism == OP
	if cfg.Mechanism == GP {
		w.gpScale = 2 * cfg.Clip / cfg.Epsilon
	}
	return w
}

// run processes one block in a random order.
func (w *worker) run(ctx context.Context, block []int32) error {
	w.rnd.Shuffle(len(block), func(a, b int) { block[a], block[b] = block[b], block[a] })
	for n, e := range block {
		if n&4095 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if w.cfg.Kind == tensor.CP {
			w.stepCP(int(e))
		} else {
			w.stepTucker(int(e))
		}
	}
	return nil
}

// finishC applies C's gradient row (already holding e·∂x̂/∂c − λc negated
// as a descent direction's opposite): GP and OP clip it, GP adds noise.
func (w *worker) updateC(c []float64) {
	g := w.gc // gradient of the loss (to be subtracted)
	if w.clipRows {
		if clipTo(g, w.cfg.Clip) {
			w.clipped++
		}
		if w.gpScale > 0 {
			addL2Laplace(w.nz, g, w.dir, w.gpScale)
		}
	}
	eta := w.cfg.LR
	for r := range c {
		c[r] -= eta * g[r]
	}
}

func (w *worker) stepCP(e int) {
	t, m, d := w.t, w.m, w.cfg.Rank
	i, j, k := int(t.I[e]), int(t.J[e]), int(t.K[e])
	a, b, c := m.A[i*d:i*d+d], m.B[j*d:j*d+d], m.C[k*d:k*d+d]
	var pred float64
	for r := range d {
		pred += a[r] * b[r] * c[r]
	}
	err := t.Val[e] - pred
	lam, eta := w.cfg.Lambda, w.cfg.LR
	for r := range d {
		w.gc[r] = -err*a[r]*b[r] + lam*c[r]
		ga := -err*b[r]*c[r] + lam*a[r]
		gb := -err*a[r]*c[r] + lam*b[r]
		a[r] -= eta * ga
		b[r] -= eta * gb
	}
	w.updateC(c)
}

func (w *worker) stepTucker(e int) {
	t, m, d := w.t, w.m, w.cfg.Rank
	i, j, k := int(t.I[e]), int(t.J[e]), int(t.K[e])
	a, b, c := m.A[i*d:i*d+d], m.B[j*d:j*d+d], m.C[k*d:k*d+d]
	G := w.g
	// tq[p,q] = Σ_t g_pqt c_t
	for pq := range d * d {
		var s float64
		row := G[pq*d : pq*d+d]
		for r := range d {
			s += row[r] * c[r]
		}
		w.tq[pq] = s
	}
	var pred float64
	for p := range d {
		var s float64
		for q := range d {
			s += w.tq[p*d+q] * b[q]
		}
		w.ga[p] = s // ∂x̂/∂a_p
		pred += a[p] * s
	}
	for q := range d {
		var s float64
		for p := range d {
			s += a[p] * w.tq[p*d+q]
		}
		w.gb[q] = s // ∂x̂/∂b_q
	}
	clear(w.gc)
	for p := range d {
		for q := range d {
			ab := a[p] * b[q]
			row := G[(p*d+q)*d : (p*d+q)*d+d]
			for r := range d {
				w.gc[r] += ab * row[r] // ∂x̂/∂c_t
			}
		}
	}
	err := t.Val[e] - pred
	lo, lg, eta := w.cfg.Lambda, w.cfg.LambdaG, w.cfg.LR
	// core update uses the old a, b, c
	for p := range d {
		for q := range d {
			ab := err * a[p] * b[q]
			row := G[(p*d+q)*d : (p*d+q)*d+d]
			for r := range d {
				row[r] -= eta * (-ab*c[r] + lg*row[r])
			}
		}
	}
	for r := range d {
		w.gc[r] = -err*w.gc[r] + lo*c[r]
		a[r] -= eta * (-err*w.ga[r] + lo*a[r])
		b[r] -= eta * (-err*w.gb[r] + lo*b[r])
	}
	w.updateC(c)
}

func trainSGD(ctx context.Context, t *tensor.Tensor, cfg Config, m *Model, rnd, nz *noise.Source, info *Info, progress func(done, total int)) error {
	p := makePlan(t)
	ws := [2]*worker{newWorker(cfg, t, m), newWorker(cfg, t, m)}
	parallel := cfg.Workers != 1
	for pass := range cfg.Passes {
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, s := range rnd.Perm(len(strata)) {
			for h, w := range ws {
				w.rnd = rnd.Split()
				if cfg.Mechanism == GP {
					w.nz = nz.Split()
				}
				if w.g != nil {
					copy(w.g, m.G)
				}
				_ = h
			}
			var errs [2]error
			if parallel {
				var wg sync.WaitGroup
				for h, w := range ws {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[h] = w.run(ctx, p.blocks[strata[s][h]])
					}()
				}
				wg.Wait()
			} else {
				for h, w := range ws {
					errs[h] = w.run(ctx, p.blocks[strata[s][h]])
				}
			}
			for _, err := range errs {
				if err != nil {
					return err
				}
			}
			if m.G != nil { // G ← G + ΔG₀ + ΔG₁
				for x := range m.G {
					m.G[x] = ws[0].g[x] + ws[1].g[x] - m.G[x]
				}
			}
		}
		if progress != nil {
			progress(pass+1, cfg.Passes)
		}
	}
	info.Updates = cfg.Passes * t.Len()
	if cfg.Mechanism == GP || cfg.Mechanism == OP {
		info.ClippedFraction = float64(ws[0].clipped+ws[1].clipped) / float64(info.Updates)
	}
	if cfg.Mechanism == GP {
		info.Sensitivity = 2 * cfg.Clip
		info.NoiseScale = ws[0].gpScale
	}
	return nil
}
