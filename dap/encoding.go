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
	out, err := EncodeFields(reportVersion, []byte(r.TaskID), r.ID, r.PublicShare, r.LeaderShare.Enc, r.LeaderShare.Ciphertext, r.HelperShare.Enc, r.HelperShare.Ciphertext)
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
	var task []byte
	if !DecodeFields(b, reportVersion, &task, &r.ID, &r.PublicShare, &r.LeaderShare.Enc, &r.LeaderShare.Ciphertext, &r.HelperShare.Enc, &r.HelperShare.Ciphertext) {
		return r, fmt.Errorf("%w: report: malformed binary encoding (%d bytes)", ErrInvalid, len(b))
	}
	r.TaskID = string(task)
	return r, nil
}

// EncodeFields is a version byte followed by each field with a 32-bit
// length (cryptobyte, as DAP's TLS presentation syntax): the framing of
// EncodeReport and of the leader's stored rows.
func EncodeFields(version uint8, fields ...[]byte) ([]byte, error) {
	n := 1
	for _, f := range fields {
		n += 4 + len(f)
	}
	b := cryptobyte.NewBuilder(make([]byte, 0, n))
	b.AddUint8(version)
	for _, f := range fields {
		b.AddUint32LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(f) })
	}
	return b.Bytes()
}

// DecodeFields reads EncodeFields' encoding of exactly len(fields)
// fields after the given version into fields (aliasing b); false if b is
// anything else.
func DecodeFields(b []byte, version uint8, fields ...*[]byte) bool {
	s := cryptobyte.String(b)
	var v uint8
	ok := s.ReadUint8(&v) && v == version
	for _, f := range fields {
		// cryptobyte reads 32-bit lengths only as a number then the bytes.
		var n uint32
		ok = ok && s.ReadUint32(&n) && s.ReadBytes(f, int(n))
	}
	return ok && s.Empty()
}
