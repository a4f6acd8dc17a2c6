package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/server"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/webapp"
)

const serveRoleSynopsis = `
Run one of the two aggregators of the no-trusted-curator path
(docs/AGGREGATION.md). Devices send each task's contribution as two
secret shares: the leader gets one, the helper the other (sealed to the
helper's HPKE key, relayed by the leader). Neither sees a contribution;
they verify a zero-knowledge validity proof together (Prio3SumVec: every
coordinate in the task's range), and at collection each adds discrete
Gaussian noise to its own aggregate share, enough alone for the task's ρ,
so the guarantee holds unless both operators collude.

Run them as two processes with separate databases and keys, ideally by two
independent operators. They share only --secret-file (the VDAF
verification secret) and --peer-token-file (the leader's credential at the
helper). The leader enrols users, stores their reports, charges each
task's ρ to every user who uploads for it (--budget-rho per user), and
drives aggregation and collection (admin API, --admin-token-file). The
helper derives each task's sensitivity, range and σ from the task's
public plan itself and refuses a task that states less, or whose ρ
exceeds its own --max-task-rho; it releases no aggregate share of fewer
than --min-batch reports.

The leader also serves the browser device at / (--web, on by default;
docs/BROWSER.md): a page whose WebAssembly computes a person's
contribution from ratings kept in her browser, shards it, seals the
helper's share to the key it fetches from the helper itself (--helper
must be reachable from her browser; the helper's hpke_config allows any
origin), uploads once per task and keeps her own ledger. --items gives
the page titles, --scale its rating scale.

Databases: an SQLite file (the default) or PostgreSQL (--db postgres://…,
an empty schema of its own: search_path=SCHEMA in the URL), where several
leader processes may share one database and divide each task's
aggregation jobs between them. Make each once with --create; every later
start opens it without --create and is refused, naming what is wrong,
when there is no aggregator database there (a mistyped --db, an empty
file, a schema without its tables), when the file fails SQLite's
integrity check, or when it was made for the other role or with another
--key-file or --secret-file. Both roles have the central
server's operations (privrec serve --help): GET /livez and GET /readyz
(503 with Retry-After when the database cannot take a write or its file
system has less than --min-free-disk free), a connection cap with a
descriptor reserve (--max-conns), read and idle timeouts, a graceful
shutdown on SIGTERM (--grace), --config FILE and --tls-cert/--tls-key.

Exactly once: the leader records each aggregation job before sending it
and sends it again after a crash or a failed call; the helper keeps its
answer to each job, so every report is counted once at both whatever
fails when. Each job is claimed by one aggregation at a time (a lease in
the database), so concurrent aggregate calls and several leader
processes sharing one --db divide a task's jobs; collection of a task is
serialised and waits until every report is judged. A device
retrying an upload whose acknowledgement was lost is acknowledged again
and not charged again; a body larger than the task's report size is
refused (413) before it is read.

Keys: --key-file holds the aggregator's HPKE private key; it is created
(mode 0600) if missing. Secrets: 32 random bytes, base64, e.g.
  head -c 32 /dev/urandom | base64 > secret`

// hasRole reports whether serve's arguments ask for an aggregator role.
func hasRole(args []string) bool {
	for _, a := range args {
		if a == "--role" || a == "-role" || strings.HasPrefix(a, "--role=") || strings.HasPrefix(a, "-role=") {
			return true
		}
	}
	return false
}

