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
	d := cfg.Rank
	nA, nB, nC, nG := len(m.A), len(m.B), len(m.C), len(m.G)
	// Layout of the parameter vector: A, B, C, G, then (with biases) α, β,
	// γ and μ.
	oA, oB, oC, oG := 0, nA, nA+nB, nA+nB+nC
	oBias := oG + nG
	nBias := 0
	if m.BA != nil {
		nBias = len(m.BA) + len(m.BB) + len(m.BC) + 1
	}
	oBA, oBB, oBC, oMu := oBias, oBias+len(m.BA), oBias+len(m.BA)+len(m.BB), oBias+nBias-1
	total := oBias + nBias
	params := make([]float64, total)
	pack := func() {
		copy(params[oA:], m.A)
		copy(params[oB:], m.B)
		copy(params[oC:], m.C)
		copy(params[oG:], m.G)
		if nBias > 0 {
			copy(params[oBA:], m.BA)
			copy(params[oBB:], m.BB)
			copy(params[oBC:], m.BC)
			params[oMu] = m.Offset
		}
	}
	unpack := func() {
		copy(m.A, params[oA:oA+nA])
		copy(m.B, params[oB:oB+nB])
		copy(m.C, params[oC:oC+nC])
		copy(m.G, params[oG:oG+nG])
		if nBias > 0 {
			copy(m.BA, params[oBA:oBA+len(m.BA)])
			copy(m.BB, params[oBB:oBB+len(m.BB)])
			copy(m.BC, params[oBC:oBC+len(m.BC)])
			m.Offset = params[oMu]
		}
	}
	// Accumulators: one per half of a batch, summed in a fixed order so the
	// result does not depend on the number of goroutines. curv holds the
	// diagonal Gauss–Newton curvature Σ (∂x̂/∂θ)² of the preconditioned
	// update: it depends on the positions and the current (already
	// released) parameters only, never on a rating value.
	acc := [2][]float64{make([]float64, total), make([]float64, total)}
	var curv [2][]float64
	if cfg.Precondition {
		curv = [2][]float64{make([]float64, total), make([]float64, total)}
	}
	scratch := [2][]float64{make([]float64, 3*d+nG+d*d), make([]float64, 3*d+nG+d*d)}
	accumulate := func(h int, idx []int) {
		g := acc[h]
		s := scratch[h]
		ga, gb, gc, gg, tq := s[:d], s[d:2*d], s[2*d:3*d], s[3*d:3*d+nG], s[3*d+nG:]
		for _, e := range idx {
			i, j, k := int(t.I[e]), int(t.J[e]), int(t.K[e])
			a, b, c := m.A[i*d:i*d+d], m.B[j*d:j*d+d], m.C[k*d:k*d+d]
			var pred float64
			if cfg.Kind == tensor.CP {
				for r := range d {
					ga[r], gb[r], gc[r] = b[r]*c[r], a[r]*c[r], a[r]*b[r]
					pred += a[r] * ga[r]
				}
			} else {
				tuckerPartials(d, m.G, a, b, c, ga, gb, gc, gg, tq)
				for p := range d {
					pred += a[p] * ga[p]
				}
			}
			if nBias > 0 {
				pred += m.Offset + m.BA[i] + m.BB[j] + m.BC[k]
			}
			if curv[h] != nil {
				cv := curv[h]
				for r := range d {
					cv[oA+i*d+r] += ga[r] * ga[r]
					cv[oB+j*d+r] += gb[r] * gb[r]
					cv[oC+k*d+r] += gc[r] * gc[r]
				}
				for x, v := range gg {
					cv[oG+x] += v * v
				}
				if nBias > 0 {
					cv[oBA+i]++
					cv[oBB+j]++
					cv[oBC+k]++
					cv[oMu]++
				}
			}
			err := t.Val[e] - pred
			var ss float64
			for r := range d {
				ga[r], gb[r], gc[r] = -err*ga[r], -err*gb[r], -err*gc[r]
				ss += ga[r]*ga[r] + gb[r]*gb[r] + gc[r]*gc[r]
			}
			for x := range gg {
				gg[x] *= -err
				ss += gg[x] * gg[x]
			}
			if nBias > 0 {
				ss += 4 * err * err // ∂/∂α_i, ∂/∂β_j, ∂/∂γ_k, ∂/∂μ are all −e
			}
			f := 1.0
			if ss > cfg.Clip*cfg.Clip {
				f = cfg.Clip / math.Sqrt(ss)
			}
			for r := range d {
				g[oA+i*d+r] += f * ga[r]
				g[oB+j*d+r] += f * gb[r]
				g[oC+k*d+r] += f * gc[r]
			}
			for x := range gg {
				g[oG+x] += f * gg[x]
			}
			if nBias > 0 {
				fe := -f * err
				g[oBA+i] += fe
				g[oBB+j] += fe
				g[oBC+k] += fe
				g[oMu] += fe
			}
		}
	}
	parallel := cfg.Workers != 1
	steps := 0
	for pass := range cfg.Passes {
		perm := rnd.Perm(n)
		for lo := 0; lo < n; lo += batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			idx := perm[lo:min(lo+batch, n)]
			half := len(idx) / 2
			for h := range 2 {
				clear(acc[h])
				if curv[h] != nil {
					clear(curv[h])
				}
			}
			if parallel {
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { defer wg.Done(); accumulate(1, idx[half:]) }()
				accumulate(0, idx[:half])
				wg.Wait()
			} else {
				accumulate(0, idx[:half])
				accumulate(1, idx[half:])
			}
			sum := acc[0]
			for x := range sum {
				sum[x] += acc[1][x]
			}
			if err := mech.Release(nz, sum); err != nil {
				if errors.Is(err, mechanism.ErrData) {
					return errDiverged(cfg)
				}
				return fmt.Errorf("completion: DP-SGD noise: %w", err)
			}
			// Everything below is post-processing of the noisy sum.
			eta := cfg.LR
			if cfg.Precondition {
				cv := curv[0]
				for x := range cv {
					cv[x] += curv[1][x]
				}
				pack()
				update := func(from, to int, lam float64, prior func(x int) float64) {
					for x := from; x < to; x++ {
						p := params[x]
						if prior != nil {
							p -= prior(x)
						}
						params[x] -= eta * (sum[x] + lam*p) / (cv[x] + lam + 1e-12)
					}
				}
				update(oA, oB, cfg.Lambda, nil)
				update(oB, oC, cfg.Lambda, nil)
				update(oC, oG, cfg.Lambda, func(x int) float64 { return dayPrior(cfg.Kind, (x-oC)%d) })
				update(oG, oBias, cfg.LambdaG, nil)
				if nBias > 0 {
					update(oBA, oMu, cfg.BiasDamping, nil)
					update(oMu, oMu+1, 0, nil)
				}
				unpack()
			} else {
				for x := range nA {
					m.A[x] -= eta * sum[x]
				}
				for x := range nB {
					m.B[x] -= eta * sum[nA+x]
				}
				for x := range nC {
					m.C[x] -= eta * sum[nA+nB+x]
				}
				for x := range m.G {
					m.G[x] -= eta * sum[nA+nB+nC+x]
				}
				if nBias > 0 {
					for x := range m.BA {
						m.BA[x] -= eta * sum[oBA+x]
					}
					for x := range m.BB {
						m.BB[x] -= eta * sum[oBB+x]
					}
					for x := range m.BC {
						m.BC[x] -= eta * sum[oBC+x]
					}
					m.Offset -= eta * sum[oMu]
				}
				// Regularisation: a data-independent decay per visit of a row.
				decay := 1 - eta*cfg.Lambda
				for _, e := range idx {
					for _, row := range [][]float64{m.A[int(t.I[e])*d:][:d], m.B[int(t.J[e])*d:][:d], m.C[int(t.K[e])*d:][:d]} {
						for r := range row {
							row[r] *= decay
						}
					}
				}
				if m.G != nil {
					gd := math.Pow(1-eta*cfg.LambdaG, float64(len(idx)))
					for x := range m.G {
						m.G[x] *= gd
					}
				}
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
