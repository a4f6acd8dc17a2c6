package methods

import (
	"context"
	"strings"
	"testing"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
)

// A mistyped method name is answered with the nearest registered names.
func TestLookupSuggests(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string // in the error; "" : no suggestion
	}{
		{"dp-eas", "did you mean dp-ease?"},
		{"DP-EASE", "did you mean dp-ease?"},
		{"dpal", "did you mean dpals?"},
		{"dp-popularty", "did you mean dp-popularity?"},
		{"ldp-r", "did you mean ldp-rr?"},
		{"zzzzzzzz", ""},
	} {
		_, err := Lookup(tc.name)
		if err == nil {
			t.Fatalf("%s: found", tc.name)
		}
		msg := err.Error()
		if !strings.Contains(msg, "known:") {
			t.Errorf("%s: %s does not list the known methods", tc.name, msg)
		}
		if tc.want == "" && strings.Contains(msg, "did you mean") || tc.want != "" && !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %s; want %q", tc.name, msg, tc.want)
		}
	}
	if got := Nearest("ab", []string{"ax", "ay", "abcdef"}); strings.Join(got, ",") != "ax,ay" {
		t.Errorf("Nearest ties: %v", got)
	}
}

// Seeded noise marks the guarantee of a private method only: a
// non-private model drew no noise and carries no warning about it.
func TestReproducibleOnlyWhenNoiseDrawn(t *testing.T) {
	m, cat := plantedTopN(t, 60, 3, 4, 0.8, 0.05, 1)
	in := release.Input{Ratings: m, Declared: release.Declared{Catalogue: cat}}
	for _, tc := range []struct {
		method string
		want   bool
	}{{"popularity", false}, {"ease", false}, {"dp-popularity", true}} {
		cfg, err := Configure(tc.method, nil)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := Train(context.Background(), tc.method, cfg, in, Env{Epsilon: 1, Delta: 1e-6, Noise: noise.Seeded(3)})
		if err != nil {
			t.Fatalf("%s: %v", tc.method, err)
		}
		g := rel.Guarantee
		if g.Reproducible != tc.want || strings.Contains(g.String(), "seeded") != tc.want {
			t.Errorf("%s: reproducible %v, want %v: %s", tc.method, g.Reproducible, tc.want, g)
		}
	}
}
