//go:build long

package testtier

// Enabled reports whether the long tier runs (built with -tags long).
const Enabled = true
