package pipeline

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local paths for inputs and the work directory
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/memfs"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/textio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/statistic"
)

// Config is where a pipeline reads and writes and how it runs.
type Config struct {
	// Inputs are the ratings files (local paths or URLs of a Beam
	// filesystem the workers can read), in privrec's text formats, gzip
	// or not.
	Inputs []string
	// Read is the format and its options, as `privrec train` takes them
	// (Format must be named, not "auto"; repeated (user, item) pairs are
	// always refused).
	Read ratingio.Options
	// WorkDir receives each pipeline's un-noised sums and its refused
	// rows: a directory the driver and the workers can both reach, whose
	// files stay there (private statistics, outside any guarantee), or
	// MemoryWorkDir's in-memory one (a runner whose workers run in this
	// process), whose files are removed as soon as they are read.
	WorkDir string
	// Run executes a pipeline (beamx.Run: the --runner flag, Prism by
	// default).
	Run func(context.Context, *beam.Pipeline) error
	// Log gets one line per pipeline (the operator's log: it may name how
	// many rows were refused, which is private).
	Log *slog.Logger
	// Store, in place of Inputs, is a central-mode `privrec serve`
	// database (postgres://… or sqlite:FILE) whose reports table the
	// pipelines read through databaseio; StoreItems is its collection's
	// catalogue (the item of each stored value).
	Store      string
	StoreItems []string
}

// MemoryWorkDir is a new work directory in this process's memory (Beam's
// memfs): for a runner whose workers run in this process (Prism, by
// default), the pipelines' un-noised sums then never reach a disk, and
// each is removed once read. A killed process leaves nothing behind.
func MemoryWorkDir() string {
	var b [8]byte
	rand.Read(b[:])
	return "memfs://privrec-beam-" + hex.EncodeToString(b[:])
}

func (cfg Config) inMemory() bool { return strings.HasPrefix(cfg.WorkDir, "memfs://") }

// removeOutputs removes a pipeline's outputs from the in-memory
// filesystem (a file never written is no error there).
func removeOutputs(ctx context.Context, paths ...string) {
	fs := memfs.New(ctx)
	for _, p := range paths {
		fs.(filesystem.Remover).Remove(ctx, p)
	}
}

// Engine sums statistics by running pipelines (statistic.Engine).
type Engine struct {
	cfg   Config
	plan  statistic.RowPlan
	users int // −1 until a pipeline has counted them
	runs  int
	// Sums keeps every pre-noise sum the engine computed, in order (for
	// the equality test; never written anywhere).
	Sums [][]float64
}

// Factory is the methods.EngineFactory of cfg. Each engine it builds
// counts its pipelines (Runs).
func (cfg Config) Factory(made *[]*Engine) methods.EngineFactory {
	return func(plan statistic.RowPlan) (statistic.Engine, error) {
		switch {
		case cfg.Store != "":
			if len(cfg.Inputs) > 0 || len(cfg.StoreItems) == 0 {
				return nil, fmt.Errorf("the Beam engine reads a database or files, not both, and a database with its catalogue")
			}
		case cfg.Read.Format == "" || cfg.Read.Format == "auto":
			return nil, fmt.Errorf("the Beam engine needs the format named (--format), not detected")
		case len(cfg.Inputs) == 0:
			return nil, fmt.Errorf("the Beam engine needs at least one input")
		}
		e := &Engine{cfg: cfg, plan: plan, users: -1}
		if made != nil {
			*made = append(*made, e)
		}
		return e, nil
	}
}

// Users is the number of users the last pipeline grouped (a public fact
// under the replace-one relation); it runs a counting pipeline if none
// ran yet.
func (e *Engine) Users() int {
	if e.users < 0 {
		// A count of the users alone: the unit-norm counts over an empty
		// plan cost one pass; its sum is discarded, never released.
		if _, err := e.Sum(context.Background(), &statistic.Counts{Items: max(1, len(e.plan.Catalogue))}); err != nil {
			e.cfg.logger().Error("counting users", "err", err)
			return 0
		}
		e.Sums = e.Sums[:len(e.Sums)-1]
	}
	return e.users
}

// Runs is the number of pipelines the engine ran.
func (e *Engine) Runs() int { return e.runs }

func (cfg Config) logger() *slog.Logger {
	if cfg.Log != nil {
		return cfg.Log
	}
	return slog.Default()
}

