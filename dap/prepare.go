package dap

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/cloudflare/circl/vdaf/prio3/sumvec"

	"github.com/privrec/privrec/privacy/noise"
)

// Vec is a vector of field elements (an output or aggregate share).
type Vec = sumvec.Vec

// VerifyKeySize is the size of the secret the two aggregators share.
const VerifyKeySize = 32

// TaskVerifyKey derives a task's VDAF verification key from the secret the
// two aggregators share (HMAC-SHA256 of the task ID), so one provisioned
// secret serves every task and no task's key is reused for another.
func TaskVerifyKey(secret []byte, taskID string) (sumvec.VerifyKey, error) {
	var k sumvec.VerifyKey
	if len(secret) < 16 {
		return k, fmt.Errorf("%w: shared verification secret of %d bytes (want ≥ 16)", ErrInvalid, len(secret))
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("privrec/dap verify key/" + taskID))
	copy(k[:], m.Sum(nil))
	return k, nil
}

// Preparer is one aggregator's view of a task: the VDAF, its role, its
// HPKE key and the task's verification key.
//
// A Preparer is safe for concurrent use: circl's Prio3 values carry XOF
// state and are not, so each call takes its own from a pool.
type Preparer struct {
	Task   Task
	role   Role
	key    KeyPair
	verify sumvec.VerifyKey
	pool   sync.Pool // *sumvec.SumVec
}

func (p *Preparer) vdaf() (*sumvec.SumVec, func(), error) {
	if v, ok := p.pool.Get().(*sumvec.SumVec); ok {
		return v, func() { p.pool.Put(v) }, nil
	}
	v, err := p.Task.vdaf()
	if err != nil {
		return nil, nil, err
	}
	return v, func() { p.pool.Put(v) }, nil
}

// NewPreparer validates t and sets up the aggregator's side of it.
func NewPreparer(t Task, role Role, key KeyPair, secret []byte) (*Preparer, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if _, err := t.vdaf(); err != nil {
		return nil, err
	}
	vk, err := TaskVerifyKey(secret, t.ID)
	if err != nil {
		return nil, err
	}
	return &Preparer{Task: t, role: role, key: key, verify: vk}, nil
}

// Prepared is one report's preparation state at one aggregator.
type Prepared struct {
	state *sumvec.PrepState
	// Share is the aggregator's encoded prep share (its verifier share and
	// joint-randomness part), sent to the other aggregator.
	Share []byte
}

// Prepare decrypts this aggregator's input share of report (id, public,
// sealed) and computes its verifier share (VDAF prep_init).
func (p *Preparer) Prepare(id, public []byte, sealed Sealed) (*Prepared, error) {
	v, done, err := p.vdaf()
	if err != nil {
		return nil, err
	}
	defer done()
	in, err := p.openShare(v, id, public, sealed)
	if err != nil {
		return nil, err
	}
	var nonce sumvec.Nonce
	copy(nonce[:], id)
	st, ps, err := v.PrepInit(&p.verify, &nonce, uint8(p.role), sumvec.PublicShare(public), in)
	if err != nil {
		return nil, fmt.Errorf("%w: preparing the report: %v", ErrInvalid, err)
	}
	b, err := ps.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("dap: encoding prep share: %w", err)
	}
	return &Prepared{state: st, Share: b}, nil
}

// State encodes the report's preparation state (its output share and,
// with joint randomness, the corrected joint-randomness seed): the leader
// prepares a report at upload and keeps State and Share, not its input
// share, until the report's aggregation job (Restore).
func (st *Prepared) State() ([]byte, error) {
	b, err := st.state.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("dap: encoding preparation state: %w", err)
	}
	return b, nil
}

// Restore is a report's preparation at this aggregator from the State
// and Share that Prepare gave; a state of the wrong length or with a
// field element out of range is an error wrapping ErrInvalid.
func (p *Preparer) Restore(state, share []byte) (*Prepared, error) {
	v, done, err := p.vdaf()
	if err != nil {
		return nil, err
	}
	defer done()
	params := v.Params()
	var st sumvec.PrepState
	st.New(&params)
	if err := st.UnmarshalBinary(state); err != nil {
		return nil, fmt.Errorf("%w: stored preparation state: %v", ErrInvalid, err)
	}
	return &Prepared{state: &st, Share: share}, nil
}

