package dap

import (
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/privrec/privrec/statistic"
)

// The benchmarks' tasks are ML-1M's (3 706 items) at the steps privrec
// dap simulate uses. Each has a sub-benchmark "chunk=sqrt" with the chunk
// length of tasks created before ChunkLengthFor (√(Dimension·Bits)), to
// compare the two in one binary:
//
//	go test -run XXX -bench 'Shard|Verify' -benchtime 5x ./dap

// benchTask is the dp-popularity counts: 3 706 coordinates at 9 bits
// (step 2⁻⁸), a user with 100 items.
func benchTask(b *testing.B) (Task, []int64) {
	tk, err := NewTask(Task{ID: "bench", Statistic: "counts", Dimension: 3706, Step: 1.0 / 256, Min: 0, Bits: 9, NormSq: 256 * 256 * 50, Rho: 0.5, MinReports: 1})
	if err != nil {
		b.Fatal(err)
	}
	q := make([]int64, tk.Dimension)
	for j := range 100 {
		var x [1]byte
		rand.Read(x[:])
		q[int(x[0])*14+j%14] = 36
	}
	return tk, q
}

// biasBenchTask is dpals' bias statistics with spreads: 3·3 706 + 2 =
// 11 120 signed coordinates at 10 bits (step 2⁻⁸), a user with 100 items.
func biasBenchTask(b *testing.B) (Task, []int64) {
	tk, err := NewTask(Task{ID: "bench-bias", Statistic: "bias", Dimension: 3*3706 + 2, Step: 1.0 / 256, Min: -512, Bits: 10, NormSq: 256 * 256 * 5, Rho: 0.5, MinReports: 1})
	if err != nil {
		b.Fatal(err)
	}
	q := make([]int64, tk.Dimension)
	for j := range 100 {
		q[j*37] = 25
		q[3706+j*37] = -20
		q[2*3706+j*37] = 10
	}
	return tk, q
}

// gramBenchTask is a device's dp-ease Gram over m covered items at 10
// bits (step 2⁻⁹): m = 228 is privrec dap simulate's default budget
// (26 106 coordinates), m = 216 the Gram of its 300-device run on real
// servers (23 436); a user with 40 covered items (820 non-zero entries).
// Under GOOS=js GOARCH=wasm (go_js_wasm_exec) it is the browser's cost.
func gramBenchTask(b *testing.B, m int) (Task, []int64) {
	return gramBitsTask(b, m, 9, 10)
}

// gramBitsTask is gramBenchTask at step 2^−stepBits with bits bits per
// coordinate (entries above (2^bits − 1)·step would be capped there).
func gramBitsTask(b *testing.B, m, stepBits, bits int) (Task, []int64) {
	unit := int64(1) << stepBits
	tk, err := NewTask(Task{ID: "bench-gram", Statistic: "gram", Dimension: m * (m + 1) / 2, Step: 1 / float64(unit), Min: 0, Bits: bits, NormSq: unit * unit, Rho: 0.5, MinReports: 1})
	if err != nil {
		b.Fatal(err)
	}
	q := make([]int64, tk.Dimension)
	for j := range 820 {
		q[j*31%len(q)] = unit * 12 / 512 // unit/√820, truncated entries of a unit-norm part
	}
	return tk, q
}

// chunks runs f with the task's chunk length and with the earlier rule.
func chunks(b *testing.B, tk Task, q []int64, f func(*testing.B, Task, []int64)) {
	legacy := tk
	legacy.ChunkLength = 0
	b.Run("chunk=fill", func(b *testing.B) { f(b, tk, q) })
	b.Run("chunk=sqrt", func(b *testing.B) { f(b, legacy, q) })
}

func BenchmarkShard(b *testing.B) {
	tk, q := benchTask(b)
	chunks(b, tk, q, benchShard)
}

func BenchmarkShardBias(b *testing.B) {
	tk, q := biasBenchTask(b)
	chunks(b, tk, q, benchShard)
}

func BenchmarkShardGram(b *testing.B) {
	for _, m := range []int{228, 216} {
		b.Run(fmt.Sprintf("m=%d", m), func(b *testing.B) {
			tk, q := gramBenchTask(b, m)
			chunks(b, tk, q, benchShard)
		})
	}
}

