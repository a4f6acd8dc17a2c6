package completion

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/privrec/privrec/privacy"
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
		cfg := Defaults(c.kind)
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
				cfg := Defaults(kind)
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
		cfg := Defaults(tensor.Tucker)
		cfg.Mechanism, cfg.Epsilon, cfg.Delta = c.mech, 2, 1e-6
		g := cfg.Guarantee(3200)
		if g.Status != c.status || g.Private() != c.finite || g.ClaimedEpsilon != c.claimed || g.Unit != privacy.UnitEntry {
			t.Errorf("%q: %+v", c.mech, g)
		}
		if c.finite && g.Epsilon > 2 {
			t.Errorf("%q: ε = %v exceeds the requested 2", c.mech, g.Epsilon)
		}
	}
}

// Golden values from PRIVACY.md: ρ = 0.5, δ = 1e-5 → ε ≈ 5.2985 by the
// simple conversion; ZCDPForEpsDelta inverts it.
func TestZCDP(t *testing.T) {
	if e := EpsilonOfZCDP(0.5, 1e-5); math.Abs(e-5.2985) > 1e-4 {
		t.Errorf("ε(ρ=0.5, δ=1e-5) = %v, want 5.2985", e)
	}
	for _, eps := range []float64{0.1, 1, 10} {
		rho := ZCDPForEpsDelta(eps, 1e-6)
		if e := EpsilonOfZCDP(rho, 1e-6); e > eps*(1+1e-12) || e < eps*(1-1e-9) {
			t.Errorf("ε → ρ → ε: %v → %v → %v", eps, rho, e)
		}
		sigma := DPSGDSigma(100, rho)
		if r := 2 * 100 / (sigma * sigma); math.Abs(r-rho) > 1e-12*rho {
			t.Errorf("σ = %v gives ρ = %v, want %v", sigma, r, rho)
		}
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
	out, scale := PerturbInput(x, 1, 5, 2, false, noise.Seeded(9))
	if scale != 2 {
		t.Fatalf("scale %v, want (5−1)/2", scale)
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
	out, _ = PerturbInput(x, 1, 5, 2, true, noise.Seeded(9))
	for _, v := range out.Val {
		if v < 1 || v > 5 {
			t.Fatalf("clamped value %v outside [1, 5]", v)
		}
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
		cfg := Defaults(kind)
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
		f := &File{Method: string(kind), Guarantee: cfg.Guarantee(s.Train.Len()), Users: names(20), Items: names(20),
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
		cfg := Defaults(tensor.CP)
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
	} {
		c := Defaults(tensor.CP)
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
	cfg := Defaults(tensor.CP)
	cfg.Mechanism, cfg.Epsilon = IP, 1
	// noise.Seeded makes this example reproducible; real releases use noise.Secure().
	m, info, err := Train(context.Background(), s.Train, cfg, noise.Seeded(2), noise.Seeded(3), nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(info.Updates, "updates, Laplace scale", info.NoiseScale, "; finite RMSE:", !math.IsNaN(m.RMSE(s.Test)))
	fmt.Println(cfg.Guarantee(s.Train.Len()).Status)
	// Output:
	// 320000 updates, Laplace scale 1 ; finite RMSE: true
	// proven
}
