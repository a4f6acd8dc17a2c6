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
	helperOnly := full
	helperOnly.LeaderShare = dap.Sealed{}
	prepared, err := encodePrepared(&full, []byte("prep share"), bytes.Repeat([]byte{3}, 160))
	if err != nil {
		t.Fatal(err)
	}
	preparedEmpty, err := encodePrepared(&dap.Report{TaskID: "t"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	empty := dap.Report{TaskID: "t"}
	emptyBin, err := EncodeReport(&empty)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		body     []byte
		want     dap.Report
		prepared bool
		share    string
		state    []byte
	}{
		{"prepared at upload", prepared, helperOnly, true, "prep share", bytes.Repeat([]byte{3}, 160)},
		{"prepared, empty fields", preparedEmpty, empty, true, "", nil},
		{"binary", binary, full, false, "", nil},
		{"binary, empty fields", emptyBin, empty, false, "", nil},
		{"JSON of an older database", legacy, full, false, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeStoredReport(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if !sameReport(&got.Report, &tc.want) {
				t.Fatalf("decoded %+v, want %+v", got.Report, tc.want)
			}
			if (got.prepState != nil) != tc.prepared || string(got.prepShare) != tc.share || !bytes.Equal(got.prepState, tc.state) {
				t.Fatalf("prepared %v, share %q, state of %d bytes; want %v, %q, %d", got.prepState != nil, got.prepShare, len(got.prepState), tc.prepared, tc.share, len(tc.state))
			}
		})
	}
	if len(prepared) >= len(binary) {
		t.Errorf("prepared row of %d bytes, the report %d: want smaller (no leader share)", len(prepared), len(binary))
	}
	if len(binary) >= len(legacy) {
		t.Errorf("binary body of %d bytes, JSON %d: want smaller", len(binary), len(legacy))
	}
	for _, bad := range [][]byte{nil, {2}, {3}, binary[:len(binary)-1], append(append([]byte{}, binary...), 0), prepared[:len(prepared)-1], append(append([]byte{}, prepared...), 0)} {
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
	if p, err := encodePrepared(&r, []byte{4}, []byte{5, 6}); err == nil {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rep, err := decodeStoredReport(body)
		if err != nil || len(body) == 0 || body[0] == '{' {
			return
		}
		again, err := EncodeReport(&rep.Report)
		if rep.prepState != nil {
			again, err = encodePrepared(&rep.Report, rep.prepShare, rep.prepState)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, body) {
			t.Fatalf("re-encoding changed the body: %x → %x", body, again)
		}
	})
}
