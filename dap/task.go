package dap

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"regexp"

	"github.com/cloudflare/circl/vdaf/prio3/sumvec"

	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/noise"
)

// ErrInvalid marks a task, report or request that is malformed or out of
// range; it changes nothing.
var ErrInvalid = errors.New("dap: invalid")

// NoiseMode says how the two aggregators share the noise of a release.
type NoiseMode string

const (
	// NoiseEachAlone (the default): each aggregator adds discrete Gaussian
	// noise of σ with Norm²/(2σ²) ≤ ρ, so its noise alone gives the task's
	// guarantee whatever the other aggregator does. Honest total variance
	// 2σ²: the release's noise is √2 times a trusted curator's.
	NoiseEachAlone NoiseMode = "each-alone"
	// NoiseSplit (honest-but-curious): each adds σ chosen so that the sum
	// of the two discrete Gaussians gives ρ (Kairouz, Liu, Steinke 2021,
	// "The Distributed Discrete Gaussian Mechanism"), about the central
	// noise. If one aggregator omits its noise, the release is only
	// Norm²/(2σ²)-zCDP (≈ 2ρ): use it only when both operators are trusted
	// to follow the protocol.
	NoiseSplit NoiseMode = "honest-but-curious"
)

// MaxDimension bounds a task's vector length (Prio3SumVec's proof and
// shares grow linearly with Dimension·Bits).
const MaxDimension = 1 << 20

// Task is the public description of one aggregation: every device,
// aggregator and reader of the release sees the same values.
type Task struct {
	// ID names the task (letters, digits, '-', '_', '.'; at most 64).
	ID string `json:"id"`
	// Statistic names what the vector is (e.g. "dp-popularity/counts");
	// Plan is its public plan (item list, clipping, earlier releases used).
	Statistic string          `json:"statistic"`
	Plan      json.RawMessage `json:"plan,omitempty"`
	// Dimension is the vector length.
	Dimension int `json:"dimension"`
	// Step is the fixed-point lattice spacing g: a device sends the
	// integer vector q with contribution ≈ g·q.
	Step float64 `json:"step"`
	// Min is the smallest integer a coordinate may take; Bits its range:
	// each q_j ∈ [Min, Min+2^Bits), which the validity proof enforces.
	// Min ≤ 0 < Min+2^Bits.
	Min  int64 `json:"min"`
	Bits int   `json:"bits"`
	// NormSq bounds Σ_j q_j² (an honest device clips to it, exactly in
	// integers): the ℓ2 sensitivity of the sum under adding or removing one
	// user is √NormSq lattice units.
	NormSq int64 `json:"norm_sq"`
	// Relation is the neighbour relation the guarantee is stated for:
	// RelationAddRemove (a user contributes or not; DAP's natural one) or
	// RelationReplace (one user's ratings replaced by any others, the
	// relation of privrec's central releases).
	Relation string `json:"relation"`
	// Sensitivity is the ℓ2 sensitivity of the integer sum Σq under
	// Relation, in lattice units. NewTask derives it when zero: √NormSq
	// (add/remove) or 2√NormSq (replace, triangle inequality). A plan may
	// state a smaller replace-one bound proved for its statistic; it may
	// never be below √NormSq for add/remove.
	Sensitivity float64 `json:"sensitivity"`
	// Rho is the zCDP ρ the release costs each contributing user.
	Rho float64 `json:"rho"`
	// Noise and Sigma: how the noise is split and each aggregator's
	// discrete Gaussian σ (lattice units), derived by NewTask.
	Noise NoiseMode `json:"noise"`
	Sigma uint64    `json:"sigma"`
	// MinReports is the smallest number of valid reports a release needs
	// (DAP's min_batch_size).
	MinReports int `json:"min_reports"`
	// ChunkLength is Prio3SumVec's chunk length (the arity of its
	// ParallelSum gadget, a VDAF parameter as in DAP's task), set by
	// NewTask (ChunkLengthFor). Zero, in tasks stored before it was a
	// field, means the earlier rule √(Dimension·Bits).
	ChunkLength int `json:"chunk_length,omitempty"`
}

var taskIDRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// NewTask fills in Sigma for t's ρ, bound and noise mode and validates it.
func NewTask(t Task) (Task, error) {
	if t.Noise == "" {
		t.Noise = NoiseEachAlone
	}
	if t.Relation == "" {
		t.Relation = RelationAddRemove
	}
	if t.Sensitivity == 0 && t.NormSq > 0 {
		t.Sensitivity = math.Sqrt(float64(t.NormSq))
		if t.Relation == RelationReplace {
			t.Sensitivity *= 2
		}
		t.Sensitivity = up(t.Sensitivity)
	}
	if err := t.checkShape(); err != nil {
		return Task{}, err
	}
	s, err := SigmaFor(t.Rho, t.Sensitivity, t.Dimension, t.Noise)
	if err != nil {
		return Task{}, fmt.Errorf("task %s: %w", t.ID, err)
	}
	t.Sigma = s
	if t.ChunkLength == 0 {
		t.ChunkLength = ChunkLengthFor(t.Dimension * t.Bits)
	}
	return t, t.Validate()
}

