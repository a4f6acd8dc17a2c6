package ratingio

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// randomMatrix builds a matrix with string and integer IDs, arbitrary
// float32 values and optional timestamps.
func randomMatrix(t testing.TB, seed uint64, n int, timed bool) *ratings.Matrix {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	b := ratings.NewBuilder(ratings.DupLast)
	for k := range n {
		u := "u" + itoa(r.IntN(50))
		if r.IntN(2) == 0 {
			u = itoa(r.IntN(50))
		}
		it := itoa(r.IntN(80))
		v := float64(math.Float32frombits(r.Uint32()))
		if math.IsNaN(v) || math.IsInf(v, 0) {
			v = -0.1
		}
		if err := b.AddTimed(u, it, v, r.Int64()-r.Int64(), timed, int64(k+1)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTSVRoundTrip(t *testing.T) {
	for _, timed := range []bool{false, true} {
		m := randomMatrix(t, 1, 3000, timed)
		var buf bytes.Buffer
		if err := WriteTSV(&buf, m); err != nil {
			t.Fatal(err)
		}
		back, err := ReadContext(context.Background(), &buf, "round.tsv", Options{Format: "tsv"})
		if err != nil {
			t.Fatal(err)
		}
		if !sameRatings(back, m) {
			t.Fatalf("timed=%v: TSV round trip changed the matrix", timed)
		}
	}
}

// sameRatings compares two matrices as sets of (user name, item name,
// value bits, time), ignoring the order of the dense indices.
func sameRatings(a, b *ratings.Matrix) bool {
	type key struct{ u, i string }
	type val struct {
		v uint32
		t int64
	}
	set := func(m *ratings.Matrix) map[key]val {
		s := map[key]val{}
		m.All(func(e ratings.Entry) bool {
			s[key{m.Users.Name(e.User), m.Items.Name(e.Item)}] = val{math.Float32bits(e.Value), e.Time}
			return true
		})
		return s
	}
	sa, sb := set(a), set(b)
	if len(sa) != len(sb) || a.Len() != b.Len() || a.HasTime() != b.HasTime() {
		return false
	}
	for k, v := range sa {
		if sb[k] != v {
			return false
		}
	}
	return true
}

func TestWriteTSVRejectsTabs(t *testing.T) {
	b := ratings.NewBuilder(ratings.DupError)
	b.Add("a\tb", "1", 1, 1)
	m, _ := b.Build()
	if err := WriteTSV(&bytes.Buffer{}, m); err == nil {
		t.Fatal("an ID with a tab was written")
	}
}

func TestBinaryRoundTrip(t *testing.T) {
	for _, timed := range []bool{false, true} {
		m := randomMatrix(t, 2, 5000, timed)
		var buf bytes.Buffer
		if err := WriteBinary(&buf, m); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		back, err := ReadContext(context.Background(), bytes.NewReader(data), "x.bin", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if back.Fingerprint() != m.Fingerprint() {
			t.Fatal("binary round trip changed the matrix")
		}
		// Known size (a real file) takes the single-allocation path.
		path := writeFile(t, "x.bin", string(data))
		back, err = ReadFile(path, Options{Format: "binary"})
		if err != nil || back.Fingerprint() != m.Fingerprint() {
			t.Fatalf("file round trip: %v", err)
		}
	}
}

func TestBinaryCorrupt(t *testing.T) {
	m := randomMatrix(t, 3, 500, true)
	var buf bytes.Buffer
	if err := WriteBinary(&buf, m); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := []struct {
		name   string
		data   []byte
		reason string
	}{
		{"truncated", good[:len(good)-9], "bytes but the file has"},
		{"flipped value bit", mutate(func(b []byte) []byte { b[len(b)-100] ^= 1; return b }), "checksum"},
		{"version", mutate(func(b []byte) []byte { b[8] = 9; return b }), "version 9"},
		{"huge header", mutate(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[32:], 1<<50); return b }), "implausible"},
		{"trailing", append(bytes.Clone(good), 0), "bytes but the file has"},
	}
	for _, tc := range tests {
		_, err := ReadFile(writeFile(t, "x.bin", string(tc.data)), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.reason)
		}
		// Streams (unknown size) must fail too, without huge allocations.
		_, err = ReadContext(context.Background(), bytes.NewReader(tc.data), "x.bin", Options{})
		if err == nil {
			t.Errorf("%s (stream): no error", tc.name)
		}
	}
}

func TestBinaryScale(t *testing.T) {
	b := ratings.NewBuilder(ratings.DupError)
	b.Add("1", "1", 7, 1)
	m, _ := b.Build()
	var buf bytes.Buffer
	WriteBinary(&buf, m)
	_, err := ReadContext(context.Background(), &buf, "x.bin", Options{HasScale: true, Min: 1, Max: 5})
	if err == nil || !strings.Contains(err.Error(), "outside the declared scale") {
		t.Fatalf("got %v", err)
	}
}

func TestGzipBinary(t *testing.T) {
	m := randomMatrix(t, 9, 2000, true)
	var raw, gz bytes.Buffer
	if err := WriteBinary(&raw, m); err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(&gz)
	zw.Write(raw.Bytes())
	zw.Close()
	path := writeFile(t, "x.bin.gz", gz.String())
	back, err := ReadFile(path, Options{})
	if err != nil || back.Fingerprint() != m.Fingerprint() {
		t.Fatalf("gzip binary: %v", err)
	}
	if f, err := Detect(path); err != nil || f != "binary" {
		t.Fatalf("Detect = %q, %v", f, err)
	}
}

// TestBinaryStructuralChecks corrupts the arrays of a binary file behind
// valid checksums: the structural checks must catch what a checksum cannot.
func TestBinaryStructuralChecks(t *testing.T) {
	b := ratings.NewBuilder(ratings.DupError)
	for _, r := range [][2]string{{"a", "x"}, {"a", "y"}, {"b", "x"}, {"c", "y"}} {
		b.Add(r[0], r[1], 1, 0)
	}
	m, _ := b.Build()
	var buf bytes.Buffer
	if err := WriteBinary(&buf, m); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	// Layout: header 64, names "a b c x y" as 1-byte lengths → 10 bytes,
	// padding 6 → arrays start at 80: rowPtr 4×8, rowCol 4×4, rowVal 4×4,
	// colPtr 3×8, colRow 4×4, colVal 4×4.
	const rowCol, colRow = 80 + 32, 80 + 32 + 16 + 16 + 24
	tests := []struct {
		name   string
		at     int
		val    uint32
		reason string
	}{
		{"item out of range", rowCol, 7, "out of range"},
		{"items unsorted", rowCol, 1, "not sorted"},
		{"user out of range", colRow, 9, "out of range"},
		{"views disagree", colRow + 4, 2, "user-major view"},
	}
	for _, tc := range tests {
		data := bytes.Clone(good)
		binary.LittleEndian.PutUint32(data[tc.at:], tc.val)
		data = fixChecksums(data)
		_, err := ReadContext(context.Background(), bytes.NewReader(data), "x.bin", Options{})
		if err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.reason)
		}
	}
}
