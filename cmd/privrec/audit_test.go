package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/internal/testtier"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/privacy/audit"
)

// The audit command: its fixed JSON field names, exit status 0 for a correct
// mechanism and 1 for an under-noised one, 2 for usage errors. Audits run
// at confidence 1 − 1e-6 with a fixed seed (false failure ≤ 1e-6; the
// under-noised case is missed with probability < 1e-20, see
// privacy/audit's tests).
func TestAuditCommand(t *testing.T) {
	out, errs, code := runCLI(t, "audit", "--mechanism", "rr", "--epsilon", "1", "--samples", "100000",
		"--confidence", "0.999999", "--seed", "5", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bad JSON %q: %v", out, err)
	}
	for _, k := range []string{"mechanism", "claimed_epsilon", "epsilon_lower_bound", "confidence", "samples", "violation"} {
		if _, ok := r[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, out)
		}
	}
	if r["violation"] != false || r["epsilon_lower_bound"].(float64) > 1 {
		t.Errorf("unexpected report %s", out)
	}

	out, _, code = runCLI(t, "audit", "--mechanism", "laplace", "--epsilon", "1", "--samples", "200000",
		"--confidence", "0.999999", "--seed", "6", "--noise-factor", "0.9")
	if code != 1 || !strings.Contains(out, "VIOLATION") {
		t.Errorf("under-noised Laplace: exit %d, output %q", code, out)
	}

	// The two mechanisms whose audit needed more than tails on the raw
	// output, at their default sample counts (l2laplace 10^6; gaussian
	// 6·10^7, skipped with -short): correct ones pass at confidence
	// 1 − 1e-6 (false failure ≤ 1e-6), 0.9× under-noised ones are caught
	// at the default confidence 0.95 (l2laplace: missed with probability
	// < 1e-20; gaussian: ≈ 2e-4, see privacy/audit's TestStatedSampleCounts,
	// which also runs the correct gaussian at 6·10^7). The correct gaussian
	// runs here at 10^6 samples: passing holds at any sample count.
	for _, c := range []struct {
		args    []string
		code    int
		samples float64 // expected samples per input in the report
		slow    bool
	}{
		{[]string{"--mechanism", "l2laplace", "--seed", "7", "--confidence", "0.999999"}, 0, audit.DefaultSamples, false},
		{[]string{"--mechanism", "l2laplace", "--seed", "8", "--noise-factor", "0.9"}, 1, audit.DefaultSamples, false},
		{[]string{"--mechanism", "gaussian", "--seed", "9", "--confidence", "0.999999", "--samples", "1000000"}, 0, 1e6, false},
		{[]string{"--mechanism", "gaussian", "--seed", "10", "--noise-factor", "0.9"}, 1, audit.GaussianSamples, true},
	} {
		if c.slow && testtier.Quick() { // 6·10^7 samples: the long tier
			continue
		}
		out, errs, code := runCLI(t, append([]string{"audit", "--epsilon", "1", "--json"}, c.args...)...)
		var r map[string]any
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: bad JSON %q (%s): %v", c.args, out, errs, err)
		}
		if code != c.code || r["violation"] != (c.code == 1) || r["samples"] != c.samples {
			t.Errorf("%v: exit %d, want %d; report %s", c.args, code, c.code, out)
		}
	}

	for _, args := range [][]string{
		{"audit"},
		{"audit", "--mechanism", "nope"},
		{"audit", "--mechanism", "laplace", "--epsilon", "NaN"},
		{"audit", "--mechanism", "laplace", "--delta", "1e-5"},
		{"audit", "--mechanism", "rr", "--samples", "5"},
		{"audit", "--mechanism", "rr", "--samples", "-1"},
		{"audit", "--mechanism", "rr", "--confidence", "1"},
		{"audit", "--mechanism", "krr", "--values", "-3"},
	} {
		if _, _, code := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	out, errs, code = runCLI(t, "audit", "--help")
	if code != 0 || !strings.Contains(out+errs, "Example") || !strings.Contains(out+errs, "privrec audit --mechanism laplace") {
		t.Errorf("--help exit %d, no worked example: %q", code, out+errs)
	}
}