// Sum runs one pipeline that sums c over the users.
func (e *Engine) Sum(ctx context.Context, c statistic.Contribution) ([]float64, error) {
	kind, plan, err := statistic.Encode(c)
	if err != nil {
		return nil, err
	}
	spec := c.Spec()
	width, err := keyWidth(c)
	if err != nil {
		return nil, err
	}
	if e.runs == 0 {
		if err := e.cfg.checkFormat(ctx); err != nil {
			return nil, err
		}
	}
	e.runs++
	out := e.outputs(kind)
	if e.cfg.inMemory() {
		// Whatever happens next, the un-noised sums leave this process's
		// memory with the pipeline.
		defer removeOutputs(ctx, out.sums, out.refused)
	}
	p, s := beam.NewPipelineWithRoot()
	if err := e.build(s, kind, plan, width, out); err != nil {
		return nil, err
	}
	if err := e.cfg.Run(ctx, p); err != nil {
		return nil, fmt.Errorf("%s pipeline: %w", spec.Name, err)
	}
	return e.collect(ctx, spec, width, out)
}

// sumOutputs are where a run's pipeline writes: the sums, the refused
// rows' count and first row, and (on a filesystem the operator named)
// every refused row.
type sumOutputs struct{ sums, refused, list string }

// outputs are the paths of this run's outputs in the work directory.
func (e *Engine) outputs(kind string) sumOutputs {
	// Not filepath.Join: it would turn gs://bucket into gs:/bucket.
	base := strings.TrimSuffix(e.cfg.WorkDir, "/") + "/" + fmt.Sprintf("%s-%d", kind, e.runs)
	return sumOutputs{base + ".sums", base + ".refused-count", base + ".refused"}
}

// build builds the pipeline of one statistic (kind, its encoded public
// plan, keys of width coordinates) in scope s: the rows read and parsed,
// grouped by user, each user's contribution, summed per key, written to
// out with the refusals.
func (e *Engine) build(s beam.Scope, kind string, plan []byte, width int, out sumOutputs) error {
	var parsed, refused beam.PCollection
	if e.cfg.Store != "" {
		var err error
		if parsed, refused, err = readStore(s, e.cfg.Store, e.cfg.StoreItems); err != nil {
			return err
		}
	} else {
		files := beam.Create(s, toAny(e.cfg.Inputs)...)
		opt := e.cfg.Read
		parsed, refused = beam.ParDo2(s, &parseFn{Format: opt.Format, Cols: opt.Cols, Column: opt.Column,
			HasScale: opt.HasScale, Min: opt.Min, Max: opt.Max, Sources: e.cfg.Inputs}, files)
	}
	byUser := beam.GroupByKey(s, parsed)
	// The public plan as a singleton side input (an ALS step's previous
	// factors are megabytes; see contributeFn).
	planIn := beam.SideInput{Input: beam.Create(s, plan)}
	parts, refused2, ones := beam.ParDo3(s, &contributeFn{Kind: kind, Rows: e.plan, Sources: e.cfg.Inputs, Latest: e.cfg.Store != ""}, byUser, planIn)
	// Combine per key: blocks of statistic.BlockSize coordinates (sparse
	// accumulators until they fill), or, for a factored statistic, one
	// key per slab (an ALS step's item), its factors kept as they are
	// until they outweigh the slab and expanded where they are summed
	// (slabSumFn). Either way a lifted accumulator is never larger than
	// the parts it replaces.
	var sums beam.PCollection
	if width == statistic.BlockSize {
		sums = beam.CombinePerKey(s, &blockSumFn{}, parts)
	} else {
		sums = beam.CombinePerKey(s, &slabSumFn{Kind: kind, Width: width}, parts)
	}
	lines := beam.ParDo(s, formatBlock, sums)
	users := beam.ParDo(s, formatUsers, stats.Sum(s, ones))
	textio.Write(s, out.sums, beam.Flatten(s, lines, users))
	// The refused rows' count and the first of them; one empty line (which
	// readRefused skips) so that the file exists even when nothing was
	// refused: a missing file then means a failed write. On a filesystem
	// the operator named, every refused row is listed too.
	refusals := beam.Flatten(s, refused, refused2)
	summary := beam.ParDo(s, formatRefused, beam.Combine(s, &firstRefusedFn{}, refusals))
	textio.Write(s, out.refused, beam.Flatten(s, summary, beam.Create(s, "")))
	if !e.cfg.inMemory() {
		textio.Write(s, out.list, beam.ParDo(s, refusalMsg, refusals))
	}
	return nil
}

// collect reads what a run wrote: refused rows fail the sum
// (RefusedError); else the sums and the number of users, which are kept.
func (e *Engine) collect(ctx context.Context, spec statistic.Spec, width int, out sumOutputs) ([]float64, error) {
	if n, first, err := readRefused(ctx, out.refused); err != nil {
		return nil, err
	} else if n > 0 {
		re := &RefusedError{N: n, First: first}
		if !e.cfg.inMemory() {
			re.List = out.list
		}
		return nil, re
	}
	v, users, err := readSums(ctx, out.sums, spec.Dim, width)
	if err != nil {
		return nil, err
	}
	e.users = users
	e.cfg.logger().Info("beam pipeline done", "statistic", spec.Name, "coordinates", spec.Dim, "keys", (spec.Dim+width-1)/width, "key_width", width, "sums", out.sums)
	e.Sums = append(e.Sums, append([]float64(nil), v...))
	return v, nil
}

