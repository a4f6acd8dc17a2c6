package dap

import (
	"encoding/binary"
	"fmt"

	"github.com/cloudflare/circl/vdaf/prio3/sumvec"
)

// open decrypts this aggregator's input share of report (id, public,
// sealed): the share's encoding, not yet decoded.
func (p *Preparer) open(id, public []byte, sealed Sealed) ([]byte, error) {
	if len(id) != ReportIDSize {
		return nil, fmt.Errorf("%w: report id of %d bytes", ErrInvalid, len(id))
	}
	rcv, err := suite.NewReceiver(p.key.Private, info(p.role))
	if err != nil {
		return nil, fmt.Errorf("dap: HPKE receiver: %w", err)
	}
	opener, err := rcv.Setup(sealed.Enc)
	if err != nil {
		return nil, fmt.Errorf("%w: HPKE encapsulated key: %v", ErrInvalid, err)
	}
	pt, err := opener.Open(sealed.Ciphertext, aad(p.Task.ID, id, public))
	if err != nil {
		return nil, fmt.Errorf("%w: input share does not decrypt for the %s: %v", ErrInvalid, p.role, err)
	}
	return pt, nil
}

// openShare decrypts this aggregator's input share of a report and
// decodes it for v.
func (p *Preparer) openShare(v *sumvec.SumVec, id, public []byte, sealed Sealed) (sumvec.InputShare, error) {
	var in sumvec.InputShare
	pt, err := p.open(id, public, sealed)
	if err != nil {
		return in, err
	}
	params := v.Params()
	in.New(&params, uint(p.role))
	if err := in.UnmarshalBinary(pt); err != nil {
		return in, fmt.Errorf("%w: input share: %v", ErrInvalid, err)
	}
	return in, nil
}

// Check opens this aggregator's input share of a report without
// preparing it: the leader refuses at upload, before it charges anyone,
// a report whose share it could never decrypt or decode. (The other
// aggregator's share is sealed to a key this one does not hold; it is
// checked at aggregation.)
//
// The leader's share is checked as Prio3's decoder checks it — its exact
// length, and every field element below the modulus — without
// converting its elements, which preparation does again: for a Gram
// report that is most of the check's cost.
func (p *Preparer) Check(id, public []byte, sealed Sealed) error {
	pt, err := p.open(id, public, sealed)
	if err != nil {
		return err
	}
	if p.role != Leader {
		return p.decodes(pt)
	}
	sh, err := p.leaderShape()
	if err != nil {
		return err
	}
	if sh.elements == 0 {
		return p.decodes(pt)
	}
	if len(pt) != sh.size {
		return fmt.Errorf("%w: input share: %d bytes, want %d", ErrInvalid, len(pt), sh.size)
	}
	for i := 0; i < sh.elements*fieldSize; i += fieldSize {
		if !canonical(pt[i : i+fieldSize]) {
			return fmt.Errorf("%w: input share: field element %d is not below the modulus", ErrInvalid, i/fieldSize)
		}
	}
	return nil
}

// decodes is the full check: the share decodes for the task's VDAF.
func (p *Preparer) decodes(pt []byte) error {
	v, done, err := p.vdaf()
	if err != nil {
		return err
	}
	defer done()
	var in sumvec.InputShare
	params := v.Params()
	in.New(&params, uint(p.role))
	if err := in.UnmarshalBinary(pt); err != nil {
		return fmt.Errorf("%w: input share: %v", ErrInvalid, err)
	}
	return nil
}

// fieldSize is the bytes of one encoded Field128 element (Prio3SumVec's
// field): 16, little-endian.
const fieldSize = 16

// The modulus 2^128 − 28·2^64 + 1 of Field128, as its two little-endian
// 64-bit words.
const modulusHi, modulusLo = 0xffffffffffffffe4, 0x1

// canonical reports whether an encoded Field128 element is below the
// modulus (the check Prio3's decoder makes of each).
func canonical(b []byte) bool {
	hi, lo := binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[:8])
	return hi < modulusHi || (hi == modulusHi && lo < modulusLo)
}

// shareShape is the layout of the leader's input share: its field
// elements (measurement and proof shares) then the joint-randomness
// blind; size is the whole encoding in bytes.
type shareShape struct{ elements, size int }

// leaderShape is the task's leader share layout, computed once: the
// encoding of a zero share, checked against the field elements the
// parameters give. Should the two not agree (another Prio3 encoding),
// elements is 0 and Check decodes the share in full.
func (p *Preparer) leaderShape() (shareShape, error) {
	p.shapeOnce.Do(func() {
		v, done, err := p.vdaf()
		if err != nil {
			p.shapeErr = err
			return
		}
		defer done()
		params := v.Params()
		var in sumvec.InputShare
		in.New(&params, uint(Leader))
		b, err := in.MarshalBinary()
		if err != nil {
			p.shapeErr = fmt.Errorf("dap: encoding a zero input share: %w", err)
			return
		}
		n := int(params.MeasurementLength() + params.ProofLength())
		blind := 0
		if params.JointRandLength() > 0 {
			blind = 32
		}
		p.shape = shareShape{size: len(b)}
		if n*fieldSize+blind == len(b) {
			p.shape.elements = n
		}
	})
	return p.shape, p.shapeErr
}
