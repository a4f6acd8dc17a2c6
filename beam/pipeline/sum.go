package pipeline

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/privrec/privrec/statistic"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Ratings)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*Part)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*Acc)(nil)).Elem())
	register.DoFn4x1[context.Context, string, func(string, Ratings), func(Refusal), error](&parseFn{})
	register.Emitter2[string, Ratings]()
	register.Emitter1[string]()
	register.DoFn6x1[string, func(*Ratings) bool, []byte, func(int, Part), func(Refusal), func(int), error](&contributeFn{})
	register.Iter1[Ratings]()
	register.Emitter2[int, Part]()
	register.Emitter1[int]()
	register.Combiner3[Acc, Part, []float64](&blockSumFn{})
	register.Combiner3[Acc, Part, []float64](&slabSumFn{})
	register.Emitter2[int, []float64]()
	register.Function2x1[int, []float64, string](formatBlock)
	register.Function1x1[int, string](formatUsers)
}

// Part is one user's part of a statistic within one combine key: for a
// block of statistic.BlockSize coordinates, offsets within the block and
// values; for a key of a statistic.Factored (an ALS step's item), her
// factor in Val (Idx nil), which the combiner expands (slabSumFn).
type Part struct {
	Idx []int32
	Val []float64
}

// contributeFn turns one user's group of ratings into her parts of the
// statistic: her Row under the public RowPlan (the plan's filter and clamp,
// the catalogue's indices in increasing order — what the in-process path
// sums), then the statistic package's Contribute, split by block. A user
// with a repeated (user, item) has every repeat refused (source and
// position) and contributes nothing. Every user is counted once (count).
//
// The contribution's public plan (statistic.Encode: for an ALS step the
// previous step's noised item factors and biases, megabytes) arrives as a
// singleton side input, not in the DoFn's serialized fields: the runner
// ships it to the workers once per pipeline as data, and each DoFn
// instance decodes it once.
type contributeFn struct {
	Kind    string            `json:"kind"`
	Rows    statistic.RowPlan `json:"rows"`
	Sources []string          `json:"sources"`
	// Latest keeps a user's rating of an item at the latest position
	// instead of refusing a repeat (a central-mode database: a later
	// report replaces her earlier rating, as service.RatingsMatrix reads
	// it).
	Latest bool `json:"latest,omitempty"`

	c     statistic.Contribution
	index map[string]int32
}

// Setup builds the catalogue index.
func (f *contributeFn) Setup() {
	f.index = make(map[string]int32, len(f.Rows.Catalogue))
	for j, id := range f.Rows.Catalogue {
		f.index[id] = int32(j)
	}
}

// ProcessElement handles one user's ratings; plan is the side input.
func (f *contributeFn) ProcessElement(user string, iter func(*Ratings) bool, plan []byte, emit func(int, Part), refuse func(Refusal), count func(int)) error {
	if f.c == nil {
		c, err := statistic.Decode(f.Kind, plan)
		if err != nil {
			return err
		}
		f.c = c
	}
	var all []Rating
	var rs Ratings
	for iter(&rs) {
		rs.each(func(r Rating) { all = append(all, r) })
	}
	count(1)
	slices.SortFunc(all, func(a, b Rating) int {
		if a.Item != b.Item {
			if a.Item < b.Item {
				return -1
			}
			return 1
		}
		return cmpPos(a, b)
	})
	if f.Latest {
		all = latest(all)
	}
	dup := false
	for k := 1; k < len(all); k++ {
		if all[k].Item == all[k-1].Item {
			dup = true
			refuse(Refusal{Src: all[k].Src, Pos: all[k].First,
				Msg: fmt.Sprintf("%s: user %q rated item %q again (first at %s)", f.where(all[k]), user, all[k].Item, f.where(all[k-1]))})
		}
	}
	if dup {
		return nil
	}
	type entry struct {
		j int32
		v float32
	}
	kept := make([]entry, 0, len(all))
	for _, r := range all {
		v, ok := f.Rows.Value(r.Value)
		if !ok {
			continue
		}
		if j, ok := f.index[r.Item]; ok {
			kept = append(kept, entry{j, v})
		}
	}
	slices.SortFunc(kept, func(a, b entry) int { return int(a.j - b.j) })
	row := statistic.Row{Items: make([]int32, len(kept)), Vals: make([]float32, len(kept))}
	for k, e := range kept {
		row.Items[k], row.Vals[k] = e.j, e.v
	}
	if fc, ok := f.c.(statistic.Factored); ok {
		// One small part per key (item): the outer products are formed in
		// the combiner, so a user shuffles d+2 values per rated item
		// instead of her dense slabs.
		fc.Factors(row, func(key int, x []float64) {
			emit(key, Part{Val: append([]float64(nil), x...)})
		})
		return nil
	}
	blockParts(f.c, row, emit)
	return nil
}

