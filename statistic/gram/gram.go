// Package gram is the item–item Gram statistic of the private top-N
// models (a statistic.Contribution). It lives apart from package
// statistic because it is built on topn's columns, and topn imports mf,
// which imports statistic.
package gram

import (
	"context"
	"fmt"
	"math"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/statistic"
	"github.com/privrec/privrec/topn"
)

// Kind is the Gram statistic's kind for statistic.Decode.
const Kind = "gram"

func init() { statistic.Register(Kind, func() statistic.Contribution { return new(Gram) }) }

// Gram is the statistic of the private top-N models' item–item Gram: the
// upper triangle (UpperIndex layout) of Σ_u x_u x_uᵀ over the covered
// columns, x_u user u's indicator over her covered items, with public
// column weights g and scaled to ℓ2 norm ≤ Norm.
//
// User u's part has entries W_u·g_p·g_q for her columns' pairs p ≤ q, W_u
// chosen from her columns alone (Weight) so that its squared norm
// W_u²·((Σ g_p²)² + Σ g_p⁴)/2 is at most Norm². Two users' parts have
// non-negative entries, so ‖x − x'‖² ≤ ‖x‖² + ‖x'‖² ≤ 2·Norm²:
// Δ₂ = √2·Norm under replacement.
type Gram struct {
	// Columns maps item j to its column (−1: not covered).
	Columns topn.Columns `json:"columns"`
	// Covered is the number of covered columns m.
	Covered int `json:"covered"`
	// ColWeights are the public column weights g (nil: 1).
	ColWeights []float64 `json:"col_weights,omitempty"`
	// Norm bounds each user's part.
	Norm float64 `json:"norm"`
}

// NewGram is the Gram statistic over the columns cols (colW: nil or one
// public weight per covered column) with each user's part of ℓ2 norm ≤
// norm.
func NewGram(cols topn.Columns, colW []float64, norm float64) (*Gram, error) {
	g := &Gram{Columns: cols, Covered: cols.Covered(), ColWeights: colW, Norm: norm}
	return g, g.Validate()
}

// Kind implements Contribution.
func (g *Gram) Kind() string { return Kind }

// GramSensitivity is the ℓ2 sensitivity √2·norm of a Gram statistic
// (see Gram).
func GramSensitivity(norm float64) mechanism.Sensitivity {
	return mechanism.Sensitivity{Value: math.Sqrt2 * norm, Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}
}

// Spec implements Contribution.
func (g *Gram) Spec() statistic.Spec {
	return statistic.Spec{Name: "the item–item Gram", Dim: g.Covered * (g.Covered + 1) / 2, Sensitivity: GramSensitivity(g.Norm)}
}

// Weight is W_u as a function of a user's covered columns (see Gram): for
// unit column weights min(1, Norm/√(n(n+1)/2)) over her n columns, a hair
// below so rounding cannot raise the norm.
func (g *Gram) Weight() func(cols []int32) float64 {
	norm, cw := g.Norm, g.ColWeights
	if cw == nil {
		return func(cols []int32) float64 {
			n := len(cols)
			return math.Min(1, norm/math.Sqrt(float64(n)*float64(n+1)/2)) * (1 - 1e-12)
		}
	}
	return func(cols []int32) float64 {
		var s2, s4 float64
		for _, p := range cols {
			x := cw[p] * cw[p]
			s2 += x
			s4 += x * x
		}
		return norm / math.Sqrt((s2*s2+s4)/2) * (1 - 1e-12)
	}
}

// Contribute implements Contribution.
func (g *Gram) Contribute(r statistic.Row, add func(i int, x float64)) {
	c := g.Columns.Contribute(r.Items, g.Weight(), nil)
	m := g.Covered
	for a, p := range c.Cols {
		base := statistic.UpperIndex(m, int(p), int(p))
		// The entries topn.GramScaled adds: W, or (W·g_p)·g_q.
		if g.ColWeights == nil {
			for _, q := range c.Cols[a:] {
				add(base+int(q-p), c.Weight)
			}
			continue
		}
		wp := c.Weight * g.ColWeights[p]
		for _, q := range c.Cols[a:] {
			add(base+int(q-p), wp*g.ColWeights[q])
		}
	}
}

// SumMatrix is the in-process sum over x's users on w workers
// (topn.GramScaled, the same per-user parts), in the statistic.UpperIndex layout.
func (g *Gram) SumMatrix(ctx context.Context, x *topn.Interactions, w int) ([]float64, error) {
	gram, err := topn.GramScaled(ctx, x, g.Columns, g.ColWeights, g.Weight(), w)
	if err != nil {
		return nil, err
	}
	return statistic.PackUpper(gram), nil
}

// Validate checks the plan is consistent.
func (g *Gram) Validate() error {
	if g.Covered < 1 || g.Covered != g.Columns.Covered() {
		return fmt.Errorf("gram: %d covered columns declared, %d in the column map", g.Covered, g.Columns.Covered())
	}
	if !(g.Norm > 0) || math.IsInf(g.Norm, 0) {
		return fmt.Errorf("gram: norm %g must be finite and > 0", g.Norm)
	}
	if g.ColWeights != nil && len(g.ColWeights) != g.Covered {
		return fmt.Errorf("gram: %d column weights for %d columns", len(g.ColWeights), g.Covered)
	}
	for q, c := range g.Columns {
		if c >= int32(g.Covered) {
			return fmt.Errorf("gram: item %d maps to column %d of %d", q, c, g.Covered)
		}
	}
	return nil
}
