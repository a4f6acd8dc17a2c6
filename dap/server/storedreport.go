package server

import (
	"encoding/json"
	"fmt"

	"github.com/privrec/privrec/dap"
)

// ReportMediaType is the Content-Type of a report in the binary encoding
// (dap.ReportMediaType).
const ReportMediaType = dap.ReportMediaType

// EncodeReport is a report's binary encoding, the leader's upload body
// (dap.EncodeReport).
func EncodeReport(r *dap.Report) ([]byte, error) { return dap.EncodeReport(r) }

// DecodeReport reads EncodeReport's encoding (dap.DecodeReport).
func DecodeReport(b []byte) (dap.Report, error) { return dap.DecodeReport(b) }

// preparedVersion starts the row of a report the leader prepared at
// upload (dap.EncodeReport's rows start with its version, 1; rows of a
// database from before the binary encoding with '{').
const preparedVersion = 2

// storedReport is a report as the leader keeps it until its aggregation
// job: prepared at upload (prepShare and prepState: the leader's prep
// share and preparation state, dap.Prepared; the report's leader share
// is not kept), or, in a row stored by an earlier privrec, the report as
// uploaded (prepState nil: it is prepared at aggregation).
type storedReport struct {
	dap.Report
	prepShare, prepState []byte
}

// encodePrepared is the row of a report the leader prepared at upload:
// the version, then the task ID, report ID, public share, the helper's
// sealed share, the leader's prep share and its preparation state, each
// with a 32-bit length. The state is the leader's output share (the
// truncated measurement share: 16 bytes per coordinate, a tenth of its
// input share for a 10-bit Gram), so the row written at upload and read
// back at aggregation is a tenth of the report.
func encodePrepared(r *dap.Report, prepShare, prepState []byte) ([]byte, error) {
	out, err := dap.EncodeFields(preparedVersion, []byte(r.TaskID), r.ID, r.PublicShare, r.HelperShare.Enc, r.HelperShare.Ciphertext, prepShare, prepState)
	if err != nil {
		return nil, fmt.Errorf("dap store: encoding a prepared report: %w", err)
	}
	return out, nil
}

// decodeStoredReport reads a row: one written by encodePrepared, by
// EncodeReport (a report as uploaded), or the JSON of a database written
// before the binary encoding (it starts with '{'). The byte slices alias
// b.
func decodeStoredReport(b []byte) (storedReport, error) {
	var r storedReport
	switch {
	case len(b) > 0 && b[0] == '{':
		if err := json.Unmarshal(b, &r.Report); err != nil {
			return r, fmt.Errorf("dap store: stored report: %w", err)
		}
		return r, nil
	case len(b) > 0 && b[0] == preparedVersion:
		return decodePrepared(b)
	}
	rep, err := DecodeReport(b)
	if err != nil {
		return r, fmt.Errorf("dap store: stored report: %w", err)
	}
	r.Report = rep
	return r, nil
}

// decodePrepared reads encodePrepared's row.
func decodePrepared(b []byte) (storedReport, error) {
	var r storedReport
	var task []byte
	if !dap.DecodeFields(b, preparedVersion, &task, &r.ID, &r.PublicShare, &r.HelperShare.Enc, &r.HelperShare.Ciphertext, &r.prepShare, &r.prepState) {
		return r, fmt.Errorf("%w: dap store: stored report: malformed prepared row (%d bytes)", dap.ErrInvalid, len(b))
	}
	if r.prepState == nil {
		r.prepState = []byte{} // prepared, even with an empty state
	}
	r.TaskID = string(task)
	return r, nil
}
