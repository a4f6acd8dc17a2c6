package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/webapp"
)

func init() {
	register(&command{name: "serve", summary: "run the collection and serving system (local-DP reports, per-user privacy ledger, releases); serve stats, serve bench", run: runServe})
}

const serveSynopsis = `
Run the collection and serving system over HTTP/JSON (API under /v1/,
docs/SERVICE.md and docs/openapi.yaml). Users enrol and receive a secret
token (the database keeps only its SHA-256). In local mode (--mechanism rr
or laplace) each user's device randomizes one report over the WHOLE
catalogue (--items; missing ratings too) at per-item ε = E / n, so one
report is E-DP for its user; the server debits E from her ledger and stores
the report in one durable transaction, and refuses reports beyond her
budget B. In central mode (--mechanism none) reports carry true ratings to
this trusted curator; only releases with a proven user-level guarantee
under the collection's relation are published, and each charges every
user it covers its zCDP ρ against a budget (--budget, --budget-delta)
converted once to ρ; δ above 1/(10·population) (or --max-delta) is
refused; --exhausted skip and --period choose what happens when budgets
run out. The admin (token in --admin-token-file or PRIVREC_ADMIN_TOKEN)
trains a release on the stored data (POST /v1/admin/releases); clients
download its public part and compute their own recommendations. The
browser client is served at / (--web=false turns it off): open
http://ADDR/ to join, rate, check and send a randomized report, and see
recommendations computed in the browser (docs/BROWSER.md).

The database (--db sqlite:FILE, or postgres://…) records the collection
settings on first start; a later start with other settings is refused.
SIGTERM or SIGINT stops the server gracefully (requests in flight finish).

  privrec serve stats --db URL [--json]    users, reports, releases, largest ε (ρ) spent
  privrec serve bench [--db URL] [--clients 64] [--duration 10s] [--json]
                                           load benchmark, clients and server in one process`

// serverGC makes the collector run less often (GOGC=400) unless GOGC is
// set: a server's live heap is small and its garbage per request large,
// so this trades a few tens of MB for ≈ 5 % of the CPU per report.
func serverGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

