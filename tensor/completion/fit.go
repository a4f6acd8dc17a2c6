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
	f := newFitter(t, cfg, cal, rnd, progress)
	if cfg.Validation > 0 {
		if err := f.search(ctx); err != nil {
			return nil, err
		}
	}
	m, err := f.refit(ctx)
	if err != nil {
		return nil, err
	}
	info.Lambda, info.Sweeps = f.best.Lambda, f.sweeps
	info.Updates = f.sweeps * t.Len()
	return m, nil
}

// fitter is fit's state: the plan (candidates, starts, progress total)
// and the best setting found so far (λ, start, number of sweeps and its
// validation RMSE).
type fitter struct {
	t        *tensor.Tensor
	cfg      Config
	cal      *calibration
	rnd      *noise.Source
	grid     []float64
	initSeed uint64
	starts   int
	progress func(done, total int)

	total, done int

	best      Config
	bestStart int
	sweeps    int
	bestRMSE  float64
}

func newFitter(t *tensor.Tensor, cfg Config, cal *calibration, rnd *noise.Source, progress func(done, total int)) *fitter {
	f := &fitter{t: t, cfg: cfg, cal: cal, rnd: rnd, grid: cfg.LambdaGrid, starts: 1, progress: progress,
		best: cfg, sweeps: cfg.Passes, bestRMSE: math.Inf(1)}
	if len(f.grid) == 0 {
		f.grid = []float64{cfg.Lambda}
	}
	// Without validation the initial model is drawn from rnd itself, as
	// the seed-era solver drew it, so that the seed's settings give the
	// same model as before; with it every start has its own seed.
	if cfg.Validation > 0 {
		f.initSeed = rnd.Uint64()
	}
	if cfg.Validation > 0 && cfg.solver() == ALS {
		f.starts = max(cfg.Starts, 1)
	}
	f.total = cfg.Passes
	if cfg.Validation > 0 {
		f.total += f.starts * len(f.grid) * cfg.Passes
	}
	f.best.Lambda = f.grid[0]
	return f
}

// initial is start st's initial model for c.
func (f *fitter) initial(c Config, st int) *Model {
	src := f.rnd
	if f.cfg.Validation > 0 {
		src = noise.Seeded(f.initSeed + uint64(st))
	}
	m := initModel(c, f.t.Dims, src)
	if c.solver() == ALS && st == 0 {
		flatDays(m)
	}
	return m
}

func (f *fitter) tick() {
	f.done++
	if f.progress != nil {
		f.progress(min(f.done, f.total), f.total)
	}
}

// search holds out the validation share and tries the candidates from
// every start.
func (f *fitter) search(ctx context.Context) error {
	n := f.t.Len()
	nVal := min(max(int(math.Round(f.cfg.Validation*float64(n))), 1), n-1)
	perm := f.rnd.Perm(n)
	val, train := f.t.Subset(perm[:nVal]), f.t.Subset(perm[nVal:])
	patience := f.cfg.Patience
	if patience == 0 {
		patience = 3
	}
	for st := range f.starts {
		if err := f.searchStart(ctx, st, train, val, patience); err != nil {
			return err
		}
	}
	return nil
}

// searchStart tries the candidates from start st: once a candidate after
// the first has improved on the start's best, it stops after two in a
// row that do not.
func (f *fitter) searchStart(ctx context.Context, st int, train, val *tensor.Tensor, patience int) error {
	worse, improved, startBest := 0, false, math.Inf(1)
	for g, lam := range f.grid {
		if improved && worse == 2 {
			break
		}
		own, err := f.candidate(ctx, st, lam, train, val, patience)
		if err != nil {
			return err
		}
		if own < startBest*(1-1e-4) {
			startBest, worse = own, 0
			improved = improved || g > 0
		} else {
			worse++
		}
		f.done = (st*len(f.grid) + g + 1) * f.cfg.Passes // a candidate stopped early counts in full
	}
	return nil
}

// candidate fits λ = lam from start st on train sweep by sweep until the
// validation RMSE has not improved on its own best (by a part in 10⁴)
// for patience sweeps, keeping the overall best; it returns its own best.
func (f *fitter) candidate(ctx context.Context, st int, lam float64, train, val *tensor.Tensor, patience int) (float64, error) {
	cfg := f.cfg
	c := cfg
	c.Lambda = lam
	m := f.initial(c, st)
	s := newSweeper(train, c, f.cal, m, f.rnd)
	since, own := 0, math.Inf(1)
	for sweep := 1; sweep <= cfg.Passes && since < patience; sweep++ {
		if err := s.sweep(ctx); err != nil {
			return 0, err
		}
		f.tick()
		r := rmseClamped(m, val, cfg.Lo, cfg.Hi)
		if math.IsNaN(r) {
			break
		}
		if r < own*(1-1e-4) {
			own, since = r, 0
		} else {
			since++
		}
		if r < f.bestRMSE*(1-1e-4) {
			f.bestRMSE, f.best, f.bestStart, f.sweeps = r, c, st, sweep
		}
	}
	return own, nil
}

// refit fits the best setting on all of t for the best number of sweeps.
func (f *fitter) refit(ctx context.Context) (*Model, error) {
	m := f.initial(f.best, f.bestStart)
	s := newSweeper(f.t, f.best, f.cal, m, f.rnd)
	for range f.sweeps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := s.sweep(ctx); err != nil {
			return nil, err
		}
		f.tick()
	}
	if f.progress != nil {
		f.progress(f.total, f.total)
	}
	return m, nil
}
