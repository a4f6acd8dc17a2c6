package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/privacy/audit"
	"github.com/privrec/privrec/privacy/noise"
)

func init() {
	register(&command{name: "audit", summary: "empirically check a privacy mechanism: lower bound on ε from samples", run: runAudit})
}

// auditSynopsis is privrec audit's help text.
var auditSynopsis = `
Two audits. --method NAME (or all) audits a whole training method: it is
trained many times on neighbouring data sets and its release is checked
for un-noised facts, canary IDs and privacy loss beyond its claim; see
privrec audit --method NAME --help for its flags.

--mechanism NAME samples a privacy mechanism — its own Release, the code path every release
takes — on its worst-case pair of neighbouring inputs (sensitivity 1; for rr the signs +1/−1, for krr missing/rating 1, for
modlaplace the ratings −1/+1, for l2laplace the vectors 0/e₁), count a
fixed family of likelihood-ratio events on both sides, and print a
Clopper–Pearson lower bound on the privacy loss beside the claimed ε (for
gaussian, ln((p_a − δ)/p_b)). The bound holds simultaneously over all
events at the stated confidence, so a bound above the claim is a violation
(exit status 1) with false-alarm probability at most 1 − confidence.
A lower bound can only show a mechanism is broken, never prove it private.

Mechanisms: ` + strings.Join(audit.Names, ", ") + `. --delta applies to gaussian only.
--noise-factor 0.9 builds the mechanism with 10 % too little noise (for ε/0.9)
while still claiming ε: the audit catches it at ε = 1 with the default
sample counts and confidence 0.95 (measured bounds, seed 1; correct vs 0.9×):
  laplace, rr, krr, modlaplace   10⁶ samples per input (caught from 2·10⁵)
  l2laplace (dim 2)              10⁶ per input, ≈ 1 s: 0.967 vs 1.078
  gaussian (δ = 1e-5)            6·10⁷ per input, ≈ 15 s on 2 idle cores: 0.933 vs 1.043
The gaussian needs that many samples because at δ = 1e-5 the events that
can exceed (ε, δ) lie beyond 3.5σ and a 10 % under-noised Gaussian exceeds
the claim there by only ≈ 3·10⁻⁵ in probability; its events are set where
the privacy loss of the claimed mechanism is 0.80ε … ε. For l2laplace the
statistic audited is ‖y‖₂ − ‖y − e₁‖₂ (the privacy loss over ε) of the whole
output vector, not a single coordinate.`

const auditExample = `  privrec audit --method dp-bias --epsilon 1
  privrec audit --mechanism laplace --epsilon 1 --samples 1000000
  privrec audit --mechanism gaussian --epsilon 1 --delta 1e-5 --json
  privrec audit --mechanism laplace --epsilon 1 --noise-factor 0.9   # exits 1
  privrec audit --mechanism gaussian --epsilon 1 --noise-factor 0.9  # exits 1 (≈ 15 s)`

func runAudit(ctx context.Context, args []string, out io.Writer) error {
	if name := methodFromArgs(args); name != "" {
		return runAuditMethod(ctx, name, args, out)
	}
	a, err := parseMechanismAuditArgs(args)
	if err != nil {
		return err
	}
	spec, n, err := mechanismAuditSpec(a)
	if err != nil {
		return err
	}
	src := noise.Secure()
	if a.seed != 0 {
		src = noise.Seeded(a.seed)
	}
	r, err := audit.Run(ctx, spec, n, a.conf, src)
	if err != nil {
		return err
	}
	if a.json {
		if err := writeJSON(out, r); err != nil {
			return err
		}
	} else {
		printMechanismAudit(out, r)
	}
	if r.Violation {
		return exitError{code: 1}
	}
	return nil
}

// mechanismAuditArgs is privrec audit --mechanism's command line.
type mechanismAuditArgs struct {
	name                     string
	eps, delta, conf, factor float64
	samples, values, dim     int
	bounded, json            bool
	seed                     uint64
}

