package accountant

import (
	"fmt"
	"math"
	"sync"
)

// ErrOverspent is wrapped by the error a Budget returns when a spend would
// exceed it.
var ErrOverspent = fmt.Errorf("privacy budget exceeded")

// Budget is an (ε, δ) privacy budget under basic composition: each Spend
// adds its ε and δ; a spend that would exceed the total is refused and
// nothing is charged. Safe for concurrent use.
type Budget struct {
	mu                   sync.Mutex
	eps, delta           float64
	spentEps, spentDelta float64
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
	ne, nd := up(b.spentEps+eps), b.spentDelta+delta
	if delta != 0 {
		nd = up(nd)
	}
	if ne > b.eps || nd > b.delta {
		return fmt.Errorf("%w: spending (ε=%g, δ=%g) on top of (ε=%g, δ=%g) exceeds (ε=%g, δ=%g)",
			ErrOverspent, eps, delta, b.spentEps, b.spentDelta, b.eps, b.delta)
	}
	b.spentEps, b.spentDelta = ne, nd
	return nil
}

// Spent returns what has been charged so far.
func (b *Budget) Spent() (eps, delta float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spentEps, b.spentDelta
}

// Remaining returns what is left (never negative).
func (b *Budget) Remaining() (eps, delta float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return math.Max(0, b.eps-b.spentEps), math.Max(0, b.delta-b.spentDelta)
}

// RhoBudget is a zCDP budget: spends add their ρ (exact composition for
// zCDP); a spend that would exceed the total is refused. Build one for a
// target (ε, δ) with NewRhoBudgetFor. Safe for concurrent use.
type RhoBudget struct {
	mu         sync.Mutex
	rho, spent float64
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
	n := up(b.spent + rho)
	if n > b.rho {
		return fmt.Errorf("%w: spending ρ=%g on top of %g exceeds ρ=%g", ErrOverspent, rho, b.spent, b.rho)
	}
	b.spent = n
	return nil
}

// Spent returns the ρ charged so far.
func (b *RhoBudget) Spent() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent
}

// Total returns the budget's ρ.
func (b *RhoBudget) Total() float64 { return b.rho }
