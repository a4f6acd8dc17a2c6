package dap

import (
	"github.com/cloudflare/circl/kem"
	"github.com/cloudflare/circl/vdaf/prio3/sumvec"
)

// Malicious devices for the aggregator tests.

// ShardOutOfRange is a device that sends coordinate 0 = 2·(2^Bits − 1),
// outside the task's range: the only way to encode it in Prio3SumVec is a
// bit share that is not 0 or 1, so it starts from the all-ones encoding
// and adds 1 to each of that coordinate's bit shares in the leader's
// input share (the other coordinates are honest zeros). The public
// share's joint-randomness part no longer matches the leader's share:
// the leader's preparation, at upload, refuses it.
func (t *Task) ShardOutOfRange(lk, hk kem.PublicKey) (*Report, error) {
	enc := make([]uint64, t.Dimension)
	enc[0] = 1<<t.Bits - 1
	return t.shardEncoded(enc, lk, hk, func(r Role, pt []byte) []byte {
		if r == Leader {
			for b := range t.Bits {
				addOne(pt[b*16 : (b+1)*16])
			}
		}
		return pt
	})
}

// ShardForgedProof is a device whose proof share is altered (one field
// element of the leader's proof share, right after the measurement share).
func (t *Task) ShardForgedProof(lk, hk kem.PublicKey) (*Report, error) {
	enc := make([]uint64, t.Dimension)
	return t.shardEncoded(enc, lk, hk, func(r Role, pt []byte) []byte {
		if r == Leader {
			off := t.Dimension * t.Bits * 16
			addOne(pt[off : off+16])
		}
		return pt
	})
}

func addOne(b []byte) {
	var x, one sumvec.Fp
	if err := x.UnmarshalBinary(b); err != nil {
		panic(err)
	}
	_ = one.SetUint64(1)
	x.AddAssign(&one)
	out, err := x.MarshalBinary()
	if err != nil {
		panic(err)
	}
	copy(b, out)
}

// ShardTampered is a device that rewrites its input shares with f before
// sealing them.
func (t *Task) ShardTampered(lk, hk kem.PublicKey, f func(Role, []byte) []byte) (*Report, error) {
	return t.shardEncoded(make([]uint64, t.Dimension), lk, hk, f)
}
