package dap

import (
	"crypto/rand"
	"testing"
)

// benchTask is MovieLens-1M's catalogue (3 706 items) at 9 bits: the
// dp-popularity counts at lattice step 1/256.
func benchTask(b *testing.B) (Task, testAggs, []int64) {
	tk, err := NewTask(Task{ID: "bench", Statistic: "counts", Dimension: 3706, Step: 1.0 / 256, Min: 0, Bits: 9, NormSq: 256 * 256 * 50, Rho: 0.5, MinReports: 1})
	if err != nil {
		b.Fatal(err)
	}
	var t testing.T
	a := newTestAggs(&t, tk)
	q := make([]int64, tk.Dimension)
	for j := range 100 {
		var x [1]byte
		rand.Read(x[:])
		q[int(x[0])*14+j%14] = 36
	}
	return tk, a, q
}

func BenchmarkShard(b *testing.B) {
	tk, a, q := benchTask(b)
	var size int
	for b.Loop() {
		r, err := tk.Shard(q, a.lk.Public, a.hk.Public)
		if err != nil {
			b.Fatal(err)
		}
		size = r.Size()
	}
	b.ReportMetric(float64(size), "bytes/report")
}

func BenchmarkVerify(b *testing.B) {
	tk, a, q := benchTask(b)
	r, err := tk.Shard(q, a.lk.Public, a.hk.Public)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := a.run(r); err != nil {
			b.Fatal(err)
		}
	}
}
