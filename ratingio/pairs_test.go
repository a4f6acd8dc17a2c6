package ratingio

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestReadPairs(t *testing.T) {
	cases := []struct {
		name, in string
		want     string // user/item@line, space-separated
		err      string
	}{
		{"tsv with ratings", "1\t10\t4\n2\t20\t3\t881250949\n", "1/10@1 2/20@2", ""},
		{"header, comments, blanks", "# pairs\nuser_id,item_id\n\n1,10\n", "1/10@4", ""},
		{"movielens ::", "1::1193::5::978300760\n", "1/1193@1", ""},
		{"spaces", "u1   i2\n", "u1/i2@1", ""},
		{"one field", "1\t10\n7\n", "", "p.tsv:2: want a user ID and an item ID"},
		{"empty item", "1,\n", "", "p.tsv:1:"},
		{"nothing", "# none\n", "", "no (user, item) pairs"},
		{"header is only skipped first", "1\t2\nuser\titem\n", "1/2@1 user/item@2", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := ReadPairs(strings.NewReader(tc.in), "p.tsv")
			if tc.err != "" {
				var pe *ParseError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &pe) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.User+"/"+p.Item+"@"+itoa64(p.Line))
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("got %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// FuzzReadPairs: any input gives pairs with non-empty IDs or an error
// naming the file, never a panic.
func FuzzReadPairs(f *testing.F) {
	for _, s := range []string{"1\t2\n", "user,item\n1,2\n", "a::b::3\n", "x\n", "\xef\xbb\xbf1 2\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ps, err := ReadPairs(strings.NewReader(string(in)), "pairs")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "pairs") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, p := range ps {
			if p.User == "" || p.Item == "" || p.Line < 1 {
				t.Fatalf("bad pair %+v", p)
			}
		}
	})
}
