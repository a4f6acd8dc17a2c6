// Package privacy holds what privrec promises to the people in the data:
// the Guarantee every model and released dataset carries. Its
// subpackages provide the randomness (noise), the mechanisms that carry
// their guarantee (mechanism), composition (accountant) and the empirical
// audit (audit).
package privacy

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Unit is what one neighbouring dataset differs in.
type Unit string

// Notion is where the noise is added and who may see what.
type Notion string

// Status says how the guarantee is backed.
type Status string

const (
	// UnitEntry: neighbours differ in one rating.
	UnitEntry Unit = "entry"
	// UnitUser: neighbours differ in all ratings of one user.
	UnitUser Unit = "user"

	// Central: a trusted curator adds the noise.
	Central Notion = "central"
	// Joint: each user's own output may depend on her data; everyone else's
	// outputs are DP in it.
	Joint Notion = "joint"
	// Local: randomised on the user's side before collection.
	Local Notion = "local"

	// Proven follows from a standard theorem whose conditions the code enforces.
	Proven Status = "proven"
	// AsClaimed is the source paper's claim that the standard proof does not cover.
	AsClaimed Status = "as-claimed"
	// None: something is released without noise.
	None Status = "none"
)

// Guarantee is the differential-privacy statement attached to a model or a
// released dataset. Epsilon is +Inf when nothing is promised.
type Guarantee struct {
	Epsilon float64 `json:"epsilon"`
	Delta   float64 `json:"delta"`
	// Rho is the zCDP parameter when zCDP is the native accounting (0 otherwise).
	Rho    float64 `json:"rho,omitempty"`
	Unit   Unit    `json:"unit"`
	Notion Notion  `json:"notion"`
	Status Status  `json:"status"`
	// Relation states the neighbouring relation in words: what two
	// neighbouring datasets differ in and what is public by assumption
	// (e.g. "one rating's value changes; which ratings exist is public").
	Relation string `json:"relation,omitempty"`
	// ClaimedEpsilon is the source paper's ε where it differs from Epsilon (0 otherwise).
	ClaimedEpsilon float64 `json:"claimed_epsilon,omitempty"`
	Note           string  `json:"note,omitempty"`
	// Reproducible is true when the noise came from a seeded stream (an
	// experiment), which must never be used for a real release.
	Reproducible bool `json:"reproducible_noise,omitempty"`
}

// NoPrivacy is the guarantee of a method that adds no noise.
func NoPrivacy(unit Unit, note string) Guarantee {
	return Guarantee{Epsilon: math.Inf(1), Unit: unit, Notion: Central, Status: None, Note: note}
}

// Private reports whether the guarantee promises anything (finite ε and a status other than none).
func (g Guarantee) Private() bool {
	return g.Status != None && !math.IsInf(g.Epsilon, 1) && !math.IsNaN(g.Epsilon)
}

// Validate checks that the guarantee is well formed: a known unit, notion
// and status; ε ≥ 0 (or +Inf), 0 ≤ δ < 1, ρ ≥ 0, none of them NaN; a
// proven or as-claimed guarantee has a finite ε; a claimed ε is finite and
// non-negative.
func (g Guarantee) Validate() error {
	switch g.Unit {
	case UnitEntry, UnitUser:
	default:
		return fmt.Errorf("guarantee: unknown unit %q", g.Unit)
	}
	switch g.Notion {
	case Central, Joint, Local:
	default:
		return fmt.Errorf("guarantee: unknown notion %q", g.Notion)
	}
	switch g.Status {
	case Proven, AsClaimed, None:
	default:
		return fmt.Errorf("guarantee: unknown status %q", g.Status)
	}
	switch {
	case math.IsNaN(g.Epsilon) || g.Epsilon < 0:
		return fmt.Errorf("guarantee: ε = %v", g.Epsilon)
	case math.IsNaN(g.Delta) || g.Delta < 0 || g.Delta >= 1:
		return fmt.Errorf("guarantee: δ = %v", g.Delta)
	case math.IsNaN(g.Rho) || g.Rho < 0 || math.IsInf(g.Rho, 0):
		return fmt.Errorf("guarantee: ρ = %v", g.Rho)
	case math.IsNaN(g.ClaimedEpsilon) || g.ClaimedEpsilon < 0 || math.IsInf(g.ClaimedEpsilon, 0):
		return fmt.Errorf("guarantee: claimed ε = %v", g.ClaimedEpsilon)
	case g.Status != None && math.IsInf(g.Epsilon, 1):
		return fmt.Errorf("guarantee: status %s with an infinite ε", g.Status)
	}
	return nil
}

