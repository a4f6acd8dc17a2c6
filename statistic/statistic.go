// Package statistic is the one definition of privrec's released sums:
// for each private method whose global step is a sum over users of
// bounded per-user contributions, it holds the contribution (computed from
// one user's own ratings and the public plan — the declared catalogue and
// scale, earlier noised releases), its ℓ2 sensitivity with the proof, its
// dimension and keying (coordinates are combined in blocks, so no worker
// needs the whole vector), and its release (one discrete-Gaussian draw
// through privacy/mechanism).
//
// Every engine calls the same code: the in-process training of package
// methods sums the contributions in user order (Sum), a data-parallel
// engine (the Beam pipelines of privrec-beam) computes them on its
// workers, combines them per block, and hands the sum to the same
// Release on the driver. A contribution never sees another user's data
// and the noise is never added inside an engine.
package statistic

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
)

// Row is one user's data as a contribution sees it: her items as indices
// on the declared catalogue, in increasing order, and her ratings (nil for
// interactions).
type Row struct {
	Items []int32
	Vals  []float32
}

// Spec is what the release of a statistic needs to know.
type Spec struct {
	// Name names the release in errors and notes ("the item counts").
	Name string
	// Dim is the number of coordinates released.
	Dim int
	// Sensitivity is the ℓ2 sensitivity of the sum for one user's ratings
	// replaced (proved where each contribution is defined).
	Sensitivity mechanism.Sensitivity
}

// BlockSize is the number of coordinates a combine key holds: coordinate
// i belongs to block i/BlockSize. A block is 32 KiB of float64, so a
// worker combining one key never holds a whole large statistic (a Gram of
// 2 000 items has 2·10⁶ coordinates, 489 blocks).
const BlockSize = 4096

// Blocks is the number of combine keys of a statistic of dim coordinates.
func Blocks(dim int) int { return (dim + BlockSize - 1) / BlockSize }

// Contribution is the per-user part of a statistic. Contribute must depend
// only on the row and on the contribution's own (public) fields, add each
// value through add (a coordinate may be added more than once; the values
// add), and keep the part within the Spec's sensitivity. A Contribution is
// JSON-encodable (its exported fields are the public plan), so a worker
// process can rebuild it with Decode.
type Contribution interface {
	// Kind names the contribution's type for Decode.
	Kind() string
	// Spec is the release's dimension, name and sensitivity.
	Spec() Spec
	// Contribute adds the user's part.
	Contribute(r Row, add func(i int, x float64))
}

// Factored is a Contribution whose part is, for each key it touches (an
// item), a short factor — the ALS step's (c_ij, y_ij, ũ_i) — that Expand
// turns into the key's slab of SlabDim coordinates, at key·SlabDim in
// the statistic. Contribute must add exactly what Factors followed by
// Expand adds (the same float64 values): it is the one definition, and an
// engine that moves parts between workers sends the factors, which are
// d+2 values where the slab has d(d+1)/2 + d, and expands them where it
// sums (privrec-beam's combiner, keyed by item).
type Factored interface {
	Contribution
	// SlabDim is the number of coordinates of one key's slab.
	SlabDim() int
	// Factors emits the user's factor for each key (the factor slice may
	// be reused after emit returns).
	Factors(r Row, emit func(key int, f []float64))
	// Expand writes factor f's slab, SlabDim values, into slab. It
	// depends on f alone, not on the plan, so a combiner can call it on
	// the kind's zero value (Zero).
	Expand(f, slab []float64)
}

// Zero is the zero value of a registered contribution kind, with no plan:
// what a combiner needs to call a Factored kind's Expand.
func Zero(kind string) (Contribution, error) {
	mk, ok := kinds[kind]
	if !ok {
		return nil, fmt.Errorf("unknown contribution kind %q", kind)
	}
	return mk(), nil
}

// kinds are the contribution types Decode knows (Register adds to them
// at init time only).
var kinds = map[string]func() Contribution{
	kindCounts: func() Contribution { return new(Counts) },
	kindBias:   func() Contribution { return new(Bias) },
}

// Register makes a contribution type known to Decode; call it from an
// init function. A duplicate kind is a programming error and panics.
func Register(kind string, mk func() Contribution) {
	if _, dup := kinds[kind]; dup {
		panic("statistic: duplicate contribution kind " + kind)
	}
	kinds[kind] = mk
}

// Encode is c's kind and JSON form (its public plan), for Decode.
func Encode(c Contribution) (kind string, plan []byte, err error) {
	plan, err = json.Marshal(c)
	if err != nil {
		return "", nil, fmt.Errorf("encoding the %s contribution: %w", c.Kind(), err)
	}
	return c.Kind(), plan, nil
}

