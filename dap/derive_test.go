package dap

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/statistic"
	"github.com/privrec/privrec/statistic/gram"
	"github.com/privrec/privrec/topn"
)

// catalogue is item IDs i0 … i(n−1).
func catalogue(n int) []string {
	ids := make([]string, n)
	for j := range ids {
		ids[j] = fmt.Sprintf("i%d", j)
	}
	return ids
}

// engineTask is the task the engine (Lattice.TaskFor, step bits 8 and 9)
// makes for c at ρ.
func engineTask(t *testing.T, id string, row statistic.RowPlan, c statistic.Contribution, rho float64) Task {
	t.Helper()
	mech, err := statistic.Mechanism(c.Spec(), rho, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := Lattice{StepBits: 8, GramStepBits: 9}.TaskFor(id, row, c, mech)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// reproTask is the task of the malicious-leader reproduction: dp-popularity
// counts over 20 items (cap 50), step 2⁻⁸, 9 bits, norm_sq 3 276 800,
// replace-user, ρ 0.001, min_reports 1, with the sensitivity the leader
// states (NewTask then gives it the σ that sensitivity needs).
func reproTask(t testing.TB, sens float64) Task {
	t.Helper()
	plan, err := NewPlan(statistic.RowPlan{Catalogue: catalogue(20)}, &statistic.Counts{Items: 20, Cap: 50})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := NewTask(Task{ID: "pop-evil", Statistic: "dp-popularity/counts", Plan: plan, Dimension: 20, Step: 1.0 / 256, Bits: 9,
		NormSq: 3276800, Relation: RelationReplace, Sensitivity: sens, Rho: 0.001, MinReports: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestDeriveRepro: the reproduction's task (sensitivity 1e-6, σ 1) is
// refused, naming the sensitivity derived from the plan (2 560); the same
// task with the derived sensitivity passes with σ 57 244 (ρ = 2560²/(2σ²)
// ≤ 0.001).
func TestDeriveRepro(t *testing.T) {
	evil := reproTask(t, 1e-6)
	if evil.Sigma != 1 {
		t.Fatalf("the leader's task has σ %d, want 1 (the reproduction)", evil.Sigma)
	}
	_, err := Derive(evil)
	var sf *Shortfall
	if !errors.As(err, &sf) || sf.Field != "sensitivity" || sf.Stated != "1e-06" || sf.Derived != "2560" || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Derive(the reproduction) = %v; want a sensitivity shortfall, 1e-06 stated, 2560 derived", err)
	}
	d, err := Derive(reproTask(t, 2560))
	if err != nil {
		t.Fatal(err)
	}
	if d.Sensitivity != 2560 || d.Sigma != 57244 || d.NormSq != 3276800 || d.Bits != 9 || d.Min != 0 || d.ChargeRho != 0.001 || !(d.Rho <= 0.001) {
		t.Errorf("derived %+v; want sensitivity 2560, σ 57244, norm_sq 3276800, 9 bits, charge ρ 0.001", d)
	}
}

// TestDeriveManipulations: every way a leader can state less than the
// plan gives is refused, naming the field with both values; harmless
// changes (more noise) pass.
func TestDeriveManipulations(t *testing.T) {
	good := reproTask(t, 2560)
	bigPlan, err := NewPlan(statistic.RowPlan{Catalogue: catalogue(20)}, &statistic.Counts{Items: 20, Cap: 200})
	if err != nil {
		t.Fatal(err)
	}
	wrongDim, err := NewPlan(statistic.RowPlan{Catalogue: catalogue(21)}, &statistic.Counts{Items: 21, Cap: 50})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Task)
		field string // the Shortfall's field; "" for another refusal
		want  string // in the error
	}{
		{"understated sensitivity", func(x *Task) { x.Sensitivity = 2559.9; x.Sigma = 57222 }, "sensitivity", "2559.9 stated, 2560 derived"},
		{"sigma below what ρ needs", func(x *Task) { x.Sigma = 40000 }, "sigma", "40000 stated, 57244 derived"},
		{"norm_sq above the plan's", func(x *Task) { x.NormSq = 4 * 3276800; x.Sensitivity = 2 * 2560; x.Sigma = 2 * 57244 }, "norm_sq", "13107200 stated, 3276800 derived"},
		{"norm_sq below the plan's", func(x *Task) { x.NormSq = 100 }, "norm_sq", "100 stated, 3276800 derived"},
		{"wider range", func(x *Task) { x.Bits = 12 }, "range [min, min+2^bits)", "[0, 4096) stated, [0, 512) derived"},
		{"signed range", func(x *Task) { x.Min = -256 }, "range [min, min+2^bits)", "[-256, 256) stated, [0, 512) derived"},
		{"a plan with a larger cap", func(x *Task) { x.Plan = bigPlan }, "norm_sq", "3276800 stated, 13107200 derived"},
		{"dimension other than the plan's", func(x *Task) { x.Plan = wrongDim }, "", "plan has 21 coordinates, task 20"},
		{"no plan", func(x *Task) { x.Plan = nil }, "", "has no plan"},
		{"a plan that does not decode", func(x *Task) { x.Plan = []byte(`{"kind":"nope"}`) }, "", "unknown contribution kind"},
		{"a step too fine for 32 bits", func(x *Task) { x.Step = 1e-12 }, "", "do not fit 32 bits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := good
			tc.edit(&x)
			_, err := Derive(x)
			var sf *Shortfall
			switch {
			case err == nil:
				t.Fatal("accepted")
			case !errors.Is(err, ErrInvalid):
				t.Errorf("%v does not wrap ErrInvalid", err)
			case tc.field != "" && (!errors.As(err, &sf) || sf.Field != tc.field):
				t.Errorf("%v: want a shortfall of %s", err, tc.field)
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("%v: want %q", err, tc.want)
			}
		})
	}
	// More noise or a larger stated sensitivity are harmless: accepted,
	// and the device is charged the stated ρ.
	x := good
	x.Sigma, x.Sensitivity = 2*good.Sigma, 3000
	if d, err := Derive(x); err != nil || d.ChargeRho != 0.001 || !(d.Rho < 0.001/3) {
		t.Errorf("more noise: %+v, %v", d, err)
	}
}

// TestDeriveSplitNoise: a split-noise task is refused by a device without
// her consent; with it she is charged the ρ one aggregator's noise alone
// gives, Δ²/(2σ²) with the per-aggregator σ (≈ 2ρ).
func TestDeriveSplitNoise(t *testing.T) {
	tk := reproTask(t, 2560)
	tk.ID, tk.Noise = "split", NoiseSplit
	var err error
	if tk.Sigma, err = SigmaFor(tk.Rho, tk.Sensitivity, tk.Dimension, tk.Noise); err != nil {
		t.Fatal(err)
	}
	if _, err := (Consent{}).Check(tk); !errors.Is(err, ErrNeedsConsent) || !strings.Contains(err.Error(), "--allow-split-noise") {
		t.Fatalf("without consent: %v", err)
	}
	d, err := Consent{SplitNoise: true}.Check(tk)
	if err != nil {
		t.Fatal(err)
	}
	alone := 2560.0 * 2560 / (2 * float64(tk.Sigma) * float64(tk.Sigma))
	if math.Abs(d.RhoAlone-alone) > 1e-12 || d.ChargeRho != d.RhoAlone || !(d.RhoAlone > 1.9*0.001 && d.RhoAlone < 2.1*0.001) || !(d.Rho <= 0.001) {
		t.Errorf("split: %+v; want ρ alone = Δ²/(2σ²) = %v ≈ 0.002 charged, ρ ≤ 0.001 with both noises", d, alone)
	}
	if g := d.Guarantee(); !strings.Contains(g, "only while both add their noise") {
		t.Errorf("guarantee %q does not state the weaker setting", g)
	}
	l, _ := NewLedger("http://l", 1)
	if err := l.Reserve(&tk); !errors.Is(err, ErrNeedsConsent) || len(l.Tasks) != 0 {
		t.Errorf("Ledger.Reserve of a split task without consent: %v, %v", err, l.Tasks)
	}
	if err := l.Charge(d); err != nil || l.SpentRho() != math.Ceil(d.ChargeRho*1e9)/1e9 {
		t.Errorf("charged %v (%v), want %v", l.SpentRho(), err, d.ChargeRho)
	}
}

// TestDeriveSound: for each statistic the engine makes tasks of, Derive
// accepts the engine's task and the bounds it derives hold for real
// contributions: random users' quantized parts are never clipped
// (‖q‖² ≤ the derived norm_sq, each q_j in the derived range) and a
// replaced user moves the sum by at most the derived sensitivity.
func TestDeriveSound(t *testing.T) {
	const n = 12
	row := statistic.RowPlan{Catalogue: catalogue(n), Clamp: &[2]float64{1, 5}}
	cols, err := topn.NewColumns(n, []int{0, 2, 3, 5, 7, 8})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gram.NewGram(cols, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	cov := &mf.CovStatistic{Items: []int{0, 1, 4, 6}, Mean: 3, ItemBias: make([]float64, n), UserDamping: 2, Clip: 1.5}
	for _, c := range []statistic.Contribution{
		&statistic.Counts{Items: n, Cap: 3}, &statistic.Counts{Items: n},
		&statistic.Bias{Items: n, Mid: 3, Half: 2, Clip: 2}, g, cov,
	} {
		t.Run(c.Kind(), func(t *testing.T) {
			if c, ok := c.(interface{ Validate() error }); ok {
				if err := c.Validate(); err != nil {
					t.Fatal(err)
				}
			}
			tk := engineTask(t, "s", row, c, 0.5)
			d, err := Derive(tk)
			if err != nil {
				t.Fatalf("the engine's task: %v", err)
			}
			if !(d.Sensitivity <= tk.Sensitivity) || d.Sigma > tk.Sigma || !(d.ChargeRho == tk.Rho) {
				t.Fatalf("derived %+v for the engine's %+v", d, tk)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var prev []int64
			for range 300 {
				var ids []string
				var vals []float64
				for j := range n {
					if rng.IntN(3) != 0 {
						ids, vals = append(ids, fmt.Sprintf("i%d", j)), append(vals, float64(1+rng.IntN(5)))
					}
				}
				x := d.device.Contribute(d.device.RowOf(ids, vals))
				q := make([]int64, len(x))
				var sq float64
				for j, v := range x {
					q[j] = int64(math.Trunc(v / tk.Step))
					sq += float64(q[j] * q[j])
				}
				if err := tk.CheckQuantized(q); err != nil || sq > float64(d.NormSq) {
					t.Fatalf("an honest part outside the derived bounds (‖q‖² %v, norm_sq %d): %v", sq, d.NormSq, err)
				}
				if prev != nil {
					var diff float64
					for j := range q {
						diff += float64((q[j] - prev[j]) * (q[j] - prev[j]))
					}
					if math.Sqrt(diff) > d.Sensitivity {
						t.Fatalf("a replaced user moves the sum by %v > the derived sensitivity %v", math.Sqrt(diff), d.Sensitivity)
					}
				}
				prev = q
			}
		})
	}
}

// FuzzDerive: no task makes Derive panic, and a task it accepts gives at
// least its stated guarantee at the derived sensitivity, with the stated
// range and norm_sq, and charges at least the stated ρ.
func FuzzDerive(f *testing.F) {
	for _, sens := range []float64{2560, 1e-6} {
		b, err := json.Marshal(reproTask(f, sens))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"id":"t","statistic":"counts","plan":{"row":{"catalogue":["a","b","c"]},"kind":"counts","contribution":{"items":3,"cap":1}},"dimension":3,"step":0.5,"min":0,"bits":2,"norm_sq":4,"relation":"replace-user","sensitivity":4,"rho":0.5,"noise":"each-alone","sigma":5,"min_reports":1}`))
	f.Add([]byte(`{"id":"b","plan":{"row":{"catalogue":["a","b"],"clamp":[1,5]},"kind":"bias","contribution":{"items":2,"mid":3,"half":2,"clip":2}},"dimension":6,"step":0.5,"min":-4,"bits":3,"norm_sq":8,"sensitivity":3,"rho":0.25,"noise":"honest-but-curious","sigma":9,"min_reports":3,"relation":"add-remove-user"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var tk Task
		if json.Unmarshal(b, &tk) != nil {
			return
		}
		d, err := Derive(tk)
		if err != nil {
			return
		}
		rho, err := RhoOf(tk.Sigma, d.Sensitivity, tk.Dimension, tk.Noise)
		if err != nil || rho > tk.Rho || d.NormSq != tk.NormSq || d.Min != tk.Min || d.Bits != tk.Bits || d.ChargeRho < tk.Rho || d.ChargeRho < d.RhoAlone {
			t.Fatalf("accepted %s: derived %+v (ρ %v, %v)", b, d, rho, err)
		}
	})
}
