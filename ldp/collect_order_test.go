package ldp

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// TestCollectOrderIgnoresRatings: the position of a user's report in a
// collect file does not move when her ratings change (issue 23, defect 7:
// it followed the order users first appeared in the ratings, which a file
// sorted by item or time ties to what they rated). Each case builds the
// same three clients from ratings read in a different order and checks
// the reports come out in the order of the user IDs. At ε = 30 a rated
// cell is reported as rated, and a missing one as missing, except with
// probability ≈ 5·e^−30 ≈ 5·10⁻¹³ per cell; the noise is seeded.
func TestCollectOrderIgnoresRatings(t *testing.T) {
	type add struct {
		user, item string
		v          float64
	}
	cases := []struct {
		name string
		adds []add
	}{
		{"b rates i2", []add{{"a", "i1", 5}, {"b", "i2", 3}, {"c", "i3", 1}}},
		{"b rates i4 instead, read last", []add{{"a", "i1", 5}, {"c", "i3", 1}, {"b", "i4", 2}}},
		{"sorted by item, c first", []add{{"c", "i1", 4}, {"a", "i2", 5}, {"b", "i3", 2}}},
	}
	r, err := New(RR, 30, Scale{Min: 1, Max: 5, Levels: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := ratings.NewBuilder(ratings.DupError)
			for _, a := range c.adds {
				if err := b.Add(a.user, a.item, a.v, 0); err != nil {
					t.Fatal(err)
				}
			}
			m, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if _, err := CollectOver(context.Background(), &out, m, r, nil, []string{"i1", "i2", "i3", "i4"}, noise.Seeded(7), 2); err != nil {
				t.Fatal(err)
			}
			var seen []string
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if strings.HasPrefix(line, "#") {
					continue
				}
				u, _, _ := strings.Cut(line, "\t")
				if len(seen) == 0 || seen[len(seen)-1] != u {
					seen = append(seen, u)
				}
			}
			if strings.Join(seen, ",") != "a,b,c" {
				t.Fatalf("reports in the order %v; want a,b,c whatever the ratings", seen)
			}
		})
	}
}