// blockParts emits c's part for row split by block of
// statistic.BlockSize coordinates (the dense parts; a factored
// statistic's Contribute gives its expanded slabs).
func blockParts(c statistic.Contribution, row statistic.Row, emit func(int, Part)) {
	parts := map[int]*Part{}
	c.Contribute(row, func(i int, x float64) {
		b := i / statistic.BlockSize
		p := parts[b]
		if p == nil {
			p = &Part{}
			parts[b] = p
		}
		p.Idx = append(p.Idx, int32(i%statistic.BlockSize))
		p.Val = append(p.Val, x)
	})
	for b, p := range parts {
		emit(b, *p)
	}
}

// latest keeps, of ratings sorted by item and then position, the last of
// each item.
func latest(all []Rating) []Rating {
	out := all[:0]
	for k, r := range all {
		if k+1 < len(all) && all[k+1].Item == r.Item {
			continue
		}
		out = append(out, r)
	}
	return out
}

// where is a rating's source and lines.
func (f *contributeFn) where(r Rating) string {
	src := "<unknown source>"
	if r.Src >= 0 && int(r.Src) < len(f.Sources) {
		src = f.Sources[r.Src]
	}
	if r.First == r.Last {
		return fmt.Sprintf("%s:%d", src, r.First)
	}
	return fmt.Sprintf("%s:%d–%d", src, r.First, r.Last)
}

func cmpPos(a, b Rating) int {
	switch {
	case a.Src != b.Src:
		return int(a.Src - b.Src)
	case a.First < b.First:
		return -1
	case a.First > b.First:
		return 1
	}
	return 0
}

// Acc is a combine key's running sum in double-double form: each
// coordinate is Hi + Lo, with Hi the rounded sum and Lo the rounding
// errors of the additions (Knuth's TwoSum, statistic.DD). Merging
// accumulators in any order, as a runner does with bundles and retries,
// then gives the same float64 after extraction unless the exact sum lies
// within about 2⁻¹⁰⁶ of a rounding boundary: the pipeline's sum does not
// depend on how the runner split the work, and equals statistic.Sum's.
//
// An accumulator is sparse until it is dense enough to pay for its whole
// block: Idx lists the coordinates of the entries Hi[k] + Lo[k]
// (unsorted, a coordinate possibly repeated: their sum is the
// coordinate's), 20 bytes an entry; with Idx empty and Hi not it is
// dense, Hi and Lo of the key's width (16 bytes a coordinate); with Hi
// empty it is empty. A runner that lifts the combiner keeps one
// accumulator per key and bundle and shuffles it: a dense 64 KB block for
// a bundle whose users touched a few entries of it was what took Prism
// past 11 GB in the covariance over 5 000 items at 10⁶ users (3 053
// blocks; a user's part is a few entries). Sparse, a bundle's accumulator
// costs about what its users' parts cost (20 bytes an entry against a
// part's 12), and never more than the dense block (sparseMax).
//
// A factored statistic's accumulator (slabSumFn) has a third form: Fac,
// the factors added so far (each FacLen values, concatenated), not yet
// expanded, until they would take more room than the key's dense slab.
type Acc struct {
	Idx    []int32
	Hi, Lo []float64
	Fac    []float64
	FacLen int32
}

// sparseMax is the number of distinct entries past which a sparse
// accumulator of width coordinates becomes dense: at 20 bytes an entry
// against 16 a coordinate, a sparse one above 4/5 of the width would be
// larger; at half, the dense block is at most 1.6× the sparse bytes and
// adds faster.
func sparseMax(width int) int { return width / 2 }

// dense reports whether a holds a whole block (or slab). (Lengths, not
// nil: a coder may decode a nil slice as an empty one.)
func (a *Acc) dense() bool { return len(a.Idx) == 0 && len(a.Hi) > 0 }

// addPart adds a block part (offsets and values) to a of width
// coordinates.
func (a *Acc) addPart(p Part, width int) {
	if a.dense() {
		d := statistic.DD{Hi: a.Hi, Lo: a.Lo}
		for k, i := range p.Idx {
			d.Add(int(i), p.Val[k])
		}
		return
	}
	a.grow(len(p.Idx), width)
	if a.dense() {
		a.addPart(p, width)
		return
	}
	a.Idx = append(a.Idx, p.Idx...)
	a.Hi = append(a.Hi, p.Val...)
	a.Lo = append(a.Lo, make([]float64, len(p.Idx))...)
}

