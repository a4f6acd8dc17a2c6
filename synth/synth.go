// Package synth generates the synthetic data sets of the seed papers, with
// the papers' parameters as defaults and a known ground truth:
//
//   - OneBit — seed 000 (one-bit matrix completion with DP): a rank-r
//     M = M1 M2ᵀ with U[−½, ½] factors scaled to ‖M‖∞ = α, a uniformly
//     random 15 % of the entries observed as signs Y = ±1 drawn through a
//     probit or logistic link.
//   - RankOne — seed 001 (joint-DP matrix completion): Y* = u vᵀ with
//     ‖Y*‖∞ = 1, 500 000 users × 400 items, exactly 80 ratings per user;
//     40 M ratings built straight into the sparse store on all cores.
//   - LowRank — seeds 002/003 (local-DP rating collection): a low-rank true
//     rating matrix Θ in [−1, 1] (or on a 1..d scale) observed on a random
//     subset with bounded noise, the generating process of the papers'
//     Figure 1. The papers run no experiments, so the sizes are ours.
//
// Seed 004's tensor generators live with the tensor code.
//
// Every generator is deterministic for its seed (independent of the number
// of cores) and returns the observed ratings as a ratings.Matrix (users and
// items named 1..n) and the truth as Factors, a dense matrix held by its
// factors so that even the 500 000 × 400 truth of seed 001 costs 4 MB.
package synth

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/ratings"
)

// Factors is a matrix given by its factors: At(i, j) = Σ_k U[i,k]·V[j,k].
// It implements mat.Matrix.
type Factors struct {
	U, V *mat.Dense // rows × rank and cols × rank
}

// Dims returns the shape (rows of U × rows of V).
func (f *Factors) Dims() (r, c int) {
	r, _ = f.U.Dims()
	c, _ = f.V.Dims()
	return r, c
}

// At returns entry (i, j).
func (f *Factors) At(i, j int) float64 {
	return mat.Dot(f.U.RowView(i), f.V.RowView(j))
}

// T returns the transpose (V Uᵀ).
func (f *Factors) T() mat.Matrix { return &Factors{U: f.V, V: f.U} }

// Rank returns the inner dimension.
func (f *Factors) Rank() int { _, k := f.U.Dims(); return k }

// Dense materialises the matrix (rows × cols float64s: mind the size).
func (f *Factors) Dense() *mat.Dense {
	var d mat.Dense
	d.Mul(f.U, f.V.T())
	return &d
}

// MaxAbs returns ‖·‖∞ = max |At(i, j)|.
func (f *Factors) MaxAbs() float64 {
	r, c := f.Dims()
	if f.Rank() == 1 { // max |u_i v_j| = max|u|·max|v|
		return maxAbs(f.U.RawMatrix().Data, r) * maxAbs(f.V.RawMatrix().Data, c)
	}
	m := 0.0
	row := make([]float64, c)
	out := mat.NewVecDense(c, row)
	for i := range r {
		out.MulVec(f.V, f.U.RowView(i))
		m = max(m, maxAbs(row, c))
	}
	return m
}

func maxAbs(x []float64, n int) float64 {
	m := 0.0
	for _, v := range x[:n] {
		m = max(m, math.Abs(v))
	}
	return m
}

// Link is the noise model of one-bit observations: Y = +1 with probability
// h(M), −1 otherwise.
type Link string

const (
	// Probit is h(x) = Φ(x/σ): Y = sign(M + Z), Z ~ N(0, σ²).
	Probit Link = "probit"
	// Logistic is h(x) = 1/(1 + e^−x): Y = sign(M + Z), Z standard logistic.
	Logistic Link = "logistic"
)

// ParseLink accepts "probit" (also "gaussian") and "logistic".
func ParseLink(s string) (Link, error) {
	switch s {
	case "probit", "gaussian":
		return Probit, nil
	case "logistic":
		return Logistic, nil
	}
	return "", fmt.Errorf("synth: unknown link %q (want probit or logistic)", s)
}

// Prob returns h(x) for the link (sigma is the probit scale).
func (l Link) Prob(x, sigma float64) float64 {
	if l == Logistic {
		return 1 / (1 + math.Exp(-x))
	}
	return 0.5 * math.Erfc(-x/(sigma*math.Sqrt2))
}

// newRand is the deterministic stream of a generator.
func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream))
}

// uniformFactor fills an n × r matrix with U[lo, hi) entries.
func uniformFactor(r *rand.Rand, n, k int, lo, hi float64) *mat.Dense {
	d := make([]float64, n*k)
	for i := range d {
		d[i] = lo + (hi-lo)*r.Float64()
	}
	return mat.NewDense(n, k, d)
}

// observe chooses exactly s of the rows×cols cells uniformly (selection
// sampling in row-major order, so each row's items come out sorted) and
// returns their CSR pattern; value(i, j) gives each chosen cell's rating.
func observe(r *rand.Rand, rows, cols, s int, value func(i, j int) float32) (*ratings.Matrix, error) {
	total := rows * cols
	rowPtr := make([]int64, rows+1)
	rowCol := make([]int32, 0, s)
	rowVal := make([]float32, 0, s)
	chosen := 0
	for i := range rows {
		for j := range cols {
			t := i*cols + j
			if chosen < s && r.IntN(total-t) < s-chosen {
				rowCol = append(rowCol, int32(j))
				rowVal = append(rowVal, value(i, j))
				chosen++
			}
		}
		rowPtr[i+1] = int64(len(rowCol))
	}
	m, err := ratings.FromCSR(nil, nil, cols, rowPtr, rowCol, rowVal, nil)
	if err != nil {
		return nil, fmt.Errorf("synth: building the observed matrix: %w", err)
	}
	return m, nil
}

// checkFrac validates an observation fraction and returns the number of
// observed cells.
func checkFrac(name string, frac float64, rows, cols int) (int, error) {
	if !(frac > 0 && frac <= 1) {
		return 0, fmt.Errorf("synth: %s %v must be in (0, 1]", name, frac)
	}
	return int(math.Round(frac * float64(rows) * float64(cols))), nil
}

// maxCells bounds rows×cols for the generators that visit every cell.
const maxCells = 1 << 31

// normalFactor fills an n × k matrix with N(0, 1) entries.
func normalFactor(r *rand.Rand, n, k int) *mat.Dense {
	d := make([]float64, n*k)
	for i := range d {
		d[i] = r.NormFloat64()
	}
	return mat.NewDense(n, k, d)
}
