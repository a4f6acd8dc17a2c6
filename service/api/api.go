// Package api holds the wire types of the privrec collection and serving
// API (`privrec serve`, docs/SERVICE.md, docs/openapi.yaml) and the strict
// decoders the server uses for every request body. It depends only on the
// standard library and privrec's model and privacy packages, so that a
// client — the reference Go client, or the same code compiled to
// WebAssembly — can share it without the server's storage drivers.
package api

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/release"
)

// Paths of the API.
const (
	PathConfig        = "/v1/config"
	PathEnroll        = "/v1/enroll"
	PathMe            = "/v1/me"
	PathMyState       = "/v1/me/state"
	PathMyToken       = "/v1/me/token"
	PathReports       = "/v1/reports"
	PathReleases      = "/v1/releases"
	PathLatestRelease = "/v1/releases/latest"
	PathAdminReleases = "/v1/admin/releases"
	PathAdminStats    = "/v1/admin/stats"
	PathHealth        = "/healthz" // readiness, as PathReady
	PathReady         = "/readyz"
	PathLive          = "/livez"
	PathMetrics       = "/metrics"
)

// Collection modes.
const (
	// ModeLocal: each report is randomized on the user's device (local DP);
	// the server charges each report's ε when it stores it, and releases
	// are post-processing of the reports, charged nothing.
	ModeLocal = "local"
	// ModeCentral: users send true ratings to a trusted curator; a report
	// is charged nothing, and every release charges each user whose data
	// it used her per-user ε of the release.
	ModeCentral = "central"
)

// MechanismNone is the mechanism name of the central mode (no
// randomization on the device).
const MechanismNone = "none"

// Ledger units: what a user's spent, remaining and budget are counted in.
const (
	// UnitEpsilon: pure ε, composed by basic composition (local mode:
	// every report is a pure ε-DP randomizer).
	UnitEpsilon = "epsilon"
	// UnitRho: zCDP ρ, composed by addition (central mode: Gaussian
	// releases compose exactly in ρ, a pure ε-DP release costs ε²/2).
	UnitRho = "rho"
)

// Budget policies of the central mode: what a release does about users
// whose remaining budget cannot pay for it.
const (
	// ExhaustedRefuse: the release is refused whole (nothing published
	// or charged) if it would take any user past her budget.
	ExhaustedRefuse = "refuse"
	// ExhaustedSkip: the release is trained on the users who can still
	// pay for it; the others' ratings are left out of it (and they are
	// not charged). Who is left out depends only on the public release
	// history (every charge is the same for every user a release covers).
	ExhaustedSkip = "skip"
)

// Scale is the declared rating scale. Levels > 0 declares a discrete
// scale Min, Min+step, …, Max of Levels values (randomized response needs
// one).
type Scale struct {
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Levels int     `json:"levels,omitempty"`
}

// Item is one catalogue item.
type Item struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
}

