// Package onebit is one-bit matrix completion with differential privacy
// (seed 000: "one-bit matrix completion with input, objective, gradient
// and output perturbation", building on Davenport et al., "1-bit matrix
// completion").
//
// A d1 × d2 matrix M is seen only through signs Y_ij = +1 with probability
// h(M_ij), −1 otherwise, on an observed set Ω. The estimator minimises the
// negative log-likelihood over C = {‖X‖_* ≤ τ, ‖X‖_∞ ≤ α} by
// Douglas–Rachford splitting between the nuclear-norm ball and the
// entrywise loss-plus-box (one nuclear projection per iteration), with
// over-relaxation and safeguarded Anderson acceleration, stopped when a
// duality gap — proved by a Cholesky factorisation bounding the dual
// variable's spectral norm — shows the objective within a set fraction of
// the optimum (dr.go). The returned point is exactly feasible. Nuclear
// projections use a warm-started block subspace iteration (one sweep per
// call) for large matrices and, for small ones, the Gram matrix's
// tridiagonal form with inverse-iteration eigenvectors for the kept values
// only. The previous solver — the spectral projected gradient method with
// Dykstra projections onto C — remains as Options.Solver "spg".
//
// Five mechanisms wrap the solver: Clear (no noise), InP (randomised response
// on the observed signs, fitted with the adjusted link), ObjP (a random
// linear term in the objective), GraP (Laplace noise on clamped gradients for
// a fixed number of iterations) and OutP (Laplace noise on the completed
// matrix). Each reports the guarantee the code provably gives, and the
// paper's claimed ε where the two differ (see Guarantee and docs/onebit.md).
package onebit