func runServe(ctx context.Context, args []string, out io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "stats":
			return runServeStats(ctx, args[1:], out)
		case "bench":
			return runServeBench(ctx, args[1:], out)
		}
	}
	if hasRole(args) { // the two-aggregator path (serve_role.go)
		return runServeRole(ctx, args, out)
	}
	example := `  printf '%s\n' i1 i2 i3 > items.txt
  head -c 32 /dev/urandom | base64 > admin.token
  privrec serve --db sqlite:privrec.db --listen 127.0.0.1:8080 --items items.txt \
      --mechanism rr --scale 1:5 --epsilon 3 --budget 9 --admin-token-file admin.token
  privrec client --server http://127.0.0.1:8080 enroll --json`
	fs := newFlags("serve --db URL --listen ADDR --items FILE --mechanism rr|laplace|none --epsilon E --budget B --scale MIN:MAX", serveSynopsis, example)
	db := fs.String("db", "", "database: sqlite:FILE (embedded, WAL, durable commits) or postgres://USER:PASS@HOST/DB")
	listen := fs.String("listen", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks one, logged)")
	items := fs.String("items", "", "declared catalogue: one item ID per line, an optional title after a tab (MovieLens item files as they come)")
	mech := fs.String("mechanism", "", "rr (randomized response over {missing, 1…d}), laplace (modified Laplace) — both local DP — or none (central mode)")
	eps := fs.Float64("epsilon", 0, "per-report ε: the per-user ε of one report over the whole catalogue, debited per report (local mode)")
	budget := fs.Float64("budget", 0, "per-user privacy budget ε (the ledger refuses anything beyond); in central mode with --budget-delta, converted once to the zCDP ρ the ledger holds")
	budgetDelta := fs.Float64("budget-delta", 0, "central mode: the δ of the budget (--budget, --budget-delta)-DP, converted to zCDP ρ (0: 1e-6; at most 1/(10·population) is the rule)")
	maxDelta := fs.Float64("max-delta", 0, "central mode: the largest δ a release may state (0: 1/(10·population of the release))")
	exhausted := fs.String("exhausted", "", "central mode, what a release does about users whose budget cannot pay for it: refuse (default: the release is refused whole) or skip (it covers only the users who can pay)")
	period := fs.Duration("period", 0, "central mode: make the budget per period (e.g. 720h): each user's releases within one period cost at most her budget, which renews with the next (0: for all time)")
	scale := fs.String("scale", "", "declared rating scale MIN:MAX (e.g. 1:5)")
	levels := fs.Int("levels", 0, "rating levels d for rr (0: MAX − MIN + 1 for integer ends); in central mode, ratings must lie on the d levels")
	adminFile := fs.String("admin-token-file", "", "file holding the admin token (≥ 16 characters; default: $PRIVREC_ADMIN_TOKEN; none: admin API disabled)")
	enroll := fs.String("enroll", "open", "who may enrol: open (anyone, rate-limited per address) or admin (admin token only)")
	rate := fs.Float64("rate", 50, "requests per second per user token")
	burst := fs.Int("burst", 100, "burst of requests per user token")
	enrollRate := fs.Float64("enroll-rate", 10, "enrolments per second per client address")
	enrollBurst := fs.Int("enroll-burst", 100, "burst of enrolments per client address")
	maxBody := fs.Int64("max-body", 0, "largest request body in bytes (0: 64 KiB + 32 bytes per catalogue item)")
	maxBatch := fs.Int("max-batch", 256, "largest group-commit batch (writes per transaction)")
	writers := fs.Int("writers", 0, "concurrent write transactions (PostgreSQL only; 0: 1 — on a small machine one writer with large batches is fastest)")
	grace := fs.Duration("grace", 15*time.Second, "how long a graceful shutdown waits for requests in flight")
	logLevel := fs.String("log-level", "info", "debug (every request), info, warn or error")
	logFormat := fs.String("log-format", "json", "json or text")
	workers := fs.Int("workers", 0, "training goroutines (0: all cores)")
	addrFile := fs.String("addr-file", "", "write the listening address (host:port) to this file once ready")
	web := fs.Bool("web", true, "serve the browser client at / (docs/BROWSER.md): the device code in WebAssembly, true ratings kept in the browser")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *db == "" {
		return usagef("--db is required (sqlite:FILE or postgres://…)")
	}
	if *items == "" {
		return usagef("--items FILE is required: the declared catalogue every report covers")
	}
	if *scale == "" {
		return usagef("--scale MIN:MAX is required: the declared rating scale the devices use")
	}
	sc, err := release.ParseScale(*scale)
	if err != nil {
		return usagef("--scale: %v", err)
	}
	cat, err := model.LoadCatalogue(*items)
	if err != nil {
		return usagef("--items: %v", err)
	}
	if *enroll != "open" && *enroll != "admin" {
		return usagef("--enroll must be open or admin, got %q", *enroll)
	}
	log, err := newLogger(*logLevel, *logFormat)
	if err != nil {
		return err
	}
	admin, err := adminToken(*adminFile)
	if err != nil {
		return err
	}
	opt := service.Options{Catalogue: cat, Mechanism: *mech, Epsilon: *eps, Budget: *budget, Scale: sc, Levels: *levels,
		BudgetDelta: *budgetDelta, MaxDelta: *maxDelta, Exhausted: *exhausted, Period: *period,
		AdminToken: admin, EnrollAdminOnly: *enroll == "admin", MaxBody: *maxBody, Rate: *rate, Burst: *burst,
		EnrollRate: *enrollRate, EnrollBurst: *enrollBurst, MaxBatch: *maxBatch, Writers: *writers, Workers: *workers, Log: log}
	if _, err := service.BuildConfig(opt); err != nil {
		return usagef("%v", err)
	}
	if *web {
		if opt.Root, err = webapp.New(); err != nil {
			return err
		}
	}
	serverGC()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	st, err := store.Open(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	srv, err := service.New(ctx, st, opt)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		srv.Close()
		return fmt.Errorf("serve: %w", err)
	}
	cfg := srv.Config()
	if *addrFile != "" {
		if err := model.WriteFileAtomicBytes(*addrFile, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			ln.Close()
			srv.Close()
			return fmt.Errorf("--addr-file: %w", err)
		}
	}
	log.Info("listening", "addr", ln.Addr().String(), "db", store.Redact(*db), "mode", cfg.Mode, "mechanism", cfg.Mechanism,
		"report_epsilon", cfg.ReportEpsilon, "cell_epsilon", cfg.CellEpsilon, "budget", cfg.Budget, "items", len(cfg.Items),
		"admin_api", admin != "", "enroll", *enroll)
	if err := service.Serve(ctx, srv, ln, *grace); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// adminToken reads the admin token from a file or $PRIVREC_ADMIN_TOKEN.
// It is never logged or printed.
func adminToken(path string) (string, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("--admin-token-file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if len(tok) < 16 {
			return "", usagef("--admin-token-file: the token must be at least 16 characters")
		}
		return tok, nil
	}
	tok := strings.TrimSpace(os.Getenv("PRIVREC_ADMIN_TOKEN"))
	if tok != "" && len(tok) < 16 {
		return "", usagef("PRIVREC_ADMIN_TOKEN must be at least 16 characters")
	}
	return tok, nil
}

func newLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, usagef("--log-format %q: want json or text", format)
}

