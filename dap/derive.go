package dap

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// Derived is what a party that relies on a task computes for itself from
// the task's public plan (the statistic a device rebuilds with
// statistic.Decode) and lattice (step, noise mode, stated ρ), instead of
// taking the leader's word for it. Devices (Prepare, Client.Contribute,
// the browser) and the helper (its provisioning) both call Derive, and
// refuse a task whose stated values fall short of it.
type Derived struct {
	TaskID string `json:"task"`
	// Kind is the contribution's kind, Dimension its length.
	Kind      string `json:"kind"`
	Dimension int    `json:"dimension"`
	// Min, Bits and NormSq are the range and the bound on Σq² of an honest
	// contribution at the task's step: what the plan's statistic can
	// produce after Quantize (rounding toward zero never increases a
	// magnitude, so the statistic's own bounds hold on the lattice).
	Min    int64 `json:"min"`
	Bits   int   `json:"bits"`
	NormSq int64 `json:"norm_sq"`
	// Relation is the task's neighbour relation and Sensitivity the ℓ2
	// sensitivity of the lattice sum under it: √NormSq (add/remove),
	// √(2·NormSq) (replace, for statistics whose contributions have
	// non-negative inner products: counts, bias, Gram) or 2√NormSq
	// (replace, any other).
	Relation    string  `json:"relation"`
	Sensitivity float64 `json:"sensitivity"`
	// Noise is the task's noise mode and Sigma the smallest σ per
	// aggregator its stated ρ needs at Sensitivity in that mode.
	Noise NoiseMode `json:"noise"`
	Sigma uint64    `json:"sigma"`
	// Rho is the ρ the task's σ gives when both aggregators add their
	// noise; RhoAlone the ρ one aggregator's noise alone gives (what holds
	// if the other omits its noise: equal to Rho for NoiseEachAlone, about
	// 2ρ for NoiseSplit). Both are at most what they are stated as.
	Rho      float64 `json:"rho"`
	RhoAlone float64 `json:"rho_alone"`
	// ChargeRho is what a device is charged and shown for the task: the
	// larger of the stated ρ and RhoAlone (the guarantee against one
	// aggregator that omits its noise).
	ChargeRho float64 `json:"charge_rho"`

	device *Device
}

// Shortfall is a task whose stated value falls short of what Derive
// derived (or is inconsistent with its plan): it names the field and both
// values, and wraps ErrInvalid.
type Shortfall struct {
	Task, Field     string
	Stated, Derived string
	// Why says what the derived value follows from.
	Why string
}

func (e *Shortfall) Error() string {
	return fmt.Sprintf("dap: task %q: %s %s stated, %s derived (%s)", e.Task, e.Field, e.Stated, e.Derived, e.Why)
}

func (e *Shortfall) Unwrap() error { return ErrInvalid }

// ErrNeedsConsent is returned for a task a device accepts only if its
// user opted in (Consent).
var ErrNeedsConsent = errors.New("dap: refused without the user's consent")

