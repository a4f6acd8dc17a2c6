package dap

import (
	"fmt"
	"math"
	"math/big"
)

// Quantize maps a real contribution x to the task's integer lattice: q_j =
// x_j/Step rounded toward zero and clamped to [Min, Max], then, if Σq_j² >
// NormSq, every coordinate is scaled by √NormSq/‖q‖ and rounded toward
// zero (and, should floating point leave the sum above the bound, the
// largest |q_j| is decreased until it holds). The bound is checked on the
// integers actually sent, so it holds exactly (quantize, then clip).
//
// Rounding toward zero never increases a magnitude: |q_j| ≤ |x_j|/Step,
// so ‖q‖ ≤ ‖x‖/Step (a contribution with ‖x‖ ≤ Step·√NormSq is never
// clipped) and coordinatewise relations a statistic's sensitivity proof
// may rely on (a sign, |x_a| ≤ x_b) still hold for q. Error: 0 ≤
// |x_j| − Step·|q_j| < Step per coordinate (a bias toward zero of at most
// Step; ≤ Step·√(nonzero coordinates) in ℓ2). NaN or infinite entries are
// an error.
func (t *Task) Quantize(x []float64) ([]int64, error) {
	if len(x) != t.Dimension {
		return nil, fmt.Errorf("%w: task %s: contribution has %d entries, want %d", ErrInvalid, t.ID, len(x), t.Dimension)
	}
	q := make([]int64, len(x))
	lo, hi := float64(t.Min), float64(t.Max())
	for j, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: task %s: contribution entry %d is %v", ErrInvalid, t.ID, j, v)
		}
		q[j] = int64(math.Max(lo, math.Min(hi, math.Trunc(v/t.Step))))
	}
	t.clip(q)
	return q, nil
}

// normSq is Σq_j² exactly.
func normSq(q []int64) *big.Int {
	s, sq := new(big.Int), new(big.Int)
	for _, v := range q {
		b := big.NewInt(v)
		s.Add(s, sq.Mul(b, b))
	}
	return s
}

// clip enforces Σq² ≤ NormSq in place, shrinking toward zero only.
func (t *Task) clip(q []int64) {
	bound := big.NewInt(t.NormSq)
	n := normSq(q)
	if n.Cmp(bound) <= 0 {
		return
	}
	nf, _ := new(big.Float).SetInt(n).Float64()
	f := math.Sqrt(float64(t.NormSq) / nf)
	for j, v := range q {
		q[j] = int64(float64(v) * f) // conversion truncates toward zero
	}
	for normSq(q).Cmp(bound) > 0 {
		k := 0
		for j := range q {
			if abs64(q[j]) > abs64(q[k]) {
				k = j
			}
		}
		if q[k] > 0 {
			q[k]--
		} else {
			q[k]++
		}
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// CheckQuantized reports whether q is a vector an honest device may send:
// the right length, each entry in [Min, Max], Σq² ≤ NormSq.
func (t *Task) CheckQuantized(q []int64) error {
	if len(q) != t.Dimension {
		return fmt.Errorf("%w: task %s: %d entries, want %d", ErrInvalid, t.ID, len(q), t.Dimension)
	}
	for j, v := range q {
		if v < t.Min || v > t.Max() {
			return fmt.Errorf("%w: task %s: entry %d = %d outside [%d, %d]", ErrInvalid, t.ID, j, v, t.Min, t.Max())
		}
	}
	if normSq(q).Cmp(big.NewInt(t.NormSq)) > 0 {
		return fmt.Errorf("%w: task %s: Σq² above %d", ErrInvalid, t.ID, t.NormSq)
	}
	return nil
}
