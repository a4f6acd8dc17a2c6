package completion

import (
	"fmt"
	"math"
	"slices"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/tensor"
)

// calibration holds the mechanisms of one configuration on one training
// tensor. Train draws its noise from them and Guarantee reads their
// guarantees, so what is printed is what was added.
type calibration struct {
	ip *mechanism.Laplace   // IP: one coordinate per training value
	gp *mechanism.L2Laplace // GP: one release per update of a row of C
	op *mechanism.L2Laplace // OP: one release per row of C
	// DP-SGD: one Gaussian release per batch; a pass's batches are
	// disjoint, so a pass costs one release's ρ.
	sgd          *mechanism.Gaussian
	sgdPassRho   float64
	sgdTargetRho float64
	// centre releases the sum of the clamped values (DP-SGD's optional
	// private centring).
	centre *mechanism.Laplace
}

// instrument attaches in (an audit's noise factor and tap) to every
// mechanism of the calibration; the guarantees are unchanged.
func (cal *calibration) instrument(in *mechanism.Instrument) {
	if cal.ip != nil {
		cal.ip = cal.ip.Instrumented(in)
	}
	if cal.centre != nil {
		cal.centre = cal.centre.Instrumented(in)
	}
	if cal.gp != nil {
		cal.gp = cal.gp.Instrumented(in)
	}
	if cal.op != nil {
		cal.op = cal.op.Instrumented(in)
	}
	if cal.sgd != nil {
		cal.sgd = cal.sgd.Instrumented(in)
	}
}

// sens is a sensitivity under the relation of every mechanism here: one
// rating's value is replaced.
func sens(v float64, n mechanism.Norm) mechanism.Sensitivity {
	return mechanism.Sensitivity{Value: v, Norm: n, Relation: mechanism.ReplaceOne, Unit: privacy.UnitEntry}
}

// numParams is the number of model parameters on a tensor of the given shape.
func (c Config) numParams(dims [3]int) int {
	n := (dims[0] + dims[1] + dims[2]) * c.Rank
	if c.Kind == tensor.Tucker {
		n += c.Rank * c.Rank * c.Rank
	}
	if c.Biases {
		n += dims[0] + dims[1] + dims[2] + 1
	}
	return n
}

// calibrate builds the mechanisms for a training tensor with dims and
// nTrain entries.
func (c Config) calibrate(dims [3]int, nTrain int) (*calibration, error) {
	cal := &calibration{}
	var err error
	switch c.Mechanism {
	case IP:
		cal.ip, err = mechanism.NewLaplace(c.Epsilon, sens(c.Hi-c.Lo, mechanism.L1), max(nTrain, 1))
	case GP:
		cal.gp, err = mechanism.NewL2Laplace(c.Epsilon, sens(2*c.Clip, mechanism.L2), c.Rank)
	case OP:
		cal.op, err = mechanism.NewL2Laplace(c.Epsilon, sens(OPSensitivity(c), mechanism.L2), c.Rank)
	case DPSGD:
		// ρ for (ε, δ) by the tight conversion, spread evenly over the
		// passes, after the centring's ε²/2 (pure ε is ε²/2-zCDP).
		if cal.sgdTargetRho, err = accountant.RhoForApprox(c.Epsilon, c.Delta); err != nil {
			break
		}
		budget := cal.sgdTargetRho
		if c.CentreEps > 0 {
			if cal.centre, err = mechanism.NewLaplace(c.CentreEps, sens(c.Hi-c.Lo, mechanism.L1), 1); err != nil {
				break
			}
			var rc float64
			if rc, err = accountant.PureToZCDP(cal.centre.Guarantee().Epsilon); err != nil {
				break
			}
			if budget -= rc; !(budget > 0) {
				err = fmt.Errorf("%w: the centring's ε = %v uses the whole budget", accountant.ErrInvalid, c.CentreEps)
				break
			}
		}
		perPass := budget / float64(c.Passes)
		dim := c.numParams(dims)
		var sigma float64
		if sigma, err = mechanism.GaussianSigma(perPass, 2*c.Clip, dim); err != nil {
			break
		}
		if cal.sgd, err = mechanism.NewGaussianSigma(sigma, c.Delta, sens(2*c.Clip, mechanism.L2), dim); err != nil {
			break
		}
		cal.sgdPassRho = cal.sgd.Rho()
	}
	if err != nil {
		return nil, fmt.Errorf("completion: calibrating %s noise: %w", c.Mechanism, err)
	}
	return cal, nil
}

// repeat is n copies of x (for the accountant's variadic compositions).
func repeat(x float64, n int) []float64 { return slices.Repeat([]float64{x}, n) }

