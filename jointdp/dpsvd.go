package jointdp

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
)

// DPSVDOptions configures private SVD (Algorithm 3).
type DPSVDOptions struct {
	// Rank is r.
	Rank int
	// Plan holds the one Gram mechanism and the ℓ2 clip L of each user's
	// row in the Gram matrix (PlanDPSVD).
	Plan    *GramPlan
	Noise   *noise.Source
	Workers int
	// Instrument, when set, is attached to every mechanism of the plan
	// (mechanism.Instrument: an audit's noise factor and tap); nil for
	// releases.
	Instrument *mechanism.Instrument
}

// DPSVDResult is the output of PrivateSVD: V holds the public top-r
// eigenvectors V_r, U's row i is user i's local projection.
type DPSVDResult struct {
	Factors
	// Eigenvalues are the top r eigenvalues of the released (noisy) Gram
	// matrix.
	Eigenvalues []float64
	// Sigma is the σ of the release (from the plan's mechanism).
	Sigma float64
}

// PrivateSVD runs Algorithm 3: the global step releases W = Σ_i
// Π_L(P_Ω(Y*_i))ᵀΠ_L(P_Ω(Y*_i)) + N once and takes its top-r eigenspace
// V_r; each user i then computes Ŷ_i = (n/|Ω_i|)·P_Ω(Y*_i)·V_r V_rᵀ from
// her own row. The paper scales by mn/|Ω|; |Ω| depends on everyone's data,
// so releasing it to every user would leak it unnoised: the per-user
// inverse sampling rate n/|Ω_i| is her own (equal to mn/|Ω| when every
// user rates the same number of items, as in the seed's synthetic data).
func PrivateSVD(ctx context.Context, p *Problem, o DPSVDOptions) (*DPSVDResult, error) {
	if o.Rank < 1 || o.Rank > p.N {
		return nil, fmt.Errorf("jointdp: rank must lie in 1..%d, got %d", p.N, o.Rank)
	}
	if err := o.Plan.check(p.N); err != nil {
		return nil, err
	}
	if len(o.Plan.Mechs) != 1 {
		return nil, fmt.Errorf("jointdp: private SVD makes one release, the plan has %d", len(o.Plan.Mechs))
	}
	if o.Noise == nil {
		return nil, fmt.Errorf("jointdp: no noise source")
	}
	mech := o.Plan.Mechs[0].Instrumented(o.Instrument)
	ch := p.chunks(workers(o.Workers))
	agg := newAggregate(p.N, len(ch))
	scales := p.clipScales(o.Plan.L)
	// Local: each user adds Π_L(x_i)ᵀΠ_L(x_i) (a zero iterate makes
	// local.addGram return exactly that, up to sign, which cancels).
	err := parallel(ctx, ch, func(w, lo, hi int) error {
		var buf []float64
		for i := lo; i < hi; i++ {
			if i%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			a, b := p.Ptr[i], p.Ptr[i+1]
			l := local{items: p.Cols[a:b], vals: p.Vals[a:b], scale: scales[i], y: make([]float64, b-a)}
			buf = l.addGram(&agg.parts[w], buf)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	W, err := agg.release(o.Noise, mech)
	if err != nil {
		return nil, err
	}
	vals, Vr, err := topEigenDense(W, o.Rank)
	if err != nil {
		return nil, err
	}
	r := o.Rank
	f := Factors{M: p.M, N: p.N, Rank: r, U: make([]float64, p.M*r), V: make([]float64, p.N*r)}
	for j := range p.N {
		for c := range r {
			f.V[j*r+c] = Vr.At(j, c)
		}
	}
	// Local projection: U_i = (n/|Ω_i|)·x_i V_r (raw row: her own data).
	err = parallel(ctx, ch, func(w, lo, hi int) error {
		for i := lo; i < hi; i++ {
			items, v := p.Row(i)
			if len(items) == 0 {
				continue
			}
			c := float64(p.N) / float64(len(items))
			ui := f.U[i*r : (i+1)*r]
			for q, it := range items {
				x := c * float64(v[q])
				vj := f.V[int(it)*r : int(it)*r+r]
				for k := range r {
					ui[k] += x * vj[k]
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &DPSVDResult{Factors: f, Eigenvalues: vals, Sigma: mech.Sigma()}, nil
}
