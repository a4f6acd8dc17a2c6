package dap

import (
	"bytes"
	"crypto/rand"
	"errors"
	"math"
	"testing"

	"github.com/privrec/privrec/privacy/noise"
)

// testTask is a small signed task: 5 coordinates in [-8, 8), ‖q‖² ≤ 64.
func testTask(t *testing.T) Task {
	t.Helper()
	tk, err := NewTask(Task{ID: "t1", Statistic: "test", Dimension: 5, Step: 0.25, Min: -8, Bits: 4, NormSq: 64, Rho: 0.5, MinReports: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

type testAggs struct {
	leader, helper *Preparer
	lk, hk         KeyPair
}

func newTestAggs(t *testing.T, tk Task) testAggs {
	t.Helper()
	secret := make([]byte, VerifyKeySize)
	rand.Read(secret)
	lk, err := NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	hk, err := NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewPreparer(tk, Leader, lk, secret)
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewPreparer(tk, Helper, hk, secret)
	if err != nil {
		t.Fatal(err)
	}
	return testAggs{l, h, lk, hk}
}

// run prepares one report at both aggregators and returns the two output
// shares, or the first error.
func (a testAggs) run(r *Report) (Vec, Vec, error) {
	pl, err := a.leader.Prepare(r.ID, r.PublicShare, r.LeaderShare)
	if err != nil {
		return nil, nil, err
	}
	ph, err := a.helper.Prepare(r.ID, r.PublicShare, r.HelperShare)
	if err != nil {
		return nil, nil, err
	}
	ol, err := a.leader.Finish(pl, pl.Share, ph.Share)
	if err != nil {
		return nil, nil, err
	}
	oh, err := a.helper.Finish(ph, pl.Share, ph.Share)
	return ol, oh, err
}

func TestRoundTrip(t *testing.T) {
	tk := testTask(t)
	a := newTestAggs(t, tk)
	contribs := [][]float64{{1, -1, 0.5, 0, -2}, {0.25, 0.25, 0.25, 0.25, 0.25}, {-1.9, 1.8, 0, 0, 0}}
	aggL, aggH := tk.NewVec(), tk.NewVec()
	want := make([]int64, tk.Dimension)
	for _, x := range contribs {
		q, err := tk.Quantize(x)
		if err != nil {
			t.Fatal(err)
		}
		for j := range q {
			want[j] += q[j]
		}
		r, err := tk.Shard(q, a.lk.Public, a.hk.Public)
		if err != nil {
			t.Fatal(err)
		}
		ol, oh, err := a.run(r)
		if err != nil {
			t.Fatal(err)
		}
		aggL.AddAssign(ol)
		aggH.AddAssign(oh)
	}
	got, vals, err := tk.Combine(aggL, aggH, len(contribs))
	if err != nil {
		t.Fatal(err)
	}
	for j := range want {
		if got[j] != want[j] || vals[j] != float64(want[j])*tk.Step {
			t.Fatalf("coordinate %d: got %d (%v), want %d", j, got[j], vals[j], want[j])
		}
	}
}

func TestQuantizeClipsExactly(t *testing.T) {
	tk := testTask(t)
	tests := []struct {
		name string
		x    []float64
	}{
		{"inside", []float64{0.5, -0.5, 0, 0, 1}},
		{"norm", []float64{1.9, 1.9, 1.9, 1.9, 1.9}},
		{"range", []float64{100, -100, 0, 0, 0}},
		{"rounding", []float64{1.99, -1.99, 1.99, -1.99, 0.01}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := tk.Quantize(tc.x)
			if err != nil {
				t.Fatal(err)
			}
			if err := tk.CheckQuantized(q); err != nil {
				t.Fatal(err)
			}
			var n float64
			for _, v := range tc.x {
				n += v * v
			}
			for j := range q { // never away from zero
				if math.Abs(float64(q[j]))*tk.Step > math.Abs(tc.x[j]) {
					t.Fatalf("entry %d: %v quantized to %d", j, tc.x[j], q[j])
				}
			}
			if math.Sqrt(n)/tk.Step <= 8 { // never clipped: error < step, toward zero
				for j := range q {
					if d := math.Abs(tc.x[j]) - tk.Step*math.Abs(float64(q[j])); d < 0 || d >= tk.Step {
						t.Fatalf("entry %d: %v quantized to %d", j, tc.x[j], q[j])
					}
				}
			}
		})
	}
	if _, err := tk.Quantize([]float64{math.NaN(), 0, 0, 0, 0}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NaN: %v", err)
	}
}

func TestSigmaFor(t *testing.T) {
	for _, mode := range []NoiseMode{NoiseEachAlone, NoiseSplit} {
		for _, rho := range []float64{0.01, 0.5, 8} {
			s, err := SigmaFor(rho, 8, 100, mode)
			if err != nil {
				t.Fatal(err)
			}
			r, _ := RhoOf(s, 8, 100, mode)
			r1, _ := RhoOf(s-1, 8, 100, mode)
			if r > rho || r1 <= rho {
				t.Fatalf("%s ρ=%v: σ=%d gives %v, σ-1 gives %v", mode, rho, s, r, r1)
			}
		}
	}
	// Each-alone: σ² = Δ²/(2ρ), so at ρ = 0.5, Δ = 8: σ = 8.
	if s, _ := SigmaFor(0.5, 8, 100, NoiseEachAlone); s != 8 {
		t.Fatalf("σ = %d, want 8", s)
	}
	// Split: each σ is ≈ 1/√2 of the each-alone σ (the honest-but-curious saving).
	a, _ := SigmaFor(0.01, 8, 100, NoiseEachAlone)
	b, _ := SigmaFor(0.01, 8, 100, NoiseSplit)
	if r := float64(b) / float64(a); math.Abs(r-1/math.Sqrt2) > 0.02 {
		t.Fatalf("split/alone σ ratio %v, want ≈ 0.707", r)
	}
}

func TestNoiseIsSeededExactSampler(t *testing.T) {
	tk := testTask(t)
	a, b := tk.NewVec(), tk.NewVec()
	tk.AddNoise(a, noise.Seeded(3))
	tk.AddNoise(b, noise.Seeded(3))
	x, _ := EncodeVec(a)
	y, _ := EncodeVec(b)
	if !bytes.Equal(x, y) {
		t.Fatal("same seed, different noise")
	}
}

func TestDeviceLedger(t *testing.T) {
	tk := countsTask(t) // ρ 0.5
	l, err := NewLedger("http://leader", 1.2)
	if err != nil {
		t.Fatal(err)
	}
	t2 := tk
	t2.ID = "t2"
	t3 := tk
	t3.ID = "t3"
	steps := []struct {
		task *Task
		err  error
		want float64
	}{{&tk, nil, 0.5}, {&tk, ErrAlreadySent, 0.5}, {&t2, nil, 1}, {&t3, ErrOverBudget, 1}}
	for i, s := range steps {
		err := l.Reserve(s.task)
		if !errors.Is(err, s.err) || l.SpentRho() != s.want {
			t.Fatalf("step %d: err %v, spent %v; want %v, %v", i, err, l.SpentRho(), s.err, s.want)
		}
	}
	path := t.TempDir() + "/ledger.json"
	if err := l.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := LoadLedger(path)
	if err != nil || back.SpentRho() != 1 {
		t.Fatalf("reloaded: %v, %v", back, err)
	}
}

// TestChunkLengthFor: the gadget's calls fill its power-of-two domain
// (calls = P − 1), the chunk is between √L and ≈ 2√L, and the proof
// (2·chunk wire seeds and a gadget polynomial of 2P − 1 coefficients)
// stays within 2.5 % of the measurement from L = 10⁴ on.
func TestChunkLengthFor(t *testing.T) {
	for _, l := range []int{1, 2, 3, 4, 5, 17, 100, 1000, 9999, 33354, 74140, 111200, 234360, 261060, 1 << 21, 32 << 20} {
		c := ChunkLengthFor(l)
		calls := (l + c - 1) / c
		p := 1
		for p < calls+1 {
			p *= 2
		}
		root := math.Sqrt(float64(l))
		switch {
		case c < 1 || c > l:
			t.Errorf("L = %d: chunk %d outside [1, L]", l, c)
		case l >= 4 && calls != p-1:
			t.Errorf("L = %d: chunk %d gives %d calls, domain %d: calls do not fill it", l, c, calls, p)
		case l >= 4 && (float64(c) < root || float64(c) > 2*root*float64(p)/float64(p-1)+1):
			t.Errorf("L = %d: chunk %d outside [√L, 2√L·P/(P − 1) + 1] = [%.1f, %.1f]", l, c, root, 2*root*float64(p)/float64(p-1)+1)
		case l >= 10000 && float64(2*c+2*p-1) > 0.025*float64(l):
			t.Errorf("L = %d: proof of %d elements, over 2.5 %% of L", l, 2*c+2*p-1)
		}
	}
}

// TestChunkLength: NewTask records the chunk length, Validate refuses
// one outside [1, L] or with too many gadget calls, and a task stored
// before the field existed (zero: √L) still shards and verifies.
func TestChunkLength(t *testing.T) {
	tk := testTask(t)
	if want := ChunkLengthFor(tk.Dimension * tk.Bits); tk.ChunkLength != want {
		t.Fatalf("NewTask: chunk_length %d, want %d", tk.ChunkLength, want)
	}
	big, err := NewTask(Task{ID: "big", Statistic: "test", Dimension: 1 << 20, Step: 1, Bits: 1, NormSq: 1, Rho: 0.5, MinReports: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tk   Task
		c    int
	}{{"negative", tk, -1}, {"beyond L", tk, tk.Dimension*tk.Bits + 1}, {"too many calls", big, 15}} {
		bad := tc.tk
		bad.ChunkLength = tc.c
		if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: chunk_length %d: got %v, want ErrInvalid", tc.name, tc.c, err)
		}
	}
	for _, c := range []int{0, 1, tk.Dimension * tk.Bits} {
		k := tk
		k.ChunkLength = c
		if err := k.Validate(); err != nil {
			t.Fatalf("chunk_length %d: %v", c, err)
		}
		a := newTestAggs(t, k)
		q, err := k.Quantize([]float64{1, -1, 0.5, 0, -2})
		if err != nil {
			t.Fatal(err)
		}
		r, err := k.Shard(q, a.lk.Public, a.hk.Public)
		if err != nil {
			t.Fatal(err)
		}
		ol, oh, err := a.run(r)
		if err != nil {
			t.Fatalf("chunk_length %d: %v", c, err)
		}
		ints, _, err := k.Combine(ol, oh, 1)
		if err != nil {
			t.Fatal(err)
		}
		for j := range q {
			if ints[j] != q[j] {
				t.Fatalf("chunk_length %d: coordinate %d: %d, want %d", c, j, ints[j], q[j])
			}
		}
	}
}

// TestRestore: a preparation kept as its State and Share (the leader's,
// from upload to aggregation) and restored finishes to the same output
// share and proof verdict as the one kept in memory; a truncated or
// out-of-range state is refused.
func TestRestore(t *testing.T) {
	tk := testTask(t)
	a := newTestAggs(t, tk)
	q, err := tk.Quantize([]float64{1, -1, 0.5, 0, -2})
	if err != nil {
		t.Fatal(err)
	}
	r, err := tk.Shard(q, a.lk.Public, a.hk.Public)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := a.leader.Prepare(r.ID, r.PublicShare, r.LeaderShare)
	if err != nil {
		t.Fatal(err)
	}
	ph, err := a.helper.Prepare(r.ID, r.PublicShare, r.HelperShare)
	if err != nil {
		t.Fatal(err)
	}
	state, err := pl.State()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := a.leader.Restore(state, pl.Share)
	if err != nil {
		t.Fatal(err)
	}
	want, err := a.leader.Finish(pl, pl.Share, ph.Share)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.leader.Finish(restored, restored.Share, ph.Share)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("restored output share of %d elements, want %d", len(got), len(want))
	}
	for j := range want {
		if got[j] != want[j] {
			t.Fatalf("restored output share differs at %d", j)
		}
	}
	ones := append([]byte{}, state...)
	for i := range 16 {
		ones[i] = 0xff // the first element at or above the modulus
	}
	for name, bad := range map[string][]byte{"short": state[:len(state)-1], "long": append(append([]byte{}, state...), 0), "out of range": ones} {
		if _, err := a.leader.Restore(bad, pl.Share); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s state: %v, want ErrInvalid", name, err)
		}
	}
}