func runServeRole(ctx context.Context, args []string, out io.Writer) error {
	example := `  head -c 32 /dev/urandom | base64 > secret; head -c 32 /dev/urandom | base64 > peer.token
  head -c 32 /dev/urandom | base64 > admin.token
  privrec serve --role helper --create --db helper.db --key-file helper.key --secret-file secret \
      --peer-token-file peer.token --listen 127.0.0.1:8091 --max-task-rho 1 &
  privrec serve --role leader --create --db leader.db --key-file leader.key --secret-file secret \
      --peer-token-file peer.token --admin-token-file admin.token \
      --helper http://127.0.0.1:8091 --budget-rho 2 --listen 127.0.0.1:8090`
	fs := newFlags("serve --role leader|helper --db FILE|URL --key-file FILE --secret-file FILE --peer-token-file FILE", serveRoleSynopsis, example)
	f := addRoleFlags(fs)
	hf := addServeHTTPFlags(fs)
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if err := hf.loadConfigFile(fs); err != nil {
		return err
	}
	var so service.Options
	if err := hf.apply(&so); err != nil {
		return err
	}
	if *f.readTimeout <= 0 {
		return usagef("--read-timeout must be positive, got %s", *f.readTimeout)
	}
	log, err := newLogger(*f.logLevel, *f.logFormat)
	if err != nil {
		return err
	}
	cfg, err := f.config(log)
	if err != nil {
		return err
	}
	var page http.Handler
	if cfg.Role == dap.Leader && *f.web {
		if page, err = dapPage(*f.helperURL, *f.items, *f.scale); err != nil {
			return err
		}
	}
	serverGC()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv, err := openRoleServer(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", *f.listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if *f.addrFile != "" {
		if err := model.WriteFileAtomicBytes(*f.addrFile, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			ln.Close()
			return fmt.Errorf("--addr-file: %w", err)
		}
	}
	log.Info("listening", "role", cfg.Role.String(), "addr", ln.Addr().String(), "scheme", hf.scheme(), "db", store.Redact(cfg.DB))
	hf.watchTLS(ctx, log)
	return service.ServeHandler(ctx, roleHandler(srv.Handler(), page), ln, service.HTTPOptions{MaxConns: so.MaxConns, IdleTimeout: so.IdleTimeout, TLS: so.TLS,
		ReadTimeout: *f.readTimeout, Grace: *f.grace, Log: log})
}

// roleFlags are `privrec serve --role`'s own flags (the HTTP ones are
// serveHTTPFlags, shared with the central server).
type roleFlags struct {
	role, db, helperCA, minFree, listen, keyFile, secretFile, peerFile *string
	adminFile, helperURL, items, scale, addrFile, logLevel, logFormat  *string
	create, web                                                        *bool
	lockTTL, lockWait, helperTimeout, grace, readTimeout               *time.Duration
	enrolRate, budget, maxRho                                          *float64
	enrolBurst, minBatch, batch                                        *int
	maxUsers                                                           *int64
}

func addRoleFlags(fs *flag.FlagSet) *roleFlags {
	return &roleFlags{
		role:          fs.String("role", "", "leader (devices upload to it; keeps the ledger; drives aggregation) or helper"),
		db:            fs.String("db", "", "the aggregator's own database: an SQLite file (sqlite:FILE or FILE), or PostgreSQL (postgres://USER:PASSWORD@HOST/DB?search_path=SCHEMA; several leader processes may share one and divide each task's aggregation jobs)"),
		create:        fs.Bool("create", false, "make a new aggregator database at --db (refused if one is there); without it --db must hold this role's database, made with the same --key-file and --secret-file"),
		lockTTL:       fs.Duration("lock-ttl", 30*time.Second, "leader: the lease a process holds on an aggregation job while it runs it, and on a task while it collects it (several leader processes may share --db and divide a task's jobs; after a crash another takes the job over once this has run out)"),
		lockWait:      fs.Duration("lock-wait", time.Minute, "leader: how long a collect call waits for one in progress on the same task before it is answered 503"),
		enrolRate:     fs.Float64("enrol-rate", 10, "leader: enrolments admitted per second per client address (4× that overall; 0: no limit)"),
		enrolBurst:    fs.Int("enrol-burst", 100, "leader: the burst of enrolments admitted per client address (4× that overall)"),
		maxUsers:      fs.Int64("max-users", 0, "leader: the most users enrolled (0: no cap); enrolment beyond is refused (403)"),
		helperCA:      fs.String("helper-ca", "", "leader: PEM certificate(s) to trust for an https:// --helper besides the system's (a helper with its own CA)"),
		helperTimeout: fs.Duration("helper-timeout", 2*time.Minute, "leader: the longest a request to the helper may take (an aggregation job of --batch reports included)"),
		minFree:       fs.String("min-free-disk", "64MiB", "refuse writes (503 with Retry-After) and answer /readyz 503 when the database's file system has less free space than this (bytes, or with KiB, MiB, GiB; 0: no check)"),
		listen:        fs.String("listen", "127.0.0.1:8090", "address to listen on (host:port; port 0 picks one)"),
		keyFile:       fs.String("key-file", "", "HPKE private key file (created, mode 0600, if missing)"),
		secretFile:    fs.String("secret-file", "", "the verification secret both aggregators share (base64, ≥ 16 bytes)"),
		peerFile:      fs.String("peer-token-file", "", "the bearer token the leader presents to the helper (≥ 16 characters)"),
		adminFile:     fs.String("admin-token-file", "", "leader: the admin token (≥ 16 characters; default $PRIVREC_ADMIN_TOKEN)"),
		helperURL:     fs.String("helper", "", "leader: the helper's base URL"),
		budget:        fs.Float64("budget-rho", 0, "leader: each user's total zCDP ρ over all tasks"),
		maxRho:        fs.Float64("max-task-rho", 0, "helper: the largest ρ per task it agrees to, as it derives it from the task's plan (0: no limit of its own)"),
		minBatch:      fs.Int("min-batch", server.DefaultMinBatch, "helper: the fewest valid reports it releases an aggregate share for, whatever the task's min_reports"),
		batch:         fs.Int("batch", 256, "reports per aggregation job"),
		web:           fs.Bool("web", true, "leader: serve the browser device at / (docs/BROWSER.md): her ratings stay in the browser, which shards and encrypts her contribution to both aggregators"),
		items:         fs.String("items", "", "leader, with --web: titles for the page (one item ID per line, an optional title after a tab); default: the tasks' item IDs"),
		scale:         fs.String("scale", "1:5", "leader, with --web: the rating scale the page offers (MIN:MAX)"),
		grace:         fs.Duration("grace", 15*time.Second, "how long a graceful shutdown waits for requests in flight"),
		addrFile:      fs.String("addr-file", "", "write the listening address (host:port) to this file once ready"),
		logLevel:      fs.String("log-level", "info", "debug, info, warn or error"),
		logFormat:     fs.String("log-format", "json", "json or text"),
		readTimeout:   fs.Duration("read-timeout", time.Minute, "the longest a request (its body included: a report of a few MB from a slow device) may take to arrive"),
	}
}