// Issue 23: `privrec audit --method M --noise-factor 0.5` exits 1 and the
// unmodified method passes (dpals and cp-ip: a zCDP and a pure-ε method;
// every private method is covered by methods.TestAuditEveryPrivateMethod);
// issue 37: so do --sensitivity-factor 0.5 and dp-ease's --fault
// gram-unnormalised (a fault on a method without that safeguard is a usage
// error); dpfw and onebit-outp, once
// audits whose pair did not reach the declared sensitivity ("no power",
// exit 3: methods.TestAuditPowerAtEpsilonOne), pass.
// False failure: each run makes two Clopper–Pearson bounds at confidence
// 1 − 10⁻⁴, so the unmodified runs fail with probability ≤ 2·10⁻⁴ each;
// the halved noise is caught with bounds ≈ 1.5× the claim (a miss is far
// below 10⁻⁶). `--method all` runs every private method (here with a
// handful of trainings: its plumbing, not its power).
func TestAuditMethodNoiseFactor(t *testing.T) {
	for _, c := range []struct {
		method, flag, factor string
		code                 int
	}{
		{"dpals", "--noise-factor", "1", 0}, {"dpals", "--noise-factor", "0.5", 1}, {"dpals", "--sensitivity-factor", "0.5", 1},
		{"cp-ip", "--noise-factor", "1", 0}, {"cp-ip", "--noise-factor", "0.5", 1}, {"cp-ip", "--sensitivity-factor", "0.5", 1},
		{"dp-bias", "--noise-factor", "1", 0}, {"dpfw", "--noise-factor", "1", 0},
		{"onebit-outp", "--noise-factor", "1", 0}, {"onebit-outp", "--sensitivity-factor", "0.5", 1},
		{"dp-ease", "--fault", "gram-unnormalised", 1},
	} {
		out, errs, code := runCLI(t, "audit", "--method", c.method, c.flag, c.factor, "--seed", "31",
			"--confidence", "0.9999", "--json")
		var r map[string]any
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%s %s %s: bad JSON %q (%s): %v", c.method, c.flag, c.factor, out, errs, err)
		}
		if code != c.code || r["violation"] != (c.code == 1) || r["release_check"] == nil || r["noise_factor"] == nil {
			t.Errorf("%s %s %s: exit %d, want %d; report %s", c.method, c.flag, c.factor, code, c.code, out)
		}
	}
	// A fault the method has no safeguard for is refused, naming it.
	if _, errs, code := runCLI(t, "audit", "--method", "dp-bias", "--fault", "gram-unnormalised"); code != 2 || !strings.Contains(errs, "dp-bias has no such safeguard") {
		t.Errorf("dp-bias --fault gram-unnormalised: exit %d, %q: want a usage error naming the method", code, errs)
	}
	out, errs, code := runCLI(t, "audit", "--method", "all", "--runs", "2", "--samples", "10", "--seed", "3", "--json")
	var reps []map[string]any
	if err := json.Unmarshal([]byte(out), &reps); err != nil || (code != 0 && code != 1 && code != 3) {
		t.Fatalf("--method all: exit %d, bad JSON %q (%s): %v", code, out, errs, err)
	}
	want := 0
	for _, m := range methods.All() {
		if m.Private {
			want++
		}
	}
	if len(reps) != want {
		t.Errorf("--method all audited %d methods, want every private one (%d)", len(reps), want)
	}
	for _, args := range [][]string{
		{"audit", "--method", "dp-bias", "--noise-factor", "0"},
		{"audit", "--method", "dp-bias", "--noise-factor", "NaN"},
		{"audit", "--method", "dp-bias", "--sensitivity-factor", "0"},
		{"audit", "--method", "dp-bias", "--sensitivity-factor", "-1"},
		{"audit", "--matrix", "--method", "dp-bias", "--epsilons", "0"},
		{"audit", "--matrix", "--method", "dp-bias,nope"},
		{"audit", "--matrix", "--method", "bias"},
		{"audit", "--method", "dp-bias", "--epsilon", "-1"},
		{"audit", "--method", "dp-bias", "--samples", "5"},
		{"audit", "--method", "nope"},
	} {
		if _, _, code := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// Only the audit command may under-noise or tap a method: no other
// command's (or the service's) code sets Env.NoiseFactor or Env.Tap.
func TestOnlyAuditSetsNoiseFactor(t *testing.T) {
	for _, dir := range []string{".", "../../service"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") || filepath.Base(f) == "audit.go" || filepath.Base(f) == "audit_matrix.go" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{"NoiseFactor", "SensitivityFactor", "Fault:", ".Fault =", "Tap:", ".Tap ="} {
				if strings.Contains(string(b), bad) {
					t.Errorf("%s mentions %s: only `privrec audit` may under-noise or tap a method", f, bad)
				}
			}
		}
	}
}
