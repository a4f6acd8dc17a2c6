package experiment

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/synth"
	"github.com/privrec/privrec/tensor"
	"github.com/privrec/privrec/transform"
)

// The built-in data sources: rating files, and the seed papers' synthetic
// setups (package synth).
func init() {
	RegisterGenerator("onebit-synthetic", oneBitSource)
	RegisterGenerator("rankone-synthetic", rankOneSource)
	RegisterGenerator("lowrank-synthetic", lowRankSource)
	RegisterGenerator("tensor-synthetic", tensorSource)
}

// MissingDataError says which dataset file is missing and where to get it.
type MissingDataError struct {
	Path, Dataset, Hint string
}

func (e *MissingDataError) Error() string {
	msg := fmt.Sprintf("dataset %s: file %s not found", e.Dataset, e.Path)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// Where to get the files the reproductions read, by file name.
var dataHints = map[string]string{
	"u1.base":              "MovieLens 100K from https://grouplens.org/datasets/movielens/100k/ (unzip ml-100k.zip into DATA-DIR/ml-100k/)",
	"u1.test":              "MovieLens 100K from https://grouplens.org/datasets/movielens/100k/ (unzip ml-100k.zip into DATA-DIR/ml-100k/)",
	"ua.base":              "MovieLens 100K from https://grouplens.org/datasets/movielens/100k/ (unzip ml-100k.zip into DATA-DIR/ml-100k/)",
	"ua.test":              "MovieLens 100K from https://grouplens.org/datasets/movielens/100k/ (unzip ml-100k.zip into DATA-DIR/ml-100k/)",
	"ub.base":              "MovieLens 100K from https://grouplens.org/datasets/movielens/100k/ (unzip ml-100k.zip into DATA-DIR/ml-100k/)",
	"ub.test":              "MovieLens 100K from https://grouplens.org/datasets/movielens/100k/ (unzip ml-100k.zip into DATA-DIR/ml-100k/)",
	"u.data":               "MovieLens 100K from https://grouplens.org/datasets/movielens/100k/ (unzip ml-100k.zip into DATA-DIR/ml-100k/)",
	"ratings.dat":          "MovieLens 1M from https://grouplens.org/datasets/movielens/1m/ (unzip into DATA-DIR/ml-1m/)",
	"ratings.tsv":          "MovieLens 1M from https://grouplens.org/datasets/movielens/1m/, converted to DATA-DIR/ml-1m/ratings.tsv: one rating per line, user<TAB>item<TAB>rating, no header (privrec data convert --in ratings.dat --format movielens --to tsv --out ratings.tsv writes it, with an extra time column the reproductions do not use)",
	"rating_final.csv":     "UCI restaurant & consumer data (CC BY 4.0) from https://archive.ics.uci.edu/dataset/232 into DATA-DIR/restaurant-consumer/",
	"ratings.tsv.gz":       "Jester Dataset 1 complete (73,421 users, 100 jokes; https://eigentaste.berkeley.edu/dataset/, jester_dataset_1_{1,2,3}.zip) as DATA-DIR/jester1/ratings.tsv.gz: one rating per line, user<TAB>joke<TAB>rating (ratings in [-10, 10], the 'not rated' code 99 dropped, users numbered in file order across the three parts), no header, gzip-compressed",
	"jester5k_ratings.tsv": "Jester5k, the 5,000-user sample of Jester Dataset 1 (https://eigentaste.berkeley.edu/dataset/; shipped as Jester5k in the R package recommenderlab), as DATA-DIR/jester/jester5k_ratings.tsv: one rating per line, user<TAB>joke<TAB>rating (jokes 1..100, ratings in [-10, 10]), no header",
}

func resolve(dir, path string) string {
	if filepath.IsAbs(path) || dir == "" {
		return path
	}
	return filepath.Join(dir, path)
}

// fileCache keeps each ratings file read once per process.
var fileCache sync.Map // key → *fileEntry

type fileEntry struct {
	once sync.Once
	m    *ratings.Matrix
	err  error
}

func readCached(dataset, path, format, column string) (*ratings.Matrix, error) {
	key := path + "\x00" + format + "\x00" + column
	v, _ := fileCache.LoadOrStore(key, &fileEntry{})
	e := v.(*fileEntry)
	e.once.Do(func() {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			e.err = &MissingDataError{Path: path, Dataset: dataset, Hint: dataHints[filepath.Base(path)]}
			return
		}
		e.m, e.err = ratingio.ReadFile(path, ratingio.Options{Format: format, Column: column})
		if e.err != nil {
			e.err = fmt.Errorf("dataset %s: %w", dataset, e.err)
		}
	})
	return e.m, e.err
}

