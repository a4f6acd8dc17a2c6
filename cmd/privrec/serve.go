package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
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

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
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
catalogue (--items; missing ratings too) at per-item ε = (E − M) / n and
adds her own mean rating with Laplace noise at ε = M (the mean report,
--mean-epsilon; default E/8), so one report is E-DP for its user; the
server debits E from her ledger and stores the report in one durable
transaction, and refuses reports beyond her budget B. In central mode (--mechanism none) reports carry true ratings to
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

The database (--db sqlite:FILE, or postgres://…) holds one collection.
Create it explicitly, once, with --create and its settings; every later
start opens it without --create and is refused — naming what is wrong —
when there is no collection there (a mistyped path, an empty file), when
the file fails SQLite's integrity check, or when a flag differs from the
recorded settings. An older schema is migrated forward on opening.
SIGTERM or SIGINT stops the server gracefully (requests in flight finish).
--config FILE reads any of these flags from a file (NAME = VALUE lines);
--tls-cert and --tls-key serve HTTPS directly. deploy/ has a systemd unit
and a Dockerfile (docs/SERVICE.md, "Configuration file, TLS and
deployment").

  privrec serve stats --db URL [--json]    users, reports, releases, largest ε (ρ) spent
  privrec serve backup --db sqlite:FILE --out FILE   online backup, checked
  privrec serve restore --backup FILE --db sqlite:FILE [--replace]
  privrec serve token create|list|revoke|rotate --db URL …
                                           admin and user tokens, no restart
  privrec serve bench [--runs 3] [--clients 64] [--duration 10s] [--json]
                                           load benchmark: a server process driven by
                                           the load generator (privrec loadgen)

No trusted curator: privrec serve --role leader|helper runs one of the
two aggregators instead (docs/AGGREGATION.md): devices send secret
shares, nobody sees a contribution unless both operators collude. Its
flags differ: privrec serve --role leader --help.`

// serverGC makes the collector run less often (GOGC=400) unless GOGC is
// set: a server's live heap is small and its garbage per request large,
// so this trades a few tens of MB for ≈ 5 % of the CPU per report. Both
// privrec serve and the aggregators (--role) use it: an aggregator's
// garbage is its reports' shares, hundreds of kB to MB each.
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
		case "backup":
			return runServeBackup(ctx, args[1:], out)
		case "restore":
			return runServeRestore(ctx, args[1:], out)
		case "token":
			return runServeToken(ctx, args[1:], out)
		}
	}
	if hasRole(args) { // the two-aggregator path (serve_role.go)
		return runServeRole(ctx, args, out)
	}
	f, err := parseServeFlags(args)
	if err != nil {
		return err
	}
	opt, err := f.options()
	if err != nil {
		return err
	}
	return f.serve(ctx, opt)
}

// serveFlags is privrec serve's command line.
type serveFlags struct {
	fs *flag.FlagSet
	hf *serveHTTP

	db, listen, items, mech, exhausted, scale, adminFile, enroll  string
	logLevel, logFormat, addrFile                                 string
	addItems, create, web                                         bool
	eps, meanEps, budget, budgetDelta, maxDelta, rate, enrollRate float64
	levels, burst, enrollBurst, maxBatch, writers, workers        int
	maxBody                                                       int64
	period, userTokenTTL, grace                                   time.Duration
	// meanSet says --mean-epsilon was given.
	meanSet bool
	log     *slog.Logger
	admin   string
}

// parseServeFlags parses privrec serve's command line (and its config
// file, if any).
func parseServeFlags(args []string) (*serveFlags, error) {
	example := `  printf '%s\n' i1 i2 i3 > items.txt
  head -c 32 /dev/urandom | base64 > admin.token
  privrec serve --create --db sqlite:privrec.db --listen 127.0.0.1:8080 --items items.txt \
      --mechanism rr --scale 1:5 --epsilon 3 --budget 9 --admin-token-file admin.token
  privrec client --server http://127.0.0.1:8080 enroll --json`
	fs := newFlags("serve --db URL --listen ADDR --items FILE --mechanism rr|laplace|none --epsilon E --budget B --scale MIN:MAX", serveSynopsis, example)
	f := &serveFlags{fs: fs}
	fs.StringVar(&f.db, "db", "", "database: sqlite:FILE (embedded, WAL, durable commits) or postgres://USER:PASS@HOST/DB")
	fs.BoolVar(&f.addItems, "add-items", false, "accept an --items file that extends the recorded catalogue (the recorded items first, in order, then new ones; every other setting unchanged) and record it as the collection's next version (docs/SERVICE.md)")
	fs.BoolVar(&f.create, "create", false, "create a new collection in --db with these settings (a new or empty SQLite file, or a PostgreSQL schema without privrec's tables); without it --db must hold the collection already")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks one, logged)")
	fs.StringVar(&f.items, "items", "", "declared catalogue: one item ID per line, an optional title after a tab (MovieLens item files as they come)")
	fs.StringVar(&f.mech, "mechanism", "", "rr (randomized response over {missing, 1…d}), laplace (modified Laplace) — both local DP — or none (central mode)")
	fs.Float64Var(&f.eps, "epsilon", 0, "per-report ε: the per-user ε of one report over the whole catalogue, debited per report (local mode)")
	fs.Float64Var(&f.meanEps, "mean-epsilon", 0, "local mode: the part of --epsilon spent on the mean report (each device's own mean rating with Laplace noise; the rest is spread over the catalogue's cells); default --epsilon/8 for a new collection (--create), the recorded one for an existing collection; 0: no mean report")
	fs.Float64Var(&f.budget, "budget", 0, "per-user privacy budget ε (the ledger refuses anything beyond); in central mode with --budget-delta, converted once to the zCDP ρ the ledger holds")
	fs.Float64Var(&f.budgetDelta, "budget-delta", 0, "central mode: the δ of the budget (--budget, --budget-delta)-DP, converted to zCDP ρ (0: 1e-6; at most 1/(10·population) is the rule)")
	fs.Float64Var(&f.maxDelta, "max-delta", 0, "central mode: the largest δ a release may state (0: 1/(10·population of the release))")
	fs.StringVar(&f.exhausted, "exhausted", "", "central mode, what a release does about users whose budget cannot pay for it: refuse (default: the release is refused whole) or skip (it covers only the users who can pay)")
	fs.DurationVar(&f.period, "period", 0, "central mode: make the budget per period (e.g. 720h): each user's releases within one period cost at most her budget, which renews with the next (0: for all time)")
	fs.StringVar(&f.scale, "scale", "", "declared rating scale MIN:MAX (e.g. 1:5)")
	fs.IntVar(&f.levels, "levels", 0, "rating levels d for rr (0: MAX − MIN + 1 for integer ends); in central mode, ratings must lie on the d levels")
	fs.StringVar(&f.adminFile, "admin-token-file", "", "file holding the admin token (≥ 16 characters; default: $PRIVREC_ADMIN_TOKEN; none: admin API disabled)")
	fs.DurationVar(&f.userTokenTTL, "user-token-ttl", 0, "users' tokens expire this long after they are issued (enrolment or rotation; 0: never)")
	fs.StringVar(&f.enroll, "enroll", "open", "who may enrol: open (anyone, rate-limited per address) or admin (admin token only)")
	fs.Float64Var(&f.rate, "rate", 50, "requests per second per user token")
	fs.IntVar(&f.burst, "burst", 100, "burst of requests per user token")
	fs.Float64Var(&f.enrollRate, "enroll-rate", 10, "enrolments per second per client address")
	fs.IntVar(&f.enrollBurst, "enroll-burst", 100, "burst of enrolments per client address")
	fs.Int64Var(&f.maxBody, "max-body", 0, "largest request body in bytes (0: 64 KiB + 32 bytes per catalogue item)")
	fs.IntVar(&f.maxBatch, "max-batch", 256, "largest group-commit batch (writes per transaction)")
	fs.IntVar(&f.writers, "writers", 0, "concurrent write transactions (PostgreSQL only; 0: 1 — on a small machine one writer with large batches is fastest)")
	fs.DurationVar(&f.grace, "grace", 15*time.Second, "how long a graceful shutdown waits for requests in flight")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug (every request), info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "json", "json or text")
	fs.IntVar(&f.workers, "workers", 0, "training goroutines (0: all cores)")
	fs.StringVar(&f.addrFile, "addr-file", "", "write the listening address (host:port) to this file once ready")
	fs.BoolVar(&f.web, "web", true, "serve the browser client at / (docs/BROWSER.md): the device code in WebAssembly, true ratings kept in the browser")
	f.hf = addServeHTTPFlags(fs)
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	if err := f.hf.loadConfigFile(fs); err != nil {
		return nil, err
	}
	return f, nil
}

