package dap

import (
	"fmt"

	"github.com/cloudflare/circl/vdaf/prio3/sumvec"
)

// openShare decrypts this aggregator's input share of report (id, public,
// sealed) and decodes it for v.
func (p *Preparer) openShare(v *sumvec.SumVec, id, public []byte, sealed Sealed) (sumvec.InputShare, error) {
	var in sumvec.InputShare
	if len(id) != ReportIDSize {
		return in, fmt.Errorf("%w: report id of %d bytes", ErrInvalid, len(id))
	}
	rcv, err := suite.NewReceiver(p.key.Private, info(p.role))
	if err != nil {
		return in, fmt.Errorf("dap: HPKE receiver: %w", err)
	}
	opener, err := rcv.Setup(sealed.Enc)
	if err != nil {
		return in, fmt.Errorf("%w: HPKE encapsulated key: %v", ErrInvalid, err)
	}
	pt, err := opener.Open(sealed.Ciphertext, aad(p.Task.ID, id, public))
	if err != nil {
		return in, fmt.Errorf("%w: input share does not decrypt for the %s: %v", ErrInvalid, p.role, err)
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
func (p *Preparer) Check(id, public []byte, sealed Sealed) error {
	v, done, err := p.vdaf()
	if err != nil {
		return err
	}
	defer done()
	_, err = p.openShare(v, id, public, sealed)
	return err
}