// Finish combines both aggregators' prep shares (leader's first), decides
// the validity proof, and returns this aggregator's output share; an
// invalid report (out-of-range contribution, forged proof, shares that do
// not belong together) is an error wrapping ErrInvalid.
func (p *Preparer) Finish(st *Prepared, leaderShare, helperShare []byte) (Vec, error) {
	v, done, err := p.vdaf()
	if err != nil {
		return nil, err
	}
	defer done()
	params := v.Params()
	shares := make([]sumvec.PrepShare, 2)
	for i, b := range [][]byte{leaderShare, helperShare} {
		shares[i].New(&params)
		if err := shares[i].UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("%w: %s prep share: %v", ErrInvalid, Role(i), err)
		}
	}
	msg, err := v.PrepSharesToPrep(shares)
	if err != nil {
		return nil, fmt.Errorf("%w: validity proof rejected: %v", ErrInvalid, err)
	}
	out, err := v.PrepNext(st.state, msg)
	if err != nil {
		return nil, fmt.Errorf("%w: joint randomness mismatch: %v", ErrInvalid, err)
	}
	b, err := out.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("dap: encoding output share: %w", err)
	}
	return p.Task.DecodeVec(b)
}

// NewVec is a zero aggregate share for the task.
func (t *Task) NewVec() Vec { return make(Vec, t.Dimension) }

// DecodeVec reads an encoded share of the task's dimension.
func (t *Task) DecodeVec(b []byte) (Vec, error) {
	v := t.NewVec()
	if len(b) != len(v)*int(v[0].Size()) {
		return nil, fmt.Errorf("%w: share of %d bytes, want %d", ErrInvalid, len(b), len(v)*int(v[0].Size()))
	}
	if err := v.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("%w: share: %v", ErrInvalid, err)
	}
	return v, nil
}

// EncodeVec writes a share.
func EncodeVec(v Vec) ([]byte, error) {
	b, err := v.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("dap: encoding share: %w", err)
	}
	return b, nil
}

// addInt adds the signed integer z to the field element x.
func addInt(x *sumvec.Fp, z int64) {
	var f sumvec.Fp
	if z >= 0 {
		_ = f.SetUint64(uint64(z))
		x.AddAssign(&f)
		return
	}
	_ = f.SetUint64(uint64(-z))
	x.SubAssign(&f)
}

// AddNoise adds independent discrete Gaussian noise N_Z(0, Sigma²) (the
// exact sampler noise.DiscreteGaussian) to every coordinate of an
// aggregator's aggregate share, in place. This is the only step of the
// protocol that makes the release private; each aggregator runs it once
// per task, on its own share, before the share leaves it.
func (t *Task) AddNoise(agg Vec, src *noise.Source) {
	for j := range agg {
		addInt(&agg[j], noise.DiscreteGaussian(src, t.Sigma))
	}
}

// Combine reconstructs the release from the two noised aggregate shares
// and the number n of reports aggregated: the integer sum Σq + noise
// (centred lift out of the field; Σ of n reports' encodings plus noise
// stays below 2^62 in magnitude, except with negligible probability, by
// Validate's bounds) and its real value Step·(Σq + noise).
func (t *Task) Combine(leader, helper Vec, n int) (ints []int64, values []float64, err error) {
	if len(leader) != t.Dimension || len(helper) != t.Dimension {
		return nil, nil, fmt.Errorf("%w: shares of length %d and %d, want %d", ErrInvalid, len(leader), len(helper), t.Dimension)
	}
	ints = make([]int64, t.Dimension)
	values = make([]float64, t.Dimension)
	for j := range ints {
		var s sumvec.Fp
		s.Add(&leader[j], &helper[j])
		v, err := lift(&s)
		if err != nil {
			return nil, nil, fmt.Errorf("dap: task %s coordinate %d: %w", t.ID, j, err)
		}
		ints[j] = v + int64(n)*t.Min
		values[j] = t.Step * float64(ints[j])
	}
	return ints, values, nil
}

// lift maps a field element to the integer in (−2^62, 2^62) it represents.
func lift(x *sumvec.Fp) (int64, error) {
	if u, err := x.GetUint64(); err == nil && u < 1<<62 {
		return int64(u), nil
	}
	var neg sumvec.Fp
	neg.Sub(&neg, x)
	if u, err := neg.GetUint64(); err == nil && u < 1<<62 {
		return -int64(u), nil
	}
	return 0, fmt.Errorf("sum outside ±2^62 (wrapped around the field)")
}