// BenchmarkGramBits: a smaller Gram report by fewer bits per
// coordinate. At step 2^−s with b bits a coordinate holds at most
// (2^b − 1)·2^−s: 10 bits at 2^−9 (the engine's default) hold 1.998, the
// whole range of a unit-norm part's entries; fewer bits cap an entry
// below 1 (users with few covered items would be scaled down further),
// a coarser step doubles the truncation error (each entry < 2^−s low).
// Report bytes, sharding and both aggregators' preparation per report,
// m = 228:
//
//	go test -run XXX -bench GramBits -benchtime 4x -count 3 ./dap
func BenchmarkGramBits(b *testing.B) {
	for _, c := range []struct{ step, bits int }{{9, 10}, {9, 8}, {9, 7}, {8, 9}, {8, 7}} {
		tk, q := gramBitsTask(b, 228, c.step, c.bits)
		b.Run(fmt.Sprintf("step=2^-%d/bits=%d/shard", c.step, c.bits), func(b *testing.B) { benchShard(b, tk, q) })
		b.Run(fmt.Sprintf("step=2^-%d/bits=%d/verify", c.step, c.bits), func(b *testing.B) { benchVerify(b, tk, q) })
	}
}

// BenchmarkVerify… are both aggregators' preparation of one report (in
// one process).
func BenchmarkVerify(b *testing.B) {
	tk, q := benchTask(b)
	chunks(b, tk, q, benchVerify)
}

func BenchmarkVerifyBias(b *testing.B) {
	tk, q := biasBenchTask(b)
	chunks(b, tk, q, benchVerify)
}

func BenchmarkVerifyGram(b *testing.B) {
	for _, m := range []int{228, 216} {
		b.Run(fmt.Sprintf("m=%d", m), func(b *testing.B) {
			tk, q := gramBenchTask(b, m)
			chunks(b, tk, q, benchVerify)
		})
	}
}

func benchAggs(b *testing.B, tk Task) testAggs {
	var t testing.T
	a := newTestAggs(&t, tk)
	if t.Failed() {
		b.Fatal("setting up the aggregators failed")
	}
	return a
}

func benchShard(b *testing.B, tk Task, q []int64) {
	a := benchAggs(b, tk)
	var size int
	c0 := cpuSeconds()
	for b.Loop() {
		r, err := tk.Shard(q, a.lk.Public, a.hk.Public)
		if err != nil {
			b.Fatal(err)
		}
		size = r.Size()
	}
	reportCPU(b, c0)
	b.ReportMetric(float64(size), "bytes/report")
}

func benchVerify(b *testing.B, tk Task, q []int64) {
	a := benchAggs(b, tk)
	r, err := tk.Shard(q, a.lk.Public, a.hk.Public)
	if err != nil {
		b.Fatal(err)
	}
	c0 := cpuSeconds()
	for b.Loop() {
		if _, _, err := a.run(r); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, c0)
}

// reportCPU adds the process's CPU milliseconds per operation since c0.
func reportCPU(b *testing.B, c0 float64) {
	if c := cpuSeconds(); c > 0 {
		b.ReportMetric((c-c0)*1000/float64(b.N), "cpu-ms/op")
	}
}

// BenchmarkDerive: what a device and the helper pay to derive a task's
// privacy parameters from its plan, at ML-1M's catalogue (the counts of
// dp-popularity, 3 706 items, and the bias statistics, 11 120
// coordinates): decoding the plan and the catalogue's index dominate.
//
//	go test -run XXX -bench Derive ./dap
func BenchmarkDerive(b *testing.B) {
	ids := make([]string, 3706)
	for j := range ids {
		ids[j] = fmt.Sprintf("%d", j+1)
	}
	row := statistic.RowPlan{Catalogue: ids, Clamp: &[2]float64{1, 5}}
	for _, c := range []statistic.Contribution{&statistic.Counts{Items: 3706, Cap: 50}, &statistic.Bias{Items: 3706, Mid: 3, Half: 2, Clip: 2, Spread: true}} {
		mech, err := statistic.Mechanism(c.Spec(), 0.5, 1e-6)
		if err != nil {
			b.Fatal(err)
		}
		tk, err := Lattice{StepBits: 8, GramStepBits: 9}.TaskFor("bench", row, c, mech)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.Kind(), func(b *testing.B) {
			for b.Loop() {
				if _, err := Derive(tk); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
