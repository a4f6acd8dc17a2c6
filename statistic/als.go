package statistic

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
)

// The statistics of dpals' private ALS steps and covariance features.
// Their contributions are computed by package mf (a user's row there
// depends on the previous step's public factors); what is defined here
// is their sensitivity, dimension and release.

// ALSStepSensitivity is the ℓ2 sensitivity of one private ALS step's
// released vector when one user's ratings are replaced by any others;
// userClip Γ is the bound on the norm of the rows that enter the
// statistics (with bias refinement, √(Γ² + γ_b²) for the augmented rows),
// residualClip R the clip of the centred ratings and rhsScale s the weight
// of the right-hand sides.
//
// The released vector holds, for every active item j, the Gram block
// G_j = Σ_i c_ij ũ_i ũ_iᵀ as its upper triangle with the off-diagonal
// entries multiplied by √2 (so that the vector's inner product is the
// Frobenius one; ReleaseFrobenius), and s·h_j with h_j = Σ_i c_ij y_ij ũ_i.
// User i's part is x_i = (c_ij·T(ũ_i ũ_iᵀ), s·c_ij·y_ij·ũ_i)_j with
// ‖ũ_i‖ ≤ Γ, |y_ij| ≤ R and Σ_j c_ij² ≤ 1. Her row ũ_i depends only on the
// public item factors of the previous step and her own ratings, so
// replacing her changes only x_i: Δ = x_i' − x_i.
//
//   - ‖x_i‖² = Σ_j c_ij² (‖ũ_i‖⁴ + s²y_ij²‖ũ_i‖²) ≤ Γ⁴ + s²R²Γ².
//   - ⟨x_i, x_i'⟩ = Σ_j c_ij c'_ij ((ũ·ũ')² + s² y_ij y'_ij (ũ·ũ'))
//     ≥ Σ_j c_ij c'_ij · min_{t∈[0,Γ²]} (t² − s²R² t) = Σ_j c_ij c'_ij · m,
//     with t = |ũ·ũ'| ≤ Γ² (any sign of ũ·ũ') and m = −s⁴R⁴/4 if
//     s²R² ≤ 2Γ², else Γ⁴ − s²R²Γ²;
//     as m ≤ 0 and Σ_j c_ij c'_ij ≤ 1 (Cauchy–Schwarz), ⟨x_i, x_i'⟩ ≥ m.
//   - ‖Δ‖² = ‖x_i‖² + ‖x_i'‖² − 2⟨x_i, x_i'⟩ ≤ 2(Γ⁴ + s²R²Γ²) − 2m.
//
// With s = Γ/R (the two parts of ‖x_i‖² equal), m = −Γ⁴/4 and
// Δ = Γ²·√4.5 ≈ 2.121·Γ²; the triangle inequality alone would give
// 2√2·Γ² ≈ 2.828·Γ². The reference implementation of Chien et al.
// ("Private Alternating Least Squares", ICML 2021) bounds the right-hand
// side assuming |y| ≤ 1 without clipping y; here y is clipped to ±R
// before it enters h_j.
func ALSStepSensitivity(userClip, residualClip, rhsScale float64) float64 {
	g2 := userClip * userClip
	sr2 := rhsScale * rhsScale * residualClip * residualClip
	m := g2*g2 - sr2*g2
	if sr2 <= 2*g2 {
		m = -sr2 * sr2 / 4
	}
	return math.Sqrt(2*(g2*g2+sr2*g2) - 2*m)
}

// ALSStepDim is the number of coordinates one ALS step releases for
// items active items at row dimension k (k+1 with bias refinement): per
// item the k(k+1)/2 Gram entries and k right-hand-side entries.
func ALSStepDim(items, k int) int { return items * (k*(k+1)/2 + k) }

// ALSStep is the Spec of one ALS step (sens from ALSStepSensitivity).
func ALSStep(step, items, k int, sens float64) Spec {
	return Spec{Name: fmt.Sprintf("the item statistics of ALS step %d", step), Dim: ALSStepDim(items, k),
		Sensitivity: mechanism.Sensitivity{Value: sens, Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}}
}

// CovSensitivity is the ℓ2 (Frobenius) sensitivity of the released item
// covariance C = Σ_i x_i x_iᵀ when one user's ratings are replaced by any
// others. User i's vector x_i has x_ij = c_ij·y_ij on her covered items,
// y_ij her centred rating clipped to ±R and c_ij = 1/√m_i (m_i her covered
// items), so ‖x_i‖ ≤ R. Then ‖x xᵀ‖_F = ‖x‖² ≤ R² and
// ⟨x xᵀ, x' x'ᵀ⟩_F = (x·x')² ≥ 0, so
// ‖x xᵀ − x' x'ᵀ‖_F² ≤ ‖x‖⁴ + ‖x'‖⁴ ≤ 2R⁴: Δ = √2·R².
// Her x_i depends only on the public centring and her own ratings.
func CovSensitivity(clip float64) float64 { return math.Sqrt2 * clip * clip }

// CovDim is the number of coordinates the covariance release has for m
// items (the upper triangle).
func CovDim(m int) int { return m * (m + 1) / 2 }

// Covariance is the Spec of the item covariance over m items.
func Covariance(m int, clip float64) Spec {
	return Spec{Name: "the item covariance", Dim: CovDim(m),
		Sensitivity: mechanism.Sensitivity{Value: CovSensitivity(clip), Norm: mechanism.L2, Relation: mechanism.ReplaceOne, Unit: privacy.UnitUser}}
}

// SymReleaser adds symmetric noise to a matrix in place
// (mechanism.Gaussian.ReleaseSym).
type SymReleaser interface {
	ReleaseSym(src *noise.Source, s *mat.SymDense) error
}

// ReleaseFrobenius releases the symmetric g through rel with its
// off-diagonal entries scaled by √2 during the release, so that the
// released vector's ℓ2 norm is g's Frobenius norm (the norm
// ALSStepSensitivity and CovSensitivity bound), and scaled back after.
func ReleaseFrobenius(rel SymReleaser, src *noise.Source, g *mat.SymDense) error {
	raw := g.RawSymmetric()
	k := raw.N
	for a := range k {
		for b := a + 1; b < k; b++ {
			raw.Data[a*raw.Stride+b] *= math.Sqrt2
		}
	}
	if err := rel.ReleaseSym(src, g); err != nil {
		return err
	}
	for a := range k {
		for b := a + 1; b < k; b++ {
			raw.Data[a*raw.Stride+b] /= math.Sqrt2
		}
	}
	return nil
}
