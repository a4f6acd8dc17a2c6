// Package store is the durable storage of `privrec serve`: users (with
// only a hash of their token), their privacy ledgers, the reports they
// submitted, the releases published and each user's own per-release
// state. One interface, two implementations over database/sql: embedded
// SQLite (modernc.org/sqlite; WAL, synchronous=FULL: a commit is on disk
// before it returns) and PostgreSQL (pgx; synchronous commits).
//
// The ledger is kept in integer nano-units of the collection's ledger
// unit (ε in local mode, zCDP ρ in central mode; 1 = 10⁹ units): a charge
// is rounded up and a budget down, so floating-point sums can never let a
// user overspend. Every ledger change happens in the same transaction as
// the row that justifies it (a report, a release's charges), so a crash
// leaves either both or neither.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Nano is the number of ledger units in one ε (local mode) or one ρ
// (central mode).
const Nano = 1e9

// ChargeNano converts an ε to charge into ledger units, rounding up (a
// charge within 10⁻⁶ units of an integer is taken as that integer, so
// that 0.1 costs exactly 10⁸).
func ChargeNano(eps float64) (int64, error) {
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps < 0 || eps > 1e9 {
		return 0, fmt.Errorf("store: cannot charge ε = %v", eps)
	}
	return int64(math.Ceil(eps*Nano - 1e-6)), nil
}

// BudgetNano converts a budget into ledger units, rounding down.
func BudgetNano(eps float64) (int64, error) {
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps <= 0 || eps > 1e9 {
		return 0, fmt.Errorf("store: budget ε = %v must be positive and finite", eps)
	}
	return int64(math.Floor(eps*Nano + 1e-6)), nil
}

// Eps converts ledger units back to ε.
func Eps(n int64) float64 { return float64(n) / Nano }

// Errors.
var (
	// ErrNotFound: no such user, report or release.
	ErrNotFound = errors.New("store: not found")
	// ErrConfigMismatch: the database was created with another
	// collection configuration.
	ErrConfigMismatch = errors.New("store: configuration mismatch")
)

// OverBudgetError refuses a release that would push a user over budget.
type OverBudgetError struct {
	User                  string
	Spent, Charge, Budget int64
}

func (e *OverBudgetError) Error() string {
	return fmt.Sprintf("store: user %s has spent %g of her budget %g; a charge of %g would exceed it",
		e.User, Eps(e.Spent), Eps(e.Budget), Eps(e.Charge))
}

// User is one enrolled user's ledger.
type User struct {
	ID        string
	Budget    int64 // nano-ε
	Spent     int64 // nano-ε
	Reports   int64
	CreatedMS int64
	// TokenExpiresMS (0: never) and TokenRevokedMS (0: not revoked) are
	// her token's; a rotation replaces the token and clears both.
	TokenExpiresMS, TokenRevokedMS int64
}

// TokenValid reports whether her token may be used at nowMS.
func (u User) TokenValid(nowMS int64) bool {
	return u.TokenRevokedMS == 0 && (u.TokenExpiresMS == 0 || nowMS < u.TokenExpiresMS)
}

// NewUser is a user to enrol.
type NewUser struct {
	ID        string
	TokenHash []byte
	Budget    int64
	CreatedMS int64
	// TokenExpiresMS: when her token expires (0: never).
	TokenExpiresMS int64
}

// AdminToken is a recorded admin token: its hash, never the token.
type AdminToken struct {
	ID, Label                       string
	Hash                            []byte
	CreatedMS, ExpiresMS, RevokedMS int64
}

// Valid reports whether the token may be used at nowMS.
func (t AdminToken) Valid(nowMS int64) bool {
	return t.RevokedMS == 0 && (t.ExpiresMS == 0 || nowMS < t.ExpiresMS)
}

