package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/privrec/privrec/dap"
)

func TestStoredReportRoundTrip(t *testing.T) {
	full := dap.Report{TaskID: "task-1", ID: bytes.Repeat([]byte{7}, dap.ReportIDSize), PublicShare: []byte("public"),
		LeaderShare: dap.Sealed{Enc: []byte("lenc"), Ciphertext: bytes.Repeat([]byte{1}, 1000)},
		HelperShare: dap.Sealed{Enc: []byte("henc"), Ciphertext: []byte("hct")}}
	legacy, err := json.Marshal(&full)
	if err != nil {
		t.Fatal(err)
	}
	binary, err := EncodeReport(&full)
	if err != nil {
		t.Fatal(err)
	}
	empty := dap.Report{TaskID: "t"}
	emptyBin, err := EncodeReport(&empty)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body []byte
		want dap.Report
	}{
		{"binary", binary, full},
		{"binary, empty fields", emptyBin, empty},
		{"JSON of an older database", legacy, full},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeStoredReport(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if !sameReport(&got, &tc.want) {
				t.Fatalf("decoded %+v, want %+v", got, tc.want)
			}
		})
	}
	if len(binary) >= len(legacy) {
		t.Errorf("binary body of %d bytes, JSON %d: want smaller", len(binary), len(legacy))
	}
	for _, bad := range [][]byte{nil, {2}, binary[:len(binary)-1], append(append([]byte{}, binary...), 0)} {
		if _, err := decodeStoredReport(bad); err == nil {
			t.Errorf("malformed body of %d bytes decoded without error", len(bad))
		}
	}
}

// sameReport compares every field (a nil and an empty byte slice are the
// same bytes).
func sameReport(a, b *dap.Report) bool {
	return a.TaskID == b.TaskID && bytes.Equal(a.ID, b.ID) && bytes.Equal(a.PublicShare, b.PublicShare) &&
		bytes.Equal(a.LeaderShare.Enc, b.LeaderShare.Enc) && bytes.Equal(a.LeaderShare.Ciphertext, b.LeaderShare.Ciphertext) &&
		bytes.Equal(a.HelperShare.Enc, b.HelperShare.Enc) && bytes.Equal(a.HelperShare.Ciphertext, b.HelperShare.Ciphertext)
}

// FuzzStoredReport: no stored body makes the decoder panic, and whatever
// it accepts in binary encodes back to the same bytes.
func FuzzStoredReport(f *testing.F) {
	r := dap.Report{TaskID: "t", ID: make([]byte, dap.ReportIDSize), PublicShare: []byte{1, 2}}
	b, err := EncodeReport(&r)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"task_id":"t"}`))
	f.Add([]byte{1, 0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, body []byte) {
		rep, err := decodeStoredReport(body)
		if err != nil || len(body) == 0 || body[0] == '{' {
			return
		}
		again, err := EncodeReport(&rep)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, body) {
			t.Fatalf("re-encoding changed the body: %x → %x", body, again)
		}
	})
}
