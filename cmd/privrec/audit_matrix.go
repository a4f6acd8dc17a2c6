package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/privrec/privrec/methods"
)

// The audit matrix (issue 37): every method × ε × {unmodified, half the
// noise, half the sensitivity} → verdict and seconds.

// matrixCase is one column of the matrix: the factors and the verdict a
// correct audit must give.
type matrixCase struct {
	name                string
	noise, sensitivity  float64
	wantViolation       bool
	sensitivityOnlyKnob bool
}

var matrixCases = []matrixCase{
	{name: "unmodified", noise: 1, sensitivity: 1},
	{name: "noise ×0.5", noise: 0.5, sensitivity: 1, wantViolation: true},
	{name: "sensitivity ×0.5", noise: 1, sensitivity: 0.5, wantViolation: true, sensitivityOnlyKnob: true},
}

// matrixCell is one audit of the matrix.
type matrixCell struct {
	Method            string   `json:"method"`
	Epsilon           float64  `json:"epsilon"`
	Case              string   `json:"case"`
	NoiseFactor       float64  `json:"noise_factor"`
	SensitivityFactor float64  `json:"sensitivity_factor"`
	Verdict           string   `json:"verdict"`
	Expected          bool     `json:"expected"`
	NotApplicable     string   `json:"not_applicable,omitempty"`
	NoPower           []string `json:"no_power,omitempty"`
	Seconds           float64  `json:"seconds"`
}

// matrixArgs reads the methods (all: every private one) and the ε list.
func matrixArgs(name, epsList string) ([]string, []float64, error) {
	var names []string
	if name == "all" {
		for _, m := range methods.All() {
			if m.Private {
				names = append(names, m.Name)
			}
		}
	} else {
		for _, n := range strings.Split(name, ",") {
			m, err := methods.Lookup(strings.TrimSpace(n))
			if err != nil {
				return nil, nil, usagef("--method: %v", err)
			}
			if !m.Private {
				return nil, nil, usagef("--method: %s is a non-private baseline: there is nothing to audit", m.Name)
			}
			names = append(names, m.Name)
		}
	}
	var eps []float64
	for _, f := range strings.Split(epsList, ",") {
		e, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(e > 0) || e > 100 {
			return nil, nil, usagef("--epsilons: %q is not an ε in (0, 100]", f)
		}
		eps = append(eps, e)
	}
	return names, eps, nil
}

// runAuditMatrix audits every method at every ε in the three cases and
// prints a Markdown table (or the cells as JSON); exit 1 unless every cell
// is as expected.
func runAuditMatrix(ctx context.Context, names []string, eps []float64, opts methods.AuditOptions, jsonOut bool, out io.Writer) error {
	var cells []matrixCell
	ok := true
	if !jsonOut {
		fmt.Fprintf(out, "| method | ε |")
		for _, c := range matrixCases {
			fmt.Fprintf(out, " %s |", c.name)
		}
		fmt.Fprintf(out, "\n| --- | --- |%s\n", strings.Repeat(" --- |", len(matrixCases)))
	}
	for _, name := range names {
		m, err := methods.Lookup(name)
		if err != nil {
			return err
		}
		for _, e := range eps {
			row := make([]string, 0, len(matrixCases))
			for _, c := range matrixCases {
				o := opts
				o.Epsilon, o.NoiseFactor, o.SensitivityFactor = e, c.noise, c.sensitivity
				start := time.Now()
				rep, err := methods.Audit(ctx, name, m.New(), o)
				if err != nil {
					return fmt.Errorf("audit of %s at ε = %g (%s): %w", name, e, c.name, err)
				}
				cell := matrixCell{Method: name, Epsilon: e, Case: c.name, NoiseFactor: c.noise, SensitivityFactor: c.sensitivity,
					Verdict: auditVerdict(rep), NoPower: rep.NoPower, Seconds: time.Since(start).Seconds()}
				cell.Expected = rep.Violation == c.wantViolation && (rep.Violation || len(rep.NoPower) == 0)
				if c.sensitivityOnlyKnob && !rep.Violation {
					if why := sensitivityNotApplicable(rep); why != "" {
						cell.NotApplicable, cell.Expected = why, len(rep.NoPower) == 0
					}
				}
				ok = ok && cell.Expected
				cells = append(cells, cell)
				row = append(row, matrixText(cell))
			}
			if !jsonOut {
				fmt.Fprintf(out, "| %s | %g | %s |\n", name, e, strings.Join(row, " | "))
			}
		}
	}
	if jsonOut {
		if err := writeJSON(out, cells); err != nil {
			return err
		}
	}
	if !ok {
		return exitError{code: 1}
	}
	return nil
}

// sensitivityNotApplicable says why a method has no sensitivity an audit
// could check (a guarantee that claims nothing or is not proven, or no
// additive release: randomized response, local randomizers); "" when it
// has one.
func sensitivityNotApplicable(rep *methods.AuditReport) string {
	switch {
	case rep.NoGuarantee:
		return "claims nothing"
	case rep.ReleaseCheck == nil || rep.ReleaseCheck.Mechanism == "rr":
		return "no sensitivity (a randomizer, not additive noise)"
	case !rep.Proven:
		return "not proven"
	}
	return ""
}

// matrixText is a cell's table text: its verdict, whether it is what a
// correct audit gives, and its seconds.
func matrixText(c matrixCell) string {
	v := c.Verdict
	switch {
	case c.NotApplicable != "":
		v = "n/a, " + c.NotApplicable + ": " + map[string]string{"ok": "passes"}[v]
		if c.Verdict != "ok" {
			v = "n/a, " + c.NotApplicable + ": " + c.Verdict
		}
	case c.Verdict == "VIOLATION":
		v = "caught"
	case c.Verdict == "ok":
		v = "passes"
	}
	mark := ""
	if !c.Expected {
		mark = " **UNEXPECTED**"
	}
	return fmt.Sprintf("%s%s, %.1f s", v, mark, c.Seconds)
}