// Submission is a report to store and charge.
type Submission struct {
	User     string
	ClientID string
	BodyHash []byte
	Charge   int64 // nano-ε
	Values   []byte
	Received int64 // unix ms
	// Version is the collection version the report was made for (its
	// catalogue; 0 is taken as 1).
	Version int
	// Mean is the report's mean report (local mode with a mean ε; nil:
	// none, stored as NULL).
	Mean *float64
}

// Outcome says what happened to a submission.
type Outcome int

const (
	// Stored: the report was stored and charged.
	Stored Outcome = iota + 1
	// Duplicate: a report with this client ID and the same content was
	// stored before; nothing was stored or charged, Report is the original.
	Duplicate
	// Conflict: the client ID was used before with other content.
	Conflict
	// OverBudget: the charge would exceed the budget; nothing stored.
	OverBudget
	// NoUser: the user does not exist.
	NoUser
)

func (o Outcome) String() string {
	switch o {
	case Stored:
		return "stored"
	case Duplicate:
		return "duplicate"
	case Conflict:
		return "conflict"
	case OverBudget:
		return "over_budget"
	case NoUser:
		return "no_user"
	}
	return "unknown"
}

// Result is a submission's outcome with the facts for the acknowledgement.
type Result struct {
	Outcome Outcome
	// Report is the stored (or, for a duplicate, the original) report.
	Report Report
	// Spent and Budget are the user's ledger after the outcome (for
	// OverBudget: before the refused charge; for a repeat: after the
	// original, or unset).
	Spent, Budget int64
}

// Report is a stored report.
type Report struct {
	Seq        int64
	User       string
	ClientID   string
	BodyHash   []byte
	Charge     int64
	SpentAfter int64
	Received   int64
	Values     []byte
	// Version is the collection version it was made for.
	Version int
	// Mean is its mean report (nil: none).
	Mean *float64
}

// Charge debits one user for a release.
type Charge struct {
	User string
	Nano int64
}

// UserState is one user's own state in a release (joint DP).
type UserState struct {
	User  string
	State []byte
}

// NewRelease is a release to publish.
type NewRelease struct {
	CreatedMS int64
	Method    string
	MaxSeq    int64
	// Doc is the public JSON document (api.Release without its ID).
	Doc []byte
	// Charges are the ledger debits (central and joint releases).
	Charges []Charge
	// States are the users' own states (joint DP), served to each only.
	States []UserState
	// PeriodStartMS, when > 0, makes the budget per period: a charge must
	// fit the user's budget together with the charges of the releases
	// created at or after PeriodStartMS (the current period's), instead
	// of with her lifetime spending. CreatedMS must not precede it.
	PeriodStartMS int64
}

// ReleaseRow is a stored release.
type ReleaseRow struct {
	ID           int64
	CreatedMS    int64
	Method       string
	MaxSeq       int64
	UsersCharged int64
	Doc          []byte
}

// Stats are whole-store counts.
type Stats struct {
	Users, Reports, Releases int64
	MaxSpent                 int64
}

// Tx is one write transaction. The service groups many operations into
// one Tx (group commit); each returns its business outcome, and an error
// only when the database failed (the whole transaction is then rolled
// back).
type Tx interface {
	CreateUser(ctx context.Context, u NewUser) error
	Submit(ctx context.Context, s Submission) (Result, error)
	// SubmitBatch decides and stores many submissions in batch order
	// (a later one sees the earlier ones' charges and client IDs).
	SubmitBatch(ctx context.Context, subs []Submission) ([]Result, error)
}

