//go:build !race

package methods

// raceReleaseRuns is AuditOptions.ReleaseRuns without the race detector:
// 0, the planned count.
const raceReleaseRuns = 0