func parseMechanismAuditArgs(args []string) (*mechanismAuditArgs, error) {
	fs := newFlags("audit --mechanism NAME --epsilon E [--delta D] [--samples N] [--json]\n       privrec audit --method NAME|all [--epsilon E] [method flags] [--json]", auditSynopsis, auditExample)
	a := &mechanismAuditArgs{}
	fs.StringVar(&a.name, "mechanism", "", "mechanism to audit: "+strings.Join(audit.Names, ", "))
	fs.String("method", "", "audit a whole training method instead, or all of them (privrec audit --method NAME --help)")
	fs.Float64Var(&a.eps, "epsilon", 1, "claimed ε")
	fs.Float64Var(&a.delta, "delta", 0, "claimed δ (gaussian; default 1e-5 there)")
	fs.IntVar(&a.samples, "samples", 0, "samples per input (0: the mechanism's default, 10^6; gaussian 6·10^7)")
	fs.Float64Var(&a.conf, "confidence", 0.95, "confidence of the lower bound")
	fs.IntVar(&a.values, "values", 5, "krr: number of rating values d (plus missing)")
	fs.IntVar(&a.dim, "dim", 2, "l2laplace: vector dimension")
	fs.Float64Var(&a.factor, "noise-factor", 1, "scale the noise by this factor (<1 under-noises; for demonstrating a violation)")
	fs.BoolVar(&a.bounded, "bounded-time", false, "modlaplace: use the bounded-time (client-side) sampler")
	fs.Uint64Var(&a.seed, "seed", 0, "use a seeded, reproducible stream (0: crypto/rand)")
	fs.BoolVar(&a.json, "json", false, "print a JSON report on stdout")
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	if a.name == "" {
		return nil, usagef("--mechanism is required (one of %s), or --method NAME", strings.Join(audit.Names, ", "))
	}
	if err := checkEpsDelta(a.eps, a.delta); err != nil {
		return nil, err
	}
	if a.samples != 0 && (a.samples < 1000 || a.samples > 100_000_000) {
		return nil, usagef("--samples %d must be between 1000 and 10^8 (or 0 for the default)", a.samples)
	}
	if !(a.conf > 0 && a.conf < 1) {
		return nil, usagef("--confidence %v must be between 0 and 1", a.conf)
	}
	if a.name == "gaussian" && a.delta == 0 {
		a.delta = 1e-5
	}
	return a, nil
}

// mechanismAuditSpec is the audited mechanism and its samples per input
// (--samples, else the mechanism's default, else audit.DefaultSamples).
func mechanismAuditSpec(a *mechanismAuditArgs) (audit.Spec, int, error) {
	spec, err := audit.For(a.name, a.eps, a.delta, audit.Options{Values: a.values, Dim: a.dim, NoiseFactor: a.factor, BoundedTime: a.bounded})
	if err != nil {
		return spec, 0, usagef("%v", err)
	}
	n := a.samples
	if n == 0 {
		n = spec.Samples
	}
	if n == 0 {
		n = audit.DefaultSamples
	}
	return spec, n, nil
}

// printMechanismAudit prints a mechanism audit's bound and verdict.
func printMechanismAudit(out io.Writer, r audit.Result) {
	verdict := "no violation"
	if r.Violation {
		verdict = "VIOLATION: the mechanism leaks more than it claims"
	}
	fmt.Fprintf(out, "mechanism           %s\n", r.Mechanism)
	fmt.Fprintf(out, "claimed ε           %g", r.ClaimedEpsilon)
	if r.Delta > 0 {
		fmt.Fprintf(out, " (δ = %g)", r.Delta)
	}
	fmt.Fprintf(out, "\nε lower bound       %.4f (%.0f%% confidence, %d samples per input)\n", r.EpsilonLowerBound, 100*r.Confidence, r.Samples)
	fmt.Fprintf(out, "point estimate      %.4f on event %s\n", r.EpsilonEstimate, r.Event)
	fmt.Fprintf(out, "time                %.2f s\n", r.Seconds)
	fmt.Fprintf(out, "verdict             %s\n", verdict)
}