// Store is the durable storage.
type Store interface {
	// Init creates the tables if needed and records the collection
	// configuration (canonical JSON) on first use; a later Init with a
	// different configuration returns ErrConfigMismatch naming the stored
	// one.
	Init(ctx context.Context, config []byte) error
	// Config returns the recorded configuration (ErrNotFound before Init).
	Config(ctx context.Context) ([]byte, error)
	// Evolve records config as the collection's next version (returned)
	// if the recorded one is still old (else ErrConfigMismatch): reports
	// stored from then on carry the new version.
	Evolve(ctx context.Context, old, config []byte, nowMS int64) (int, error)
	// CollectionVersion is the current collection version (1 after Init).
	CollectionVersion(ctx context.Context) (int, error)
	// Update runs fn in one transaction and commits it durably.
	Update(ctx context.Context, fn func(Tx) error) error
	// UserByToken finds the user whose token hashes to h.
	UserByToken(ctx context.Context, h []byte) (User, error)
	// User reads one user's ledger.
	User(ctx context.Context, id string) (User, error)
	// Report reads one of a user's reports by client ID.
	Report(ctx context.Context, user, clientID string) (Report, error)
	// Reports lists a user's reports in submission order.
	Reports(ctx context.Context, user string) ([]Report, error)
	// ScanReports calls fn for every report with seq ≤ maxSeq (0: all) in
	// seq order and returns the largest seq seen.
	ScanReports(ctx context.Context, maxSeq int64, fn func(Report) error) (int64, error)
	// Publish stores a release, its users' states and its charges in one
	// transaction; an *OverBudgetError (nothing stored) when a charge
	// would push a user over her budget.
	Publish(ctx context.Context, r NewRelease) (int64, error)
	// LatestRelease and Release read published releases.
	LatestRelease(ctx context.Context) (ReleaseRow, error)
	Release(ctx context.Context, id int64) (ReleaseRow, error)
	// UserState reads one user's own state in a release.
	UserState(ctx context.Context, release int64, user string) ([]byte, error)
	// Stats counts users, reports, releases and the largest ε spent.
	Stats(ctx context.Context) (Stats, error)
	// Check verifies the ledger: every user's spent equals the sum of her
	// reports' and releases' charges, her report count her reports, and
	// no user is over budget. It returns the first inconsistency.
	Check(ctx context.Context) error
	// CheckPeriods is Check for per-period budgets (periodMS > 0): no
	// user's release charges within one period [k·periodMS, (k+1)·periodMS)
	// of Unix time exceed her budget (her lifetime spent may). With
	// periodMS ≤ 0 it is Check.
	CheckPeriods(ctx context.Context, periodMS int64) error
	// SpentSince is every user's spending: with sinceMS ≤ 0 her lifetime
	// spent (users with none included), else the sum of her charges by
	// releases created at or after sinceMS (users charged nothing since
	// are absent).
	SpentSince(ctx context.Context, sinceMS int64) (map[string]int64, error)
	// UserSpentSince is one user's charges by releases created at or
	// after sinceMS.
	UserSpentSince(ctx context.Context, user string, sinceMS int64) (int64, error)
	// ReportsPage lists up to limit of a user's reports with seq >
	// afterSeq in submission order (a page of GET /v1/reports).
	ReportsPage(ctx context.Context, user string, afterSeq int64, limit int) ([]Report, error)
	// DeleteUser deletes a user's reports and per-release states and
	// revokes her token in one transaction, keeping her ledger (what she
	// spent stays spent: past releases used her data); a repeat changes
	// nothing (Erasure.Repeat). ErrNotFound when there is no such user.
	DeleteUser(ctx context.Context, id string, nowMS int64) (Erasure, error)
	// ExportUser reads everything stored about a user (not her token
	// hash). ErrNotFound when there is no such user.
	ExportUser(ctx context.Context, id string) (Export, error)
	// Ping checks the database is reachable.
	Ping(ctx context.Context) error
	// Heartbeat durably commits a write of the heartbeat row in a
	// transaction of its own, as a report's is committed: it fails when
	// the database cannot take a write right now (disk full, read-only,
	// I/O errors, unreachable).
	Heartbeat(ctx context.Context, nowMS int64) error
	// SchemaVersion is the database's schema version; Migrations the
	// migrations applied to it.
	SchemaVersion(ctx context.Context) (int, error)
	Migrations(ctx context.Context) ([]Migration, error)
	// SetUserToken replaces a user's token (rotation): the new hash, its
	// expiry (0: never), not revoked. ErrNotFound: no such user.
	SetUserToken(ctx context.Context, user string, hash []byte, expiresMS int64) error
	// RevokeUserToken revokes a user's token at nowMS (her ledger and
	// reports stay). ErrNotFound: no such user.
	RevokeUserToken(ctx context.Context, user string, nowMS int64) error
	// AddAdminToken records an admin token (its hash only).
	AddAdminToken(ctx context.Context, t AdminToken) error
	// AdminToken finds an admin token by hash (ErrNotFound: none).
	AdminToken(ctx context.Context, hash []byte) (AdminToken, error)
	// AdminTokens lists the admin tokens recorded, oldest first.
	AdminTokens(ctx context.Context) ([]AdminToken, error)
	// RevokeAdminToken revokes an admin token by ID at nowMS
	// (ErrNotFound: none).
	RevokeAdminToken(ctx context.Context, id string, nowMS int64) error
	// Backup writes a consistent copy of the database to a new file
	// while it serves (SQLite; PostgreSQL: ErrBackupUnsupported).
	Backup(ctx context.Context, path string) error
	Close() error
	// Kind is "sqlite" or "postgres".
	Kind() string
}