// options checks the flags and builds the service's options (without the
// stored collection's mean ε, which serve reads from the store).
func (f *serveFlags) options() (service.Options, error) {
	var opt service.Options
	if f.db == "" {
		return opt, usagef("--db is required (sqlite:FILE or postgres://…)")
	}
	if f.items == "" {
		return opt, usagef("--items FILE is required: the declared catalogue every report covers")
	}
	if f.scale == "" {
		return opt, usagef("--scale MIN:MAX is required: the declared rating scale the devices use")
	}
	sc, err := release.ParseScale(f.scale)
	if err != nil {
		return opt, usagef("--scale: %v", err)
	}
	cat, err := model.LoadCatalogue(f.items)
	if err != nil {
		return opt, usagef("--items: %v", err)
	}
	if f.enroll != "open" && f.enroll != "admin" {
		return opt, usagef("--enroll must be open or admin, got %q", f.enroll)
	}
	if f.log, err = newLogger(f.logLevel, f.logFormat); err != nil {
		return opt, err
	}
	if f.admin, err = adminToken(f.adminFile); err != nil {
		return opt, err
	}
	f.fs.Visit(func(fl *flag.Flag) { f.meanSet = f.meanSet || fl.Name == "mean-epsilon" })
	if !f.meanSet && (f.mech == "rr" || f.mech == "laplace") {
		f.meanEps = service.DefaultMeanEpsilon(f.eps)
	}
	opt = service.Options{Catalogue: cat, Mechanism: f.mech, Epsilon: f.eps, MeanEpsilon: f.meanEps, Budget: f.budget, Scale: sc, Levels: f.levels,
		BudgetDelta: f.budgetDelta, MaxDelta: f.maxDelta, Exhausted: f.exhausted, Period: f.period,
		AddItems: f.addItems, AdminToken: f.admin, UserTokenTTL: f.userTokenTTL, EnrollAdminOnly: f.enroll == "admin", MaxBody: f.maxBody, Rate: f.rate, Burst: f.burst,
		EnrollRate: f.enrollRate, EnrollBurst: f.enrollBurst, MaxBatch: f.maxBatch, Writers: f.writers, Workers: f.workers, Log: f.log}
	if _, err := service.BuildConfig(opt); err != nil {
		return opt, usagef("%v", err)
	}
	if err := f.hf.apply(&opt); err != nil {
		return opt, err
	}
	if f.web {
		if opt.Root, err = webapp.New(); err != nil {
			return opt, err
		}
	}
	return opt, nil
}