// grow makes room for n more sparse entries: when they would not fit in
// the slices' capacity, it first compacts a (one entry per coordinate),
// and densifies it if that leaves more than sparseMax entries. Appends
// double the capacity only when compacting did not free half of it, so
// the entries are sorted O(log n) times each.
func (a *Acc) grow(n, width int) {
	if len(a.Idx)+n <= cap(a.Idx) || len(a.Idx) < 64 {
		return
	}
	a.compact()
	if len(a.Idx)+n > sparseMax(width) {
		a.densify(width)
	}
}

// compact sorts a's sparse entries by coordinate and merges the repeats
// (TwoSum of the rounded parts, their errors added, as statistic.DD's
// Merge).
func (a *Acc) compact() {
	sort.Sort(entries{a})
	out := 0
	for k := range a.Idx {
		if out > 0 && a.Idx[out-1] == a.Idx[k] {
			s, e := statistic.TwoSum(a.Hi[out-1], a.Hi[k])
			a.Hi[out-1] = s
			a.Lo[out-1] += a.Lo[k] + e
			continue
		}
		a.Idx[out], a.Hi[out], a.Lo[out] = a.Idx[k], a.Hi[k], a.Lo[k]
		out++
	}
	a.Idx, a.Hi, a.Lo = a.Idx[:out], a.Hi[:out], a.Lo[:out]
}

// densify turns a sparse (or empty) a into its dense block of width
// coordinates.
func (a *Acc) densify(width int) {
	d := statistic.NewDD(width)
	a.mergeInto(d)
	a.Idx, a.Hi, a.Lo = nil, d.Hi, d.Lo
}

// mergeInto adds a to the dense d.
func (a *Acc) mergeInto(d statistic.DD) {
	if a.dense() {
		d.Merge(statistic.DD{Hi: a.Hi, Lo: a.Lo})
		return
	}
	for k, i := range a.Idx {
		s, e := statistic.TwoSum(d.Hi[i], a.Hi[k])
		d.Hi[i] = s
		d.Lo[i] += a.Lo[k] + e
	}
}

// entries sorts a sparse accumulator's three slices by coordinate.
type entries struct{ a *Acc }

func (e entries) Len() int           { return len(e.a.Idx) }
func (e entries) Less(i, j int) bool { return e.a.Idx[i] < e.a.Idx[j] }
func (e entries) Swap(i, j int) {
	a := e.a
	a.Idx[i], a.Idx[j] = a.Idx[j], a.Idx[i]
	a.Hi[i], a.Hi[j] = a.Hi[j], a.Hi[i]
	a.Lo[i], a.Lo[j] = a.Lo[j], a.Lo[i]
}

// ensure makes an empty a dense (width coordinates).
func (a *Acc) ensure(width int) {
	if len(a.Hi) == 0 {
		a.Idx, a.Hi, a.Lo = nil, make([]float64, width), make([]float64, width)
	}
}

// mergeAcc is a + b, coordinate by coordinate, in double-double form, for
// accumulators of width coordinates.
func mergeAcc(a, b Acc, width int) Acc {
	switch {
	case len(b.Hi) == 0:
		return a
	case len(a.Hi) == 0:
		return b
	case a.dense():
		b.mergeInto(statistic.DD{Hi: a.Hi, Lo: a.Lo})
		return a
	case b.dense():
		a.mergeInto(statistic.DD{Hi: b.Hi, Lo: b.Lo})
		return b
	}
	a.grow(len(b.Idx), width)
	if a.dense() {
		b.mergeInto(statistic.DD{Hi: a.Hi, Lo: a.Lo})
		return a
	}
	a.Idx = append(a.Idx, b.Idx...)
	a.Hi = append(a.Hi, b.Hi...)
	a.Lo = append(a.Lo, b.Lo...)
	return a
}

// extractAcc is the float64 sum of each of width coordinates.
func extractAcc(a Acc, width int) []float64 {
	if !a.dense() {
		a.densify(width)
	}
	return statistic.DD{Hi: a.Hi, Lo: a.Lo}.Result()
}

// blockSumFn combines Parts of one block into its sum (sparse
// accumulators until they fill, see Acc).
type blockSumFn struct{}

// CreateAccumulator implements the combiner.
func (*blockSumFn) CreateAccumulator() Acc { return Acc{} }

// AddInput implements the combiner.
func (*blockSumFn) AddInput(a Acc, p Part) Acc {
	a.addPart(p, statistic.BlockSize)
	return a
}

// MergeAccumulators implements the combiner.
func (*blockSumFn) MergeAccumulators(a, b Acc) Acc { return mergeAcc(a, b, statistic.BlockSize) }