// Guarantee states what a configuration trained on t provably gives, for
// neighbouring datasets that differ in the value of one rating (the set of
// observed positions is treated as public: every mechanism here releases a
// model whose shape and update pattern depend on it). That is
// privacy.RelationRatingValue, with a rating's day part of its position;
// the proven guarantees carry it as their Relation. All arithmetic is
// privacy/accountant's and the per-release guarantees are
// privacy/mechanism's.
//
//   - none: no noise, status none.
//   - IP: ε-DP, proven (each value clamped to [Lo, Hi], lattice Laplace
//     (Hi−Lo)/ε, training is post-processing).
//   - GP, OP: the seed releases A, B (and the Tucker core) without noise,
//     so the full model has status none; the note gives the guarantee of C
//     alone: the seed's claim, and what can be proven (basic composition
//     over every noisy step for GP; over the rows of C, each moved by its
//     slice's entries, for OP).
//   - DP-SGD: ρ-zCDP composed over the passes, (ε, δ) by the tight
//     conversion, proven.
func (c Config) Guarantee(t *tensor.Tensor) (privacy.Guarantee, error) {
	if err := c.Validate(); err != nil {
		return privacy.Guarantee{}, err
	}
	if c.Mechanism == NoMechanism {
		return privacy.NoPrivacy(privacy.UnitEntry, "Non-private tensor completion: the factors are fitted to the raw ratings without noise."), nil
	}
	cal, err := c.calibrate(t.Dims, t.Len())
	if err != nil {
		return privacy.Guarantee{}, err
	}
	return c.guarantee(cal, t)
}

// neighboursText states the neighbouring relation in every guarantee's
// note.
const neighboursText = "Neighbouring data differ in the value of one rating; which (user, item, day) positions are rated — including each rating's timestamp, from which the day axis is built — is treated as public."

func (c Config) guarantee(cal *calibration, t *tensor.Tensor) (privacy.Guarantee, error) {
	switch c.Mechanism {
	case IP:
		return c.guaranteeIP(cal), nil
	case GP:
		return c.guaranteeGP(cal, t)
	case OP:
		return c.guaranteeOP(cal, t)
	case DPSGD:
		return c.guaranteeDPSGD(cal)
	}
	return privacy.NoPrivacy(privacy.UnitEntry, "Non-private tensor completion: the factors are fitted to the raw ratings without noise."), nil
}

func (c Config) composeErr(err error) (privacy.Guarantee, error) {
	return privacy.Guarantee{}, fmt.Errorf("completion: composing the %s guarantee: %w", c.Mechanism, err)
}

// guaranteeIP: ε-DP per rating value, proven.
func (c Config) guaranteeIP(cal *calibration) privacy.Guarantee {
	g := cal.ip.Guarantee()
	g.Relation = privacy.RelationRatingValue
	g.Note = fmt.Sprintf("Input perturbation: every training value is clamped to [%g, %g] and released with Laplace noise of scale %.4g (ε = %g per rating); the model is post-processing. %s %s",
		c.Lo, c.Hi, cal.ip.Scale(), c.Epsilon, neighboursText, g.Note)
	return g
}

// seedOnly is GP's and OP's guarantee: none for the model (A, B and the
// core are released without noise), with the seed's claimed ε recorded and
// note stating what C alone has.
func (c Config) seedOnly(note string) privacy.Guarantee {
	return privacy.Guarantee{Epsilon: math.Inf(1), Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.None,
		ClaimedEpsilon: c.Epsilon, Note: note}
}

// guaranteeGP: none for the model; C alone as the seed claims it and as
// it can be proven.
func (c Config) guaranteeGP(cal *calibration, t *tensor.Tensor) (privacy.Guarantee, error) {
	step := cal.gp.Guarantee().Epsilon
	// Every noisy step can differ between neighbours (the un-noised A, B
	// carry the change into later gradients), each is ε-DP with the
	// clip: basic composition over one pass's steps, then over passes.
	perPass, err := accountant.BasicComposition(repeat(step, t.Len())...)
	if err != nil {
		return c.composeErr(err)
	}
	all, err := accountant.BasicComposition(repeat(perPass, c.Passes)...)
	if err != nil {
		return c.composeErr(err)
	}
	// The seed's reading: the changed rating is visited once per pass.
	visits, err := accountant.BasicComposition(repeat(step, c.Passes)...)
	if err != nil {
		return c.composeErr(err)
	}
	return c.seedOnly(fmt.Sprintf("Gradient perturbation as seed 004 calibrates it: only C's gradient rows are clipped (m = %g) and noised (ℓ2 Laplace, Δ = 2m, per-step ε = %g); "+
		"the released A, B%s are computed without noise, so the model as a whole has no DP guarantee. "+
		"C alone: the seed claims ε = %g for the whole run, independent of the number of passes; that proof does not compose the %d passes. "+
		"Each pass visits the changed rating once, so counting passes gives ε = %.6g — but the un-noised A and B carry the change into every later step, "+
		"so what can be proven for C alone is basic composition over all %d passes × %d noisy steps, ε = %.6g. %s",
		c.Clip, step, coreText(c), c.Epsilon, c.Passes, visits, c.Passes, t.Len(), all, neighboursText)), nil
}

