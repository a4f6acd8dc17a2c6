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
// and its database row (dap.EncodeReport).
func EncodeReport(r *dap.Report) ([]byte, error) { return dap.EncodeReport(r) }

// DecodeReport reads EncodeReport's encoding (dap.DecodeReport).
func DecodeReport(b []byte) (dap.Report, error) { return dap.DecodeReport(b) }

// decodeStoredReport reads a row body written by EncodeReport, or the
// JSON of a database written before the binary encoding (it starts with
// '{'). The byte slices alias b.
func decodeStoredReport(b []byte) (dap.Report, error) {
	if len(b) > 0 && b[0] == '{' {
		var r dap.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return r, fmt.Errorf("dap store: stored report: %w", err)
		}
		return r, nil
	}
	r, err := DecodeReport(b)
	if err != nil {
		return r, fmt.Errorf("dap store: stored report: %w", err)
	}
	return r, nil
}
