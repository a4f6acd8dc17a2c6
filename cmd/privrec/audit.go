package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/privacy/audit"
	"github.com/privrec/privrec/privacy/noise"
)

func init() {
	register(&command{name: "audit", summary: "empirically check a privacy mechanism: lower bound on ε from samples", run: runAudit})
}

func runAudit(ctx context.Context, args []string, out io.Writer) error {
	if name := methodFromArgs(args); name != "" {
		return runAuditMethod(ctx, name, args, out)
	}
	fs := newFlags("audit --mechanism NAME --epsilon E [--delta D] [--samples N] [--json]", `
Sample a privacy mechanism on its worst-case pair of neighbouring inputs
(sensitivity 1; for rr the signs +1/−1, for krr missing/rating 1, for
modlaplace the ratings −1/+1, for l2laplace the vectors 0/e₁), count a
fixed family of likelihood-ratio events on both sides, and print a
Clopper–Pearson lower bound on the privacy loss beside the claimed ε (for
gaussian, ln((p_a − δ)/p_b)). The bound holds simultaneously over all
events at the stated confidence, so a bound above the claim is a violation
(exit status 1) with false-alarm probability at most 1 − confidence.
A lower bound can only show a mechanism is broken, never prove it private.

Mechanisms: `+strings.Join(audit.Names, ", ")+`. --delta applies to gaussian only.
--noise-factor 0.9 builds the mechanism with 10 % too little noise (for ε/0.9)
while still claiming ε: the audit catches it at ε = 1 with the default
sample counts and confidence 0.95 (measured bounds, seed 1; correct vs 0.9×):
  laplace, rr, krr, modlaplace   10⁶ samples per input (caught from 2·10⁵)
  l2laplace (dim 2)              10⁶ per input, ≈ 1 s: 0.967 vs 1.078
  gaussian (δ = 1e-5)            6·10⁷ per input, ≈ 15 s on 2 idle cores: 0.935 vs 1.045
The gaussian needs that many samples because at δ = 1e-5 the events that
can exceed (ε, δ) lie beyond 3.5σ and a 10 % under-noised Gaussian exceeds
the claim there by only ≈ 3·10⁻⁵ in probability; its events are set where
the privacy loss of the claimed mechanism is 0.80ε … ε. For l2laplace the
statistic audited is ‖y‖₂ − ‖y − e₁‖₂ (the privacy loss over ε) of the whole
output vector, not a single coordinate.`,
		`  privrec audit --mechanism laplace --epsilon 1 --samples 1000000
  privrec audit --mechanism gaussian --epsilon 1 --delta 1e-5 --json
  privrec audit --mechanism laplace --epsilon 1 --noise-factor 0.9   # exits 1
  privrec audit --mechanism gaussian --epsilon 1 --noise-factor 0.9  # exits 1 (≈ 15 s)`)
	name := fs.String("mechanism", "", "mechanism to audit: "+strings.Join(audit.Names, ", "))
	eps := fs.Float64("epsilon", 1, "claimed ε")
	delta := fs.Float64("delta", 0, "claimed δ (gaussian; default 1e-5 there)")
	samples := fs.Int("samples", 0, "samples per input (0: the mechanism's default, 10^6; gaussian 6·10^7)")
	conf := fs.Float64("confidence", 0.95, "confidence of the lower bound")
	values := fs.Int("values", 5, "krr: number of rating values d (plus missing)")
	dim := fs.Int("dim", 2, "l2laplace: vector dimension")
	factor := fs.Float64("noise-factor", 1, "scale the noise by this factor (<1 under-noises; for demonstrating a violation)")
	bounded := fs.Bool("bounded-time", false, "modlaplace: use the bounded-time (client-side) sampler")
	seed := fs.Uint64("seed", 0, "use a seeded, reproducible stream (0: crypto/rand)")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *name == "" {
		return usagef("--mechanism is required (one of %s)", strings.Join(audit.Names, ", "))
	}
	if *samples != 0 && (*samples < 1000 || *samples > 100_000_000) {
		return usagef("--samples %d must be between 1000 and 10^8 (or 0 for the default)", *samples)
	}
	if !(*conf > 0 && *conf < 1) {
		return usagef("--confidence %v must be between 0 and 1", *conf)
	}
	if *name == "gaussian" && *delta == 0 {
		*delta = 1e-5
	}
	spec, err := audit.For(*name, *eps, *delta, audit.Options{Values: *values, Dim: *dim, NoiseFactor: *factor, BoundedTime: *bounded})
	if err != nil {
		return usagef("%v", err)
	}
	n := *samples
	if n == 0 {
		n = spec.Samples
	}
	if n == 0 {
		n = audit.DefaultSamples
	}
	src := noise.Secure()
	if *seed != 0 {
		src = noise.Seeded(*seed)
	}
	r, err := audit.Run(ctx, spec, n, *conf, src)
	if err != nil {
		return err
	}
	if *jsonOut {
		if err := writeJSON(out, r); err != nil {
			return err
		}
	} else {
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
	if r.Violation {
		return exitError{code: 1}
	}
	return nil
}

func runAuditMethod(ctx context.Context, name string, args []string, out io.Writer) error {
	meth, err := methods.Lookup(name)
	if err != nil {
		return usagef("%v", err)
	}
	fs := newFlags("audit --method NAME [--epsilon E] [--delta D] [--runs N] [--samples N] [method flags] [--json]", `
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
  (c) the released value that differs most between the sides gives a
      Clopper–Pearson lower bound on ε, which must not exceed the claim.
Any of these is a violation (exit status 1). A lower bound can only show a
method is broken, never prove it private. For the local-DP methods
(ldp-laplace, ldp-rr) each side's ratings are first randomized as the
users' devices would (per-rating --epsilon, the declared scale 1:5 and
catalogue), and the method trains on the reports; under the local relation
the clients' IDs are public, so only the canary item is searched.`,
		`  privrec audit --method dp-bias --epsilon 1 --json
  privrec audit --method ldp-rr --epsilon 1 --debias --runs 10 --samples 200
  privrec audit --method dpsvd --epsilon 2 --rank 2 --runs 20 --samples 1000`)
	fs.String("method", "", "method to audit")
	eps := fs.Float64("epsilon", 1, "ε the method is trained with")
	delta := fs.Float64("delta", 1e-5, "δ the method is trained with ((ε, δ) methods)")
	runs := fs.Int("runs", 16, "trainings per side for the field comparison")
	samples := fs.Int("samples", 400, "trainings per side for the ε lower bound (0: skip it)")
	conf := fs.Float64("confidence", 0.95, "confidence of the lower bound")
	seed := fs.Uint64("seed", 0, "seed of the audit's randomness (0: random)")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	cfg := meth.New()
	if err := bindConfig(fs, cfg); err != nil {
		return err
	}
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *runs < 2 || *runs > 10000 {
		return usagef("--runs %d must be between 2 and 10000", *runs)
	}
	if *samples < 0 || *samples > 1_000_000 {
		return usagef("--samples %d must be between 0 and 10^6", *samples)
	}
	if !(*conf > 0 && *conf < 1) {
		return usagef("--confidence %v must be between 0 and 1", *conf)
	}
	if err := cfg.Validate(); err != nil {
		return usagef("%s: %v", name, err)
	}
	s := *samples
	if s == 0 {
		s = -1
	}
	rep, err := methods.Audit(ctx, name, cfg, methods.AuditOptions{Epsilon: *eps, Delta: *delta, Runs: *runs, Samples: s,
		Confidence: *conf, Seed: *seed})
	if err != nil {
		return err
	}
	if *jsonOut {
		if err := writeJSON(out, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "method              %s\n", rep.Method)
		fmt.Fprintf(out, "relation            %s\n", rep.Relation)
		fmt.Fprintf(out, "claimed ε           %.4g", rep.ClaimedEpsilon)
		if rep.Delta > 0 {
			fmt.Fprintf(out, " (δ = %g)", rep.Delta)
		}
		fmt.Fprintf(out, "\npublic fields       %d compared over %d runs per side, %d vary with the noise\n", rep.Fields, rep.Runs, rep.Noised)
		fmt.Fprintf(out, "un-noised leaks     %d\n", len(rep.Differences))
		for _, d := range rep.Differences {
			fmt.Fprintf(out, "    %s\n", d)
		}
		fmt.Fprintf(out, "canary IDs found    %d\n", len(rep.Canaries))
		for _, c := range rep.Canaries {
			fmt.Fprintf(out, "    %s\n", c)
		}
		if rep.Samples > 0 {
			fmt.Fprintf(out, "ε lower bound       %.4f (%.0f%% confidence, %d trainings per side, %s; %s)\n", rep.EpsilonLowerBound, 100*rep.Confidence, rep.Samples, rep.Statistic, rep.Event)
		}
		verdict := "no violation"
		if rep.Violation {
			verdict = "VIOLATION: the public artefact leaks more than the guarantee says"
		}
		fmt.Fprintf(out, "time                %.2f s\nverdict             %s\n", rep.Seconds, verdict)
	}
	if rep.Violation {
		return exitError{code: 1}
	}
	return nil
}
