//go:build race

package methods_test

// raceEnabled trims the all-methods audit under the race detector (≈ 10–20×
// slower): every method's audit still runs, concurrently as always, but
// with a handful of samples and no assertion on the statistical outcome.
const raceEnabled = true

// raceReleaseRuns is AuditOptions.ReleaseRuns under the race detector: a
// handful of release-check runs instead of the planned hundreds.
const raceReleaseRuns = 20
