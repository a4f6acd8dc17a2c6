package server

import (
	"encoding/json"
	"fmt"

	"golang.org/x/crypto/cryptobyte"

	"github.com/privrec/privrec/dap"
)

// storedReportVersion starts the leader's binary encoding of a stored
// report. A JSON body (a database written before the binary encoding)
// starts with '{' and is still read.
const storedReportVersion = 1

// encodeStoredReport is the leader's row body for a report: a version
// byte, then the task ID, report ID, public share and the two sealed
// shares, each with a 32-bit length (cryptobyte, as DAP's TLS
// presentation syntax). The leader's input share is ≈ 16 bytes per field
// element (1.8 MB for dpals' bias statistics at MovieLens-1M): JSON with
// base64 cost a third more bytes and most of the leader's CPU outside
// Prio3 (encoding at upload, scanning and decoding at aggregation).
func encodeStoredReport(r *dap.Report) ([]byte, error) {
	b := cryptobyte.NewBuilder(make([]byte, 0, 1+7*4+len(r.TaskID)+r.Size()))
	b.AddUint8(storedReportVersion)
	for _, f := range [][]byte{[]byte(r.TaskID), r.ID, r.PublicShare, r.LeaderShare.Enc, r.LeaderShare.Ciphertext, r.HelperShare.Enc, r.HelperShare.Ciphertext} {
		b.AddUint32LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(f) })
	}
	out, err := b.Bytes()
	if err != nil {
		return nil, fmt.Errorf("dap store: encoding report: %w", err)
	}
	return out, nil
}

// decodeStoredReport reads a row body written by encodeStoredReport (or
// the JSON of older databases). The byte slices alias b.
func decodeStoredReport(b []byte) (dap.Report, error) {
	var r dap.Report
	if len(b) > 0 && b[0] == '{' {
		if err := json.Unmarshal(b, &r); err != nil {
			return r, fmt.Errorf("dap store: stored report: %w", err)
		}
		return r, nil
	}
	s := cryptobyte.String(b)
	var version uint8
	var task []byte
	// cryptobyte reads 32-bit lengths only as a number then the bytes.
	read := func(v *[]byte) bool {
		var n uint32
		return s.ReadUint32(&n) && s.ReadBytes(v, int(n))
	}
	ok := s.ReadUint8(&version) && version == storedReportVersion && read(&task)
	for _, f := range []*[]byte{&r.ID, &r.PublicShare, &r.LeaderShare.Enc, &r.LeaderShare.Ciphertext, &r.HelperShare.Enc, &r.HelperShare.Ciphertext} {
		ok = ok && read(f)
	}
	if !ok || !s.Empty() {
		return r, fmt.Errorf("dap store: stored report: malformed binary encoding (%d bytes)", len(b))
	}
	r.TaskID = string(task)
	return r, nil
}