// The whole-method audit's tiers: the default (the short tier of
// methods.TestAuditEveryPrivateMethod: 2× under-noising caught for every
// private method) and --full (more trainings, a tighter confidence).
const (
	auditShortSamples = methods.AuditSamples
	auditFullSamples  = 6000
	auditFullRuns     = 32
	auditFullConf     = 1 - 1e-6
)

// auditMethodSynopsis is privrec audit --method's help text.
const auditMethodSynopsis = `
Whole-artefact audit of a training method. It trains the method many times
on two neighbouring small data sets under the method's own neighbouring
relation (one rating's value changed; or one user's ratings replaced or
added, that user being a canary whose ratings include an item outside the
declared catalogue) and checks everything the method makes public — the
model file's header and arrays, and the train report:
  (a) a field that stays the same when only the privacy noise changes but
      differs between the neighbours is an un-noised fact of the private
      data (a leak);
  (b) the canary user's or item's ID must not appear anywhere public;
  (c) a Clopper–Pearson lower bound on ε from the raw noised releases
      (before any post-processing: the audit taps every release the
      method makes through privacy/mechanism), with the log-likelihood
      ratio of the two inputs as the statistic; a zCDP claim ρ is tested
      at its point (ε'(ρ, δ'), δ') with δ' = 0.3;
  (d) the release check: of the additive releases every run makes, the
      one the neighbouring pair moves most relative to its declared Δ
      (the first on a tie), against its own claim, at the sensitivity the
      audit derives from the pair (the larger of the declared Δ and how
      far the pair moves the release; coordinates a method labels by item
      are compared by item across runs), on a test point planned from the
      claim alone where the claimed release and one with half its noise
      differ most: a group of K neighbours (claim K²ρ or Kε), one event
      and its mirror, a point (ε', δ') of the claim's profile and
      600–150 000 samples per side (every coordinate of a Laplace or
      Gaussian release is one), so that half the noise or half the
      sensitivity is caught at every ε.
Any of these is a violation (exit status 1); each bound is simultaneous
over its events at --confidence, so a correct method is flagged with
probability at most 2·(1 − confidence). An audit without power — the pair
reaches less than 90 % of a proven method's declared sensitivity, the
release's coordinates vary between runs, or no test point can contradict
the claim — says "no power" and exits 3: never a pass. A lower bound can only show a
method is broken, never prove it private. For the local-DP methods
(ldp-laplace, ldp-rr) each side's ratings are first randomized as the
users' devices would (per-rating --epsilon, the declared scale 1:5 and
catalogue) and the audited value is the canary's report of one rating.
Methods with status none (the GP/OP tensor variants) claim nothing about
the data: only their noise is audited (d).

--noise-factor 0.5 trains with half the noise each release claims (the
guarantee still claims the budget): every private method is then caught.
--sensitivity-factor 0.5 calibrates every release for half its
sensitivity (same claim): caught for every method with a proven guarantee
whose pair reaches its sensitivity. --matrix runs both and the unmodified
audit for every method named at every --epsilons value and prints the
table (exit 1 unless every cell is as expected).
--epsilon 0 (the default) trains pure-ε methods at ε = 1 and zCDP methods
at ε = 6 (ρ ≈ 0.75, where the bound is most sensitive). Tiers: the default
makes 1200 trainings per side per bound at confidence 0.95 (the test suite
runs it at 1 − 10⁻⁴); --full makes 6000 at 1 − 10⁻⁶ with 32 comparison
runs. --method all audits every private method with its defaults.`

const auditMethodExample = `  privrec audit --method dp-bias --json
  privrec audit --method dpsvd --noise-factor 0.5        # exits 1
  privrec audit --method all --full
  privrec audit --method dpals --epsilon 1 --sensitivity-factor 0.5   # exits 1
  privrec audit --method dp-ease --epsilon 1 --fault gram-unnormalised   # exits 1
  privrec audit --matrix --method dp-bias,cp-ip --epsilons 0.5,1,4,8
  privrec audit --method dpsvd --epsilon 2 --rank 2 --runs 20 --samples 1000`

