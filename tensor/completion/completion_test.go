package completion

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/tensor"
)

func synth(t testing.TB, kind tensor.Kind, snr float64, seed uint64) *tensor.Synth {
	t.Helper()
	c := tensor.PaperSynth(kind)
	c.SNR = snr
	s, err := tensor.Synthesize(c, noise.Seeded(seed))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The solvers recover a noise-free low-rank tensor from half its entries
// (deterministic seeds; no statistical tolerance). CP needs rank 4 because
// min–max scaling adds a constant (rank-one) term to the rank-3 truth.
func TestRecoversLowRank(t *testing.T) {
	for _, c := range []struct {
		kind         tensor.Kind
		rank, passes int
		lr, lambda   float64
		want         float64
	}{
		{tensor.CP, 4, 1000, 0.02, 0, 0.005},
		{tensor.Tucker, 3, 1000, 0.05, 0, 0.04},
	} {
		s := synth(t, c.kind, 0, 1)
		cfg := Paper(c.kind)
		cfg.Rank, cfg.Passes, cfg.LR, cfg.Lambda, cfg.LambdaG = c.rank, c.passes, c.lr, c.lambda, 0
		m, _, err := Train(context.Background(), s.Train, cfg, noise.Seeded(2), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		mu := s.Train.Mean()
		var ss float64
		for _, v := range s.Test.Val {
			ss += (v - mu) * (v - mu)
		}
		base := math.Sqrt(ss / float64(s.Test.Len()))
		if r := m.RMSE(s.Test); r > c.want {
			t.Errorf("%s: test RMSE %.4f, want ≤ %v (training mean: %.4f)", c.kind, r, c.want, base)
		}
	}
}

// One goroutine and two give the same model for a seed.
func TestWorkersReproducible(t *testing.T) {
	for _, kind := range []tensor.Kind{tensor.CP, tensor.Tucker} {
		for _, mech := range []Mechanism{NoMechanism, GP, DPSGD} {
			s := synth(t, kind, 1, 3)
			var models [2]*Model
			for w := range 2 {
				cfg := Paper(kind)
				cfg.Passes, cfg.Workers = 5, w+1
				cfg.Mechanism, cfg.Epsilon, cfg.Delta = mech, 5, 1e-5
				m, _, err := Train(context.Background(), s.Train, cfg, noise.Seeded(4), noise.Seeded(5), nil)
				if err != nil {
					t.Fatal(err)
				}
				models[w] = m
			}
			a, b := models[0], models[1]
			same := slices.Equal(a.A, b.A) && slices.Equal(a.B, b.B) && slices.Equal(a.C, b.C) && slices.Equal(a.G, b.G)
			if mech == DPSGD {
				// the batch sum is split in two halves either way; only the
				// goroutine count differs
				same = same || math.Abs(a.RMSE(s.Test)-b.RMSE(s.Test)) < 1e-12
			}
			if !same {
				t.Errorf("%s %q: models differ between 1 and 2 workers", kind, mech)
			}
		}
	}
}

func TestGuarantee(t *testing.T) {
	s := synth(t, tensor.Tucker, 1, 1)
	for _, c := range []struct {
		mech    Mechanism
		status  privacy.Status
		finite  bool
		claimed float64
	}{
		{NoMechanism, privacy.None, false, 0},
		{IP, privacy.Proven, true, 0},
		{GP, privacy.None, false, 2},
		{OP, privacy.None, false, 2},
		{DPSGD, privacy.Proven, true, 0},
	} {
		cfg := Paper(tensor.Tucker)
		cfg.Mechanism, cfg.Epsilon, cfg.Delta = c.mech, 2, 1e-6
		g, err := cfg.Guarantee(s.Train)
		if err != nil {
			t.Fatal(err)
		}
		if g.Status != c.status || g.Private() != c.finite || g.ClaimedEpsilon != c.claimed || g.Unit != privacy.UnitEntry {
			t.Errorf("%q: %+v", c.mech, g)
		}
		if c.finite && g.Epsilon > 2 {
			t.Errorf("%q: ε = %v exceeds the requested 2", c.mech, g.Epsilon)
		}
		if c.finite && g.Relation != privacy.RelationRatingValue {
			t.Errorf("%q: relation %q, want the rating-value relation the proofs use", c.mech, g.Relation)
		}
	}
}

// The notes of GP and OP state the provable ε of C alone: basic
// composition over passes × entries (GP) and over the rows of C, i.e.
// |Ω|·ε (OP).
func TestGuaranteeNotes(t *testing.T) {
	s := synth(t, tensor.CP, 1, 1)
	n := s.Train.Len()
	for _, c := range []struct {
		mech Mechanism
		want string
	}{
		{GP, fmt.Sprintf("%d passes × %d noisy steps, ε = %.6g", 100, n, 100*float64(n)*0.5)},
		{GP, fmt.Sprintf("counting passes gives ε = %.6g", 50.0)},
		{OP, fmt.Sprintf("composed over its rows, is ε = %.6g", float64(n)*0.5)},
	} {
		cfg := Paper(tensor.CP)
		cfg.Mechanism, cfg.Epsilon = c.mech, 0.5
		g, err := cfg.Guarantee(s.Train)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(g.Note, c.want) {
			t.Errorf("%q note lacks %q:\n%s", c.mech, c.want, g.Note)
		}
	}
}

// DP-SGD's σ is calibrated with the accountant: the composed guarantee is
// within the requested (ε, δ) and uses nearly all of it, and σ matches
// ρ = (2·clip)²/(2σ²) per pass up to the lattice rounding (which costs
// √(parameters)·σ·2^-27 in sensitivity, < 1e-4 relative here).
func TestDPSGDCalibration(t *testing.T) {
	s := synth(t, tensor.CP, 1, 1)
	for _, eps := range []float64{0.1, 1, 10} {
		cfg := Paper(tensor.CP)
		cfg.Mechanism, cfg.Epsilon, cfg.Delta, cfg.Clip = DPSGD, eps, 1e-6, 0.3
		cal, err := cfg.calibrate(s.Train.Dims, s.Train.Len())
		if err != nil {
			t.Fatal(err)
		}
		g, err := cfg.guarantee(cal, s.Train)
		if err != nil {
			t.Fatal(err)
		}
		if g.Epsilon > eps || g.Epsilon < eps*(1-1e-6) || g.Delta != 1e-6 || g.Status != privacy.Proven {
			t.Errorf("ε = %v: guarantee %+v", eps, g)
		}
		rho, err := accountant.RhoForApprox(eps, 1e-6)
		if err != nil {
			t.Fatal(err)
		}
		want := 2 * cfg.Clip / math.Sqrt(2*rho/float64(cfg.Passes))
		if sg := cal.sgd.Sigma(); sg < want || sg > want*(1+1e-4) {
			t.Errorf("ε = %v: σ = %v, want %v", eps, sg, want)
		}
	}
}

// Centred DP-SGD: the offset is the training mean up to the Laplace noise
// of the sum (scale (hi − lo)/ε_c = 10 on 3200 values, so the mean's noise
// is Laplace(1/320); a tolerance of 0.05 fails with probability e^-16),
// the whole run stays within (ε, δ), the offset survives a save and load,
// and predictions include it.
func TestCentredDPSGD(t *testing.T) {
	s := synth(t, tensor.CP, 1, 1)
	cfg := Paper(tensor.CP)
	cfg.Mechanism, cfg.Epsilon, cfg.Delta, cfg.Clip, cfg.CentreEps, cfg.Passes = DPSGD, 1, 1e-5, 0.3, 0.1, 10
	m, info, err := Train(context.Background(), s.Train, cfg, noise.Seeded(1), noise.Seeded(2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if mu := s.Train.Mean(); math.Abs(m.Offset-mu) > 0.05 || info.Offset != m.Offset {
		t.Errorf("offset %v (info %v), training mean %v", m.Offset, info.Offset, mu)
	}
	g := info.Guarantee
	if g.Status != privacy.Proven || g.Epsilon > 1 || g.Epsilon < 0.99 || g.Delta != 1e-5 || !strings.Contains(g.Note, "Centred DP-SGD") {
		t.Errorf("guarantee %+v", g)
	}
	// the centring's ε²/2 is taken out of DP-SGD's ρ
	plain := cfg
	plain.CentreEps = 0
	cp, err := plain.calibrate(s.Train.Dims, s.Train.Len())
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cfg.calibrate(s.Train.Dims, s.Train.Len())
	if err != nil {
		t.Fatal(err)
	}
	if !(cc.sgd.Sigma() > cp.sgd.Sigma()) {
		t.Errorf("σ with centring %v, without %v", cc.sgd.Sigma(), cp.sgd.Sigma())
	}
	var buf bytes.Buffer
	f := &File{Method: "cp-dpsgd", Guarantee: g, Users: make([]string, 20), Items: make([]string, 20), Axis: tensor.DayAxis{Days: 20}, Lo: -10, Hi: 10, Model: m}
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if back.Model.Offset != m.Offset || back.Predict(1, 2, 3) != f.Predict(1, 2, 3) {
		t.Errorf("offset %v after reload, %v before", back.Model.Offset, m.Offset)
	}
	zero := *m
	zero.A = make([]float64, len(m.A))
	if p := zero.Predict(0, 0, 0); p != m.Offset {
		t.Errorf("zero factors predict %v, want the offset %v", p, m.Offset)
	}
}

// IP's noise has the seed's scale: the mean absolute deviation of
// Laplace(b) is b (sd b); with n = 125 000 a tolerance of 4.42·b/√n has a
// false-failure rate of about 1e-5.
func TestPerturbInputScale(t *testing.T) {
	const n = 125000
	x := tensor.New([3]int{n, 1, 1}, n)
	for i := range n {
		x.Add(int32(i), 0, 0, 3)
	}
	cfg := Config{Kind: tensor.CP, Rank: 1, Passes: 1, LR: 1, InitScale: 1, Mechanism: IP, Epsilon: 2, Lo: 1, Hi: 5}
	cal, err := cfg.calibrate(x.Dims, n)
	if err != nil {
		t.Fatal(err)
	}
	scale := cal.ip.Scale()
	// the lattice rounding of 125 000 coordinates costs n·2^-39·ε ≈ 1e-7
	if scale < 2 || scale > 2*(1+1e-6) {
		t.Fatalf("scale %v, want (5−1)/2", scale)
	}
	out, err := PerturbInput(x, 1, 5, false, cal.ip, noise.Seeded(9))
	if err != nil {
		t.Fatal(err)
	}
	var mad float64
	for _, v := range out.Val {
		mad += math.Abs(v - 3)
	}
	mad /= n
	if math.Abs(mad-scale) > 4.42*scale/math.Sqrt(n) {
		t.Errorf("mean |noise| %v, want %v", mad, scale)
	}
	// values outside [lo, hi] are clamped before noise; with clamp, after too
	x.Val[0] = 100
	out, err = PerturbInput(x, 1, 5, true, cal.ip, noise.Seeded(9))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range out.Val {
		if v < 1 || v > 5 {
			t.Fatalf("clamped value %v outside [1, 5]", v)
		}
	}
}

// The rank-3 Tucker kernel computes what the general one does (same sums
// in the same order; the tolerance only allows for fused multiply-adds on
// platforms whose compiler fuses differently in the two kernels).
func TestTucker3MatchesGeneral(t *testing.T) {
	s := synth(t, tensor.Tucker, 1, 2)
	for _, mech := range []Mechanism{NoMechanism, OP} {
		cfg := Paper(tensor.Tucker)
		cfg.Passes, cfg.Mechanism, cfg.Epsilon = 3, mech, 1
		var models [2]*Model
		for v := range 2 {
			m := initModel(cfg, s.Train.Dims, noise.Seeded(7))
			w := newWorker(cfg, m, nil)
			copy(w.g, m.G)
			block := makePlan(s.Train).blocks[0]
			var err error
			if v == 0 {
				err = w.runTucker(block)
			} else {
				err = w.runTucker3(block)
			}
			if err != nil {
				t.Fatal(err)
			}
			copy(m.G, w.g)
			models[v] = m
		}
		for name, pair := range map[string][2][]float64{"A": {models[0].A, models[1].A}, "B": {models[0].B, models[1].B}, "C": {models[0].C, models[1].C}, "G": {models[0].G, models[1].G}} {
			for x := range pair[0] {
				if d := math.Abs(pair[0][x] - pair[1][x]); d > 1e-12 {
					t.Fatalf("%q %s[%d]: general %v, rank-3 %v", mech, name, x, pair[0][x], pair[1][x])
				}
			}
		}
	}
}

// shuffle is uniform: over 240 000 shuffles of 4 entries each of the 24
// orders has probability 1/24; the χ² statistic with 23 degrees of
// freedom exceeds 49.7 with probability 1e-3 (false-failure rate).
func TestShuffleUniform(t *testing.T) {
	src := noise.Seeded(11)
	var counts [24]int
	block := make([]entry, 4)
	const n = 240000
	for range n {
		for x := range block {
			block[x] = entry{i: int32(x)}
		}
		shuffle(src, block)
		// Lehmer code of the permutation
		code := 0
		for x := range 4 {
			smaller := 0
			for y := x + 1; y < 4; y++ {
				if block[y].i < block[x].i {
					smaller++
				}
			}
			code = code*(4-x) + smaller
		}
		counts[code]++
	}
	var chi2 float64
	for _, c := range counts {
		d := float64(c) - n/24.0
		chi2 += d * d / (n / 24.0)
	}
	if chi2 > 49.7 {
		t.Errorf("χ² = %.1f over the 24 orders (counts %v)", chi2, counts)
	}
}

// GP clips C's gradient rows and OP's Lipschitz clip holds.
func TestClipTo(t *testing.T) {
	g := []float64{3, 4}
	if !clipTo(g, 1) || math.Abs(math.Hypot(g[0], g[1])-1) > 1e-15 {
		t.Errorf("clipTo → %v", g)
	}
	g = []float64{0.3, 0.4}
	if clipTo(g, 1) || g[0] != 0.3 {
		t.Errorf("clipTo changed a short vector: %v", g)
	}
}

func TestFileRoundTrip(t *testing.T) {
	for _, kind := range []tensor.Kind{tensor.CP, tensor.Tucker} {
		s := synth(t, kind, 1, 1)
		cfg := Paper(kind)
		cfg.Passes = 3
		m, _, err := Train(context.Background(), s.Train, cfg, noise.Seeded(1), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, sc, err := tensor.BiScaleDays(s.Train, 2)
		if err != nil {
			t.Fatal(err)
		}
		names := func(n int) []string {
			out := make([]string, n)
			for x := range out {
				out[x] = fmt.Sprint(x + 1)
			}
			return out
		}
		g0, err := cfg.Guarantee(s.Train)
		if err != nil {
			t.Fatal(err)
		}
		f := &File{Method: string(kind), Guarantee: g0, Users: names(20), Items: names(20),
			Axis: tensor.DayAxis{Origin: 0, Days: 20}, Lo: 0, Hi: 1, Model: m, Scaling: sc}
		var buf bytes.Buffer
		if err := f.Write(&buf); err != nil {
			t.Fatal(err)
		}
		g, err := ReadFile(&buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range [][3]int{{0, 0, 0}, {3, 7, 19}, {19, 19, 5}} {
			if a, b := f.Predict(p[0], p[1], p[2]), g.Predict(p[0], p[1], p[2]); a != b {
				t.Errorf("%s: prediction at %v %v after reload, %v before", kind, p, b, a)
			}
		}
		if f.Kind() != string(kind) || g.Kind() != string(kind) {
			t.Errorf("%s: Kind() %q before, %q after reload", kind, f.Kind(), g.Kind())
		}
		if g.Guarantee.Status != privacy.None || g.Model.Kind != kind {
			t.Errorf("%s: header %+v", kind, g.Guarantee)
		}
	}
}

func TestCancel(t *testing.T) {
	s := synth(t, tensor.CP, 1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, mech := range []Mechanism{NoMechanism, DPSGD} {
		cfg := Paper(tensor.CP)
		cfg.Mechanism, cfg.Epsilon, cfg.Delta = mech, 1, 1e-5
		if _, _, err := Train(ctx, s.Train, cfg, noise.Seeded(1), noise.Seeded(2), nil); !errors.Is(err, context.Canceled) {
			t.Errorf("%q: err = %v, want context.Canceled", mech, err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, mod := range []func(*Config){
		func(c *Config) { c.Rank = 0 },
		func(c *Config) { c.Passes = 0 },
		func(c *Config) { c.LR = math.NaN() },
		func(c *Config) { c.Lambda = -1 },
		func(c *Config) { c.Workers = 3 },
		func(c *Config) { c.Mechanism = "xp" },
		func(c *Config) { c.Mechanism, c.Epsilon = IP, 0 },
		func(c *Config) { c.Mechanism, c.Epsilon, c.Lo, c.Hi = IP, 1, 1, 1 },
		func(c *Config) { c.Mechanism, c.Epsilon, c.Clip = GP, 1, 0 },
		func(c *Config) { c.Mechanism, c.Epsilon, c.Delta = DPSGD, 1, 0 },
		func(c *Config) { c.Mechanism, c.Epsilon, c.CentreEps = IP, 1, 0.1 },
		func(c *Config) { c.Mechanism, c.Epsilon, c.Delta, c.CentreEps = DPSGD, 1, 1e-5, 1 },
		func(c *Config) { c.Mechanism, c.Epsilon, c.Delta, c.CentreEps, c.Hi = DPSGD, 1, 1e-5, 0.1, 0 },
	} {
		c := Paper(tensor.CP)
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

func ExampleTrain() {
	s, err := tensor.Synthesize(tensor.PaperSynth(tensor.CP), noise.Seeded(1))
	if err != nil {
		panic(err)
	}
	cfg := Paper(tensor.CP)
	cfg.Mechanism, cfg.Epsilon = IP, 1
	// noise.Seeded makes this example reproducible; real releases use noise.Secure().
	m, info, err := Train(context.Background(), s.Train, cfg, noise.Seeded(2), noise.Seeded(3), nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d updates, Laplace scale %.6f; finite RMSE: %v\n", info.Updates, info.NoiseScale, !math.IsNaN(m.RMSE(s.Test)))
	fmt.Println(info.Guarantee.Status, info.Guarantee.Epsilon)
	// Output:
	// 320000 updates, Laplace scale 1.000000; finite RMSE: true
	// proven 1
}

// Guarantee of the seed's gradient perturbation: C is noised, A and B are
// not, so the model has no guarantee; the seed's claim is kept.
func ExampleConfig_Guarantee() {
	s, err := tensor.Synthesize(tensor.PaperSynth(tensor.CP), noise.Seeded(1))
	if err != nil {
		panic(err)
	}
	cfg := Paper(tensor.CP)
	cfg.Mechanism, cfg.Epsilon = GP, 1
	g, err := cfg.Guarantee(s.Train)
	if err != nil {
		panic(err)
	}
	fmt.Println(g.Status, g.Private(), g.ClaimedEpsilon)
	cfg.Mechanism, cfg.Delta = DPSGD, 1e-5
	if g, err = cfg.Guarantee(s.Train); err != nil {
		panic(err)
	}
	fmt.Println(g.Status, g.Epsilon <= 1, g.Delta)
	// Output:
	// none false 1
	// proven true 1e-05
}

// plausibleSizes reports whether the container's declared header and
// array sizes fit in data. model.ReadContainer allocates what a header
// declares (up to 1 GiB) before reading it; that is the container's
// business, and such inputs only make the fuzzer crawl, so they are
// skipped here.
func plausibleSizes(data []byte) bool {
	off := len(model.Magic)
	if len(data) < off+4 {
		return true
	}
	n := int(binary.LittleEndian.Uint32(data[off:]))
	if n > len(data)-off-4 {
		return false
	}
	var h struct {
		Arrays []struct {
			Len int `json:"len"`
		} `json:"arrays"`
	}
	if json.Unmarshal(data[off+4:off+4+n], &h) != nil {
		return true
	}
	total := 0
	for _, a := range h.Arrays {
		if a.Len < 0 || a.Len > len(data) {
			return false
		}
		total += a.Len
	}
	return total*4 <= len(data)
}

// ReadFile never panics on a corrupted model file: it returns an error or
// a model whose arrays match its declared shape, which then predicts
// without panicking.
func FuzzReadFile(f *testing.F) {
	for _, kind := range []tensor.Kind{tensor.CP, tensor.Tucker} {
		s, err := tensor.Synthesize(tensor.SynthConfig{Kind: kind, Dims: [3]int{3, 4, 2}, Rank: 2, Missing: 0.2, TrainFrac: 0.9}, noise.Seeded(1))
		if err != nil {
			f.Fatal(err)
		}
		cfg := Paper(kind)
		cfg.Rank, cfg.Passes = 2, 1
		m, info, err := Train(context.Background(), s.Train, cfg, noise.Seeded(1), nil, nil)
		if err != nil {
			f.Fatal(err)
		}
		_, sc, err := tensor.BiScaleDays(s.Train, 2)
		if err != nil {
			f.Fatal(err)
		}
		file := &File{Method: string(kind), Guarantee: info.Guarantee, Users: []string{"a", "b", "c"}, Items: []string{"1", "2", "3", "4"},
			Axis: tensor.DayAxis{Days: 2}, Lo: 0, Hi: 1, Model: m, Scaling: sc}
		var buf bytes.Buffer
		if err := file.Write(&buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add([]byte("not a model"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !plausibleSizes(data) {
			return
		}
		g, err := ReadFile(bytes.NewReader(data))
		if err != nil {
			return
		}
		d := g.Model.Dims
		for _, i := range []int{0, d[0] - 1} {
			for _, j := range []int{0, d[1] - 1} {
				for _, k := range []int{0, d[2] - 1} {
					g.Predict(i, j, k)
				}
			}
		}
	})
}
