package ldp

import (
	"fmt"
	"math"
	"strconv"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
)

// MeanReporter is the second part of a device's report, beside the
// randomized vector: her own mean rating, with Laplace noise. The per-cell
// reports cannot tell the service even the average rating at the small
// per-cell ε a whole-catalogue report affords (at 8/3 706 per cell the
// debiased count of rated cells has a standard deviation several times the
// count), so without it the recovery has no level to fall back on; with it
// the service averages the clients' means into μ̃ and shrinks the recovered
// matrix toward μ̃ (recovery.Shrink).
//
// The device's mean is that of her ratings on the declared scale (the
// scale's midpoint when she has none — a declared value, never read from
// anyone's ratings), so it lies in [Min, Max] whatever her data: ℓ1
// sensitivity Max − Min between any two of her vectors, and the report is
// ε-DP for her whole vector (and so for any one of her ratings). The noise
// is lattice-snapped exact Laplace from the bounded-time sampler (as the
// modified Laplace cells), calibrated by mechanism.LaplaceScale so that the
// lattice rounding is paid for.
type MeanReporter struct {
	eps, scale float64
	sc         Scale
}

// NewMeanReporter returns the mean report at ε on the declared scale sc.
func NewMeanReporter(eps float64, sc Scale) (*MeanReporter, error) {
	if err := checkEpsilon(eps); err != nil {
		return nil, fmt.Errorf("ldp: mean report: %w", err)
	}
	if err := sc.validate(); err != nil {
		return nil, err
	}
	b, err := mechanism.LaplaceScale(eps, sc.Max-sc.Min, 1)
	if err != nil {
		return nil, fmt.Errorf("ldp: mean report at ε = %g: %w", eps, err)
	}
	return &MeanReporter{eps: eps, scale: b, sc: sc}, nil
}

// Epsilon is the report's ε (per user, and per rating).
func (m *MeanReporter) Epsilon() float64 { return m.eps }

// Variance is the variance of the noise one mean report carries
// (2·b², b the effective Laplace scale), on the rating scale.
func (m *MeanReporter) Variance() float64 {
	b := noise.EffectiveLaplaceScale(m.scale)
	return 2 * b * b
}

// Mean is the value the device reports before noise: the mean of the
// present cells of in (original scale), or the scale's midpoint when none
// is present. A rating outside the scale is an error.
func (m *MeanReporter) Mean(in []float64) (float64, error) {
	var s float64
	var n int
	for j, v := range in {
		if IsMissing(v) {
			continue
		}
		if math.IsInf(v, 0) || v < m.sc.Min || v > m.sc.Max {
			return 0, fmt.Errorf("ldp: item %d: rating %v outside the scale [%v, %v]", j, v, m.sc.Min, m.sc.Max)
		}
		s += v
		n++
	}
	if n == 0 {
		return (m.sc.Min + m.sc.Max) / 2, nil
	}
	return math.Max(m.sc.Min, math.Min(m.sc.Max, s/float64(n))), nil
}

// Report draws the device's mean report from s: Mean(in) plus Laplace
// noise, on the original rating scale (not clamped: the service's average
// of unclamped reports is unbiased).
func (m *MeanReporter) Report(s *noise.Source, in []float64) (float64, error) {
	x, err := m.Mean(in)
	if err != nil {
		return 0, err
	}
	return noise.SnapLaplaceFixedTime(s, x, m.scale), nil
}

// Guarantee is the mean report's own guarantee: ε-DP, local, unit user.
func (m *MeanReporter) Guarantee() privacy.Guarantee {
	return privacy.Guarantee{Epsilon: m.eps, Unit: privacy.UnitUser, Notion: privacy.Local, Status: privacy.Proven,
		Note: fmt.Sprintf("The device's own mean rating on the declared scale [%g, %g] (ℓ1 sensitivity %g), lattice-snapped Laplace noise of scale %.4g.",
			m.sc.Min, m.sc.Max, m.sc.Max-m.sc.Min, noise.EffectiveLaplaceScale(m.scale))}
}

// Guarantees composes a report of n cells randomized by r with the mean
// report at meanEps (0: none) by basic composition: one rating changes one
// cell and the mean, so per rating ε_cell + ε_mean; the whole vector
// changes every cell and the mean, so per user n·ε_cell + ε_mean.
func Guarantees(r Randomizer, n int, meanEps float64) (perRating, perUser privacy.Guarantee, err error) {
	perRating, perUser = r.PerRating(), r.PerUser(n)
	if meanEps == 0 {
		return perRating, perUser, nil
	}
	if perRating.Epsilon, err = accountant.BasicComposition(perRating.Epsilon, meanEps); err != nil {
		return perRating, perUser, fmt.Errorf("ldp: composing the mean report: %w", err)
	}
	if perUser.Epsilon, err = accountant.BasicComposition(perUser.Epsilon, meanEps); err != nil {
		return perRating, perUser, fmt.Errorf("ldp: composing the mean report: %w", err)
	}
	add := fmt.Sprintf(" With the device's mean report at ε = %s (basic composition).", strconv.FormatFloat(meanEps, 'g', -1, 64))
	perRating.Note += add
	perUser.Note += add
	return perRating, perUser, nil
}

// MeanShare is the default share of a whole report's ε (cells and mean)
// spent on the mean report, and MaxDefaultMeanEpsilon caps the default:
// beyond it the mean report's noise (a Laplace scale of 1/16 of the rating
// range per client) no longer matters next to the spread of the users'
// means.
const (
	MeanShare             = 1.0 / 8
	MaxDefaultMeanEpsilon = 16.0
)

// DefaultMeanEpsilon is the ε of the mean report when none is chosen
// (`privrec collect`, simulations): an eighth of the whole report, i.e. a
// seventh of what its n cells at per-cell ε cost, at most
// MaxDefaultMeanEpsilon. A fixed ε would be too little for a small
// population (at ε = 1 the average of 138 restaurant-goers' mean reports
// on a 0–2 scale has a standard deviation of 0.24) and needlessly small
// beside a generous cell budget.
func DefaultMeanEpsilon(cellEps float64, n int) float64 {
	return math.Min(MaxDefaultMeanEpsilon, float64(n)*cellEps*MeanShare/(1-MeanShare))
}

// MeanPrefix starts a mean-report line of a collect file:
// "#mean \t user \t value". The '#' makes every rating reader skip it as a
// comment; ReadCollection and CountReports read it.
const MeanPrefix = "#mean\t"

// AppendMeanLine appends the mean-report line of user (with its newline).
func AppendMeanLine(b []byte, user string, v float64) []byte {
	b = append(b, MeanPrefix...)
	b = append(b, user...)
	b = append(b, '\t')
	b = AppendReport(b, v)
	return append(b, '\n')
}