// forgetCached drops a file read by readCached (a large population's
// ratings, once its sweep is done).
func forgetCached(path, format, column string) {
	fileCache.Delete(path + "\x00" + format + "\x00" + column)
}

// fileSource reads a ratings file and splits it: a canonical test file, or
// a random hold-out per run; then the optional item restriction, rescaling
// and per-user cap of the spec. The split carries the source's facts taken
// before splitting: its items (the catalogue), its number of users, and
// its declared scale (after rescaling).
func fileSource(ctx context.Context, d DataSpec, seed uint64, dataDir string) (*Split, error) {
	all, err := readCached(d.Name, resolve(dataDir, d.Path), d.Format, d.Column)
	if err != nil {
		return nil, err
	}
	if d.HoldoutUsers != nil {
		return usersSplit(ctx, d, all, seed, dataDir)
	}
	var train, test *ratings.Matrix
	if d.Test != "" {
		if test, err = readCached(d.Name, resolve(dataDir, d.Test), d.Format, d.Column); err != nil {
			return nil, err
		}
		train = all
	}
	if d.TopItems > 0 {
		// Restrict before splitting so the test set asks about kept items only.
		all = transform.TopItems(all, d.TopItems)
		if test != nil {
			train = all
			keep := map[string]bool{}
			for _, n := range train.Items.Names() {
				keep[n] = true
			}
			test = test.Filter(func(e ratings.Entry) bool { return keep[test.Items.Name(e.Item)] })
		}
	}
	sc := scaleOf(d.Scale)
	if d.Rescale != nil {
		// A fixed linear map of the declared scale (not of the observed
		// range, which is private) onto [lo, hi].
		from, lo, hi := *sc, d.Rescale[0], d.Rescale[1]
		f := func(e ratings.Entry) float32 {
			return float32(lo + (float64(e.Value)-from.Min)*(hi-lo)/from.Width())
		}
		all = all.MapValues(f)
		if test != nil {
			train = all
			test = test.MapValues(f)
		}
		sc = &release.Scale{Min: lo, Max: hi}
	}
	// The source's items and users, before splitting.
	items := slices.Clone(all.Items.Names())
	users := all.NumUsers()
	if test != nil {
		seenI := make(map[string]bool, len(items))
		for _, n := range items {
			seenI[n] = true
		}
		for _, n := range test.Items.Names() {
			if !seenI[n] {
				seenI[n] = true
				items = append(items, n)
			}
		}
		seenU := make(map[string]bool, users)
		for _, n := range all.Users.Names() {
			seenU[n] = true
		}
		for _, n := range test.Users.Names() {
			if !seenU[n] {
				seenU[n] = true
				users++
			}
		}
	}
	if test == nil {
		train, test = transform.HoldOut(all, d.Holdout, seed)
	}
	if d.CapPerUser > 0 {
		train = transform.CapPerUser(train, d.CapPerUser, seed^0xca9)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &Split{Train: train, Test: test, Scale: sc, Items: items, Users: users}, nil
}

// emptyLike is a matrix with m's IDs and no ratings.
func emptyLike(m *ratings.Matrix) *ratings.Matrix {
	return m.Filter(func(ratings.Entry) bool { return false })
}

// denseTruth turns factors into a matrix holding every entry (for ARE).
func denseTruth(f *synth.Factors, users, items *ratings.IDs) (*ratings.Matrix, error) {
	r, c := f.Dims()
	rowPtr := make([]int64, r+1)
	col := make([]int32, 0, r*c)
	val := make([]float32, 0, r*c)
	for i := range r {
		for j := range c {
			col = append(col, int32(j))
			val = append(val, float32(f.At(i, j)))
		}
		rowPtr[i+1] = int64(len(col))
	}
	return ratings.FromCSR(users, items, c, rowPtr, col, val, nil)
}

// oneBitSource is seed 000's synthetic setup: params rows, cols, rank,
// alpha, obs (observed fraction), sigma; strings link (probit|logistic).
// All observed signs train; ARE is measured against the whole M.
func oneBitSource(ctx context.Context, d DataSpec, seed uint64, _ string) (*Split, error) {
	cfg := synth.OneBitDefaults()
	cfg.Rows = int(d.param("rows", float64(cfg.Rows)))
	cfg.Cols = int(d.param("cols", float64(cfg.Cols)))
	cfg.Rank = int(d.param("rank", float64(cfg.Rank)))
	cfg.Alpha = d.param("alpha", cfg.Alpha)
	cfg.ObsFrac = d.param("obs", cfg.ObsFrac)
	cfg.Sigma = d.param("sigma", cfg.Sigma)
	link, err := synth.ParseLink(d.str("link", string(cfg.Link)))
	if err != nil {
		return nil, err
	}
	cfg.Link = link
	data, err := synth.OneBit(cfg, seed)
	if err != nil {
		return nil, err
	}
	truth, err := denseTruth(data.Truth, data.Observed.Users, data.Observed.Items)
	if err != nil {
		return nil, err
	}
	return &Split{Train: data.Observed, Test: emptyLike(data.Observed), Truth: truth,
		Scale: &release.Scale{Min: -1, Max: 1}, Items: data.Observed.Items.Names(), Users: data.Observed.NumUsers()}, nil
}

// rankOneSource is seed 001's synthetic setup: params users, items,
// per_user, noise, holdout (default 0.01, as the paper).
func rankOneSource(ctx context.Context, d DataSpec, seed uint64, _ string) (*Split, error) {
	cfg := synth.RankOneDefaults()
	cfg.Users = int(d.param("users", float64(cfg.Users)))
	cfg.Items = int(d.param("items", float64(cfg.Items)))
	cfg.PerUser = int(d.param("per_user", float64(cfg.PerUser)))
	cfg.Noise = d.param("noise", cfg.Noise)
	data, err := synth.RankOne(ctx, cfg, seed)
	if err != nil {
		return nil, err
	}
	train, test := transform.HoldOut(data.Observed, d.param("holdout", 0.01), seed^0x401d)
	// ‖Y*‖∞ = 1: the ratings lie in [−1, 1] (the optional noise may leave
	// it; methods clamp to the declared scale).
	return &Split{Train: train, Test: test, Scale: &release.Scale{Min: -1, Max: 1},
		Items: data.Observed.Items.Names(), Users: data.Observed.NumUsers()}, nil
}

// lowRankSource is the generating process of seeds 002/003: params users,
// items, rank, obs, noise, levels, holdout (default 0.1). The truth Θ is
// kept for ARE when it is small enough (≤ 4 M entries).
func lowRankSource(ctx context.Context, d DataSpec, seed uint64, _ string) (*Split, error) {
	cfg := synth.LowRankDefaults()
	cfg.Users = int(d.param("users", float64(cfg.Users)))
	cfg.Items = int(d.param("items", float64(cfg.Items)))
	cfg.Rank = int(d.param("rank", float64(cfg.Rank)))
	cfg.ObsFrac = d.param("obs", cfg.ObsFrac)
	cfg.Noise = d.param("noise", cfg.Noise)
	cfg.Levels = int(d.param("levels", float64(cfg.Levels)))
	data, err := synth.LowRank(cfg, seed)
	if err != nil {
		return nil, err
	}
	train, test := transform.HoldOut(data.Observed, d.param("holdout", 0.1), seed^0x10d)
	sc := &release.Scale{Min: -1, Max: 1}
	if cfg.Levels >= 2 {
		sc = &release.Scale{Min: 1, Max: float64(cfg.Levels)}
	}
	s := &Split{Train: train, Test: test, Scale: sc, Items: data.Observed.Items.Names(), Users: data.Observed.NumUsers()}
	if r, c := data.Truth.Dims(); r*c <= 4<<20 {
		if s.Truth, err = denseTruth(data.Truth, data.Observed.Users, data.Observed.Items); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// tensorSource is seed 004's synthetic tensor (§5.1) as timestamped
// ratings with day-tagged item IDs ("j@k", time k·86400), the way privrec
// data synth-tensor writes it; tensor methods need --item-day (set it in
// the dataset's method_params). Params n1, n2, n3, rank, snr, missing,
// train_frac; strings kind (cp|tucker). Test holds the noise-free truth at
// the held-out observed positions, as the seed measures RMSE.
func tensorSource(ctx context.Context, d DataSpec, seed uint64, _ string) (*Split, error) {
	kind, err := tensor.ParseKind(d.str("kind", "cp"))
	if err != nil {
		return nil, err
	}
	cfg := tensor.PaperSynth(kind)
	cfg.Dims = [3]int{int(d.param("n1", 20)), int(d.param("n2", 20)), int(d.param("n3", 20))}
	cfg.Rank = int(d.param("rank", float64(cfg.Rank)))
	cfg.SNR = d.param("snr", cfg.SNR)
	cfg.Missing = d.param("missing", cfg.Missing)
	cfg.TrainFrac = d.param("train_frac", cfg.TrainFrac)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s, err := tensor.Synthesize(cfg, noise.Seeded(seed))
	if err != nil {
		return nil, err
	}
	toRatings := func(t *tensor.Tensor) (*ratings.Matrix, error) {
		b := ratings.NewBuilder(ratings.DupError)
		for e := range t.Len() {
			item := strconv.Itoa(int(t.J[e])+1) + tensor.ItemDaySep + strconv.Itoa(int(t.K[e]))
			if err := b.AddTimed(strconv.Itoa(int(t.I[e])+1), item, t.Val[e], int64(t.K[e])*tensor.SecondsPerDay, true, int64(e+1)); err != nil {
				return nil, err
			}
		}
		return b.Build()
	}
	train, err := toRatings(s.Train)
	if err != nil {
		return nil, err
	}
	test, err := toRatings(s.Test)
	if err != nil {
		return nil, err
	}
	// Min–max scaled to [0, 1] before the noise; methods clamp to it.
	return &Split{Train: train, Test: test, Scale: &release.Scale{Min: 0, Max: 1}, Users: cfg.Dims[0]}, nil
}

// usersSplit is the strong-generalisation split of protocol "users": the
// interactions (ratings ≥ Positive) of users with ≥ MinPositives of them;
// HoldoutUsers validation and test users held out with TargetFrac of their
// interactions as targets; Train is every rating of the training users
// (a method with a positive parameter keeps the interactions itself). The
// catalogue is the Items file when given, else the source's items.
func usersSplit(ctx context.Context, d DataSpec, all *ratings.Matrix, seed uint64, dataDir string) (*Split, error) {
	minPos, frac := d.MinPositives, d.TargetFrac
	if minPos == 0 {
		minPos = 5
	}
	if frac == 0 {
		frac = 0.2
	}
	pos := all
	if d.Positive != 0 {
		pos = transform.Positives(all, d.Positive)
	}
	pos = transform.MinPerUser(pos, minPos)
	held, err := transform.SplitUsers(pos, d.HoldoutUsers[0], d.HoldoutUsers[1], frac, seed)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	train := all.Filter(func(e ratings.Entry) bool { return held.Train.UserCount(e.User) > 0 })
	items := slices.Clone(all.Items.Names())
	if d.Items != "" {
		cat, err := model.LoadCatalogue(resolve(dataDir, d.Items))
		if err != nil {
			return nil, err
		}
		items = cat.IDs()
	}
	users := 0
	for u := range int32(held.Train.NumUsers()) {
		if held.Train.UserCount(u) > 0 {
			users++
		}
	}
	return &Split{Train: train, Held: held, Scale: scaleOf(d.Scale), Items: items, Users: users}, nil
}
