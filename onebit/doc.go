// Package onebit is one-bit matrix completion with differential privacy
// (seed 000: "one-bit matrix completion with input, objective, gradient
// and output perturbation", building on Davenport et al., "1-bit matrix
// completion").
//
// A d1 × d2 matrix M is seen only through signs Y_ij = +1 with probability
// h(M_ij), −1 otherwise, on an observed set Ω. The estimator minimises the
// negative log-likelihood over C = {‖X‖_* ≤ τ, ‖X‖_∞ ≤ α} with the spectral
// projected gradient method (Barzilai–Borwein step, non-monotone line
// search, with a step cap and trust bound for inexact projections). The
// projection onto C is Dykstra's algorithm between the nuclear-norm ball and
// the box, run as accelerated proximal gradient on the dual and
// warm-started from the previous projection; nuclear projections take the
// exact spectrum of the Gram matrix for small matrices and a warm-started
// block subspace iteration for large ones. The returned point is exactly
// feasible.
//
// Five mechanisms wrap the solver: Clear (no noise), InP (randomised response
// on the observed signs, fitted with the adjusted link), ObjP (a random
// linear term in the objective), GraP (Laplace noise on clamped gradients for
// a fixed number of iterations) and OutP (Laplace noise on the completed
// matrix). Each reports the guarantee the code provably gives, and the
// paper's claimed ε where the two differ (see Guarantee and docs/onebit.md).
package onebit
