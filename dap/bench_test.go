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
	benchShard(b, tk, a, q)
}

// BenchmarkShardGram is a device's dp-ease Gram at privrec dap
// simulate's default budget: 228 covered items, 26 106 coordinates at 10
// bits (step 2⁻⁹), a user with 40 covered items (820 non-zero entries).
// Under GOOS=js GOARCH=wasm (go_js_wasm_exec) it is the browser's cost.
func BenchmarkShardGram(b *testing.B) {
	tk, a, q := gramBenchTask(b)
	benchShard(b, tk, a, q)
}

// BenchmarkVerifyGram is both aggregators' preparation of one such Gram
// report (in one process).
func BenchmarkVerifyGram(b *testing.B) {
	tk, a, q := gramBenchTask(b)
	benchVerify(b, tk, a, q)
}

func gramBenchTask(b *testing.B) (Task, testAggs, []int64) {
	tk, err := NewTask(Task{ID: "bench-gram", Statistic: "gram", Dimension: 228 * 229 / 2, Step: 1.0 / 512, Min: 0, Bits: 10, NormSq: 512 * 512, Rho: 0.5, MinReports: 1})
	if err != nil {
		b.Fatal(err)
	}
	var t testing.T
	a := newTestAggs(&t, tk)
	q := make([]int64, tk.Dimension)
	for j := range 820 {
		q[j*31%len(q)] = 12 // 512/√820 ≈ 17.9, truncated entries of a unit-norm part
	}
	return tk, a, q
}

func benchShard(b *testing.B, tk Task, a testAggs, q []int64) {
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
	benchVerify(b, tk, a, q)
}

func benchVerify(b *testing.B, tk Task, a testAggs, q []int64) {
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
