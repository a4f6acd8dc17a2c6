package api

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/privrec/privrec/privacy"
)

func testConfig() *Config {
	items := make([]Item, 4)
	for j := range items {
		items[j] = Item{ID: string(rune('a' + j))}
	}
	return &Config{Mode: ModeLocal, Mechanism: "rr", ReportEpsilon: 2, CellEpsilon: 0.5, Budget: 4, Scale: Scale{Min: 1, Max: 5, Levels: 5},
		Units: "levels", Items: items, Guarantee: privacy.Guarantee{Epsilon: 2, Unit: privacy.UnitUser, Notion: privacy.Local, Status: privacy.Proven}}
}

// testMeanConfig is testConfig with a mean report at ε = 0.25.
func testMeanConfig() *Config {
	c := testConfig()
	c.MeanEpsilon, c.CellEpsilon, c.MaxAbsMean = 0.25, 0.4375, 1000
	return c
}

var seeds = []string{
	`{"id":"r1","epsilon":2,"values":[1,null,5,3]}`,
	` { "values" : [ null , null , null , null ] , "epsilon" : 2e0 , "id" : "x-y_z:1.2" } `,
	`{"id":"r1","epsilon":2,"values":[1,null,5,3],"user":"u"}`,
	`{"ID":"r1","Epsilon":2,"Values":[1,null,5,3]}`,
	`{"id":"r1","id":"r2","epsilon":2,"values":[1,null,5,3]}`,
	`{"id":"r\u0031","epsilon":2,"values":[1,null,5,3]}`,
	`{"id":"r1","epsilon":2,"values":[1,null,5,3]}{}`,
	`{"id":"r1","epsilon":-0.0,"values":[1e0,-0,5.5,1E+2]}`,
	`{"id":"r1","epsilon":2,"values":[01,null,5,3]}`,
	`{"id":"r1","epsilon":2,"values":[1e400,null,5,3]}`,
	`{"id":"r1","epsilon":2,"values":[.5,null,5,3]}`,
	`{"id":"r1","epsilon":2,"values":[+1,null,5,3]}`,
	`{"id":"r1","epsilon":2,"values":[]}`,
	`{"id":"r1","epsilon":2,"values":null}`,
	`{"id":null,"epsilon":2,"values":[1,2,3,4]}`,
	`{}`, `[]`, `null`, ``, `{"id":"é","epsilon":2,"values":[1,2,3,4]}`,
	`{"id":"r1","epsilon":Infinity,"values":[1,2,3,4]}`,
	`{"id":"r1","epsilon":2,"values":[1,2,3,4,]}`,
	// The mean report.
	`{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":3.25}`,
	`{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":null}`,
	`{"id":"r1","epsilon":2,"mean":-1.5e1,"values":[1,null,5,3]}`,
	`{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":3,"mean":4}`,
	`{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":"3"}`,
	`{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":1e400}`,
	`{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":NaN}`,
	`{"id":"r1","epsilon":2,"values":[1,null,5,3],"Mean":3}`,
}

// TestFastMatchesSlow: wherever the dedicated parser accepts a body, it
// reads exactly what encoding/json reads.
func TestFastMatchesSlow(t *testing.T) {
	for _, s := range seeds {
		checkFast(t, []byte(s))
	}
}

func checkFast(t *testing.T, b []byte) {
	f, ok := fastReport(b)
	if !ok {
		return
	}
	s, e := slowReport(b)
	if e != nil {
		t.Fatalf("%q: the fast parser accepted what encoding/json refuses: %v", b, e)
	}
	same := func(x, y *float64) bool {
		return (x == nil) == (y == nil) && (x == nil || math.Float64bits(*x) == math.Float64bits(*y))
	}
	if (f.id == nil) != (s.id == nil) || (f.id != nil && *f.id != *s.id) || !same(f.epsilon, s.epsilon) || !same(f.mean, s.mean) ||
		f.hasValues != s.hasValues || len(f.values) != len(s.values) {
		t.Fatalf("%q: fast %+v, slow %+v", b, f, s)
	}
	for k := range f.values {
		if !same(f.values[k], s.values[k]) {
			t.Fatalf("%q: values[%d] differ", b, k)
		}
	}
}

func TestDecodeReport(t *testing.T) {
	cfg := testConfig()
	rep, e := DecodeReport(strings.NewReader(seeds[0]), cfg)
	if e != nil || rep.ID != "r1" || rep.Epsilon != 2 || len(rep.Values) != 4 || rep.Values[1] != nil || *rep.Values[2] != 5 {
		t.Fatalf("%+v %v", rep, e)
	}
	if got := string(EncodeValues(rep.Values)); got != "[1,null,5,3]" {
		t.Fatalf("canonical values %s", got)
	}
	// The slow path names the field of the first bad element.
	_, e = DecodeReport(strings.NewReader(`{"id":"r1","epsilon":2,"values":[1,"x",5,3]}`), cfg)
	if e == nil || e.Field != "values[1]" || e.Code != CodeWrongType {
		t.Fatalf("%v", e)
	}
}