// Decode rebuilds a contribution from Encode's output.
func Decode(kind string, plan []byte) (Contribution, error) {
	mk, ok := kinds[kind]
	if !ok {
		names := make([]string, 0, len(kinds))
		for k := range kinds {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("unknown contribution kind %q (known: %v)", kind, names)
	}
	c := mk()
	if err := json.Unmarshal(plan, c); err != nil {
		return nil, fmt.Errorf("decoding the %s contribution: %w", kind, err)
	}
	if v, ok := c.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("decoding the %s contribution: %w", kind, err)
		}
	}
	return c, nil
}

// Engine computes the pre-noise sum of a statistic over the users. The
// in-process engine is Sum over a matrix in memory; privrec-beam's engine
// runs a pipeline. An engine returns the sum only: the noise is added by
// Release, once, by the caller.
type Engine interface {
	// Users is the number of users (a public fact under the replace-one
	// relation every method here is stated for).
	Users() int
	// Sum is Σ_u c.Contribute(row_u), c.Spec().Dim coordinates.
	Sum(ctx context.Context, c Contribution) ([]float64, error)
}

// Sum adds the contributions of users 0 … users−1 (row(u) her row) in user
// order into a new vector of c.Spec().Dim coordinates: the in-process
// engine. It checks ctx every 4 096 users.
//
// Each coordinate is summed in double-double form (Knuth's TwoSum: the
// rounded sum and the sum of its rounding errors, added at the end), as
// privrec-beam's combine sums it, so both return the float64 nearest the
// exact sum unless it lies within about 2⁻¹⁰⁶ of a rounding boundary. A
// plain float64 sum over 10⁶ users can be off by 10⁻⁹ on a popular item,
// and the noise's lattice (spacing σ·2⁻²⁸) would then round the two
// engines' sums to neighbouring points now and then (one coordinate of
// 20 000 at 10⁶ users, measured); the compensated sums do not.
func Sum(ctx context.Context, users int, row func(u int) Row, c Contribution) ([]float64, error) {
	acc := NewDD(c.Spec().Dim)
	for u := range users {
		if u%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.Contribute(row(u), acc.Add)
	}
	return acc.Result(), nil
}

// TwoSum is a + b as the rounded sum s and its exact rounding error e
// (Knuth's TwoSum: s + e = a + b exactly).
func TwoSum(a, b float64) (s, e float64) {
	s = a + b
	bb := s - a
	e = (a - (s - bb)) + (b - bb)
	return s, e
}

// DD is a vector of sums in double-double form: coordinate i is
// Hi[i] + Lo[i], Hi the rounded running sum and Lo the sum of its rounding
// errors (TwoSum). However the additions are ordered, split and merged,
// Result is the float64 nearest the exact sum unless that lies within
// about 2⁻¹⁰⁶ of a rounding boundary — so every engine that sums in this
// form (Sum, the in-process Gram kernel, privrec-beam's combine) releases
// the same float64s from the same parts.
type DD struct {
	Hi, Lo []float64
}

// NewDD is a zero DD of n coordinates.
func NewDD(n int) DD { return DD{Hi: make([]float64, n), Lo: make([]float64, n)} }

// Add adds x to coordinate i.
func (d DD) Add(i int, x float64) {
	s, e := TwoSum(d.Hi[i], x)
	d.Hi[i] = s
	d.Lo[i] += e
}

// AddAt adds x[t] to coordinate off+t for every t.
func (d DD) AddAt(off int, x []float64) {
	hi, lo := d.Hi[off:off+len(x)], d.Lo[off:off+len(x)]
	for t, v := range x {
		s, e := TwoSum(hi[t], v)
		hi[t] = s
		lo[t] += e
	}
}

// Merge adds o (of the same length) coordinate by coordinate.
func (d DD) Merge(o DD) {
	for i, x := range o.Hi {
		s, e := TwoSum(d.Hi[i], x)
		d.Hi[i] = s
		d.Lo[i] += o.Lo[i] + e
	}
}

// Merged merges parts (per-worker sums of n coordinates; a part with
// nil Hi is empty) into the first non-empty one and returns its float64
// sums Hi[i] + Lo[i] in its Hi, allocating nothing more (n zeros if every
// part is empty). The parts are spent.
func Merged(parts []DD, n int) []float64 {
	var first *DD
	for k := range parts {
		switch {
		case parts[k].Hi == nil:
		case first == nil:
			first = &parts[k]
		default:
			first.Merge(parts[k])
		}
	}
	if first == nil {
		return make([]float64, n)
	}
	for i, x := range first.Lo {
		first.Hi[i] += x
	}
	return first.Hi
}

