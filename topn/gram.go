package topn

import (
	"context"
	"fmt"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/statistic"
)

// Columns maps items to the columns of a Gram matrix over a subset of
// them: Columns[j] is item j's column, −1 when it is not covered.
type Columns []int32

// NewColumns covers items (distinct item indices < n) in the order given.
func NewColumns(n int, items []int) (Columns, error) {
	c := make(Columns, n)
	for j := range c {
		c[j] = -1
	}
	for q, j := range items {
		if j < 0 || j >= n || c[j] >= 0 {
			return nil, fmt.Errorf("gram columns: item %d out of range or repeated", j)
		}
		c[j] = int32(q)
	}
	return c, nil
}

// Covered is the number of covered items.
func (c Columns) Covered() int {
	n := 0
	for _, q := range c {
		if q >= 0 {
			n++
		}
	}
	return n
}

// Contribution is one user's part of a Gram matrix: Weight·g_p·g_q for
// each pair p ≤ q of her covered items (Cols, in increasing column order),
// g the columns' public weights (1 when there are none); Weight depends
// only on her own columns. It is the per-user statistic a private Gram
// release sums.
type Contribution struct {
	Cols   []int32
	Weight float64
}

// Contribute is user u's contribution under weight(cols) (cols her covered
// columns); buf is reused for the columns.
func (c Columns) Contribute(items []int32, weight func(cols []int32) float64, buf []int32) Contribution {
	buf = buf[:0]
	for _, j := range items {
		if q := c[j]; q >= 0 {
			buf = append(buf, q)
		}
	}
	// Items come in increasing index order; columns need not.
	slices.Sort(buf)
	if len(buf) == 0 {
		return Contribution{Cols: buf}
	}
	return Contribution{Cols: buf, Weight: weight(buf)}
}

// Gram sums the users' contributions over the covered items into an m × m
// symmetric matrix (m = covered items), on w workers, with weight(n)
// depending on a user's number n of covered items. Unit weights give the
// co-occurrence counts EASE starts from.
func Gram(ctx context.Context, x *Interactions, cols Columns, weight func(n int) float64, w int) (*mat.SymDense, error) {
	return GramScaled(ctx, x, cols, nil, func(c []int32) float64 { return weight(len(c)) }, w)
}

// GramScaled is Gram with public column weights g (nil: 1): entry (p, q)
// of a user's part is weight(her columns)·g_p·g_q.
func GramScaled(ctx context.Context, x *Interactions, cols Columns, g []float64, weight func(cols []int32) float64, w int) (*mat.SymDense, error) {
	m := cols.Covered()
	if m == 0 {
		return nil, fmt.Errorf("gram: no items covered")
	}
	if g != nil && len(g) != m {
		return nil, fmt.Errorf("gram: %d column weights for %d columns", len(g), m)
	}
	w = workers(w)
	// Each worker sums in double-double form (statistic.DD), and the
	// workers' sums merge in that form: the result is the float64 nearest
	// the exact sum whatever the split, the same float64s as
	// statistic.Sum over gram.Gram's parts and privrec-beam's combine (a
	// plain float64 sum differs from them by rounding, which the release's
	// noise lattice turns into a different released value now and then:
	// measured at 10⁶ users).
	parts := make([]statistic.DD, w)
	bufs := make([][]int32, w)
	err := parallel(ctx, x.NumUsers, w, 64, func(wk, lo, hi int) {
		if parts[wk].Hi == nil {
			parts[wk] = statistic.NewDD(m * m)
		}
		acc := parts[wk]
		for u := lo; u < hi; u++ {
			c := cols.Contribute(x.Row(u), weight, bufs[wk])
			bufs[wk] = c.Cols
			for a, p := range c.Cols {
				row := int(p) * m
				if g == nil {
					for _, q := range c.Cols[a:] {
						acc.Add(row+int(q), c.Weight)
					}
					continue
				}
				wp := c.Weight * g[p]
				for _, q := range c.Cols[a:] {
					acc.Add(row+int(q), wp*g[q])
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	sum := statistic.Merged(parts, m*m)
	for p := range m {
		for q := p + 1; q < m; q++ {
			sum[q*m+p] = sum[p*m+q]
		}
	}
	return mat.NewSymDense(m, sum), nil
}
