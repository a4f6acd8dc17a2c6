package completion

import (
	"context"
	"math"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/tensor"
)

// sweeper is a solver that improves a model one sweep (ALS) or pass (SGD)
// at a time.
type sweeper interface {
	sweep(ctx context.Context) error
}

// newSweeper starts the configured non-private solver on t from m.
func newSweeper(t *tensor.Tensor, cfg Config, cal *calibration, m *Model, rnd *noise.Source) sweeper {
	if cfg.solver() == ALS {
		if cfg.Biases {
			m.Offset = t.Mean()
		}
		return newALS(t, cfg, m)
	}
	return newSGD(t, cfg, cal, m, rnd, nil)
}

// fit trains the non-private solver on t (the raw ratings, or IP's noisy
// ones: everything here is then post-processing). With a validation
// fraction it holds out that share of t's entries, fits every candidate λ
// on the rest sweep by sweep until the validation RMSE (predictions
// clamped to [Lo, Hi]) has not improved for Patience sweeps, and refits
// the best λ on all of t for the best number of sweeps. Candidates are
// tried in the order given (the defaults: from strong to weak
// regularisation) and, once a candidate after the first has improved on
// the best, the search stops after two candidates in a row that do not;
// with Starts > 1 the search is repeated from every initial model. Every
// candidate of a start and the refit begin from the same initial model.
func fit(ctx context.Context, t *tensor.Tensor, cfg Config, cal *calibration, rnd *noise.Source, info *Info, progress func(done, total int)) (*Model, error) {
	grid := cfg.LambdaGrid
	if len(grid) == 0 {
		grid = []float64{cfg.Lambda}
	}
	// Without validation the initial model is drawn from rnd itself, as
	// the seed-era solver drew it, so that the seed's settings give the
	// same model as before; with it every start has its own seed.
	var initSeed uint64
	if cfg.Validation > 0 {
		initSeed = rnd.Uint64()
	}
	starts := 1
	if cfg.Validation > 0 && cfg.solver() == ALS {
		starts = max(cfg.Starts, 1)
	}
	start := func(c Config, st int) *Model {
		src := rnd
		if cfg.Validation > 0 {
			src = noise.Seeded(initSeed + uint64(st))
		}
		m := initModel(c, t.Dims, src)
		if c.solver() == ALS && st == 0 {
			flatDays(m)
		}
		return m
	}
	total := cfg.Passes
	if cfg.Validation > 0 {
		total += starts * len(grid) * cfg.Passes
	}
	done := 0
	tick := func() {
		done++
		if progress != nil {
			progress(min(done, total), total)
		}
	}
	best, bestStart := cfg, 0
	best.Lambda = grid[0]
	sweeps := cfg.Passes
	if cfg.Validation > 0 {
		n := t.Len()
		nVal := min(max(int(math.Round(cfg.Validation*float64(n))), 1), n-1)
		perm := rnd.Perm(n)
		val, train := t.Subset(perm[:nVal]), t.Subset(perm[nVal:])
		patience := cfg.Patience
		if patience == 0 {
			patience = 3
		}
		bestRMSE := math.Inf(1)
		for st := range starts {
			// per start: once a candidate after the first has improved on
			// the start's best, stop after two in a row that do not
			worse, improved, startBest := 0, false, math.Inf(1)
			for g, lam := range grid {
				if improved && worse == 2 {
					break
				}
				c := cfg
				c.Lambda = lam
				m := start(c, st)
				s := newSweeper(train, c, cal, m, rnd)
				// patience counts sweeps without improving this candidate's
				// own best (by a part in 10⁴)
				since, own := 0, math.Inf(1)
				for sweep := 1; sweep <= cfg.Passes && since < patience; sweep++ {
					if err := s.sweep(ctx); err != nil {
						return nil, err
					}
					tick()
					r := rmseClamped(m, val, cfg.Lo, cfg.Hi)
					if math.IsNaN(r) {
						break
					}
					if r < own*(1-1e-4) {
						own, since = r, 0
					} else {
						since++
					}
					if r < bestRMSE*(1-1e-4) {
						bestRMSE, best, bestStart, sweeps = r, c, st, sweep
					}
				}
				if own < startBest*(1-1e-4) {
					startBest, worse = own, 0
					improved = improved || g > 0
				} else {
					worse++
				}
				done = (st*len(grid) + g + 1) * cfg.Passes // a candidate stopped early counts in full
			}
		}
	}
	m := start(best, bestStart)
	s := newSweeper(t, best, cal, m, rnd)
	for range sweeps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := s.sweep(ctx); err != nil {
			return nil, err
		}
		tick()
	}
	if progress != nil {
		progress(total, total)
	}
	info.Lambda, info.Sweeps = best.Lambda, sweeps
	info.Updates = sweeps * t.Len()
	return m, nil
}