// Result is the float64 sums Hi[i] + Lo[i], in a new slice.
func (d DD) Result() []float64 {
	out := make([]float64, len(d.Hi))
	for i, x := range d.Hi {
		out[i] = x + d.Lo[i]
	}
	return out
}

// Mechanism is the Gaussian mechanism of s with zCDP budget rho: σ from
// mechanism.GaussianSigma for s.Dim coordinates, its (ε, δ) at delta.
func Mechanism(s Spec, rho, delta float64) (*mechanism.Gaussian, error) {
	sigma, err := mechanism.GaussianSigma(rho, s.Sensitivity.Value, s.Dim)
	if err != nil {
		return nil, fmt.Errorf("calibrating %s: %w", s.Name, err)
	}
	m, err := mechanism.NewGaussianSigma(sigma, delta, s.Sensitivity, s.Dim)
	if err != nil {
		return nil, fmt.Errorf("calibrating %s: %w", s.Name, err)
	}
	return m, nil
}

// Release adds mech's noise to the sum v in place — the one draw of the
// statistic — through inst (an audit's noise factor and tap; nil in a
// real release).
func Release(s Spec, mech *mechanism.Gaussian, inst *mechanism.Instrument, src *noise.Source, v []float64) error {
	if len(v) != s.Dim {
		return fmt.Errorf("releasing %s: %d coordinates, the statistic has %d", s.Name, len(v), s.Dim)
	}
	if err := mech.Instrumented(inst).Release(src, v); err != nil {
		return fmt.Errorf("releasing %s: %w", s.Name, err)
	}
	return nil
}

// ReleaseRho is Mechanism and Release in one: it calibrates for rho,
// releases v and returns the mechanism (its σ and guarantee).
func ReleaseRho(s Spec, rho, delta float64, inst *mechanism.Instrument, src *noise.Source, v []float64) (*mechanism.Gaussian, error) {
	mech, err := Mechanism(s, rho, delta)
	if err != nil {
		return nil, err
	}
	return mech, Release(s, mech, inst, src, v)
}

// UpperIndex is the position of entry (p, q), p ≤ q, of an m × m
// symmetric matrix in its upper triangle listed row by row (the layout
// PackUpper writes and the Gram and covariance statistics release).
func UpperIndex(m, p, q int) int { return p*m - p*(p-1)/2 + (q - p) }

// PackUpper lists the upper triangle of s row by row.
func PackUpper(s *mat.SymDense) []float64 {
	raw := s.RawSymmetric()
	m := raw.N
	v := make([]float64, 0, m*(m+1)/2)
	for p := range m {
		v = append(v, raw.Data[p*raw.Stride+p:p*raw.Stride+m]...)
	}
	return v
}

// UnpackUpper is the symmetric matrix whose upper triangle PackUpper
// listed as v.
func UnpackUpper(m int, v []float64) *mat.SymDense {
	s := mat.NewSymDense(m, nil)
	raw := s.RawSymmetric()
	off := 0
	for p := range m {
		copy(raw.Data[p*raw.Stride+p:p*raw.Stride+m], v[off:off+m-p])
		off += m - p
	}
	return s
}

// RowPlan is the public per-rating plan an engine applies to a user's raw
// ratings to build her Row, as the in-process path does before summing:
// ratings below Positive dropped (top-N interactions; nil: none), values
// clamped to [Clamp[0], Clamp[1]] (nil: not), items mapped onto the
// Catalogue's indices (ratings of other items dropped) in increasing
// order. Each step reads one rating at a time, so it keeps every
// neighbouring relation.
type RowPlan struct {
	Catalogue []string    `json:"catalogue"`
	Positive  *float64    `json:"positive,omitempty"`
	Clamp     *[2]float64 `json:"clamp,omitempty"`
}

// Value is what the plan makes of a rating value v: the value to use and
// whether the rating is kept. The comparisons are in float32, as the
// in-process transforms (transform.Positives, release.ClampToScale) make
// them on the stored values.
func (p *RowPlan) Value(v float32) (float32, bool) {
	if p.Positive != nil && !(v >= float32(*p.Positive)) {
		return 0, false
	}
	if p.Clamp != nil {
		lo, hi := float32(p.Clamp[0]), float32(p.Clamp[1])
		if !(v >= lo) { // also NaN
			return lo, true
		}
		return min(v, hi), true
	}
	return v, true
}
