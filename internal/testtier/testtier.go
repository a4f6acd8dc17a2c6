// Package testtier splits privrec's tests into two tiers.
//
// The quick tier is what `go test ./...` runs: every unit, property and
// end-to-end test that finishes in seconds, so the suite takes minutes on a
// 2-core machine. The long tier holds the statistical tests with many
// samples (privacy audits at many budgets, theorem checks over hundreds of
// recoveries, whole reproductions): their tests call Long and are skipped
// unless the binary is built with the build tag "long". CI runs both tiers
// (.ci/run: `go test ./...`, then the long tests by name with
// `-tags long`), so no assertion is lost; the README's Development section
// says how to run the long tier by hand.
package testtier

import "testing"

// Long skips t unless the test binary was built with `-tags long`, saying
// how to run it. Call it first in a long-tier test.
func Long(t testing.TB) {
	t.Helper()
	if !Enabled {
		t.Skip("long tier: run with `go test -tags long` (CI does)")
	}
}

// Quick reports whether a test should use its reduced size: in the quick
// tier (no `-tags long`) and under -short. A test that keeps a smaller
// version of its assertions in the quick tier runs in full in the long one.
func Quick() bool {
	return !Enabled || testing.Short()
}
