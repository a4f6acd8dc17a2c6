package ldp

import (
	"fmt"
	"math"
	"strconv"
)

// UsefulReports is the number of reports beyond which CellWarning calls a
// per-item ε useless: more users than nearly any collection has.
const UsefulReports = 1e5

// ReportsNeeded is about how many users' reports it takes to estimate one
// item's statistic to ±0.1 (one standard error) when each report
// randomizes that item with mechanism m at per-item ε on scale sc:
//
//   - randomized response over {missing, 1…d}: the share of users giving
//     the item one given level. A level is kept with probability
//     p = e^ε/(e^ε+d) and any other is reported with q = 1/(e^ε+d); the
//     debiased share has variance at most 1/(4n(p−q)²), so n = 25/(p−q)².
//   - modified Laplace: the item's mean rating on the normalised scale
//     [−1, 1] (±0.1 there is ±0.2 on a 1–5 scale). The Laplace noise of
//     scale 2/ε alone has variance 8/ε², so n ≥ 800/ε².
//
// Both ignore the randomization of which items are rated, so the true
// figure is larger: it is a lower bound, enough to tell a useless ε.
func ReportsNeeded(m Mechanism, cellEps float64, sc Scale) float64 {
	if !(cellEps > 0) {
		return math.Inf(1)
	}
	switch m {
	case RR:
		d := float64(max(sc.Levels, 2))
		e := math.Exp(cellEps)
		gap := math.Expm1(cellEps) / (e + d)
		return 25 / (gap * gap)
	default:
		return 800 / (cellEps * cellEps)
	}
}

// CellWarning returns a warning when reports randomized at per-item ε
// cellEps over a catalogue of items would need more than UsefulReports
// users to estimate anything about one item (ReportsNeeded), with what a
// useful collection would cost: the per-item ε that needs UsefulReports/10
// reports and the per-report ε it takes over the same catalogue. It
// returns "" when the per-item ε is usable.
func CellWarning(m Mechanism, cellEps float64, items int, sc Scale) string {
	n := ReportsNeeded(m, cellEps, sc)
	if n <= UsefulReports {
		return ""
	}
	// The per-item ε at which UsefulReports/10 reports suffice
	// (ReportsNeeded decreases in ε; bisection on a log scale).
	lo, hi := cellEps, 1e3
	for range 100 {
		mid := math.Sqrt(lo * hi)
		if ReportsNeeded(m, mid, sc) > UsefulReports/10 {
			lo = mid
		} else {
			hi = mid
		}
	}
	what := "how often one item gets one rating level"
	if m != RR {
		what = "one item's mean rating"
	}
	return fmt.Sprintf("per-item ε = %s over %d items makes each report almost pure noise: estimating %s to ±0.1 takes about %s reports (users); "+
		"%s reports would need a per-item ε of about %s, i.e. ε = %s per report over %d items: declare a smaller catalogue or accept a larger ε per report",
		fmtSig(cellEps), items, what, fmtCount(n), fmtCount(UsefulReports/10), fmtSig(hi), fmtSig(hi*float64(items)), items)
}

// fmtSig formats x with three significant digits (whole numbers from 1000).
func fmtSig(x float64) string {
	if x >= 1000 {
		return strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

// fmtCount formats a large count in words people read at a glance.
func fmtCount(n float64) string {
	switch {
	case math.IsInf(n, 1):
		return "infinitely many"
	case n >= 1e9:
		return fmtSig(n/1e9) + " billion"
	case n >= 1e6:
		return fmtSig(n/1e6) + " million"
	}
	return strconv.FormatFloat(math.Round(n), 'f', 0, 64)
}
