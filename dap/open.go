package dap

import (
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
