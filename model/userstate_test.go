package model

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// publicRank2 is an item-side model: 3 items, rank 2, offset 3, item biases.
func publicRank2() *Model {
	return &Model{Method: "test", Output: Ratings, Items: []string{"a", "b", "c"}, Rank: 2,
		V: []float64{1, 0, 0, 1, 1, 1}, ItemBias: []float64{0.5, -0.5, 0}, Offset: 3,
		Transform: Transform{UserCentred: true, Clamp: &Range{Min: 1, Max: 5}}, FoldIn: FoldRidge, FoldLambda: 1e-9}
}

func TestFoldInReproducesRow(t *testing.T) {
	m := publicRank2()
	m.Transform.UserCentred = false
	// A user whose ratings follow the model exactly with row (0.4, −0.2):
	// her fold-in (ridge, λ ≈ 0) gives back that row.
	row := []float64{0.4, -0.2}
	ids := []string{"a", "b", "c"}
	vals := make([]float64, 3)
	for j := range ids {
		vals[j] = m.Offset + m.ItemBias[j] + row[0]*m.V[2*j] + row[1]*m.V[2*j+1]
	}
	st, err := m.FoldInUser("u", ids, vals)
	if err != nil {
		t.Fatal(err)
	}
	for k := range row {
		if math.Abs(st.Row[k]-row[k]) > 1e-6 {
			t.Errorf("row = %v, want %v", st.Row, row)
		}
	}
	if recs := m.RecommendFor(st, 3); len(recs) != 0 {
		t.Errorf("every item was seen, recommendations = %v", recs)
	}
	// Centred: her bias is her mean residual, shrunk by UserDamping.
	m.Transform.UserCentred, m.UserDamping = true, 1
	st, err = m.FoldInUser("u", []string{"a", "b"}, []float64{5, 3})
	if err != nil {
		t.Fatal(err)
	}
	want := ((5 - 3 - 0.5) + (3 - 3 + 0.5)) / (2 + 1)
	if math.Abs(st.Bias-want) > 1e-12 {
		t.Errorf("bias = %v, want %v", st.Bias, want)
	}
	// Project fold-in: u = (n_items/|Ω|) Σ r_j v_j on the residuals.
	m.Transform.UserCentred, m.FoldIn = false, FoldProject
	st, err = m.FoldInUser("u", []string{"c"}, []float64{4})
	if err != nil {
		t.Fatal(err)
	}
	if r := 3.0 * (4 - 3 - 0); math.Abs(st.Row[0]-r) > 1e-12 || math.Abs(st.Row[1]-r) > 1e-12 {
		t.Errorf("project row = %v, want (%v, %v)", st.Row, r, r)
	}
}

func TestFoldInErrors(t *testing.T) {
	m := publicRank2()
	cases := []struct {
		name  string
		items []string
		vals  []float64
		want  string
	}{
		{"length mismatch", []string{"a"}, []float64{1, 2}, "1 items and 2 values"},
		{"NaN", []string{"a"}, []float64{math.NaN()}, "not finite"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := m.FoldInUser("u", tc.items, tc.vals); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// Unknown items are ignored: a user with none known gets the offset.
	st, err := m.FoldInUser("u", []string{"zzz"}, []float64{5})
	if err != nil || st.Bias != 0 || st.Row[0] != 0 {
		t.Errorf("unknown items: %+v, %v", st, err)
	}
}

// FoldInIndexed with the indices ItemIndex gives is FoldInUser, an
// index of −1 or past the catalogue is an item the model does not know,
// and mismatched lengths are refused.
func TestFoldInIndexed(t *testing.T) {
	m := publicRank2()
	m.UserDamping = 1
	items := []string{"c", "zzz", "a"}
	vals := []float64{4, 2, 5}
	want, err := m.FoldInUser("u", items, vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range [][]int32{{2, -1, 0}, {2, 3, 0}} {
		got, err := m.FoldInIndexed("u", items, at, vals)
		if err != nil {
			t.Fatal(err)
		}
		if got.Bias != want.Bias || got.Row[0] != want.Row[0] || got.Row[1] != want.Row[1] || len(got.Seen) != 3 {
			t.Errorf("indices %v: %+v, FoldInUser gives %+v", at, got, want)
		}
	}
	if _, err := m.FoldInIndexed("u", items, []int32{2, 0}, vals); err == nil || !strings.Contains(err.Error(), "2 indices") {
		t.Errorf("mismatched indices: err = %v", err)
	}
}

func TestUserStatesSaveLoadJoin(t *testing.T) {
	m := publicRank2()
	s := &UserStates{Method: "test", Rank: 2, States: []UserState{
		{User: "u/1", Row: []float64{1, 2}, Bias: 0.5, Seen: []string{"a"}},
		{User: "..", Row: []float64{0, 1}, Seen: []string{"b", "c"}},
	}}
	dir := t.TempDir()
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	// IDs that look like paths name no file: the directory holds the
	// index and one directory of shards, every file 0600.
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	index, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 1 || len(index) != 2 {
		t.Fatalf("files %v %v", index, files)
	}
	for _, f := range append(files, filepath.Join(dir, stateIndexFile)) {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode())
		}
	}
	one, err := LoadUserState(dir, "u/1")
	if err != nil || len(one.States) != 1 || one.States[0].Bias != 0.5 || one.States[0].Row[1] != 2 || one.Method != "test" || one.Rank != 2 {
		t.Fatalf("LoadUserState = %+v, %v", one, err)
	}
	st := &one.States[0]
	if _, err := LoadUserState(dir, "nobody"); err == nil {
		t.Error("missing user: no error")
	}
	all, err := LoadUserStates(dir)
	if err != nil || len(all.States) != 2 {
		t.Fatalf("LoadUserStates = %+v, %v", all, err)
	}
	j, err := m.Join(all)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := j.UserIndex("u/1")
	if !ok || math.Abs(j.Score(u, 0)-m.ScoreFor(st, 0)) > 1e-12 {
		t.Errorf("joined score differs from the state's")
	}
	if recs := j.Recommend(u, 5, nil); len(recs) != 2 {
		t.Errorf("seen item not excluded: %v", recs)
	}
	// The public model is untouched and still writes without users.
	var buf bytes.Buffer
	if err := m.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte("u/1")) {
		t.Error("public model file holds a user ID")
	}
}

