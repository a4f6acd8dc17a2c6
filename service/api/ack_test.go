package api

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

func checkAckJSON(t *testing.T, a Ack) {
	t.Helper()
	want, err := json.Marshal(&a)
	got, ok := a.AppendJSON([]byte("x"))
	if !ok {
		if len(got) != 1 {
			t.Fatalf("%+v: refused but appended %q", a, got)
		}
		return
	}
	if err != nil {
		t.Fatalf("%+v: AppendJSON wrote %q where json.Marshal fails: %v", a, got, err)
	}
	if string(got[1:]) != string(want) {
		t.Fatalf("%+v:\n AppendJSON %s\n json       %s", a, got[1:], want)
	}
}

// TestAckAppendJSON: the hand-written acknowledgement encoder writes what
// json.Marshal writes, or refuses.
func TestAckAppendJSON(t *testing.T) {
	at := time.UnixMilli(1_764_000_000_123).UTC()
	for _, a := range []Ack{
		{ID: "k1", Accepted: true, Seq: 1, Epsilon: 1, Spent: 1, Remaining: 9, Budget: 10, Received: at},
		{ID: "", Seq: -5, Epsilon: 0.1, Spent: 0.30000000000000004, Remaining: 1e-7, Budget: 1e21, Received: time.UnixMilli(0).UTC()},
		{ID: "a b-c_d.e~f", Epsilon: 1e-6, Spent: 123456789.125, Remaining: -0.5, Budget: 1e20, Received: at},
		{ID: "x", Epsilon: 5e-324, Spent: math.MaxFloat64, Remaining: -1e-10, Budget: math.Copysign(0, -1), Received: at},
		{ID: "q\"uote", Received: at},
		{ID: "<html>&", Received: at},
		{ID: "é", Received: at},
		{ID: "nan", Epsilon: math.NaN(), Received: at},
		{ID: "inf", Budget: math.Inf(1), Received: at},
		{ID: "y", Received: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{ID: "z", Received: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600))},
	} {
		checkAckJSON(t, a)
	}
	// The common case is not refused.
	if _, ok := (&Ack{ID: "k1", Received: at}).AppendJSON(nil); !ok {
		t.Fatal("a plain acknowledgement was refused")
	}
}

func FuzzAckAppendJSON(f *testing.F) {
	f.Add("k1", true, int64(1), 1.0, 2.0, 3.0, 4.0, int64(1_764_000_000_123))
	f.Add("a\u2028", false, int64(-1), 1e-7, 1e21, -0.0, 5e-324, int64(-62135596800001))
	f.Fuzz(func(t *testing.T, id string, acc bool, seq int64, e, s, r, b float64, ms int64) {
		checkAckJSON(t, Ack{ID: id, Accepted: acc, Seq: seq, Epsilon: e, Spent: s, Remaining: r, Budget: b, Received: time.UnixMilli(ms).UTC()})
	})
}

// TestEncodeValuesIntegers: the integer shortcut writes what
// strconv's shortest 'g' form writes.
func TestEncodeValuesIntegers(t *testing.T) {
	var vals []*float64
	for _, x := range []float64{0, math.Copysign(0, -1), 1, -1, 5, 999999, -999999, 1e6, 1e21, 2.5, 123456.75, -3} {
		vals = append(vals, &x)
	}
	vals = append(vals, nil)
	want := "[0,-0,1,-1,5,999999,-999999,1e+06,1e+21,2.5,123456.75,-3,null]"
	if got := string(EncodeValues(vals)); got != want {
		t.Fatalf("EncodeValues = %s, want %s", got, want)
	}
}

// FuzzDecodeAdminTokenRequest: no input panics; an error is a 400 with a
// code and message; an accepted request is within its bounds and
// re-encodes to a body that decodes to the same request.
func FuzzDecodeAdminTokenRequest(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"label":"ops","expires_in_seconds":3600}`, `{"label":1}`, `{"LABEL":"x"}`,
		`{"label":"a","label":"b"}`, `null`, `{"expires_in_seconds":-1}`, `{"expires_in_seconds":1e30}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, e := DecodeAdminTokenRequest(bytes.NewReader(b))
		if e != nil {
			if e.Status != 400 || e.Code == "" || e.Message == "" {
				t.Fatalf("%q: error %+v", b, e)
			}
			return
		}
		if len(req.Label) > MaxTokenLabel || req.ExpiresInSeconds < 0 {
			t.Fatalf("%q: accepted %+v", b, req)
		}
		again, e := DecodeAdminTokenRequest(bytes.NewReader(mustMarshalReq(t, req)))
		if e != nil || again != req {
			t.Fatalf("%q: %+v does not round-trip (%+v, %v)", b, req, again, e)
		}
	})
}

func mustMarshalReq(t *testing.T, req AdminTokenRequest) []byte {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