func runAuditMethod(ctx context.Context, name string, args []string, out io.Writer) error {
	a, err := parseMethodAuditArgs(name, args)
	if err != nil {
		return err
	}
	if err := checkAuditOptions(a.opts); err != nil {
		return err
	}
	if err := checkAuditFault(a.opts.Fault, name, a.matrix || a.all); err != nil {
		return err
	}
	if a.matrix {
		names, eps, err := matrixArgs(name, a.epsList)
		if err != nil {
			return err
		}
		return runAuditMatrix(ctx, names, eps, a.opts, a.json, out)
	}
	if a.all {
		return runAuditAll(ctx, a.opts, a.json, out)
	}
	return runAuditOne(ctx, name, a.cfg, a.opts, a.json, out)
}

// methodAuditArgs is privrec audit --method's command line: one method
// with its config, all of them, or the matrix.
type methodAuditArgs struct {
	matrix, all, json bool
	cfg               methods.Config // one method's
	opts              methods.AuditOptions
	epsList           string
}

func parseMethodAuditArgs(name string, args []string) (*methodAuditArgs, error) {
	a := &methodAuditArgs{matrix: slices.Contains(args, "--matrix") || slices.Contains(args, "-matrix")}
	a.all = name == "all" || a.matrix
	var meth *methods.Method
	if !a.all {
		var err error
		if meth, err = methods.Lookup(name); err != nil {
			return nil, usagef("%v", err)
		}
	}
	fs := newFlags("audit --method NAME|all [--epsilon E] [--delta D] [--noise-factor F] [--full] [--runs N] [--samples N] [method flags] [--json]", auditMethodSynopsis, auditMethodExample)
	fs.String("method", "", "method to audit, or all (every private method, with its defaults); with --matrix, all or a comma-separated list")
	o := &a.opts
	fs.Float64Var(&o.Epsilon, "epsilon", 0, "ε the method is trained with (0: 1 for pure-ε methods, 6 for zCDP ones)")
	fs.Float64Var(&o.Delta, "delta", 1e-5, "δ the method is trained with ((ε, δ) methods)")
	fs.Float64Var(&o.NoiseFactor, "noise-factor", 1, "multiply every privacy-noise draw's scale by this while the guarantee claims the budget (<1 under-noises: the audit must catch it)")
	fs.Float64Var(&o.SensitivityFactor, "sensitivity-factor", 1, "calibrate every release for this fraction of its sensitivity while the guarantee claims the budget (<1 understates it: the audit, which derives the sensitivity from a neighbouring pair, must catch it)")
	fault := fs.String("fault", "", "remove one safeguard of the method while it claims its budget (gram-unnormalised: dp-ease's and dp-ials' per-user Gram normalisation); the audit must catch it")
	full := fs.Bool("full", false, "the full tier: 6000 trainings per side and bound, 32 comparison runs, confidence 1 − 10⁻⁶")
	fs.IntVar(&o.Runs, "runs", 0, "trainings per side for the field comparison (0: 16; --full 32)")
	fs.IntVar(&o.Samples, "samples", 0, "trainings per side for each ε lower bound (0: the tier's, 1200 or 6000; -1: skip the bounds)")
	fs.Float64Var(&o.Confidence, "confidence", 0, "confidence of each lower bound (0: 0.95; --full 1 − 10⁻⁶)")
	fs.Uint64Var(&o.Seed, "seed", 0, "seed of the audit's randomness (0: random)")
	fs.BoolVar(&a.json, "json", false, "print a JSON report on stdout")
	fs.Bool("matrix", false, "audit every method named (--method all or a comma-separated list) at every --epsilons value, unmodified, with --noise-factor 0.5 and with --sensitivity-factor 0.5: a table of verdicts and seconds (exit 1 unless every unmodified audit passes and every manipulated one is caught)")
	fs.StringVar(&a.epsList, "epsilons", "0.5,1,4,8", "with --matrix: the ε values audited")
	if !a.all {
		a.cfg = meth.New()
		if err := bindConfig(fs, a.cfg); err != nil {
			return nil, err
		}
	}
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	auditTierDefaults(&o.Runs, &o.Samples, &o.Confidence, *full)
	o.Fault = methods.AuditFault(*fault)
	return a, nil
}

