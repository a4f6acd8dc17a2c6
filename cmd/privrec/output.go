package main

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"strconv"
)

// writeJSON prints v as indented JSON (the --json output of every command).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// isTerminal reports whether f is a terminal (a character device), so
// progress lines go to people and not into logs or pipes.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// num formats a privacy parameter or budget for people: at most four
// significant digits, so that the floating-point residue of summing costs
// (0.999999998, 3.000000002) reads as the 1 and 3 it stands for. --json
// output keeps the exact values.
func num(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "∞"
	case math.IsInf(x, -1):
		return "-∞"
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}
