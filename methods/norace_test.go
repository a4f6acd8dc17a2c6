//go:build !race

package methods_test

const raceEnabled = false

// raceReleaseRuns is AuditOptions.ReleaseRuns without the race detector:
// 0, the planned count.
const raceReleaseRuns = 0