// runAuditOne audits method name with its config and prints the report
// (JSON with jsonOut); the exit status is the verdict's.
func runAuditOne(ctx context.Context, name string, cfg methods.Config, opts methods.AuditOptions, jsonOut bool, out io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return usagef("%s: %v", name, err)
	}
	rep, err := methods.Audit(ctx, name, cfg, opts)
	if err != nil {
		return err
	}
	if jsonOut {
		if err := writeJSON(out, rep); err != nil {
			return err
		}
	} else {
		printAuditReport(out, rep)
	}
	return auditExit(rep)
}

// auditExit is the exit status of a whole-method audit: 1 for a
// violation, 3 when it had no power (never a pass), else 0.
func auditExit(rep *methods.AuditReport) error {
	switch {
	case rep.Violation:
		return exitError{code: 1}
	case len(rep.NoPower) > 0:
		return exitError{code: 3}
	}
	return nil
}

// runAuditAll audits every private method with its defaults, one line
// each (or a JSON list), exit status 1 if any shows a violation.
func runAuditAll(ctx context.Context, opts methods.AuditOptions, jsonOut bool, out io.Writer) error {
	var reps []*methods.AuditReport
	violation, noPower := false, false
	if !jsonOut {
		fmt.Fprintf(out, "%-14s %-9s %-24s %-24s %s\n", "method", "verdict", "data bound / claim", "release check / claim", "seconds")
	}
	for _, m := range methods.All() {
		if !m.Private {
			continue
		}
		rep, err := methods.Audit(ctx, m.Name, m.New(), opts)
		if err != nil {
			return fmt.Errorf("audit of %s: %w", m.Name, err)
		}
		reps = append(reps, rep)
		violation = violation || rep.Violation
		noPower = noPower || (!rep.Violation && len(rep.NoPower) > 0)
		if jsonOut {
			continue
		}
		verdict := auditVerdict(rep)
		data := "—"
		if !rep.NoGuarantee && rep.Samples > 0 {
			data = fmt.Sprintf("%.3f / %.3f", rep.EpsilonLowerBound, rep.TestedEpsilon)
		}
		rc := "—"
		if r := rep.ReleaseCheck; r != nil && r.Runs > 0 {
			rc = fmt.Sprintf("%.3f / %.3f", r.EpsilonLowerBound, r.TestedEpsilon)
		}
		fmt.Fprintf(out, "%-14s %-9s %-24s %-24s %.1f\n", m.Name, verdict, data, rc, rep.Seconds)
	}
	if jsonOut {
		if err := writeJSON(out, reps); err != nil {
			return err
		}
	}
	switch {
	case violation:
		return exitError{code: 1}
	case noPower:
		return exitError{code: 3}
	}
	return nil
}

// auditVerdict is a report's verdict in one word.
func auditVerdict(rep *methods.AuditReport) string {
	switch {
	case rep.Violation:
		return "VIOLATION"
	case len(rep.NoPower) > 0:
		return "NO-POWER"
	}
	return "ok"
}

