//go:build !race

package methods_test

const raceEnabled = false
