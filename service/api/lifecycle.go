package api

import (
	"encoding/json"
	"time"
)

// Paths of the lifecycle and admin user endpoints.
const (
	// PathMyExport: GET, everything stored about the caller.
	PathMyExport = "/v1/me/export"
	// PathAdminUsers + "/{id}": DELETE a user; + "/{id}/export": GET
	// her export.
	PathAdminUsers = "/v1/admin/users"
)

// Pagination of listings (GET /v1/reports): limit defaults to
// DefaultPageLimit and may not exceed MaxPageLimit; cursor is the
// next_cursor of the previous page, opaque to clients.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// ReportPage is one page of GET /v1/reports. NextCursor, when set, asks
// for the next page (?cursor=…); absent on the last page.
type ReportPage struct {
	Reports    []StoredReport `json:"reports"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// RetainedWhy says, in the answer of every deletion and export, what a
// deleted user's record still holds and why.
const RetainedWhy = "Your reports, your per-release states and your token are deleted. What remains is your privacy ledger: " +
	"the ε (ρ) you spent, your budget, how many reports were counted and each release's charge. " +
	"It stays because the releases published before you left were computed with your data, and their guarantee is only honest if what you spent stays counted. " +
	"It holds no report value, no rating and no token, and cannot be used to sign in."

// Retained is what stays of a deleted user: her ledger.
type Retained struct {
	// Spent is her lifetime spending in the ledger's unit, Budget her
	// budget; ReportsCounted how many reports the ledger counted (deleted
	// or not).
	Spent          float64 `json:"spent"`
	Budget         float64 `json:"budget"`
	Unit           string  `json:"unit"`
	ReportsCounted int64   `json:"reports_counted"`
	// ReleaseCharges are the charges of central or joint releases.
	ReleaseCharges []ReleaseCharge `json:"release_charges"`
	Why            string          `json:"why"`
}

// ReleaseCharge is one release's debit of a user's ledger.
type ReleaseCharge struct {
	Release int64   `json:"release"`
	Charged float64 `json:"charged"`
}

// Deletion answers DELETE /v1/me and DELETE /v1/admin/users/{id}.
type Deletion struct {
	User    string    `json:"user"`
	Deleted time.Time `json:"deleted"`
	// ReportsDeleted and StatesDeleted count the rows deleted by this
	// call (0 when she had been deleted before: AlreadyDeleted).
	ReportsDeleted int64    `json:"reports_deleted"`
	StatesDeleted  int64    `json:"states_deleted"`
	TokenRevoked   bool     `json:"token_revoked"`
	AlreadyDeleted bool     `json:"already_deleted"`
	Retained       Retained `json:"retained"`
}

// ExportState is a user's own state in one release (joint DP).
type ExportState struct {
	Release int64           `json:"release"`
	State   json.RawMessage `json:"state"`
}

// ExportLedger is a user's ledger in an export.
type ExportLedger struct {
	Spent     float64 `json:"spent"`
	Remaining float64 `json:"remaining"`
	Budget    float64 `json:"budget"`
	Unit      string  `json:"unit"`
	Reports   int64   `json:"reports"`
	// ErasedSpent and ErasedReports: the charge and count of her reports
	// deleted when she left (counted in Spent and Reports).
	ErasedSpent   float64 `json:"erased_spent"`
	ErasedReports int64   `json:"erased_reports"`
}

// Export answers GET /v1/me/export and GET /v1/admin/users/{id}/export:
// everything the server stores about one user (her token only as a
// SHA-256, which is not exported).
type Export struct {
	User           string          `json:"user"`
	Created        time.Time       `json:"created"`
	Deleted        *time.Time      `json:"deleted,omitempty"`
	Ledger         ExportLedger    `json:"ledger"`
	Reports        []StoredReport  `json:"reports"`
	States         []ExportState   `json:"states"`
	ReleaseCharges []ReleaseCharge `json:"release_charges"`
	// Retained, for a deleted user, says what stays and why.
	Retained string `json:"retained,omitempty"`
}
