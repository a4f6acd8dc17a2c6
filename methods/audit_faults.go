package methods

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/statistic"
	"github.com/privrec/privrec/statistic/gram"
	"github.com/privrec/privrec/topn"
)

// AuditFault names a safeguard of a method's analysis that an audit may
// remove (Env.Fault, AuditOptions.Fault): the method then releases a
// statistic its declared sensitivity no longer bounds, while claiming its
// budget — a fault the whole-artefact audit must catch. Only `privrec
// audit` sets one.
type AuditFault string

const (
	// NoFault is the method as written.
	NoFault AuditFault = ""
	// FaultGramUnnormalised removes the per-user normalisation of the
	// item–item Gram (dp-ease, and dp-ials' initial factors): each user's
	// part x xᵀ is summed as it is, not scaled to ℓ2 norm ≤ gram-norm,
	// while the release is still calibrated to √2·gram-norm.
	FaultGramUnnormalised AuditFault = "gram-unnormalised"
)

// AuditFaults lists the faults an audit can inject and the methods that
// have the safeguard each removes.
var AuditFaults = map[AuditFault][]string{
	FaultGramUnnormalised: {"dp-ease", "dp-ials"},
}

// check refuses a fault the method named has no safeguard for (nothing
// would be removed, and an audit would "pass" a fault never injected).
func (f AuditFault) check(method string) error {
	if f == NoFault {
		return nil
	}
	ms, ok := AuditFaults[f]
	if !ok {
		return fmt.Errorf("%s: unknown fault %q (known: %s)", method, f, FaultGramUnnormalised)
	}
	if !slices.Contains(ms, method) {
		return fmt.Errorf("%s: fault %q removes a safeguard of %v only", method, f, ms)
	}
	return nil
}

// gram returns the statistic the Gram release sums: st itself, or with
// FaultGramUnnormalised the same columns summed without the per-user
// normalisation while the declared sensitivity stays st's.
func (f AuditFault) gram(st *gram.Gram) (statistic.Contribution, error) {
	if f != FaultGramUnnormalised {
		return st, nil
	}
	if st.ColWeights != nil {
		return nil, fmt.Errorf("fault %q: defined for unit column weights only (--weight-exp 0)", f)
	}
	// With unit column weights a user's scale is min(1, norm/√(n(n+1)/2)):
	// at this norm it is 1 for every user (up to 10¹⁵⁰ covered items).
	raw, err := gram.NewGram(st.Columns, nil, 1e150)
	if err != nil {
		return nil, err
	}
	return unnormalisedGram{Gram: raw, spec: st.Spec()}, nil
}

// unnormalisedGram sums every user's x xᵀ unscaled and declares the
// normalised statistic's sensitivity (FaultGramUnnormalised).
type unnormalisedGram struct {
	*gram.Gram
	spec statistic.Spec
}

// Spec is the normalised statistic's: the fault keeps its calibration.
func (u unnormalisedGram) Spec() statistic.Spec { return u.spec }

// keyed returns env whose tap sees every draw labelled with keys()
// (mechanism.Draw.Keys), computed only when there is a tap.
func (e Env) keyed(keys func() []string) Env {
	if e.Tap == nil {
		return e
	}
	tap, k := e.Tap, keys()
	e.Tap = func(d mechanism.Draw) error {
		if len(k) == len(d.Noised) {
			d.Keys = k
		}
		return tap(d)
	}
	return e
}

// gramKeys names the coordinates of a Gram release over cols (m covered
// columns, upper triangle in statistic.UpperIndex order) by their items,
// "i,j" with i ≤ j the catalogue indices: the same entry has the same key
// whatever the columns' order.
func gramKeys(cols topn.Columns, m int) []string {
	item := make([]int, m)
	for j, c := range cols {
		if c >= 0 && int(c) < m {
			item[c] = j
		}
	}
	keys := make([]string, m*(m+1)/2)
	for p := range m {
		for q := p; q < m; q++ {
			a, b := min(item[p], item[q]), max(item[p], item[q])
			keys[statistic.UpperIndex(m, p, q)] = strconv.Itoa(a) + "," + strconv.Itoa(b)
		}
	}
	return keys
}
