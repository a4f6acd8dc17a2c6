package accountant

import (
	"fmt"
	"math"
	"strings"

	"github.com/privrec/privrec/privacy"
)

// Compose returns the guarantee of releasing all the given results of
// mechanisms run on the same data (sequential composition). All must have
// the same unit. The result is the better of
//   - basic composition: (Σε, Σδ);
//   - zCDP composition, when every part is zCDP (Rho > 0) or pure (δ = 0,
//     ρ = ε²/2) and delta > 0: ρ = Σρ_i, converted to (ε, delta) tightly.
//
// Status is the weakest of the parts (none < as-claimed < proven); a part
// without a guarantee makes the whole status none. The notion is central
// if any part is central, else joint if any part is joint, else local.
// Where any part carries a paper's claim, ClaimedEpsilon is the basic
// composition of the claims (ε where a part has none). Reproducible is
// true if any part's noise was.
func Compose(delta float64, parts ...privacy.Guarantee) (privacy.Guarantee, error) {
	if len(parts) == 0 {
		return privacy.Guarantee{}, invalid("nothing to compose")
	}
	if delta != 0 {
		if err := CheckDelta(delta); err != nil {
			return privacy.Guarantee{}, err
		}
	}
	out := privacy.Guarantee{Unit: parts[0].Unit, Status: privacy.Proven, Notion: privacy.Local}
	var sumEps, sumDelta, rho, claimed float64
	zcdp, anyClaim := true, false
	var notes []string
	for i, g := range parts {
		if g.Unit != out.Unit {
			return privacy.Guarantee{}, invalid("part %d protects %q, part 0 %q: units must match", i, g.Unit, out.Unit)
		}
		out.Reproducible = out.Reproducible || g.Reproducible
		switch {
		case g.Notion == privacy.Central:
			out.Notion = privacy.Central
		case g.Notion == privacy.Joint && out.Notion != privacy.Central:
			out.Notion = privacy.Joint
		}
		if !g.Private() {
			out.Status = privacy.None
			continue
		}
		if g.Status == privacy.AsClaimed && out.Status == privacy.Proven {
			out.Status = privacy.AsClaimed
		}
		if math.IsNaN(g.Epsilon) || g.Epsilon < 0 || math.IsNaN(g.Delta) || g.Delta < 0 || g.Delta >= 1 || math.IsNaN(g.Rho) || g.Rho < 0 {
			return privacy.Guarantee{}, invalid("part %d has invalid parameters %+v", i, g)
		}
		sumEps = addUp(sumEps, g.Epsilon)
		if g.Delta > 0 {
			sumDelta = addUp(sumDelta, g.Delta)
		}
		c := g.Epsilon
		if g.ClaimedEpsilon > 0 {
			c, anyClaim = g.ClaimedEpsilon, true
		}
		claimed += c
		switch {
		case g.Rho > 0:
			rho = addUp(rho, g.Rho)
		case g.Delta == 0:
			rho = addUp(rho, up(g.Epsilon*g.Epsilon/2))
		default:
			zcdp = false
		}
		if g.Note != "" {
			notes = append(notes, g.Note)
		}
	}
	if out.Status == privacy.None {
		out.Epsilon = math.Inf(1)
		out.Note = "A part of the release carries no privacy guarantee."
		return out, nil
	}
	out.Epsilon, out.Delta = sumEps, math.Min(sumDelta, 1)
	how := "basic composition"
	if zcdp && delta > 0 && rho > 0 {
		e, err := ZCDPToApprox(rho, delta)
		if err != nil {
			return privacy.Guarantee{}, fmt.Errorf("composing: %w", err)
		}
		out.Rho = rho
		if e < sumEps || sumDelta > delta {
			out.Epsilon, out.Delta = e, delta
			how = "zCDP composition"
		}
	}
	if anyClaim {
		out.ClaimedEpsilon = claimed
	}
	out.Note = fmt.Sprintf("%d releases, %s.", len(parts), how)
	if len(notes) > 0 {
		out.Note += " Parts: " + strings.Join(notes, " | ")
	}
	return out, nil
}
