package accountant

import (
	"fmt"
	"math"
	"math/big"
	"sync"
)

// exactSum keeps a sum of float64 values exactly (every float64 is a
// rational), so a budget is charged exactly what was spent: no rounding in
// either direction.
type exactSum struct{ r big.Rat }

func (s *exactSum) plus(x float64) *big.Rat {
	var v big.Rat
	v.SetFloat64(x)
	return v.Add(&v, &s.r)
}

func (s *exactSum) float() float64 {
	f, _ := s.r.Float64()
	return f
}

// exceeds reports whether sum > limit exactly.
func exceeds(sum *big.Rat, limit float64) bool {
	var l big.Rat
	l.SetFloat64(limit)
	return sum.Cmp(&l) > 0
}

// ErrOverspent is wrapped by the error a Budget returns when a spend would
// exceed it.
var ErrOverspent = fmt.Errorf("privacy budget exceeded")

// Budget is an (ε, δ) privacy budget under basic composition: each Spend
// adds its ε and δ (in exact rational arithmetic); a spend that would exceed the total is refused and
// nothing is charged. Safe for concurrent use.
type Budget struct {
	mu                   sync.Mutex
	eps, delta           float64
	spentEps, spentDelta exactSum
}

// NewBudget returns a budget of total (ε, δ); δ may be 0 (pure DP).
func NewBudget(eps, delta float64) (*Budget, error) {
	if err := CheckEpsilon(eps); err != nil {
		return nil, err
	}
	if delta != 0 {
		if err := CheckDelta(delta); err != nil {
			return nil, err
		}
	}
	return &Budget{eps: eps, delta: delta}, nil
}

// Spend charges (ε, δ), or refuses with an error wrapping ErrOverspent.
func (b *Budget) Spend(eps, delta float64) error {
	if err := CheckEpsilon(eps); err != nil {
		return err
	}
	if delta != 0 {
		if err := CheckDelta(delta); err != nil {
			return err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ne, nd := b.spentEps.plus(eps), b.spentDelta.plus(delta)
	if exceeds(ne, b.eps) || exceeds(nd, b.delta) {
		return fmt.Errorf("%w: spending (ε=%g, δ=%g) on top of (ε=%g, δ=%g) exceeds (ε=%g, δ=%g)",
			ErrOverspent, eps, delta, b.spentEps.float(), b.spentDelta.float(), b.eps, b.delta)
	}
	b.spentEps.r.Set(ne)
	b.spentDelta.r.Set(nd)
	return nil
}

// Spent returns what has been charged so far (the exact sums, rounded to
// the nearest float64).
func (b *Budget) Spent() (eps, delta float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spentEps.float(), b.spentDelta.float()
}

// Remaining returns what is left (never negative; rounded down).
func (b *Budget) Remaining() (eps, delta float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return math.Max(0, down(b.eps-b.spentEps.float())), math.Max(0, down(b.delta-b.spentDelta.float()))
}

// RhoBudget is a zCDP budget: spends add their ρ (exact composition for
// zCDP, summed in exact rational arithmetic); a spend that would exceed the total is refused. Build one for a
// target (ε, δ) with NewRhoBudgetFor. Safe for concurrent use.
type RhoBudget struct {
	mu    sync.Mutex
	rho   float64
	spent exactSum
}

// NewRhoBudget returns a budget of total ρ.
func NewRhoBudget(rho float64) (*RhoBudget, error) {
	if err := CheckRho(rho); err != nil {
		return nil, err
	}
	return &RhoBudget{rho: rho}, nil
}

// NewRhoBudgetFor returns the zCDP budget whose tight conversion is (ε, δ).
func NewRhoBudgetFor(eps, delta float64) (*RhoBudget, error) {
	rho, err := RhoForApprox(eps, delta)
	if err != nil {
		return nil, err
	}
	return NewRhoBudget(rho)
}

// Spend charges ρ, or refuses with an error wrapping ErrOverspent.
func (b *RhoBudget) Spend(rho float64) error {
	if err := CheckRho(rho); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.spent.plus(rho)
	if exceeds(n, b.rho) {
		return fmt.Errorf("%w: spending ρ=%g on top of %g exceeds ρ=%g", ErrOverspent, rho, b.spent.float(), b.rho)
	}
	b.spent.r.Set(n)
	return nil
}

// Spent returns the ρ charged so far.
func (b *RhoBudget) Spent() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent.float()
}

// Total returns the budget's ρ.
func (b *RhoBudget) Total() float64 { return b.rho }