// config checks the flags and reads the key, secret and tokens they name
// into the aggregator's configuration.
func (f *roleFlags) config(log *slog.Logger) (server.Config, error) {
	r, err := dap.ParseRole(*f.role)
	if err != nil {
		return server.Config{}, usagef("--role: %v", err)
	}
	if *f.db == "" || *f.keyFile == "" || *f.secretFile == "" || *f.peerFile == "" {
		return server.Config{}, usagef("--db, --key-file, --secret-file and --peer-token-file are required")
	}
	if *f.minBatch < 1 {
		return server.Config{}, usagef("--min-batch %d: want at least 1", *f.minBatch)
	}
	free, err := parseBytes(*f.minFree)
	if err != nil {
		return server.Config{}, usagef("--min-free-disk: %v", err)
	}
	if free == 0 {
		free = -1
	}
	key, err := loadOrCreateKey(*f.keyFile)
	if err != nil {
		return server.Config{}, err
	}
	secret, err := readBase64File(*f.secretFile, "--secret-file")
	if err != nil {
		return server.Config{}, err
	}
	peer, err := readTokenFile(*f.peerFile, "--peer-token-file")
	if err != nil {
		return server.Config{}, err
	}
	cfg := server.Config{Role: r, DB: *f.db, Key: key, Secret: secret, AggregatorToken: peer,
		MaxTaskRho: *f.maxRho, MinBatch: *f.minBatch, BatchSize: *f.batch, Logger: log, Mode: server.OpenExisting, LockTTL: *f.lockTTL, LockWait: *f.lockWait, MinFreeBytes: free, HelperTimeout: *f.helperTimeout,
		EnrolRate: *f.enrolRate, EnrolBurst: *f.enrolBurst, MaxUsers: *f.maxUsers}
	if *f.create {
		cfg.Mode = server.CreateNew
	}
	if spec := os.Getenv(envCrash); spec != "" {
		if cfg.Crash, err = crashHook(spec, log); err != nil {
			return server.Config{}, err
		}
	}
	if r == dap.Leader {
		if err := f.leaderConfig(&cfg); err != nil {
			return server.Config{}, err
		}
	}
	return cfg, nil
}

// leaderConfig adds the leader's own settings: its admin token, the
// helper it drives and the users' budget.
func (f *roleFlags) leaderConfig(cfg *server.Config) error {
	var err error
	if cfg.AdminToken, err = adminToken(*f.adminFile); err != nil {
		return err
	}
	cfg.HelperURL, cfg.BudgetRho = *f.helperURL, *f.budget
	if u, err := url.Parse(*f.helperURL); *f.helperURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		return usagef("--helper %q: want the helper's base URL, http://HOST:PORT or https://HOST:PORT", *f.helperURL)
	}
	if *f.helperCA != "" {
		if cfg.Client, err = clientWithCA(*f.helperCA, *f.helperTimeout); err != nil {
			return err
		}
	}
	return nil
}