// printAuditReport prints one whole-method audit in words: the claim and
// the deliberate faults, the public fields and canaries, the data-level
// bound, the release check, then the verdict.
func printAuditReport(out io.Writer, rep *methods.AuditReport) {
	fmt.Fprintf(out, "method              %s\n", rep.Method)
	fmt.Fprintf(out, "relation            %s\n", rep.Relation)
	printAuditClaim(out, rep)
	printAuditLeaks(out, rep)
	printAuditBound(out, rep)
	if r := rep.ReleaseCheck; r != nil {
		printReleaseCheck(out, r)
	}
	for _, p := range rep.NoPower {
		fmt.Fprintf(out, "no power            %s\n", p)
	}
	verdict := "no violation"
	switch {
	case rep.Violation:
		verdict = "VIOLATION: the public artefact leaks more than the guarantee says"
	case len(rep.NoPower) > 0:
		verdict = "NO POWER: the audit could not have caught half the noise or half the sensitivity (see above); not a pass"
	}
	fmt.Fprintf(out, "time                %.2f s\nverdict             %s\n", rep.Seconds, verdict)
}

// printAuditClaim prints the guarantee claimed and any fault injected
// against it.
func printAuditClaim(out io.Writer, rep *methods.AuditReport) {
	if rep.NoGuarantee {
		fmt.Fprintf(out, "claimed             nothing (status none): only the noise is audited\n")
	} else {
		fmt.Fprintf(out, "claimed ε           %.4g", rep.ClaimedEpsilon)
		if rep.Delta > 0 {
			fmt.Fprintf(out, " (δ = %g)", rep.Delta)
		}
		if rep.ClaimedRho > 0 {
			fmt.Fprintf(out, ", ρ = %.4g zCDP", rep.ClaimedRho)
		}
		fmt.Fprintf(out, "; trained at ε = %g\n", rep.TrainedEpsilon)
	}
	if rep.NoiseFactor != 1 {
		fmt.Fprintf(out, "noise factor        %g (DELIBERATELY WRONG: the noise is scaled while the guarantee claims the budget)\n", rep.NoiseFactor)
	}
	if rep.SensitivityFactor != 1 {
		fmt.Fprintf(out, "sensitivity factor  %g (DELIBERATELY WRONG: every release is calibrated for this fraction of its sensitivity while the guarantee claims the budget)\n", rep.SensitivityFactor)
	}
	if rep.Fault != "" {
		fmt.Fprintf(out, "fault               %s (DELIBERATELY WRONG: a safeguard of the method's analysis removed while the guarantee claims the budget)\n", rep.Fault)
	}
}

// printAuditLeaks prints the public fields compared, the un-noised
// differences and the canary IDs found.
func printAuditLeaks(out io.Writer, rep *methods.AuditReport) {
	fmt.Fprintf(out, "public fields       %d compared over %d runs per side, %d vary with the noise\n", rep.Fields, rep.Runs, rep.Noised)
	fmt.Fprintf(out, "un-noised leaks     %d\n", len(rep.Differences))
	for _, d := range rep.Differences {
		fmt.Fprintf(out, "    %s\n", d)
	}
	fmt.Fprintf(out, "canary IDs found    %d\n", len(rep.Canaries))
	for _, c := range rep.Canaries {
		fmt.Fprintf(out, "    %s\n", c)
	}
}

// printAuditBound prints the data-level ε lower bound, or why it was not
// sampled.
func printAuditBound(out io.Writer, rep *methods.AuditReport) {
	if rep.Samples > 0 {
		tested := fmt.Sprintf("ε = %.4g", rep.TestedEpsilon)
		if rep.TestedDelta > 0 {
			tested += fmt.Sprintf(", δ = %g", rep.TestedDelta)
		}
		fmt.Fprintf(out, "ε lower bound       %.4f against %s (%.0f%% confidence, %d trainings per side; %s; %s)\n",
			rep.EpsilonLowerBound, tested, 100*rep.Confidence, rep.Samples, rep.Statistic, rep.Event)
	}
	if rep.Unsampled != "" {
		fmt.Fprintf(out, "ε lower bound       not sampled (%s): %s\n", rep.Statistic, rep.Unsampled)
	}
}