func (t *Task) checkShape() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: task %q: %s", ErrInvalid, t.ID, fmt.Sprintf(format, a...))
	}
	switch {
	case !taskIDRE.MatchString(t.ID):
		return bad("id must be 1–64 of [A-Za-z0-9_.-]")
	case t.Dimension < 1 || t.Dimension > MaxDimension:
		return bad("dimension %d outside [1, %d]", t.Dimension, MaxDimension)
	case !(t.Step > 0) || math.IsInf(t.Step, 0):
		return bad("step %v must be finite and positive", t.Step)
	case t.Bits < 1 || t.Bits > 32:
		return bad("bits %d outside [1, 32]", t.Bits)
	case t.Min > 0 || t.Min < -(1<<32):
		return bad("min %d outside [-2^32, 0]", t.Min)
	case t.Min+(1<<t.Bits) <= 0:
		return bad("range [%d, %d) does not contain 0", t.Min, t.Min+(1<<t.Bits))
	case t.NormSq < 1 || t.NormSq > 1<<62:
		return bad("norm_sq %d outside [1, 2^62]", t.NormSq)
	case t.MinReports < 1:
		return bad("min_reports %d must be at least 1", t.MinReports)
	case t.Relation != RelationAddRemove && t.Relation != RelationReplace:
		return bad("relation %q: want %q or %q", t.Relation, RelationAddRemove, RelationReplace)
	case !(t.Sensitivity > 0) || math.IsInf(t.Sensitivity, 0):
		return bad("sensitivity %v must be finite and positive", t.Sensitivity)
	case t.Relation == RelationAddRemove && t.Sensitivity*t.Sensitivity < float64(t.NormSq):
		return bad("add/remove sensitivity %v below √norm_sq", t.Sensitivity)
	case t.Noise != NoiseEachAlone && t.Noise != NoiseSplit:
		return bad("noise %q: want %q or %q", t.Noise, NoiseEachAlone, NoiseSplit)
	case t.ChunkLength < 0 || t.ChunkLength > t.Dimension*t.Bits:
		return bad("chunk_length %d outside [1, dimension·bits = %d]", t.ChunkLength, t.Dimension*t.Bits)
	case t.ChunkLength > 0 && (t.Dimension*t.Bits+t.ChunkLength-1)/t.ChunkLength > maxGadgetCalls:
		return bad("chunk_length %d: %d gadget calls, at most %d", t.ChunkLength, (t.Dimension*t.Bits+t.ChunkLength-1)/t.ChunkLength, maxGadgetCalls)
	}
	if err := accountant.CheckRho(t.Rho); err != nil {
		return bad("rho: %v", err)
	}
	// Σ over reports of a coordinate: n·2^Bits + noise must stay far below
	// 2^63 for Combine's signed lift (the field is ≈ 2^128).
	if hi, _ := bits.Mul64(uint64(t.Dimension), 1<<t.Bits); hi != 0 {
		return bad("dimension·2^bits overflows")
	}
	return nil
}

// Validate checks every field, including that Sigma gives at least the
// guarantee the task states.
func (t *Task) Validate() error {
	if err := t.checkShape(); err != nil {
		return err
	}
	if t.Sigma < 1 || t.Sigma > noise.MaxDiscreteGaussianSigma {
		return fmt.Errorf("%w: task %q: sigma %d outside [1, 2^28]", ErrInvalid, t.ID, t.Sigma)
	}
	rho, err := RhoOf(t.Sigma, t.Sensitivity, t.Dimension, t.Noise)
	if err != nil {
		return fmt.Errorf("task %q: %w", t.ID, err)
	}
	if rho > t.Rho {
		return fmt.Errorf("%w: task %q: sigma %d gives ρ %.6g > the stated %.6g", ErrInvalid, t.ID, t.Sigma, rho, t.Rho)
	}
	return nil
}

// Max is the largest integer a coordinate may take.
func (t *Task) Max() int64 { return t.Min + (1 << t.Bits) - 1 }

// Neighbour relations of a task's guarantee.
const (
	RelationAddRemove = "add-remove-user"
	RelationReplace   = "replace-user"
)

// ReleaseSD is the standard deviation of the noise on each released
// coordinate in real units when both aggregators add theirs.
func (t *Task) ReleaseSD() float64 { return t.Step * float64(t.Sigma) * math.Sqrt2 }

// maxGadgetCalls bounds a task's gadget calls (the verifiers evaluate the
// gadget polynomial, of degree ≈ 2·calls, once per call).
const maxGadgetCalls = 1<<16 - 1

