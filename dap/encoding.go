package dap

import (
	"fmt"

	"golang.org/x/crypto/cryptobyte"
)

// ReportMediaType is the Content-Type of a report in the binary encoding
// (EncodeReport; the media type DAP gives its reports). The leader accepts
// an upload in it or in JSON.
const ReportMediaType = "application/dap-report"

// reportVersion starts the binary encoding of a report.
const reportVersion = 1

// EncodeReport is a report's binary encoding, the leader's upload body
// (ReportMediaType: the Go devices and the browser send it) and its
// database row: a version byte, then the task ID, report ID, public share and the two sealed shares, each with a
// 32-bit length (cryptobyte, as DAP's TLS presentation syntax). The
// leader's input share is ≈ 16 bytes per field element (1.8 MB for dpals'
// bias statistics at MovieLens-1M): as JSON with base64 it costs a third
// more bytes and most of the leader's CPU outside Prio3 (scanning and
// decoding at upload, encoding into the row, and again at aggregation).
func EncodeReport(r *Report) ([]byte, error) {
	b := cryptobyte.NewBuilder(make([]byte, 0, 1+7*4+len(r.TaskID)+r.Size()))
	b.AddUint8(reportVersion)
	for _, f := range [][]byte{[]byte(r.TaskID), r.ID, r.PublicShare, r.LeaderShare.Enc, r.LeaderShare.Ciphertext, r.HelperShare.Enc, r.HelperShare.Ciphertext} {
		b.AddUint32LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(f) })
	}
	out, err := b.Bytes()
	if err != nil {
		return nil, fmt.Errorf("dap: encoding report: %w", err)
	}
	return out, nil
}

// DecodeReport reads EncodeReport's encoding; anything else (a wrong
// version, a length past the end, trailing bytes) is an error wrapping
// ErrInvalid. The byte slices alias b.
func DecodeReport(b []byte) (Report, error) {
	var r Report
	s := cryptobyte.String(b)
	var version uint8
	var task []byte
	// cryptobyte reads 32-bit lengths only as a number then the bytes.
	read := func(v *[]byte) bool {
		var n uint32
		return s.ReadUint32(&n) && s.ReadBytes(v, int(n))
	}
	ok := s.ReadUint8(&version) && version == reportVersion && read(&task)
	for _, f := range []*[]byte{&r.ID, &r.PublicShare, &r.LeaderShare.Enc, &r.LeaderShare.Ciphertext, &r.HelperShare.Enc, &r.HelperShare.Ciphertext} {
		ok = ok && read(f)
	}
	if !ok || !s.Empty() {
		return r, fmt.Errorf("%w: report: malformed binary encoding (%d bytes)", ErrInvalid, len(b))
	}
	r.TaskID = string(task)
	return r, nil
}