// printReleaseCheck prints the release check: which release, its claim and
// sensitivity, and the bound its samples give.
func printReleaseCheck(out io.Writer, r *methods.ReleaseCheck) {
	claim := fmt.Sprintf("ε = %.4g", r.ClaimedEpsilon)
	if r.ClaimedRho > 0 {
		claim = fmt.Sprintf("ρ = %.4g", r.ClaimedRho)
	}
	realised := "unmeasured: its coordinates vary between runs"
	if r.RealisedSensitivity != nil {
		realised = fmt.Sprintf("%.4g, reach %.0f%%", *r.RealisedSensitivity, 100*r.Reach)
	}
	if r.Mechanism == "rr" {
		fmt.Fprintf(out, "release check       randomized response (every sign of releases 1–%d, claims %s): signs released from +1 against signs released from −1\n",
			r.Release+1, claim)
	} else {
		fmt.Fprintf(out, "release check       release %d (%s, %d coordinates, claims %s): sensitivity declared %.4g, realised by the pair %s; tested Δ̂ = %.4g\n",
			r.Release+1, r.Mechanism, r.Dim, claim, r.DeclaredSensitivity, realised, r.DerivedSensitivity)
	}
	if r.Runs > 0 {
		tested := fmt.Sprintf("ε = %.4g", r.TestedEpsilon)
		if r.TestedDelta > 0 {
			tested += fmt.Sprintf(", δ = %.4g", r.TestedDelta)
		}
		fmt.Fprintf(out, "                    %.4f against %s (group of %d, %d samples per side from %d runs, planned margin %.1f sd against half the noise; %s)\n",
			r.EpsilonLowerBound, tested, r.Group, r.Runs, r.Trainings, r.Margin, r.Event)
	}
}

// auditTierDefaults fills the values left 0 with the tier's: the default
// tier, or the full one (--full).
func auditTierDefaults(runs, samples *int, conf *float64, full bool) {
	if *runs == 0 {
		*runs = 16
		if full {
			*runs = auditFullRuns
		}
	}
	if *samples == 0 {
		*samples = auditShortSamples
		if full {
			*samples = auditFullSamples
		}
	}
	if *conf == 0 {
		*conf = 0.95
		if full {
			*conf = auditFullConf
		}
	}
}

// checkAuditFault refuses a --fault that is unknown, given with --matrix
// or --method all, or names a safeguard the method does not have.
func checkAuditFault(f methods.AuditFault, method string, many bool) error {
	if f == methods.NoFault {
		return nil
	}
	ms, ok := methods.AuditFaults[f]
	switch {
	case !ok:
		return usagef("--fault %q: unknown (known: %s)", f, methods.FaultGramUnnormalised)
	case many:
		return usagef("--fault %q: audits one method (%s), not --matrix or --method all", f, strings.Join(ms, ", "))
	case !slices.Contains(ms, method):
		return usagef("--fault %q: %s has no such safeguard (the fault applies to %s)", f, method, strings.Join(ms, ", "))
	}
	return nil
}

// checkAuditOptions refuses an audit flag out of range, naming it.
func checkAuditOptions(o methods.AuditOptions) error {
	if o.Runs < 2 || o.Runs > 10000 {
		return usagef("--runs %d must be between 2 and 10000", o.Runs)
	}
	if o.Samples < -1 || o.Samples > 1_000_000 || (o.Samples >= 0 && o.Samples < 10) {
		return usagef("--samples %d must be between 10 and 10^6 (or -1 to skip the bounds)", o.Samples)
	}
	if !(o.Confidence > 0 && o.Confidence < 1) {
		return usagef("--confidence %v must be between 0 and 1", o.Confidence)
	}
	if f := o.NoiseFactor; math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > 1e6 {
		return usagef("--noise-factor %v must be positive", f)
	}
	if f := o.SensitivityFactor; math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > 1e6 {
		return usagef("--sensitivity-factor %v must be positive", f)
	}
	if e := o.Epsilon; e != 0 && (math.IsNaN(e) || math.IsInf(e, 0) || e < 0) {
		return usagef("--epsilon %v must be positive and finite (or 0 to let the audit choose)", e)
	}
	return nil
}