// openRoleServer opens the aggregator's database and says what to do
// when it cannot: a missing one needs --create, an existing one must not
// get it, a damaged one is restored from a backup.
func openRoleServer(ctx context.Context, cfg server.Config) (*server.Server, error) {
	srv, err := server.New(ctx, cfg)
	switch {
	case errors.Is(err, dap.ErrInvalid):
		return nil, usagef("%v", err)
	case errors.Is(err, server.ErrNoDatabase):
		return nil, fmt.Errorf("%w; check --db, or make a new aggregator database there with --create", err)
	case errors.Is(err, server.ErrExists):
		return nil, fmt.Errorf("%w; drop --create to serve it (or choose another --db)", err)
	case errors.Is(err, server.ErrDamaged):
		return nil, fmt.Errorf("%w (restore the latest backup)", err)
	}
	return srv, err
}

// roleHandler is the aggregator's API, with the browser device's page at
// / on a leader that serves it.
func roleHandler(h, page http.Handler) http.Handler {
	if page == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("/dap/", h)
	mux.Handle("/livez", h)
	mux.Handle("/readyz", h)
	mux.Handle("/", page)
	return mux
}

// envCrash names a step of upload, aggregation or collection at which
// the aggregator kills itself with SIGKILL ("STEP" or "STEP@N": at its
// N-th time). Fault-injection tests only (TestDapFaults).
const envCrash = "PRIVREC_DAP_CRASH"

func crashHook(spec string, log *slog.Logger) (func(string), error) {
	step, nth := spec, 1
	if a, b, ok := strings.Cut(spec, "@"); ok {
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 {
			return nil, usagef("%s=%q: want STEP or STEP@N", envCrash, spec)
		}
		step, nth = a, n
	}
	var hits atomic.Int64
	return func(s string) {
		if s == step && hits.Add(1) == int64(nth) {
			log.Warn("fault injection: killing this process", "step", s)
			if p, err := os.FindProcess(os.Getpid()); err == nil {
				_ = p.Kill() // SIGKILL: no deferred function runs, nothing is flushed
			}
			select {} // the signal is on its way
		}
	}, nil
}

// clientWithCA is an HTTP client that trusts the certificates in the PEM
// file caFile besides the system's.
func clientWithCA(caFile string, timeout time.Duration) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, usagef("--helper-ca: %v", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, usagef("--helper-ca %s: no PEM certificate in it", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Timeout: timeout, Transport: tr}, nil
}

// parseBytes reads a size: a number of bytes, or one with KiB, MiB, GiB
// or TiB.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for i, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if v, ok := strings.CutSuffix(s, u); ok {
			s, mult = strings.TrimSpace(v), int64(1)<<(10*(i+1))
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with KiB, MiB, GiB or TiB)", s)
	}
	return n * mult, nil
}

// dapPage is the leader's browser device (webapp.NewDAP).
func dapPage(helperURL, items, scale string) (http.Handler, error) {
	o := webapp.DAPOptions{HelperURL: helperURL}
	sc, err := release.ParseScale(scale)
	if err != nil {
		return nil, usagef("--scale: %v", err)
	}
	o.Scale = [2]float64{sc.Min, sc.Max}
	if items != "" {
		if o.Catalogue, err = model.LoadCatalogue(items); err != nil {
			return nil, usagef("--items: %v", err)
		}
	}
	page, err := webapp.NewDAP(o)
	if err != nil {
		return nil, usagef("--web: %v", err)
	}
	return page, nil
}

// loadOrCreateKey reads an HPKE private key file (base64), creating it
// with a fresh key (mode 0600) if it does not exist.
func loadOrCreateKey(path string) (dap.KeyPair, error) {
	b, err := readBase64File(path, "--key-file")
	if err == nil {
		return dap.UnmarshalKeyPair(b)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return dap.KeyPair{}, err
	}
	k, err := dap.NewKeyPair()
	if err != nil {
		return k, err
	}
	sk, err := k.MarshalPrivate()
	if err != nil {
		return k, err
	}
	if err := model.WriteFileAtomicBytes(path, []byte(base64.StdEncoding.EncodeToString(sk)+"\n"), 0o600); err != nil {
		return k, fmt.Errorf("--key-file: %w", err)
	}
	return k, nil
}

func readBase64File(path, flag string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	out, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, usagef("%s %s: not base64: %v", flag, path, err)
	}
	return out, nil
}

func readTokenFile(path, flag string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 {
		return "", usagef("%s: the token must be at least 16 characters", flag)
	}
	return tok, nil
}

// newSecret returns 32 random bytes in base64 (for generated secrets).
func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b[:]), nil
}
