//go:build race

package recovery

// raceEnabled trims the heaviest accuracy tests under the race detector
// (≈ 20× slower); their concurrency is still exercised by the smaller cases.
const raceEnabled = true
