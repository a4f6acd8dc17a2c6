package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"testing"
)

// The seed-004 pipeline end to end: synth-tensor, train a tensor method
// with --json (the guarantee is printed with the field names of
// docs/MODEL_FORMAT.md's guarantee object), and
// eval --json (n, rmse, mae; no sign accuracy for a rating model).
func TestSynthTensorTrainEval(t *testing.T) {
	dir := t.TempDir()
	train, test := filepath.Join(dir, "syn.train"), filepath.Join(dir, "syn.test")
	out, errs, code := runCLI(t, "data", "synth-tensor", "--kind", "tucker", "--seed", "3", "--train", train, "--test", test, "--json")
	if code != 0 {
		t.Fatalf("synth-tensor exit %d: %s", code, errs)
	}
	var syn struct {
		Kind         string
		TrainEntries int `json:"train_entries"`
		Train        string
	}
	if err := json.Unmarshal([]byte(out), &syn); err != nil || syn.Kind != "tucker" || syn.TrainEntries == 0 || syn.Train != train {
		t.Fatalf("synth-tensor --json: %v %s", err, out)
	}
	for _, tc := range []struct {
		method  string
		args    []string
		status  string
		eps     float64 // 0: not finite (omitted or null)
		claimed float64
	}{
		// The truth is in [0, 1]; the noisy training values stray a little
		// outside it, and the reader refuses values outside --scale.
		{"cp-ip", []string{"--scale", "-0.5:1.5"}, "proven", 1, 0},
		{"tucker-gp", []string{"--scale", "-0.5:1.5"}, "none", 0, 1},
		{"tucker-dpsgd", []string{"--scale", "-0.5:1.5", "--delta", "1e-5"}, "proven", 1, 0},
	} {
		t.Run(tc.method, func(t *testing.T) {
			model := filepath.Join(dir, tc.method+".model")
			args := append([]string{"train", "--data", train, "--format", "tsv", "--method", tc.method, "--epsilon", "1",
				"--seed", "1", "--experiment", "--item-day", "--passes", "5", "--out", model, "--json"}, tc.args...)
			out, errs, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("train exit %d: %s", code, errs)
			}
			var tr map[string]any
			if err := json.Unmarshal([]byte(out), &tr); err != nil {
				t.Fatalf("train JSON %q: %v", out, err)
			}
			g, ok := tr["guarantee"].(map[string]any)
			if !ok || tr["method"] != tc.method || tr["seconds"] == nil {
				t.Fatalf("train JSON %s", out)
			}
			if g["status"] != tc.status || g["unit"] != "entry" || g["notion"] != "central" || g["note"] == "" {
				t.Errorf("guarantee %v", g)
			}
			if e, _ := g["epsilon"].(float64); tc.eps > 0 && (e > tc.eps || e < tc.eps*0.99) {
				t.Errorf("epsilon %v, want ≤ %v", g["epsilon"], tc.eps)
			}
			if c, _ := g["claimed_epsilon"].(float64); c != tc.claimed {
				t.Errorf("claimed_epsilon %v, want %v", g["claimed_epsilon"], tc.claimed)
			}
			out, errs, code = runCLI(t, "eval", "--model", model, "--data", test, "--format", "tsv", "--json")
			if code != 0 {
				t.Fatalf("eval exit %d: %s", code, errs)
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(out), &ev); err != nil {
				t.Fatalf("eval JSON %q: %v", out, err)
			}
			n, _ := ev["n"].(float64)
			rmse, _ := ev["rmse"].(float64)
			mae, _ := ev["mae"].(float64)
			if n != 800 || !(rmse > 0 && rmse < 1) || !(mae > 0 && mae <= rmse) || math.IsNaN(rmse) {
				t.Errorf("eval JSON %s", out)
			}
			if _, has := ev["accuracy"]; has {
				t.Errorf("eval reports sign accuracy for a rating model: %s", out)
			}
		})
	}
}