// Config is the published collection configuration (GET /v1/config):
// everything a client needs to randomize a report on the device, and what
// each report costs.
type Config struct {
	// Mode is ModeLocal or ModeCentral.
	Mode string `json:"mode"`
	// Mechanism is "rr" (randomized response over {missing, 1…d}),
	// "laplace" (the modified Laplace mechanism) or "none" (central mode).
	Mechanism string `json:"mechanism"`
	// ReportEpsilon is the per-user ε of one report: what the ledger
	// debits for each stored report (local mode; 0 in central mode).
	ReportEpsilon float64 `json:"report_epsilon"`
	// CellEpsilon is the randomizer's per-rating ε: ReportEpsilon less
	// MeanEpsilon, spread over the whole catalogue, which every report
	// covers (each cell, rated or missing, is randomized; basic
	// composition over the n cells and the mean report gives at most
	// ReportEpsilon).
	CellEpsilon float64 `json:"cell_epsilon,omitempty"`
	// MeanEpsilon (local mode) is the part of ReportEpsilon spent on the
	// mean report each report carries (Report.Mean: the device's own mean
	// rating on the declared scale with Laplace noise); 0: reports carry
	// none.
	MeanEpsilon float64 `json:"mean_epsilon,omitempty"`
	// MaxAbsMean bounds |mean| of a mean report (its noise exceeds the
	// bound with probability below 10⁻²⁶); larger values are refused.
	MaxAbsMean float64 `json:"max_abs_mean,omitempty"`
	// Budget is each user's total ε (the ledger refuses anything beyond);
	// in central mode, with BudgetDelta, the (ε, δ) the ledger's ρ budget
	// was converted from.
	Budget float64 `json:"budget"`
	// LedgerUnit is what the ledger counts: UnitEpsilon (local mode) or
	// UnitRho (central mode); a user's spent, remaining and budget in
	// GET /v1/me and in acknowledgements are in this unit.
	LedgerUnit string `json:"ledger_unit"`
	// BudgetDelta and BudgetRho (central mode): the budget (Budget,
	// BudgetDelta)-DP converted once to the zCDP ρ the ledger holds (the
	// largest ρ whose tight conversion gives it).
	BudgetDelta float64 `json:"budget_delta,omitempty"`
	BudgetRho   float64 `json:"budget_rho,omitempty"`
	// MaxDelta (central mode) is the largest δ a release may state; 0
	// means the default policy 1/(10·population of the release).
	MaxDelta float64 `json:"max_delta,omitempty"`
	// Exhausted (central mode) is the budget policy: ExhaustedRefuse or
	// ExhaustedSkip.
	Exhausted string `json:"exhausted,omitempty"`
	// PeriodSeconds (central mode), when > 0, makes the budget per
	// period: a user's releases within one period [k·P, (k+1)·P) of Unix
	// time together cost at most her budget, and the guarantee is stated
	// per period.
	PeriodSeconds int64 `json:"period_seconds,omitempty"`
	// MaxReports is how many reports fit into the budget (local mode).
	MaxReports int `json:"max_reports,omitempty"`
	// Scale is the declared rating scale.
	Scale Scale `json:"scale"`
	// Units are the units of report values: "levels" (rr: integers 1…d),
	// "normalised" (laplace: the scale mapped to [−1, 1], plus noise) or
	// "rating" (central mode: ratings on the scale).
	Units string `json:"units"`
	// MaxAbsValue bounds |value| of a laplace report (the noise exceeds it
	// with probability below 10⁻²⁶ per cell); larger values are refused.
	MaxAbsValue float64 `json:"max_abs_value,omitempty"`
	// Items is the declared catalogue; a report's values are in its order.
	Items []Item `json:"items"`
	// Guarantee is the guarantee of one report (local mode) or a
	// statement that the curator is trusted (central mode).
	Guarantee     privacy.Guarantee `json:"guarantee"`
	GuaranteeText string            `json:"guarantee_text"`
}

// Enrolment is the answer to POST /v1/enroll: the new user's ID and her
// secret token (shown once; the server keeps only its hash).
type Enrolment struct {
	User  string `json:"user"`
	Token string `json:"token"`
}

// Report is the body of POST /v1/reports.
type Report struct {
	// ID is chosen by the client (1–64 characters of A–Z a–z 0–9 . _ : -);
	// resubmitting the same ID returns the original acknowledgement and
	// stores and charges nothing.
	ID string `json:"id"`
	// Epsilon is the per-report ε the client spent (must equal the
	// configuration's report_epsilon; 0 or absent in central mode).
	Epsilon float64 `json:"epsilon"`
	// Values has one entry per catalogue item, in catalogue order: nil
	// (JSON null) for a missing report, else the value in the
	// configuration's units.
	Values []*float64 `json:"values"`
	// Mean is the mean report: the device's own mean rating on the
	// declared scale (the scale's midpoint when she rated nothing) plus
	// Laplace noise at the configuration's mean_epsilon, unclamped.
	// Required when mean_epsilon > 0, refused otherwise.
	Mean *float64 `json:"mean,omitempty"`
}

// Ack acknowledges a stored report. Spent and Remaining are the user's
// ledger right after this report was charged.
type Ack struct {
	ID        string    `json:"id"`
	Accepted  bool      `json:"accepted"`
	Seq       int64     `json:"seq"`
	Epsilon   float64   `json:"epsilon"`
	Spent     float64   `json:"spent"`
	Remaining float64   `json:"remaining"`
	Budget    float64   `json:"budget"`
	Received  time.Time `json:"received"`
}