// ChunkLengthFor is the chunk length NewTask gives a measurement of L
// field elements (Dimension·Bits): the gadget's calls fill its power-of-two
// evaluation domain. Prio3 interpolates each of the gadget's 2·chunk wires
// over P points, P the power of two above calls + 1, and the proof carries
// a gadget polynomial of degree 2(P − 1); the VDAF draft's √L balances
// chunk against calls but may leave P up to twice calls + 1 (at ML-1M's
// bias statistics, L = 111 200: chunk 333, 334 calls, P = 512). With P =
// 2^⌊log₂ √L⌋ (at least 2) and chunk = ⌈L/(P − 1)⌉, between √L and 2√L,
// the calls fill P − 1 points: the proof stays ≈ 4–6 √L elements
// (under 2.5 % of L at L ≥ 10⁴), and where √L left P part empty proving
// and verifying cost about a third less (docs/AGGREGATION.md, "Prio3's
// chunk length").
func ChunkLengthFor(l int) int {
	if l <= 1 {
		return 1
	}
	p := 1 << max(1, bits.Len(uint(math.Sqrt(float64(l))))-1)
	return (l + p - 2) / (p - 1)
}

// chunkLength is the task's chunk length (see ChunkLength).
func (t *Task) chunkLength() uint {
	if t.ChunkLength > 0 {
		return uint(t.ChunkLength)
	}
	return uint(max(1, math.Round(math.Sqrt(float64(t.Dimension*t.Bits)))))
}

// vdaf builds the task's Prio3SumVec; its context string binds the task ID
// (so a report for one task never verifies under another).
func (t *Task) vdaf() (*sumvec.SumVec, error) {
	v, err := sumvec.New(2, uint(t.Dimension), uint(t.Bits), t.chunkLength(), []byte("privrec/dap/"+t.ID))
	if err != nil {
		return nil, fmt.Errorf("task %s: Prio3SumVec: %w", t.ID, err)
	}
	return v, nil
}

// RhoOf is the zCDP ρ of a release in which each aggregator adds
// N_Z(0, σ²) per coordinate, for a sum of ℓ2 sensitivity √normSq over dim
// coordinates. NoiseEachAlone: normSq/(2σ²), the guarantee of one
// aggregator's noise alone (Canonne, Kamath, Steinke 2020: the discrete
// Gaussian is Δ²/(2σ²)-zCDP). NoiseSplit: the distributed discrete
// Gaussian bound for a sum of n = 2 independent N_Z(0, σ²) (Kairouz, Liu,
// Steinke 2021, Theorem 1): ρ = ε²/2 with ε = min(√(Δ²/(nσ²) + τd/2),
// Δ/(√n σ) + τ√d), τ = 10·Σ_{k=1}^{n−1} exp(−2π²σ²·k/(k+1)). Rounded up.
func RhoOf(sigma uint64, sens float64, dim int, mode NoiseMode) (float64, error) {
	if sigma < 1 || !(sens > 0) || math.IsInf(sens, 0) || dim < 1 {
		return 0, fmt.Errorf("%w: σ %d, sensitivity %v, dimension %d", ErrInvalid, sigma, sens, dim)
	}
	s2 := float64(sigma) * float64(sigma)
	d2 := up(sens * sens)
	switch mode {
	case NoiseEachAlone:
		// Exactly Δ²/(2σ²), rounded up only if inexact.
		sr := new(big.Rat).SetFloat64(sens)
		r := new(big.Rat).Mul(sr, sr)
		sq := new(big.Int).SetUint64(sigma)
		r.Quo(r, new(big.Rat).SetInt(new(big.Int).Lsh(sq.Mul(sq, sq), 1)))
		f, exact := r.Float64()
		if !exact {
			f = up(f)
		}
		return f, nil
	case NoiseSplit:
		tau := up(10 * math.Exp(-math.Pi*math.Pi*s2))
		e1 := up(math.Sqrt(up(up(d2/(2*s2)) + up(tau*float64(dim)/2))))
		e2 := up(up(math.Sqrt(d2)/(math.Sqrt2*float64(sigma))) + up(tau*math.Sqrt(float64(dim))))
		e := min(e1, e2) * (1 + 1e-12)
		return up(e * e / 2), nil
	}
	return 0, fmt.Errorf("%w: noise mode %q", ErrInvalid, mode)
}

// SigmaFor is the smallest integer σ with RhoOf(σ, …) ≤ rho.
func SigmaFor(rho float64, sens float64, dim int, mode NoiseMode) (uint64, error) {
	if err := accountant.CheckRho(rho); err != nil {
		return 0, err
	}
	ok := func(s uint64) (bool, error) {
		r, err := RhoOf(s, sens, dim, mode)
		return r <= rho, err
	}
	hi := uint64(noise.MaxDiscreteGaussianSigma)
	if good, err := ok(hi); err != nil {
		return 0, err
	} else if !good {
		return 0, fmt.Errorf("%w: ρ %.3g needs σ above 2^28 lattice units (use a coarser step)", ErrInvalid, rho)
	}
	lo := uint64(0) // ok(lo) is false (σ = 0 is not a noise)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		good, err := ok(mid)
		if err != nil {
			return 0, err
		}
		if good {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

func up(x float64) float64 { return math.Nextafter(x, math.Inf(1)) }