// guaranteeOP: none for the model; C alone as the seed claims it and as
// it can be proven.
func (c Config) guaranteeOP(cal *calibration, t *tensor.Tensor) (privacy.Guarantee, error) {
	// Row k of C is moved by the τ visits of each of the n_k entries of
	// slice k, by at most 2Lη each: sensitivity n_k·Δ, so n_k·ε; the
	// rows are composed.
	counts := make([]int, t.Dims[2])
	for _, k := range t.K {
		counts[k]++
	}
	var rows []float64
	for _, n := range counts {
		if n == 0 {
			continue
		}
		g, err := cal.op.GuaranteeFor(n)
		if err != nil {
			return c.composeErr(err)
		}
		rows = append(rows, g.Epsilon)
	}
	all, err := accountant.BasicComposition(rows...)
	if err != nil {
		return c.composeErr(err)
	}
	return c.seedOnly(fmt.Sprintf("Output perturbation as seed 004 calibrates it: ℓ2 Laplace noise with Δ = 2τLη = %g is added to the rows of C only; "+
		"the released A, B%s carry no noise, so the model as a whole has no DP guarantee. "+
		"C alone: the seed claims ε = %g from Wu et al.'s bound for convex permutation SGD, which does not apply (the tensor objective is not convex and C's updates depend on A and B, trained on the same data). "+
		"What can be proven with C's gradient rows clipped to L = %g: each of the %d training entries moves its row of C by at most 2Lη per visit, so row k is (n_k·ε)-DP and C alone, composed over its rows, is ε = %.6g. %s",
		OPSensitivity(c), coreText(c), c.Epsilon, c.Clip, t.Len(), all, neighboursText)), nil
}

// guaranteeDPSGD: ρ-zCDP over the passes (and the centring's ε when
// centred), (ε, δ) by the tight conversion, proven.
func (c Config) guaranteeDPSGD(cal *calibration) (privacy.Guarantee, error) {
	rho, err := accountant.ZCDPCompose(repeat(cal.sgdPassRho, c.Passes)...)
	if err != nil {
		return c.composeErr(err)
	}
	eps, err := accountant.ZCDPToApprox(rho, c.Delta)
	if err != nil {
		return c.composeErr(err)
	}
	what := "all parameters"
	if c.Biases {
		what = "all parameters (factors" + coreText(c) + ", the global mean and the user, item and day biases)"
	}
	step := ""
	if c.Precondition {
		step = " Each step divides a parameter's noisy sum by its curvature Σ(∂x̂/∂θ)² plus the ridge, computed from the rated positions and the already released parameters: post-processing."
	}
	g := privacy.Guarantee{Epsilon: eps, Delta: c.Delta, Rho: rho, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.Proven,
		Note: fmt.Sprintf("DP-SGD over %s: each entry's gradient clipped to %g (Δ = %g between neighbours), lattice Gaussian noise σ = %.4g on every parameter per batch, "+
			"%d passes of disjoint batches, ρ = %.4g per pass, composed ρ = %.4g zCDP, (ε, δ) by the tight conversion.%s",
			what, c.Clip, 2*c.Clip, cal.sgd.Sigma(), c.Passes, cal.sgdPassRho, rho, step)}
	if cal.centre != nil {
		cg := cal.centre.Guarantee()
		if g, err = accountant.Compose(c.Delta, cg, g); err != nil {
			return c.composeErr(err)
		}
		g.Note = fmt.Sprintf("Centred DP-SGD: the training values are centred on their mean, released privately (sum of the values clamped to [%g, %g], Laplace noise for ε = %g, divided by the public count); then %s", c.Lo, c.Hi, cg.Epsilon, g.Note)
	}
	g.Relation = privacy.RelationRatingValue
	g.Note += " " + neighboursText
	return g, nil
}

func coreText(c Config) string {
	if c.Kind == tensor.Tucker {
		return " and the core tensor"
	}
	return ""
}