// HeaderReplayed is set to "true" on the answer to a resubmitted report
// (same ID, same content): the body is the original acknowledgement.
const HeaderReplayed = "Idempotent-Replayed"

// Status is GET /v1/me: the caller's own ledger, in the configuration's
// ledger unit (Unit). With a per-period budget, Spent and Remaining are
// those of the current period, which began at PeriodStart.
type Status struct {
	User        string     `json:"user"`
	Spent       float64    `json:"spent"`
	Remaining   float64    `json:"remaining"`
	Budget      float64    `json:"budget"`
	Reports     int64      `json:"reports"`
	Unit        string     `json:"unit,omitempty"`
	PeriodStart *time.Time `json:"period_start,omitempty"`
}

// StoredReport is one of the caller's own reports (GET /v1/reports,
// GET /v1/reports/{id}).
type StoredReport struct {
	ID       string     `json:"id"`
	Seq      int64      `json:"seq"`
	Epsilon  float64    `json:"epsilon"`
	Received time.Time  `json:"received"`
	Values   []*float64 `json:"values"`
	// Mean is the report's mean report (absent when it carried none).
	Mean *float64 `json:"mean,omitempty"`
}

// Error is every error answer. Field names the offending request field
// (JSON name, with an index for array elements: "values[3]").
type Error struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"error"`
	Field   string `json:"field,omitempty"`
	// Budget facts of a refusal for lack of budget (code budget_exceeded).
	Spent     *float64 `json:"spent,omitempty"`
	Remaining *float64 `json:"remaining,omitempty"`
	Budget    *float64 `json:"budget,omitempty"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s (field %s, HTTP %d %s)", e.Message, e.Field, e.Status, e.Code)
	}
	return fmt.Sprintf("%s (HTTP %d %s)", e.Message, e.Status, e.Code)
}

// Error codes.
const (
	CodeMalformedJSON  = "malformed_json"
	CodeUnknownField   = "unknown_field"
	CodeDuplicateField = "duplicate_field"
	CodeMediaType      = "unsupported_media_type"
	CodeWrongType      = "wrong_type"
	CodeMissingField   = "missing_field"
	CodeInvalidValue   = "invalid_value"
	CodeOutOfRange     = "out_of_range"
	CodeBadEpsilon     = "bad_epsilon"
	CodeTooLarge       = "too_large"
	CodeUnauthorized   = "unauthorized"
	CodeForbidden      = "forbidden"
	CodeNotFound       = "not_found"
	CodeBudgetExceeded = "budget_exceeded"
	CodeIDConflict     = "id_conflict"
	CodeRateLimited    = "rate_limited"
	CodeMethod         = "method_not_allowed"
	CodeUnavailable    = "unavailable"
	CodeInternal       = "internal"
	CodeTrainFailed    = "train_failed"
)

// ReleaseRequest is the body of POST /v1/admin/releases.
type ReleaseRequest struct {
	// Method is a registered training method (ldp-rr or ldp-laplace in
	// local mode, matching the collection's mechanism).
	Method string `json:"method"`
	// Params are the method's parameters by JSON name (as in experiment
	// files), e.g. {"max_rank": 10, "debias": true}.
	Params map[string]any `json:"params,omitempty"`
	// Epsilon and Delta are the release's privacy parameters (central
	// mode; ignored in local mode, where the reports carry the guarantee).
	Epsilon float64 `json:"epsilon,omitempty"`
	Delta   float64 `json:"delta,omitempty"`
	// Seed seeds the non-private randomness (0: random).
	Seed uint64 `json:"seed,omitempty"`
}