// checkFormat reads the first batch of lines of each input file on the
// driver, before any pipeline: when not one row of it can be read (a wrong
// --format, a file that holds no ratings), the run fails at once naming
// the first refused rows, where a pipeline would have refused every row of
// the input, at its full cost, to say the same.
func (cfg Config) checkFormat(ctx context.Context) error {
	if cfg.Store != "" {
		return nil
	}
	opt := cfg.Read
	for _, path := range cfg.Inputs {
		fn := &parseFn{Format: opt.Format, Cols: opt.Cols, Column: opt.Column, HasScale: opt.HasScale, Min: opt.Min, Max: opt.Max,
			Sources: cfg.Inputs, Limit: int64(batchLines)}
		read := 0
		var refused []Refusal
		err := fn.ProcessElement(ctx, path, func(string, Ratings) { read++ }, func(r Refusal) { refused = append(refused, r) })
		if err != nil {
			return err
		}
		if read == 0 && len(refused) > 0 {
			n := len(refused)
			re := &RefusedError{N: n, Sample: path}
			for _, r := range keepFirst(refused) {
				re.First = append(re.First, r.Msg)
			}
			return re
		}
	}
	return nil
}

// keyWidth is the number of coordinates per combine key of c:
// statistic.BlockSize, or a statistic.Factored's SlabDim (the last slab
// may be cut at the statistic's end, its coordinates past the end zero,
// as readSums checks; the kind's zero value must be factored too, as the
// combiner rebuilds it).
func keyWidth(c statistic.Contribution) (int, error) {
	fc, ok := c.(statistic.Factored)
	if !ok {
		return statistic.BlockSize, nil
	}
	w, dim := fc.SlabDim(), c.Spec().Dim
	if w < 1 || dim < 1 {
		return 0, fmt.Errorf("%s: %d coordinates in slabs of %d", c.Spec().Name, dim, w)
	}
	z, err := statistic.Zero(c.Kind())
	if err != nil {
		return 0, err
	}
	if _, ok := z.(statistic.Factored); !ok {
		return 0, fmt.Errorf("%s: the %q kind's zero value has no factored parts", c.Spec().Name, c.Kind())
	}
	return w, nil
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// openOutput opens a file a pipeline wrote, through Beam's filesystem
// package (a local path, or gs://… with its filesystem registered).
func openOutput(ctx context.Context, path string) (io.ReadCloser, error) {
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return nil, err
	}
	r, err := fs.OpenRead(ctx, path)
	if err != nil {
		fs.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{r, closers{r, fs}}, nil
}

type closers []io.Closer

func (c closers) Close() error {
	var first error
	for _, x := range c {
		if err := x.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// readSums assembles the dim coordinates and the user count a pipeline
// wrote, in keys of width coordinates (statistic.BlockSize, or a
// factored statistic's slab); a key written twice or out of range is an
// error (nothing is released from an inconsistent output).
func readSums(ctx context.Context, path string, dim, width int) ([]float64, int, error) {
	f, err := openOutput(ctx, path)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the pipeline's sums: %w", err)
	}
	defer f.Close()
	v := make([]float64, dim)
	seen := make([]bool, (dim+width-1)/width)
	users := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<26)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Split(sc.Text(), "\t")
		switch {
		case len(fields) == 2 && fields[0] == "u":
			if users, err = strconv.Atoi(fields[1]); err != nil {
				return nil, 0, fmt.Errorf("%s:%d: user count: %w", path, line, err)
			}
		case len(fields) == 3 && fields[0] == "b":
			b, err := strconv.Atoi(fields[1])
			if err != nil || b < 0 || b >= len(seen) || seen[b] {
				return nil, 0, fmt.Errorf("%s:%d: block %q out of range or repeated", path, line, fields[1])
			}
			seen[b] = true
			raw, err := base64.StdEncoding.DecodeString(fields[2])
			if err != nil || len(raw) != 8*width {
				return nil, 0, fmt.Errorf("%s:%d: block %d is damaged", path, line, b)
			}
			for i := range width {
				x := math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
				if o := b*width + i; o < dim {
					v[o] = x
				} else if x != 0 {
					return nil, 0, fmt.Errorf("%s:%d: block %d has values past the %d coordinates", path, line, b, dim)
				}
			}
		default:
			return nil, 0, fmt.Errorf("%s:%d: unexpected line", path, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("reading the pipeline's sums: %w", err)
	}
	return v, users, nil
}