// Derive computes t's privacy parameters from its plan and lattice and
// refuses t if what it states falls short: a plan that does not decode or
// whose dimension differs, a range (min, bits) or norm_sq other than the
// plan's statistic gives at the task's step, a sensitivity below the
// derived one for the task's relation, or a σ below what the stated ρ
// needs at the derived sensitivity. Errors name the field and both values
// (*Shortfall) and wrap ErrInvalid.
func Derive(t Task) (Derived, error) {
	if err := t.checkShape(); err != nil {
		return Derived{}, err
	}
	if len(t.Plan) == 0 {
		return Derived{}, fmt.Errorf("%w: task %q has no plan: nobody could derive its sensitivity", ErrInvalid, t.ID)
	}
	dev, err := NewDevice(t)
	if err != nil {
		return Derived{}, err
	}
	sh := shapeOf(dev.Contribution)
	kind := dev.Contribution.Kind()
	if top, n := sh.coord/t.Step, sh.norm/t.Step; !(top > 0 && top < 1<<32 && n > 0 && n*n < 1<<62) {
		return Derived{}, fmt.Errorf("%w: task %q: the %s plan's bounds (|x_j| ≤ %g, ‖x‖ ≤ %g) at step %g do not fit 32 bits and Σq² < 2^62", ErrInvalid, t.ID, kind, sh.coord, sh.norm, t.Step)
	}
	bits, lo, normSq := sh.lattice(t.Step)
	d := Derived{TaskID: t.ID, Kind: kind, Dimension: t.Dimension, Min: lo, Bits: bits,
		Relation: t.Relation, Noise: t.Noise, device: dev}
	why := fmt.Sprintf("the %s plan at step %g", d.Kind, t.Step)
	short := func(field string, stated, derived any, why string) error {
		return &Shortfall{Task: t.ID, Field: field, Stated: fmt.Sprint(stated), Derived: fmt.Sprint(derived), Why: why}
	}
	switch {
	case bits > 32:
		return Derived{}, fmt.Errorf("%w: task %q: step %g is too fine for the %s plan (%d bits)", ErrInvalid, t.ID, t.Step, d.Kind, bits)
	case t.Min != lo || t.Bits != bits:
		return Derived{}, short("range [min, min+2^bits)", fmt.Sprintf("[%d, %d)", t.Min, t.Min+1<<t.Bits), fmt.Sprintf("[%d, %d)", lo, lo+1<<bits), why)
	case t.NormSq != int64(normSq):
		return Derived{}, short("norm_sq", t.NormSq, int64(normSq), why)
	}
	d.NormSq = int64(normSq)
	k := int64(1)
	if t.Relation == RelationReplace {
		k = sh.replaceSq()
		why = fmt.Sprintf("√(%d·norm_sq) under %s for the %s plan", k, t.Relation, d.Kind)
	} else {
		why = fmt.Sprintf("√norm_sq under %s", t.Relation)
	}
	// Exactly: stated² ≥ k·NormSq.
	s := new(big.Float).SetFloat64(t.Sensitivity)
	need := new(big.Float).SetInt64(d.NormSq)
	need.Mul(need, new(big.Float).SetInt64(k))
	derived := up(math.Sqrt(float64(k) * float64(d.NormSq)))
	if s.Mul(s, s).Cmp(need) < 0 {
		return Derived{}, short("sensitivity", t.Sensitivity, strconv.FormatFloat(derived, 'g', 10, 64), why)
	}
	// Both the stated and the rounded-up derived value bound the true
	// sensitivity from above: use the smaller.
	d.Sensitivity = min(derived, t.Sensitivity)
	if d.Sigma, err = SigmaFor(t.Rho, d.Sensitivity, t.Dimension, t.Noise); err != nil {
		return Derived{}, fmt.Errorf("task %q: %w", t.ID, err)
	}
	if t.Sigma < d.Sigma {
		return Derived{}, short("sigma", t.Sigma, d.Sigma, fmt.Sprintf("ρ %g at sensitivity %.10g, noise %s", t.Rho, d.Sensitivity, t.Noise))
	}
	if err := t.Validate(); err != nil {
		return Derived{}, err
	}
	if d.Rho, err = RhoOf(t.Sigma, d.Sensitivity, t.Dimension, t.Noise); err != nil {
		return Derived{}, fmt.Errorf("task %q: %w", t.ID, err)
	}
	if d.RhoAlone, err = RhoOf(t.Sigma, d.Sensitivity, t.Dimension, NoiseEachAlone); err != nil {
		return Derived{}, fmt.Errorf("task %q: %w", t.ID, err)
	}
	d.ChargeRho = max(t.Rho, d.RhoAlone)
	return d, nil
}

// Consent is what a device's user agreed to beyond privrec's default,
// which accepts only tasks whose guarantee holds against either
// aggregator alone (NoiseEachAlone).
type Consent struct {
	// SplitNoise: she accepts tasks in the honest-but-curious noise split
	// (NoiseSplit), knowing that against one aggregator that omits its
	// noise her guarantee is RhoAlone (≈ 2ρ), not the stated ρ; she is
	// charged and shown RhoAlone.
	SplitNoise bool
}

// Check is Derive followed by the user's policy: a split-noise task is
// refused (ErrNeedsConsent) unless she opted in.
func (c Consent) Check(t Task) (Derived, error) {
	d, err := Derive(t)
	if err != nil {
		return d, err
	}
	if d.Noise == NoiseSplit && !c.SplitNoise {
		return Derived{}, fmt.Errorf("%w: task %q splits the noise between the aggregators (%s): if one of them omits its noise the release gives only ρ %.4g, not the stated %.4g; accept it only if you trust both operators to follow the protocol (opt in: Consent.SplitNoise, `privrec dap contribute --allow-split-noise`)",
			ErrNeedsConsent, t.ID, NoiseSplit, d.RhoAlone, t.Rho)
	}
	return d, nil
}

// Guarantee states d's guarantee for a device in words.
func (d *Derived) Guarantee() string {
	if d.Noise == NoiseSplit {
		return fmt.Sprintf("ρ %.4g-zCDP (%s) against either operator alone; ρ %.4g only while both add their noise (honest-but-curious); your exact report is seen only if both operators collude",
			d.ChargeRho, d.Relation, d.Rho)
	}
	return fmt.Sprintf("ρ %.4g-zCDP (%s) even if one operator misbehaves: each adds enough noise alone; your exact report is seen only if both operators collude", d.ChargeRho, d.Relation)
}