// Release is a published release (GET /v1/releases/latest,
// GET /v1/releases/{id}): the public part only.
type Release struct {
	ID            int64             `json:"id"`
	Created       time.Time         `json:"created"`
	Method        string            `json:"method"`
	Guarantee     privacy.Guarantee `json:"guarantee"`
	GuaranteeText string            `json:"guarantee_text"`
	// Ledger says what the release cost and how the users' ledgers cover
	// it.
	Ledger string         `json:"ledger"`
	Report map[string]any `json:"report,omitempty"`
	// Warnings say where the release's noise drowns its statistic
	// (release.Warnings on its report and public model: nothing above the
	// noise edge, fewer covered items than a list); empty when none.
	Warnings []release.Warning `json:"warnings,omitempty"`
	Model    PublicModel       `json:"model"`
}

// ReleaseResult answers POST /v1/admin/releases: the published release's
// ID and what it charged.
type ReleaseResult struct {
	ID int64 `json:"id"`
	// UsersCharged is how many users' ledgers were debited, and MaxCharge
	// the largest single debit in the ledger's Unit (0 in local mode);
	// UsersSkipped how many users who sent reports the release left out
	// because their budget could not pay for it (policy skip). The
	// answer goes to the admin only; the public release holds no count.
	UsersCharged int     `json:"users_charged"`
	UsersSkipped int     `json:"users_skipped,omitempty"`
	MaxCharge    float64 `json:"max_charge"`
	Unit         string  `json:"unit,omitempty"`
	Reports      int64   `json:"reports"`
	Seconds      float64 `json:"seconds"`
	// Warnings (central mode) are the release's warnings judged with the
	// population it covered (release.Warnings with Facts.Users: also "too
	// few users for this ε"); for the admin only, like the counts.
	Warnings []release.Warning `json:"warnings,omitempty"`
	Release  Release           `json:"release"`
}

// Stats is `privrec serve stats` and GET /v1/admin/stats.
type Stats struct {
	Users    int64   `json:"users"`
	Reports  int64   `json:"reports"`
	Releases int64   `json:"releases"`
	MaxSpent float64 `json:"max_spent"`
	Budget   float64 `json:"budget"`
	// Unit is the ledger unit of MaxSpent and Budget.
	Unit string `json:"unit,omitempty"`
}

// Finite replaces non-finite floats (which JSON cannot carry) in a report
// or parameter map by strings ("+Inf", "NaN"), recursively.
func Finite(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = finiteValue(v)
	}
	return out
}

func finiteValue(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return fmt.Sprint(x)
		}
	case float32:
		return finiteValue(float64(x))
	case map[string]any:
		return Finite(x)
	case []float64:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = finiteValue(y)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = finiteValue(y)
		}
		return out
	}
	return v
}

// AppendJSON appends what json.Marshal writes for a, without reflection
// (the server answers every report with one; TestAckAppendJSON and
// FuzzAckAppendJSON compare the two). ok is false — and nothing is
// appended — when a holds something only json.Marshal words right: an
// ID needing escapes, a non-finite number, a year outside 0–9999.
func (a *Ack) AppendJSON(b []byte) ([]byte, bool) {
	if !plainJSON(a.ID) || a.Received.Year() < 0 || a.Received.Year() > 9999 {
		return b, false
	}
	for _, x := range [...]float64{a.Epsilon, a.Spent, a.Remaining, a.Budget} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return b, false
		}
	}
	b = append(b, `{"id":"`...)
	b = append(b, a.ID...)
	b = append(b, `","accepted":`...)
	b = strconv.AppendBool(b, a.Accepted)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, a.Seq, 10)
	b = append(b, `,"epsilon":`...)
	b = appendJSONFloat(b, a.Epsilon)
	b = append(b, `,"spent":`...)
	b = appendJSONFloat(b, a.Spent)
	b = append(b, `,"remaining":`...)
	b = appendJSONFloat(b, a.Remaining)
	b = append(b, `,"budget":`...)
	b = appendJSONFloat(b, a.Budget)
	b = append(b, `,"received":"`...)
	b = a.Received.AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...), true
}

// plainJSON: s is written by json.Marshal as itself between quotes
// (printable ASCII, none of " \ < > &).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// appendJSONFloat writes a finite float64 as encoding/json does: 'f'
// form, or 'e' form with a two-digit negative exponent shortened
// (1e-07 → 1e-7) outside [1e-6, 1e21).
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