// TestDecodeReportMean: the mean report is required (and finite, within
// max_abs_mean) when the configuration has a mean_epsilon, refused when it
// has none; every refusal names the field "mean".
func TestDecodeReportMean(t *testing.T) {
	central := testConfig()
	central.Mode, central.Mechanism, central.Units, central.ReportEpsilon, central.CellEpsilon = ModeCentral, MechanismNone, "rating", 0, 0
	for _, c := range []struct {
		name string
		cfg  *Config
		body string
		code string // "" accepted
		mean float64
		want string // in the message
	}{
		{"present", testMeanConfig(), `{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":3.25}`, "", 3.25, ""},
		{"present, slow path", testMeanConfig(), `{"id":"r\u0031","epsilon":2,"values":[1,null,5,3],"mean":-7.5}`, "", -7.5, ""},
		{"noise takes it off the scale", testMeanConfig(), `{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":412.5}`, "", 412.5, ""},
		{"missing", testMeanConfig(), `{"id":"r1","epsilon":2,"values":[1,null,5,3]}`, CodeMissingField, 0, "mean is required"},
		{"null", testMeanConfig(), `{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":null}`, CodeMissingField, 0, "mean_epsilon = 0.25"},
		{"NaN", testMeanConfig(), `{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":NaN}`, CodeMalformedJSON, 0, ""},
		{"overflows", testMeanConfig(), `{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":1e400}`, CodeOutOfRange, 0, "mean"},
		{"beyond the noise", testMeanConfig(), `{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":-1000.5}`, CodeOutOfRange, 0, "±1000"},
		{"a string", testMeanConfig(), `{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":"3"}`, CodeWrongType, 0, "mean"},
		{"twice", testMeanConfig(), `{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":3,"mean":3}`, CodeDuplicateField, 0, "mean"},
		{"unexpected", testConfig(), `{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":3}`, CodeInvalidValue, 0, "mean_epsilon is 0"},
		{"null where none is taken", testConfig(), `{"id":"r1","epsilon":2,"values":[1,null,5,3],"mean":null}`, "", 0, ""},
		{"absent where none is taken", testConfig(), `{"id":"r1","epsilon":2,"values":[1,null,5,3]}`, "", 0, ""},
		{"central mode", central, `{"id":"r1","values":[1,null,5,3],"mean":3}`, CodeInvalidValue, 0, "central mode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, e := DecodeReport(strings.NewReader(c.body), c.cfg)
			if c.code == "" {
				if e != nil {
					t.Fatalf("refused: %v", e)
				}
				if (c.cfg.MeanEpsilon > 0) != (rep.Mean != nil) || (rep.Mean != nil && *rep.Mean != c.mean) {
					t.Fatalf("mean %v, want %g", rep.Mean, c.mean)
				}
				return
			}
			if e == nil {
				t.Fatalf("accepted %+v", rep)
			}
			if e.Code != c.code || e.Field != "mean" || !strings.Contains(e.Message, c.want) {
				t.Fatalf("error %+v, want code %s naming mean (%q)", e, c.code, c.want)
			}
		})
	}
	// The device-side check (no JSON: a NaN or infinite mean reaches it).
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		rep := Report{ID: "r1", Epsilon: 2, Values: make([]*float64, 4), Mean: &v}
		if e := CheckReport(testMeanConfig(), rep); e == nil || e.Field != "mean" || e.Code != CodeOutOfRange {
			t.Fatalf("mean %g: %v", v, e)
		}
	}
}

// FuzzDecodeReport: no input panics; a decoded report passes the checks,
// has one value per item (and a mean exactly when the configuration
// takes one) and round-trips through its canonical encoding; the fast
// parser agrees with encoding/json wherever it answers.
func FuzzDecodeReport(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	cfgs := []*Config{testConfig(), testMeanConfig()}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFast(t, b)
		for _, cfg := range cfgs {
			fuzzDecode(t, cfg, b)
		}
	})
}

func fuzzDecode(t *testing.T, cfg *Config, b []byte) {
	rep, e := DecodeReport(bytes.NewReader(b), cfg)
	if e != nil {
		if e.Status < 400 || e.Status > 499 || e.Message == "" || e.Code == "" {
			t.Fatalf("%q: error %+v is not a 4xx with a code and message", b, e)
		}
		return
	}
	if ce := CheckReport(cfg, rep); ce != nil {
		t.Fatalf("%q: decoded report fails the checks: %v", b, ce)
	}
	if (rep.Mean != nil) != (cfg.MeanEpsilon > 0) || (rep.Mean != nil && (math.IsNaN(*rep.Mean) || math.IsInf(*rep.Mean, 0))) {
		t.Fatalf("%q: mean %v accepted under mean_epsilon = %g", b, rep.Mean, cfg.MeanEpsilon)
	}
	vals, err := DecodeValues(EncodeValues(rep.Values))
	if err != nil || len(vals) != len(cfg.Items) {
		t.Fatalf("%q: canonical values do not round-trip: %v", b, err)
	}
	for k := range vals {
		if (vals[k] == nil) != (rep.Values[k] == nil) || (vals[k] != nil && *vals[k] != *rep.Values[k]) {
			t.Fatalf("%q: values[%d] changed in the round trip", b, k)
		}
	}
}

// FuzzDecodeReleaseRequest: no input panics; errors are 4xx.
func FuzzDecodeReleaseRequest(f *testing.F) {
	for _, s := range []string{`{"method":"ldp-rr","params":{"max_rank":5}}`, `{"method":"dp-bias","epsilon":1,"delta":1e-6,"seed":3}`, `{"method":1}`, `{`, `{"delta":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, e := DecodeReleaseRequest(bytes.NewReader(b))
		if e != nil {
			if e.Status < 400 || e.Status > 499 {
				t.Fatalf("%q: %+v", b, e)
			}
			return
		}
		if req.Method == "" || req.Epsilon < 0 || !(req.Delta >= 0 && req.Delta < 1) {
			t.Fatalf("%q: accepted %+v", b, req)
		}
	})
}
