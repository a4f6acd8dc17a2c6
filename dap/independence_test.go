package dap

import (
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// lowBits is the low 4 bits of a field element's canonical value (its
// encoding is little-endian).
func lowBits(v Vec, j int) int {
	b, err := v[j].MarshalBinary()
	if err != nil {
		panic(err)
	}
	return int(b[0] & 15)
}

// chiSquare2 is the two-sample chi-square homogeneity statistic of two
// histograms with equal totals.
func chiSquare2(a, b []int) float64 {
	var s float64
	for i := range a {
		if n := a[i] + b[i]; n > 0 {
			d := float64(a[i] - b[i])
			s += d * d / float64(n)
		}
	}
	return s
}

// TestSharesIndependentOfContribution: what each aggregator stores from a
// report (its output share, which is what it adds to its stored aggregate
// share; the sealed input share is ciphertext) has the same distribution
// for two very different contributions: all coordinates at −3 and all at +3
// Max. Two-sample chi-square on the low 4 bits of coordinates 0 and 3
// (15 degrees of freedom each), at α = 1e-6 per comparison: false-failure
// rate ≤ 4·10⁻⁶. The positive control (the sum of the two shares, which
// does reveal the contribution) must be rejected, so the test can fail.
func TestSharesIndependentOfContribution(t *testing.T) {
	n := 1500
	if testing.Short() {
		n = 600
	}
	tk := testTask(t)
	a := newTestAggs(t, tk)
	hist := func(q []int64) (leader, helper, sum [][]int) {
		leader, helper, sum = make([][]int, 2), make([][]int, 2), make([][]int, 2)
		for k := range 2 {
			leader[k], helper[k], sum[k] = make([]int, 16), make([]int, 16), make([]int, 16)
		}
		for range n {
			r, err := tk.Shard(q, a.lk.Public, a.hk.Public)
			if err != nil {
				t.Fatal(err)
			}
			ol, oh, err := a.run(r)
			if err != nil {
				t.Fatal(err)
			}
			s := tk.NewVec()
			s.AddAssign(ol)
			s.AddAssign(oh)
			for k, j := range []int{0, 3} {
				leader[k][lowBits(ol, j)]++
				helper[k][lowBits(oh, j)]++
				sum[k][lowBits(s, j)]++
			}
		}
		return
	}
	lo := []int64{-3, -3, -3, -3, -3}
	hi := []int64{3, 3, 3, 3, 3} // Σq² = 45 ≤ 64
	la, ha, sa := hist(lo)
	lb, hb, sb := hist(hi)
	crit := distuv.ChiSquared{K: 15}.Quantile(1 - 1e-6)
	for k := range 2 {
		if c := chiSquare2(la[k], lb[k]); c > crit {
			t.Errorf("leader's share depends on the contribution: χ² = %.1f > %.1f", c, crit)
		}
		if c := chiSquare2(ha[k], hb[k]); c > crit {
			t.Errorf("helper's share depends on the contribution: χ² = %.1f > %.1f", c, crit)
		}
		if c := chiSquare2(sa[k], sb[k]); c <= crit {
			t.Errorf("positive control: the sum of both shares looks independent (χ² = %.1f)", c)
		}
	}
}
