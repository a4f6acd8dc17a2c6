// Package jointdp implements user-level joint-differentially-private matrix
// completion after Jain, Thakkar and Thakurta, "Differentially Private
// Matrix Completion, Revisited" (seed 001):
//
//   - FW: non-private Frank–Wolfe for min ½|Ω|⁻¹‖P_Ω(Y − Y*)‖²_F subject to
//     ‖Y‖_* ≤ k, with the top singular pair of the sparse residual found by
//     Lanczos on sparse products (the m × n matrix is never formed);
//   - DPFW: private Frank–Wolfe (Algorithm 1), split into a Local component
//     that sees one user's row and the public broadcasts and returns only
//     A_iᵀA_i into an Aggregate, and a Global component that can only read
//     the Aggregate after Gaussian noise has been added to it;
//   - DPSVD: private SVD (Algorithm 3): one noisy Gram matrix, its top-r
//     eigenspace, and a local projection of each user's row;
//   - MM: the McSherry–Mironov "SVD after cleansing" baseline: noisy global
//     and damped per-item averages, a noisy weighted item–item covariance,
//     its top-r eigenspace and a local least-squares fit per user.
//
// Every solver works on a Problem: the users' rows of P_Ω(Y*) in compressed
// sparse row form. Private solvers clip each row to ℓ2 norm L locally
// (Π_L), which is what bounds one user's influence on the released
// aggregates. The noise comes from noise plans (PlanDPFW, PlanDPSVD,
// PlanMM: privacy/mechanism values built from the budget and composed in
// zCDP); the solvers add noise only through them. The guarantees are
// user-level (all ratings of one user) joint DP under the paper's neighbour
// relation (one user's ratings replaced by arbitrary others); see each
// plan's Guarantee. FoldReplay and FoldMM are the fold-in rules with which a
// user's device recomputes her dpfw or mm row from a saved public model.
package jointdp