type guaranteeJSON struct {
	Epsilon        *float64 `json:"epsilon"`
	Delta          float64  `json:"delta"`
	Rho            float64  `json:"rho,omitempty"`
	Unit           Unit     `json:"unit"`
	Notion         Notion   `json:"notion"`
	Status         Status   `json:"status"`
	Relation       string   `json:"relation,omitempty"`
	ClaimedEpsilon float64  `json:"claimed_epsilon,omitempty"`
	Note           string   `json:"note,omitempty"`
	Reproducible   bool     `json:"reproducible_noise,omitempty"`
}

// JSONNumber returns x for a JSON field, or nil (null) when x is infinite
// or NaN: JSON has no infinities, and privrec writes an unbounded ε or
// estimate as null.
func JSONNumber(x float64) *float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return nil
	}
	return &x
}

// MarshalJSON writes an infinite ε as null (JSON has no infinity).
func (g Guarantee) MarshalJSON() ([]byte, error) {
	j := guaranteeJSON{Epsilon: JSONNumber(g.Epsilon), Delta: g.Delta, Rho: g.Rho, Unit: g.Unit, Notion: g.Notion, Status: g.Status, Relation: g.Relation,
		ClaimedEpsilon: g.ClaimedEpsilon, Note: g.Note, Reproducible: g.Reproducible}
	return json.Marshal(j)
}

// UnmarshalJSON reads null ε as +Inf.
func (g *Guarantee) UnmarshalJSON(b []byte) error {
	var j guaranteeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*g = Guarantee{Epsilon: math.Inf(1), Delta: j.Delta, Rho: j.Rho, Unit: j.Unit, Notion: j.Notion, Status: j.Status, Relation: j.Relation,
		ClaimedEpsilon: j.ClaimedEpsilon, Note: j.Note, Reproducible: j.Reproducible}
	if j.Epsilon != nil {
		g.Epsilon = *j.Epsilon
	}
	return nil
}

// String renders the guarantee in plain words.
func (g Guarantee) String() string {
	var b strings.Builder
	who := map[Unit]string{UnitEntry: "any single rating", UnitUser: "all the ratings of any one user"}[g.Unit]
	if who == "" {
		who = string(g.Unit)
	}
	if !g.Private() {
		fmt.Fprintf(&b, "No differential-privacy guarantee (status %s)", g.Status)
		if g.ClaimedEpsilon > 0 {
			fmt.Fprintf(&b, "; the source paper claims ε = %g", g.ClaimedEpsilon)
		}
		b.WriteString(".")
	} else {
		params := fmt.Sprintf("ε = %.4g", g.Epsilon)
		if g.Delta > 0 {
			params += fmt.Sprintf(", δ = %.3g", g.Delta)
		}
		if g.Rho > 0 {
			params += fmt.Sprintf(" (from ρ = %.4g zCDP)", g.Rho)
		}
		notion := map[Notion]string{
			Central: "central differential privacy (a trusted curator added the noise)",
			Joint:   "joint differential privacy (each user's own recommendations use her data; what anyone else sees is private in it)",
			Local:   "local differential privacy (randomised on the user's device before collection)",
		}[g.Notion]
		if notion == "" {
			notion = string(g.Notion)
		}
		fmt.Fprintf(&b, "(%s) %s protecting %s; status %s", params, notion, who, g.Status)
		if g.ClaimedEpsilon > 0 && g.ClaimedEpsilon != g.Epsilon {
			fmt.Fprintf(&b, "; the source paper claims ε = %g", g.ClaimedEpsilon)
		}
		b.WriteString(".")
		if g.Relation != "" {
			fmt.Fprintf(&b, " Neighbouring datasets: %s.", strings.TrimSuffix(g.Relation, "."))
		}
	}
	if g.Note != "" {
		b.WriteString(" ")
		b.WriteString(g.Note)
	}
	if g.Reproducible {
		b.WriteString(" WARNING: the noise came from a seeded, reproducible stream; this is an experiment, not a release.")
	}
	return b.String()
}

// The neighbouring relations privrec's methods are proven under, in the
// words a Guarantee's Relation carries.
const (
	// RelationRatingValue: seed 000's and seed 004's entry-level relation.
	RelationRatingValue = "one rating's value changes; which ratings exist (the users, the items and who rated what) is public"
	// RelationUserReplace: user-level relation of the joint-DP methods.
	RelationUserReplace = "one user's ratings are replaced by any others (within the per-user bounds); the number of users and the item catalogue are public, which items a user rated is not"
	// RelationUserAddRemove: user-level add/remove relation.
	RelationUserAddRemove = "one user's ratings are added or removed; the item catalogue is public"
	// RelationLocalReport: local DP, one report of one user's device.
	RelationLocalReport = "one user's input to one report changes (any ratings of the declared catalogue on the declared scale); the population and catalogue are public"
)