func TestSplitUsers(t *testing.T) {
	m := &Model{Method: "t", Output: Ratings, Users: []string{"x", "y"}, Items: []string{"a", "b"}, Rank: 1,
		U: []float64{1, 2}, V: []float64{3, 4}, UserBias: []float64{0.1, 0.2}, SeenPtr: []int64{0, 1, 2}, SeenItems: []int32{1, 0}}
	s := m.SplitUsers()
	if m.Users != nil || len(m.U) != 0 || m.UserBias != nil || m.SeenPtr != nil {
		t.Errorf("users left in the public model: %+v", m)
	}
	if err := m.Validate(); err != nil {
		t.Errorf("public model invalid: %v", err)
	}
	if len(s.States) != 2 || s.States[1].Row[0] != 2 || s.States[1].Bias != 0.2 || s.States[0].Seen[0] != "b" {
		t.Errorf("states = %+v", s.States)
	}
}

func TestVersion1Refused(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString(Magic)
	h := []byte(`{"version":1,"kind":"lowrank","meta":{},"arrays":[]}`)
	buf.Write([]byte{byte(len(h)), 0, 0, 0})
	buf.Write(h)
	_, err := Read(&buf)
	if err == nil || !strings.Contains(err.Error(), "version 1") || !strings.Contains(err.Error(), "retrain") {
		t.Errorf("err = %v, want a refusal that says how to retrain", err)
	}
}

// TestUserStatesFit: states are bound to the model file they were trained
// with; another model (another run, another method or rank) is refused
// with a message that says what to do, and a directory mixing two
// trainings is refused on loading.
func TestUserStatesFit(t *testing.T) {
	m := publicRank2()
	m.Method = "dpals"
	fp := Fingerprint([]byte("model file A"))
	other := Fingerprint([]byte("model file B"))
	cases := []struct {
		name   string
		s      UserStates
		fp     string
		reason string
	}{
		{"same model", UserStates{Method: "dpals", Rank: 2, Model: fp}, fp, ""},
		{"another run of the same method", UserStates{Method: "dpals", Rank: 2, Model: other}, fp, "written with another dpals model"},
		{"another method", UserStates{Method: "dp-bias", Rank: 0}, fp, "come from a dp-bias training, the model from dpals"},
		{"unbound, same method and rank", UserStates{Method: "dpals", Rank: 2}, fp, ""},
		{"unbound, another rank", UserStates{Method: "dpals", Rank: 5}, fp, "rank 5, the model rank 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Fits(m, tc.fp)
			if tc.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), "fit only the model they were trained with") {
				t.Fatalf("err = %v, want %q", err, tc.reason)
			}
		})
	}
	// A directory of per-user files (the format before shards) mixing two
	// trainings is refused as a whole; one user's file still reads.
	dir := t.TempDir()
	for _, f := range []stateFile{{"dpals", 2, fp, UserState{User: "a", Row: []float64{1, 2}}}, {"dpals", 2, other, UserState{User: "b", Row: []float64{1, 2}}}} {
		b, _ := json.Marshal(f)
		if err := os.WriteFile(userStateFile(dir, f.User), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadUserStates(dir); err == nil || !strings.Contains(err.Error(), "mixes the states of two trainings") {
		t.Fatalf("mixed directory: err = %v", err)
	}
	one, err := LoadUserState(dir, "b")
	if err != nil || one.Model != other {
		t.Fatalf("LoadUserState: %+v, %v", one, err)
	}
	// Saving a training replaces the directory's states whole (and the
	// per-user files of the old format): the states read back are bound
	// to the new model and refused with the other.
	b := &UserStates{Method: "dpals", Rank: 2, Model: other, States: []UserState{{User: "c", Row: []float64{1, 2}}}}
	if err := b.Save(dir); err != nil {
		t.Fatal(err)
	}
	got, err := LoadUserStates(dir)
	if err != nil || len(got.States) != 1 || got.States[0].User != "c" || got.Model != other {
		t.Fatalf("after Save: %+v, %v", got, err)
	}
	if err := got.Fits(m, fp); err == nil || !strings.Contains(err.Error(), "written with another dpals model") {
		t.Errorf("states of another model accepted: %v", err)
	}
	if _, err := LoadUserState(dir, "a"); err == nil {
		t.Error("a user of the replaced training still has a state")
	}
}
