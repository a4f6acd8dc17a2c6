// Package dap is privrec's two-aggregator path: devices contribute bounded
// per-user vectors to a leader and a helper aggregator, neither of which
// sees a contribution, and only a noised sum is ever reconstructed.
//
// The structure follows the IETF Distributed Aggregation Protocol
// (draft-ietf-ppm-dap) with the Prio3SumVec VDAF (draft-irtf-cfrg-vdaf),
// implemented by github.com/cloudflare/circl (vdaf/prio3/sumvec, hpke):
//
//   - A Task holds the public parameters: dimension, fixed-point lattice
//     step, per-coordinate range, the ℓ2 bound on a contribution, the zCDP
//     ρ it costs each contributing user and the noise each aggregator adds.
//   - A device quantizes her contribution to the task's lattice (Quantize:
//     rounding, then clipping of the integer vector, so the bound holds for
//     what is actually sent), shards it with Prio3SumVec (Shard), encrypts
//     each aggregator's input share to that aggregator's HPKE key and
//     uploads the report once (to the leader).
//   - The aggregators verify the validity proof jointly (each computes its
//     verifier share; the report counts only if both accept), add the
//     output shares of valid reports to their aggregate shares, and at
//     collection each adds discrete Gaussian noise (privrec's exact
//     sampler) to its own share before it leaves. The leader combines the
//     two noised shares into the release (Combine).
//
// Nobody takes the leader's word for a task: Derive computes its range,
// norm_sq, sensitivity (under its relation) and the σ its ρ needs from
// its public plan, and devices (Prepare, Client.Contribute) and the
// helper (at provisioning) refuse a task that states less, naming both
// values. A split-noise task needs the user's consent (Consent) and
// charges her the ρ one aggregator's noise alone gives.
//
// The noise default (NoiseEachAlone) gives every aggregator enough noise
// for the task's ρ on its own, so the guarantee holds even if the other
// aggregator is dishonest (it may drop its noise or learn the sum of the
// shares); the honest total variance is then 2σ², i.e. √2 times the
// standard deviation of a trusted curator's release. NoiseSplit (labelled
// "honest-but-curious") splits the variance, which matches the central
// release but holds only while both aggregators add their noise.
//
// Differences from DAP's wire format: JSON bodies with base64 fields
// instead of TLS presentation syntax, one aggregation round (Prio3 needs
// one) driven by the leader in batches, and an explicit per-task ℓ2 bound
// enforced by honest devices (Prio3SumVec proves each coordinate's range,
// not the norm: see Task.Norm).
package dap
