package model

import (
	"slices"
	"strings"
	"testing"
)

func TestReadItemFeatures(t *testing.T) {
	ids := []string{"1", "2", "3"}
	tests := []struct {
		name, in string
		want     [][]string // feature names per item, intercept left out
		skipped  int
		err      string
	}{
		{name: "tsv", in: "1\tdrama,comedy\n# note\n\n2\tcomedy, comedy\n9\tx\n",
			want: [][]string{{"drama", "comedy"}, {"comedy"}, nil}, skipped: 1},
		{name: "movies.dat", in: "3::Heat (1995)::Action|Crime|Thriller\r\n1::Toy Story (1995)::Animation\n2::Untitled::(no genres listed)\n",
			want: [][]string{{"genre:Animation", "years:1995-1999", "genre:Animation|1990s"}, nil,
				{"genre:Action", "genre:Crime", "genre:Thriller", "years:1995-1999", "genre:Action|1990s", "genre:Crime|1990s", "genre:Thriller|1990s"}}},
		{name: "no features", in: "1\t\n", want: [][]string{nil, nil, nil}},
		{name: "twice", in: "1\ta\n1\tb\n", err: "f:2: item \"1\" appears twice"},
		{name: "no tab", in: "1 a\n", err: "f:1: want ITEM<TAB>"},
		{name: "movies.dat fields", in: "1::a\n", err: "f:1: want ID::TITLE::GENRES"},
		{name: "empty id", in: "\tx\n", err: "f:1: empty item ID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ReadItemFeatures(strings.NewReader(tc.in), "f", ids)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Skipped != tc.skipped {
				t.Errorf("skipped %d, want %d", f.Skipped, tc.skipped)
			}
			for j, want := range tc.want {
				if f.Of[j][0] != 0 {
					t.Errorf("item %d: first feature %d, want the intercept", j, f.Of[j][0])
				}
				var got []string
				for _, k := range f.Of[j][1:] {
					got = append(got, f.Names[k])
				}
				if !slices.Equal(got, want) {
					t.Errorf("item %d: features %q, want %q", j, got, want)
				}
			}
		})
	}
}

func FuzzReadItemFeatures(f *testing.F) {
	f.Add("1\ta,b\n2::T (1999)::A|B\n")
	f.Add("#\n\n3\t\n")
	f.Fuzz(func(t *testing.T, in string) {
		ids := []string{"1", "2", "3"}
		fs, err := ReadItemFeatures(strings.NewReader(in), "f", ids)
		if err != nil {
			return
		}
		if len(fs.Of) != len(ids) {
			t.Fatalf("%d feature lists for %d items", len(fs.Of), len(ids))
		}
		for _, of := range fs.Of {
			if len(of) == 0 || of[0] != 0 {
				t.Fatalf("an item without the intercept: %v", of)
			}
			for _, k := range of {
				if int(k) >= fs.Len() {
					t.Fatalf("feature %d of %d", k, fs.Len())
				}
			}
		}
	})
}
