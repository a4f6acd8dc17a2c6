package release

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/privrec/privrec/model"
)

// DefaultList is the length of the list a person is shown when Facts
// does not say (the browser's and `privrec client recommend`'s default).
const DefaultList = 10

// EdgeFalseAlarm is the chance that, in a release of pure noise, some
// item's noised count rises above the noise edge (NoiseEdge): the edge
// is the (1 − EdgeFalseAlarm/n) quantile of the count noise over n items.
const EdgeFalseAlarm = 0.05

// Facts are the public facts a release is judged against besides its own
// released values.
type Facts struct {
	// Users is the population the release was trained over, where the
	// reader may know it (the curator's console, the operator's admin
	// answer; under the replace-one-user relation it is public). 0: not
	// stated, and the "too few users" judgement is left out.
	Users int
	// List is the length of the list a person is shown (0: DefaultList).
	List int
}

// Warning is one way in which a release's noise drowns its statistic.
type Warning struct {
	// Code is WarnTooFewUsers, WarnBelowNoise or WarnFewCovered.
	Code string `json:"code"`
	// Message says what was found, in the release's own numbers, and what
	// to do about it.
	Message string `json:"message"`
}

// Warning codes.
const (
	// WarnTooFewUsers: with this many users no item's count can reach
	// the noise edge, whatever the data.
	WarnTooFewUsers = "too_few_users"
	// WarnBelowNoise: nothing (no noised count, no eigenpair) rises above
	// the noise edge.
	WarnBelowNoise = "below_noise"
	// WarnFewCovered: fewer items are modelled than a list holds.
	WarnFewCovered = "few_covered"
)

func (w Warning) String() string { return w.Message }

// NoiseEdge is the level a noised count must exceed to be told from the
// noise: σ·z with z the (1 − EdgeFalseAlarm/n) standard normal quantile,
// so that over n items of pure noise one rises above it with probability
// at most EdgeFalseAlarm.
func NoiseEdge(sigma float64, n int) float64 {
	n = max(n, 1)
	z := math.Sqrt2 * math.Erfinv(1-2*EdgeFalseAlarm/float64(n))
	return sigma * z
}

// Warnings judges whether a release's noise drowns its statistic — the
// one judgement `privrec train`, the service (its admin answer and the
// release's metadata) and the browser show. It reads only what the
// release publishes (the report's σ of the item counts, its covered
// items, the public model's noised counts and kept eigenpairs) and the
// public facts f: never the data. A release without noised item counts
// (non-private methods, the rating methods' other statistics) gets no
// count judgement; one modelling fewer items than a list (covered_items,
// items_with_factors) is warned whatever its method.
func Warnings(r Report, m *model.Model, f Facts) []Warning {
	list := f.List
	if list <= 0 {
		list = DefaultList
	}
	var out []Warning
	method, items := "", 0
	if m != nil {
		method, items = m.Method, len(m.Items)
	}
	if items > 0 {
		list = min(list, items) // a catalogue shorter than the list
	}
	if sigma, ok := countSigma(r, method); ok && sigma > 0 && items > 0 {
		out = append(out, countWarnings(r, m, f.Users, sigma, NoiseEdge(sigma, items))...)
	}
	for _, key := range []string{"covered_items", "items_with_factors"} {
		if c, ok := number(r[key]); ok && c < float64(list) {
			out = append(out, Warning{WarnFewCovered, fmt.Sprintf(
				"only %g item(s) are modelled (%s): a list of %d needs at least %d; the rest of every list is the same for everyone (ranked by noised counts or biases). More users or a larger ε cover more items.",
				c, key, list, list)})
			break
		}
	}
	return out
}

// countSigma is σ of the release's item counts: the report's
// sigma_counts (dp-ease, dp-ials), or sigma for dp-popularity, whose one
// release is the counts.
func countSigma(r Report, method string) (float64, bool) {
	if s, ok := number(r["sigma_counts"]); ok {
		return s, true
	}
	if strings.HasPrefix(method, "dp-popularity") {
		return number(r["sigma"])
	}
	return 0, false
}

// countWarnings are the judgements on the noised item counts (σ, edge).
func countWarnings(r Report, m *model.Model, users int, sigma, edge float64) []Warning {
	var out []Warning
	// Each user adds at most 1 to an item's count: below the edge with
	// every user on it, no item can be told from the noise.
	if users > 0 && float64(users) < edge {
		out = append(out, Warning{WarnTooFewUsers, fmt.Sprintf(
			"too few users for this ε: the item counts' noise σ = %.3g puts the noise edge at %.4g, and with %d users no item's count (at most 1 per user) can reach it; the release is noise. Collect from more users (at least %.0f at this ε) or raise ε.",
			sigma, edge, users, math.Ceil(edge))})
	}
	if m != nil && strings.HasPrefix(m.Method, "dp-popularity") && m.ItemBias != nil {
		above := 0
		for _, c := range m.ItemBias {
			if c > edge {
				above++
			}
		}
		if above == 0 {
			out = append(out, Warning{WarnBelowNoise, fmt.Sprintf(
				"no item's noised count rises above the noise edge %.3g (σ = %.3g): the ranking is noise.", edge, sigma)})
		}
	}
	if m != nil && m.Params != nil {
		if kept, ok := number(m.Params["kept_eigenvalues"]); ok && kept == 0 {
			out = append(out, Warning{WarnBelowNoise, fmt.Sprintf(
				"no eigenpair of the noised item–item Gram rises above its noise edge (0 kept; σ_Gram = %v): the model has no item–item part, and every list is the noised counts' order, the same for everyone.",
				fmtNumber(r["sigma_gram"]))})
		}
	}
	return out
}

// number reads a report or parameter value as a number (as the method
// set it, or decoded from JSON).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, !math.IsNaN(x)
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

func fmtNumber(v any) string {
	if f, ok := number(v); ok {
		return fmt.Sprintf("%.3g", f)
	}
	return "?"
}
