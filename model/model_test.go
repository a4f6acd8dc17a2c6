package model

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
)

func testData(t *testing.T) *ratings.Matrix {
	t.Helper()
	b := ratings.NewBuilder(ratings.DupError)
	for _, r := range []struct {
		u, i string
		v    float64
	}{{"a", "x", 5}, {"a", "y", 3}, {"b", "y", 4}, {"b", "z", 1}, {"c", "x", 2}} {
		if err := b.Add(r.u, r.i, r.v, 0); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func rank1(t *testing.T) *Model {
	m := New("test", testData(t))
	m.Rank = 1
	m.U = []float64{1, 2, -1}
	m.V = []float64{0.5, 1, -2}
	m.Offset = 3
	m.Guarantee = privacy.Guarantee{Epsilon: 2, Unit: privacy.UnitEntry, Notion: privacy.Central, Status: privacy.Proven}
	return m
}

func TestRoundTrip(t *testing.T) {
	m := rank1(t)
	m.UserBias = []float64{0.1, 0.2, 0.3}
	m.Transform.Scale = &Scale{FromMin: 1, FromMax: 5, ToMin: -1, ToMax: 1}
	var buf bytes.Buffer
	if err := m.Write(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for u := range int32(3) {
		for i := range int32(3) {
			if got.Predict(u, i) != m.Predict(u, i) {
				t.Errorf("Predict(%d,%d) = %v after round trip, want %v", u, i, got.Predict(u, i), m.Predict(u, i))
			}
		}
	}
	if got.Guarantee != m.Guarantee || *got.Transform.Scale != *m.Transform.Scale {
		t.Errorf("metadata changed in round trip: %+v", got)
	}
}

func TestPredictClampsAndInverts(t *testing.T) {
	m := rank1(t)
	// user a (index 0) × item x (index 0): 3 + 1·0.5 = 3.5 on the raw scale.
	if p := m.Predict(0, 0); math.Abs(p-3.5) > 1e-12 {
		t.Errorf("Predict = %v, want 3.5", p)
	}
	// user b × item z: 3 + 2·(−2) = −1, unclamped without a declared scale,
	// clamped to the declared minimum 1 with one.
	if p := m.Predict(1, 2); p != -1 {
		t.Errorf("Predict = %v, want -1 without a declared scale", p)
	}
	m.Transform.Clamp = &Range{Min: 1, Max: 5}
	if p := m.Predict(1, 2); p != 1 {
		t.Errorf("Predict = %v, want clamp to 1", p)
	}
	m.Transform.Scale = &Scale{FromMin: 1, FromMax: 5, ToMin: 0, ToMax: 1}
	m.Offset, m.U = 0.5, []float64{0, 0, 0}
	if p := m.Predict(0, 0); math.Abs(p-3) > 1e-12 {
		t.Errorf("inverse scaling: Predict = %v, want 3", p)
	}
}

func TestRecommendExcludesSeen(t *testing.T) {
	m := rank1(t)
	// user a rated x and y: only z may be recommended.
	recs := m.Recommend(0, 10, nil)
	if len(recs) != 1 || recs[0].Item != "z" {
		t.Fatalf("Recommend = %+v, want only z", recs)
	}
	// user c rated x: y (score 3+(−1)(1)=2) before z (3+(−1)(−2)=5)? z scores higher.
	recs = m.Recommend(2, 1, nil)
	if len(recs) != 1 || recs[0].Item != "z" {
		t.Fatalf("Recommend = %+v, want z first", recs)
	}
}

func TestReadRejectsCorruptFiles(t *testing.T) {
	m := rank1(t)
	var buf bytes.Buffer
	if err := m.Write(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"bad magic", append([]byte("not-a-model!!\n"), good[len(Magic):]...)},
		{"truncated", good[:len(good)-5]},
		{"header only", good[:len(Magic)+2]},
	}
	for _, tc := range tests {
		if _, err := Read(bytes.NewReader(tc.data)); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

func TestValidate(t *testing.T) {
	m := rank1(t)
	m.V = m.V[:2]
	if err := m.Validate(); err == nil {
		t.Error("short V accepted")
	}
	m = rank1(t)
	m.U[0] = math.NaN()
	if err := m.Validate(); err == nil {
		t.Error("NaN factor accepted")
	}
}

func TestSaveIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.model")
	m := rank1(t)
	m.U[0] = math.Inf(1) // invalid: Save must fail and leave nothing behind
	if err := m.Save(path); err == nil {
		t.Fatal("invalid model saved")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("failed save left %d files", len(entries))
	}
	m = rank1(t)
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	if k, err := PeekKind(path); err != nil || k != KindLowRank {
		t.Errorf("PeekKind = %q, %v", k, err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
}