// serve opens the store, starts the service and serves until a signal.
func (f *serveFlags) serve(ctx context.Context, opt service.Options) error {
	serverGC()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	st, err := openStore(ctx, f.db, f.create)
	if err != nil {
		return err
	}
	defer st.Close()
	if !f.meanSet && !f.create {
		// The default applies to new collections: an existing one keeps
		// the mean report it was made with (none, for a collection made
		// before mean reports existed).
		if stored, err := service.StoredConfig(ctx, st); err == nil && stored.Mode == api.ModeLocal && opt.Mechanism != api.MechanismNone {
			opt.MeanEpsilon = stored.MeanEpsilon
		}
	}
	srv, err := service.New(ctx, st, opt)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		srv.Close()
		return fmt.Errorf("serve: %w", err)
	}
	f.hf.watchTLS(ctx, f.log)
	if f.addrFile != "" {
		if err := model.WriteFileAtomicBytes(f.addrFile, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			ln.Close()
			srv.Close()
			return fmt.Errorf("--addr-file: %w", err)
		}
	}
	f.logReady(ln.Addr().String(), srv.Config())
	if err := service.Serve(ctx, srv, ln, f.grace); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// logReady logs the service's settings once it listens on addr, and warns
// of a collection whose reports say too little.
func (f *serveFlags) logReady(addr string, cfg *api.Config) {
	log := f.log
	log.Info("listening", "addr", addr, "scheme", f.hf.scheme(), "db", store.Redact(f.db), "mode", cfg.Mode, "mechanism", cfg.Mechanism,
		"report_epsilon", cfg.ReportEpsilon, "cell_epsilon", cfg.CellEpsilon, "mean_epsilon", cfg.MeanEpsilon, "budget", cfg.Budget, "items", len(cfg.Items),
		"admin_api", f.admin != "", "enroll", f.enroll)
	if cfg.Mode == api.ModeLocal && cfg.MeanEpsilon == 0 {
		log.Warn("no mean report (--mean-epsilon 0): the service cannot estimate the average rating at this per-item ε, and the ldp-* recovery has no level to shrink toward; a collection with --mean-epsilon > 0 (default --epsilon/8) predicts no worse than the private mean")
	}
	if w := ldp.CellWarning(ldp.Mechanism(cfg.Mechanism), cfg.CellEpsilon, len(cfg.Items), ldp.Scale{Min: cfg.Scale.Min, Max: cfg.Scale.Max, Levels: cfg.Scale.Levels}); cfg.CellEpsilon > 0 && w != "" {
		log.Warn(w)
	}
}

// openStore opens the collection's database (or, with create, makes a
// new one) and says what to do when that is refused.
func openStore(ctx context.Context, db string, create bool) (store.Store, error) {
	open := store.Open
	if create {
		open = store.Create
	}
	st, err := open(ctx, db)
	switch {
	case err == nil:
		return st, nil
	case errors.Is(err, store.ErrNoCollection):
		return nil, fmt.Errorf("%w; check --db, or create a new collection there with privrec serve --create and its settings", err)
	case errors.Is(err, store.ErrExists):
		return nil, fmt.Errorf("%w; drop --create to serve it (or choose another --db for a new collection)", err)
	case errors.Is(err, store.ErrDamaged):
		return nil, fmt.Errorf("%w (restore the latest backup: privrec serve backup, docs/SERVICE.md)", err)
	}
	return nil, err
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
		if sv, err := st.SchemaVersion(ctx); err == nil {
			v["schema_version"] = sv
		}
		if cv, err := st.CollectionVersion(ctx); err == nil {
			v["collection_version"] = cv
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
