//go:build race

package methods

// raceReleaseRuns is AuditOptions.ReleaseRuns under the race detector (≈
// 10–20× slower): a handful of release-check runs instead of the planned
// hundreds.
const raceReleaseRuns = 20
