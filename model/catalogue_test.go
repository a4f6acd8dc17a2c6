package model

import (
	"strings"
	"testing"
)

func TestReadCatalogue(t *testing.T) {
	cases := []struct {
		name, in  string
		ids       []string
		titles    []string
		wantError string
	}{
		{"ids only", "1\n2\n\n# comment\n3\n", []string{"1", "2", "3"}, nil, ""},
		{"tab titles", "a\tAlpha\nb\n", []string{"a", "b"}, []string{"Alpha", ""}, ""},
		{"movies.dat", "1::Toy Story (1995)::Animation\n2::Jumanji (1995)::Adventure\n", []string{"1", "2"}, []string{"Toy Story (1995)", "Jumanji (1995)"}, ""},
		{"u.item latin-1", "1|Toy Story (1995)|01-Jan-1995||http://x\n2|Cit\xe9 des enfants|x\n", []string{"1", "2"}, []string{"Toy Story (1995)", "Cité des enfants"}, ""},
		{"duplicate", "a\nb\na\n", nil, nil, "cat.txt:3: item \"a\" already listed on line 1"},
		{"empty id", "a\n\tTitle\n", nil, nil, "cat.txt:2: empty item ID"},
		{"empty", "# nothing\n", nil, nil, "lists no items"},
		{"header of an id mapping", "# map\nitem_index\tmovie_id\n0\t1\n1\t2\n2\t3\n", nil, nil, "cat.txt:2: \"item_index\" looks like a header line"},
		{"header says the second column holds numbers", "item_index\tmovie_id\n0\t1\n1\t2\n", nil, nil, "the second column here holds numbers"},
		{"header with titles", "movieId\ttitle\n1\tToy Story\n", nil, nil, "looks like a header line"},
		{"lone non-integer among integers", "x\n1\n2\n3\n", nil, nil, "looks like a header line"},
		{"named ids are not a header", "apple\tApple\npear\tPear\n", []string{"apple", "pear"}, []string{"Apple", "Pear"}, ""},
		{"commented header is skipped", "#item_index\tmovie_id\n1\t2\n", []string{"1"}, []string{"2"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ReadCatalogue(strings.NewReader(tc.in), "cat.txt")
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("err = %v, want %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(c.IDs(), ",") != strings.Join(tc.ids, ",") || strings.Join(c.Titles(), ",") != strings.Join(tc.titles, ",") {
				t.Errorf("ids %q titles %q", c.IDs(), c.Titles())
			}
			var b strings.Builder
			if err := c.Write(&b); err != nil {
				t.Fatal(err)
			}
			back, err := ReadCatalogue(strings.NewReader(b.String()), "back")
			if err != nil || strings.Join(back.IDs(), ",") != strings.Join(tc.ids, ",") {
				t.Errorf("round trip: %v %v", back, err)
			}
		})
	}
}

// FuzzReadCatalogue: any input gives a catalogue or an error naming the
// file, never a panic; a catalogue written back reads the same.
func FuzzReadCatalogue(f *testing.F) {
	for _, s := range []string{"1\n2\n", "a\tA\n", "1::T::G\n", "1|T|x\n", "\xff\xfe\n", "a\na\n", "\t\n", "#\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := ReadCatalogue(strings.NewReader(string(in)), "cat")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "cat") && !strings.HasPrefix(err.Error(), "catalogue") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		var b strings.Builder
		if err := c.Write(&b); err != nil {
			t.Fatal(err)
		}
		back, err := ReadCatalogue(strings.NewReader(b.String()), "back")
		if err != nil || strings.Join(back.IDs(), "\x00") != strings.Join(c.IDs(), "\x00") {
			t.Fatalf("round trip changed the catalogue: %v", err)
		}
	})
}