func runServeStats(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("serve stats --db URL [--json]", "Print what a privrec serve database holds: users, reports, releases, the largest ε any user has spent, and checks every ledger against its reports and release charges.", "  privrec serve stats --db sqlite:privrec.db --json")
	db := fs.String("db", "", "database: sqlite:FILE or postgres://…")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *db == "" {
		return usagef("--db is required")
	}
	st, err := store.Open(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	raw, err := st.Config(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s is not a privrec serve database (no collection recorded)", store.Redact(*db))
	}
	if err != nil {
		return err
	}
	var id service.Identity
	if err := json.Unmarshal(raw, &id); err != nil {
		return fmt.Errorf("reading the collection settings: %w", err)
	}
	s, err := st.Stats(ctx)
	if err != nil {
		return err
	}
	cfg := id.Config()
	stats := service.StatsOf(s, cfg)
	ledger := st.CheckPeriods(ctx, id.PeriodSeconds*1000)
	unit := map[string]string{"rho": "ρ", "epsilon": "ε"}[cfg.LedgerUnit]
	if *jsonOut {
		v := map[string]any{"users": stats.Users, "reports": stats.Reports, "releases": stats.Releases, "max_spent": stats.MaxSpent,
			"budget": stats.Budget, "unit": cfg.LedgerUnit, "mode": id.Mode, "mechanism": id.Mechanism, "report_epsilon": id.ReportEpsilon, "ledger_ok": ledger == nil}
		if cfg.LedgerUnit == "rho" {
			v["budget_epsilon"], v["budget_delta"] = id.Budget, id.BudgetDelta
		}
		if id.PeriodSeconds > 0 {
			v["period_seconds"] = id.PeriodSeconds
		}
		if ledger != nil {
			v["ledger_error"] = ledger.Error()
		}
		if err := writeJSON(out, v); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "%s database, %s mode (%s", st.Kind(), id.Mode, id.Mechanism)
		if id.Mode == "local" {
			fmt.Fprintf(out, ", ε = %g per report", id.ReportEpsilon)
		}
		if cfg.LedgerUnit == "rho" {
			fmt.Fprintf(out, ", budget ρ = %.6g zCDP per user, from (ε = %g, δ = %g)", stats.Budget, id.Budget, id.BudgetDelta)
			if id.PeriodSeconds > 0 {
				fmt.Fprintf(out, " per period of %s", time.Duration(id.PeriodSeconds)*time.Second)
			}
			fmt.Fprintln(out, ")")
		} else {
			fmt.Fprintf(out, ", budget ε = %g per user)\n", id.Budget)
		}
		fmt.Fprintf(out, "users %d, reports %d, releases %d; largest %s spent by a user: %g\n", stats.Users, stats.Reports, stats.Releases, unit, stats.MaxSpent)
		if ledger == nil {
			fmt.Fprintf(out, "ledgers: every user's spent %s equals her reports' and releases' charges, within her budget\n", unit)
		}
	}
	if ledger != nil {
		return fmt.Errorf("ledger check failed: %w", ledger)
	}
	return nil
}

func runServeBench(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("serve bench [--db URL] [--clients 64] [--duration 10s] [--items 40] [--json]",
		"Load benchmark: a server on a loopback port and --clients concurrent clients in this process, sharing the machine. Each client enrols, then loops: randomize a fresh report over the whole catalogue (the device's ldp code), submit it, wait for the acknowledgement, which comes only after the report's group-commit transaction is durable. Prints acknowledged reports per second and the latency percentiles clients saw, then checks that the store holds every report and every ledger is exact.",
		"  privrec serve bench --clients 64 --duration 10s --json\n  privrec serve bench --db postgres://privrec:privrec@127.0.0.1/privrec_bench --json")
	db := fs.String("db", "", "database URL (default: an SQLite file in a temporary directory)")
	clients := fs.Int("clients", 64, "concurrent clients")
	dur := fs.Duration("duration", 10*time.Second, "measured duration")
	warm := fs.Duration("warmup", 2*time.Second, "warm-up before measuring")
	items := fs.Int("items", 40, "catalogue size (every report covers it all)")
	mech := fs.String("mechanism", "rr", "rr or laplace")
	writers := fs.Int("writers", 0, "concurrent write transactions (PostgreSQL only; 0: 1)")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	serverGC()
	res, err := service.Bench(ctx, service.BenchOptions{DB: *db, Clients: *clients, Duration: *dur, Warmup: *warm, Items: *items, Mechanism: *mech, Writers: *writers})
	if err != nil {
		return err
	}
	if *jsonOut {
		return writeJSON(out, res)
	}
	fmt.Fprintf(out, "%s, %d clients, %d items (%s): %.0f acknowledged durable reports/s over %.0f s; latency p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms; %d commits, %.1f reports per commit; %.0f µs CPU per report, %.2f cores used; %d errors; stored %d, ledgers %s\n",
		res.DB, res.Clients, res.Items, res.Mechanism, res.PerSecond, res.Seconds, res.P50ms, res.P90ms, res.P99ms, res.MaxMs, res.Commits, res.MeanBatch, res.CPUPerReportUs, res.Cores, res.Errors, res.StoredReports,
		map[bool]string{true: "exact", false: "INCONSISTENT"}[res.LedgerOK])
	return nil
}