// Open opens an existing collection's database by URL: "sqlite:FILE"
// (or "sqlite://FILE") or "postgres://…" / "postgresql://…". It never
// creates one: a missing or empty file, or a database without a recorded
// collection, is ErrNoCollection; a file failing SQLite's integrity check
// is ErrDamaged; a newer schema is ErrNewerSchema. An older schema is
// migrated forward.
func Open(ctx context.Context, url string) (Store, error) { return open(ctx, url, false) }

// Create opens a database for a new collection: the SQLite file is made
// if missing, the tables if absent. A database that already records a
// collection is refused (ErrExists); the collection is recorded by the
// first Init.
func Create(ctx context.Context, url string) (Store, error) { return open(ctx, url, true) }

func open(ctx context.Context, url string, create bool) (Store, error) {
	switch {
	case IsPostgres(url):
		return OpenPostgres(ctx, url, create)
	case strings.HasPrefix(url, "sqlite:"):
		path := SQLitePath(url)
		if path == "" {
			return nil, fmt.Errorf("store: %q names no file (want sqlite:FILE)", url)
		}
		return OpenSQLite(ctx, path, create)
	}
	return nil, fmt.Errorf("store: unknown database URL %q (want sqlite:FILE or postgres://…)", redact(url))
}

// SQLDriver is the database/sql driver name and data source a reader
// outside this package (privrec-beam's databaseio read of the reports
// table) opens the database at url with: "pgx" and the URL itself, or
// "sqlite" and the file, read-only. The caller imports the driver
// (github.com/jackc/pgx/v5/stdlib, modernc.org/sqlite).
func SQLDriver(url string) (driver, dsn string, err error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return "pgx", url, nil
	case strings.HasPrefix(url, "sqlite:"):
		path := SQLitePath(url)
		if path == "" {
			return "", "", fmt.Errorf("store: %q names no file (want sqlite:FILE)", url)
		}
		return "sqlite", path + "?_busy_timeout=10000&_query_only=1", nil
	}
	return "", "", fmt.Errorf("store: unknown database URL %q (want sqlite:FILE or postgres://…)", redact(url))
}

// IsURL reports whether s names a store rather than a file.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "sqlite:") || strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// redact hides a password in a URL for messages.
func redact(url string) string {
	if i := strings.Index(url, "://"); i >= 0 {
		rest := url[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			cred := rest[:at]
			if c := strings.Index(cred, ":"); c >= 0 {
				return url[:i+3] + cred[:c] + ":***" + rest[at:]
			}
		}
	}
	return url
}

// Redact hides the password of a database URL, for logs.
func Redact(url string) string { return redact(url) }

// NowMS is the current time in unix milliseconds.
func NowMS() int64 { return time.Now().UnixMilli() }