// ExtractOutput implements the combiner.
func (*blockSumFn) ExtractOutput(a Acc) []float64 { return extractAcc(a, statistic.BlockSize) }

// slabSumFn combines the factors of one key of a statistic.Factored (an
// ALS step's item) into the key's slab of Width coordinates. Each factor
// is expanded by the kind's own Expand — the statistic's one definition —
// and added in double-double form; until a key's factors would take more
// room than its dense slab (2·Width float64), the accumulator keeps them
// unexpanded (Acc.Fac). A runner that lifts the combiner thus sends, per
// key and bundle, the bundle's factors of the key or its slab, whichever
// is smaller: never more than the factors themselves (d+2 values each,
// where a slab has d(d+1)/2 + d coordinates), and one element per key and
// bundle instead of one per rating. (Dense slabs from the start, lifted,
// took Prism past 12 GB in a 10⁵-user step; grouping the factors by key
// instead, with no lifting, kept every factor as an element of the
// runner's group: 2.8 GB of heap in the same step.)
type slabSumFn struct {
	Kind  string `json:"kind"`
	Width int    `json:"width"`

	fc   statistic.Factored
	slab []float64 // one factor's expansion
}

// Setup rebuilds the kind's zero value, whose Expand needs no plan.
func (f *slabSumFn) Setup() error {
	c, err := statistic.Zero(f.Kind)
	if err != nil {
		return err
	}
	fc, ok := c.(statistic.Factored)
	if !ok {
		return fmt.Errorf("contribution kind %q has no factored parts", f.Kind)
	}
	f.fc = fc
	return nil
}

// CreateAccumulator implements the combiner.
func (*slabSumFn) CreateAccumulator() Acc { return Acc{} }

// AddInput implements the combiner.
func (f *slabSumFn) AddInput(a Acc, p Part) Acc {
	if a.dense() {
		f.expand(a, p.Val)
		return a
	}
	if a.FacLen == 0 {
		a.FacLen = int32(len(p.Val))
	}
	a.Fac = append(a.Fac, p.Val...)
	return f.fit(a)
}

// fit densifies a when its factors take more room than its slab.
func (f *slabSumFn) fit(a Acc) Acc {
	if len(a.Fac) <= 2*f.Width {
		return a
	}
	a.ensure(f.Width)
	return f.flush(a)
}

// flush expands a's factors into its dense slab (a.dense()).
func (f *slabSumFn) flush(a Acc) Acc {
	f.expandAll(a, a.Fac, int(a.FacLen))
	a.Fac, a.FacLen = nil, 0
	return a
}

// expandAll adds the slabs of the factors fac (n values each) to the
// dense a.
func (f *slabSumFn) expandAll(a Acc, fac []float64, n int) {
	for k := 0; n > 0 && k+n <= len(fac); k += n {
		f.expand(a, fac[k:k+n])
	}
}

// expand adds factor x's slab to the dense a.
func (f *slabSumFn) expand(a Acc, x []float64) {
	if f.fc == nil {
		// Runners call Setup; a direct caller (a test) may not. Engine.Sum
		// checked the kind on the driver, so this cannot fail there.
		if err := f.Setup(); err != nil {
			panic(err)
		}
	}
	if len(f.slab) != f.Width {
		f.slab = make([]float64, f.Width)
	}
	f.fc.Expand(x, f.slab)
	statistic.DD{Hi: a.Hi, Lo: a.Lo}.AddAt(0, f.slab)
}

// MergeAccumulators implements the combiner.
func (f *slabSumFn) MergeAccumulators(a, b Acc) Acc {
	switch {
	case a.dense() && b.dense():
		return mergeAcc(a, b, f.Width)
	case !a.dense() && !b.dense():
		if a.FacLen == 0 {
			a.FacLen = b.FacLen
		}
		a.Fac = append(a.Fac, b.Fac...)
		return f.fit(a)
	case !a.dense():
		a, b = b, a
	}
	f.expandAll(a, b.Fac, int(b.FacLen))
	return a
}

// ExtractOutput implements the combiner.
func (f *slabSumFn) ExtractOutput(a Acc) []float64 {
	if !a.dense() {
		a.ensure(f.Width)
		a = f.flush(a)
	}
	return extractAcc(a, f.Width)
}

// formatBlock writes a key's sum (a block, or a factored statistic's
// slab) as "b <key> <base64 of the
// little-endian float64 bits>" (exact).
func formatBlock(block int, v []float64) string {
	buf := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(x))
	}
	return "b\t" + strconv.Itoa(block) + "\t" + base64.StdEncoding.EncodeToString(buf)
}

// formatUsers writes the number of users as "u <n>".
func formatUsers(n int) string { return "u\t" + strconv.Itoa(n) }
