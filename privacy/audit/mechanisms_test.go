package audit

import (
	"slices"
	"strings"
	"testing"
)

// TestForKnowsExactlyNames checks that every name For lists has a spec
// builder and that no builder is missing from the list the CLI shows;
// an unknown name is refused with the list.
func TestForKnowsExactlyNames(t *testing.T) {
	var built []string
	for name := range specBuilders {
		built = append(built, name)
	}
	slices.Sort(built)
	listed := slices.Sorted(slices.Values(Names))
	if !slices.Equal(built, listed) {
		t.Fatalf("spec builders %v, Names %v", built, listed)
	}
	_, err := For("nope", 1, 0, Options{})
	if err == nil || !strings.Contains(err.Error(), `unknown mechanism "nope"`) {
		t.Fatalf("got %v, want an unknown-mechanism error", err)
	}
}
