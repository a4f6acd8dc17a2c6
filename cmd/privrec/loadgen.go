package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/privrec/privrec/internal/loadgen"
	"github.com/privrec/privrec/service/store"
)

func init() {
	register(&command{name: "loadgen", summary: "load generator: concurrent clients submitting randomized reports to a running privrec serve", run: runLoadgen})
}

func loadgenPrint(out io.Writer, jsonOut bool, res loadgen.Result) error {
	if jsonOut {
		return writeJSON(out, res)
	}
	fmt.Fprintf(out, "%d clients, %d items (%s): %.0f acknowledged durable reports/s over %.0f s; latency p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms; %d errors; generator %.0f µs CPU per report",
		res.Clients, res.Items, res.Mechanism, res.PerSecond, res.Seconds, res.P50ms, res.P90ms, res.P99ms, res.MaxMs, res.Errors, res.GeneratorCPUPerReportUs)
	if res.Commits > 0 {
		fmt.Fprintf(out, "; %d commits, %.1f reports per commit; stored %d", res.Commits, res.MeanBatch, res.StoredReports)
	}
	if len(res.LoadAverage) == 2 {
		fmt.Fprintf(out, "; machine load average %.1f → %.1f", res.LoadAverage[0], res.LoadAverage[1])
	}
	fmt.Fprintln(out)
	return nil
}

func runLoadgen(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("loadgen --server URL [--clients 64] [--duration 10s] [--admin-token-file FILE] [--json]",
		"Drive a running privrec serve (local mode, open enrolment) from this process: --clients concurrent clients each enrol, then loop — randomize a fresh report over the whole catalogue with the device code, submit it, wait for the acknowledgement, which the server sends only once the report's group-commit transaction is durable. Prints acknowledged reports per second and the latency percentiles the clients saw. With the admin token it also reads the server's commits per second (GET /metrics) and stored report count. `privrec serve bench` starts a server process and runs this against it.",
		"  privrec loadgen --server http://127.0.0.1:8080 --clients 64 --duration 10s --json")
	server := fs.String("server", "", "base URL of the server (http://HOST:PORT)")
	clients := fs.Int("clients", 64, "concurrent clients")
	dur := fs.Duration("duration", 10*time.Second, "measured duration")
	warm := fs.Duration("warmup", 2*time.Second, "warm-up before measuring")
	adminFile := fs.String("admin-token-file", "", "file holding the admin token (optional: commit counters and the stored count)")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *server == "" {
		return usagef("--server URL is required")
	}
	admin := ""
	if *adminFile != "" {
		var err error
		if admin, err = adminToken(*adminFile); err != nil {
			return err
		}
	}
	res, err := loadgen.Run(ctx, loadgen.Options{Server: *server, AdminToken: admin, Clients: *clients, Duration: *dur, Warmup: *warm})
	if err != nil {
		return err
	}
	return loadgenPrint(out, *jsonOut, res)
}

// benchRun is one run of serve bench: what the generator measured and
// what the server process cost.
type benchRun struct {
	loadgen.Result
	// ServerCPUPerReportUs is the server process's CPU time over its
	// whole life (enrolment and warm-up included) per report it stored.
	ServerCPUPerReportUs float64 `json:"server_cpu_us_per_report"`
	LedgerOK             bool    `json:"ledger_ok"`
}

// benchSummary is serve bench's answer: every run and the medians.
type benchSummary struct {
	DB              string     `json:"db"`
	Runs            []benchRun `json:"runs"`
	MedianPerSecond float64    `json:"median_reports_per_second"`
	MedianP99ms     float64    `json:"median_p99_ms"`
	MedianP50ms     float64    `json:"median_p50_ms"`
	// MedianServerCPUus and MedianGeneratorCPUus are the medians of the
	// runs' CPU per report: on a shared machine, the figures that depend
	// least on what else runs.
	MedianServerCPUus    float64 `json:"median_server_cpu_us_per_report"`
	MedianGeneratorCPUus float64 `json:"median_generator_cpu_us_per_report"`
	AllLedgersExact      bool    `json:"all_ledgers_exact"`
	NothingAckedLost     bool    `json:"nothing_acknowledged_lost"`
	GeneratorSeparated   bool    `json:"generator_separate_process"`
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func runServeBench(ctx context.Context, args []string, out io.Writer) error {
	a, runs, jsonOut, err := parseServeBenchArgs(args)
	if err != nil {
		return err
	}
	sum, err := serveBenchRuns(ctx, a, runs, jsonOut, out)
	if err != nil {
		return err
	}
	if jsonOut {
		if err := writeJSON(out, sum); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "%s, %d clients, median of %d runs: %.0f reports/s, p50 %.1f ms, p99 %.1f ms, CPU per report %.0f µs server + %.0f µs generator; ledgers %s; acknowledged reports all stored: %v\n",
			sum.DB, a.clients, runs, sum.MedianPerSecond, sum.MedianP50ms, sum.MedianP99ms, sum.MedianServerCPUus, sum.MedianGeneratorCPUus,
			map[bool]string{true: "exact", false: "INCONSISTENT"}[sum.AllLedgersExact], sum.NothingAckedLost)
	}
	if !sum.AllLedgersExact || !sum.NothingAckedLost {
		return errors.New("serve bench: the database does not hold what was acknowledged")
	}
	return nil
}

// parseServeBenchArgs reads serve bench's flags: each run's settings, the
// number of runs and --json.
func parseServeBenchArgs(args []string) (a benchArgs, runs int, jsonOut bool, err error) {
	fs := newFlags("serve bench [--runs 3] [--clients 64] [--duration 10s] [--items 40] [--db URL] [--json]",
		"Load benchmark with the generator and the server in separate processes: each run creates a fresh collection (an SQLite file in a temporary directory unless --db), starts `privrec serve` on it as a child process on a loopback port, drives it with the load generator of `privrec loadgen` from this process, stops the server with SIGTERM, then checks the database holds every acknowledged report and every ledger is exact. Prints each run and the medians of reports/s and latency percentiles.",
		"  privrec serve bench --runs 3 --clients 64 --duration 10s --json\n  privrec serve bench --runs 1 --db postgres://privrec:privrec@127.0.0.1/privrec_bench --json")
	fs.StringVar(&a.db, "db", "", "database URL of an empty database (default: an SQLite file in a temporary directory per run; with --db, --runs must be 1)")
	fs.IntVar(&runs, "runs", 3, "runs; the medians are reported")
	fs.IntVar(&a.clients, "clients", 64, "concurrent clients")
	fs.DurationVar(&a.dur, "duration", 10*time.Second, "measured duration of each run")
	fs.DurationVar(&a.warm, "warmup", 2*time.Second, "warm-up before measuring")
	fs.IntVar(&a.items, "items", 40, "catalogue size (every report covers it all)")
	fs.StringVar(&a.mech, "mechanism", "rr", "rr or laplace")
	fs.IntVar(&a.writers, "writers", 0, "concurrent write transactions (PostgreSQL only; 0: 1)")
	fs.BoolVar(&jsonOut, "json", false, "print JSON")
	if err := parse(fs, args, false); err != nil {
		return a, 0, false, err
	}
	if runs < 1 || a.clients < 1 || a.items < 1 || a.dur <= 0 {
		return a, 0, false, usagef("--runs, --clients, --items and --duration must be positive")
	}
	if a.db != "" && runs != 1 {
		return a, 0, false, usagef("with --db every run needs an empty database: use --runs 1")
	}
	return a, runs, jsonOut, nil
}

// serveBenchRuns makes the runs (each printed as it ends, without
// jsonOut) and summarises them: the medians and whether every database
// held what was acknowledged.
func serveBenchRuns(ctx context.Context, a benchArgs, runs int, jsonOut bool, out io.Writer) (benchSummary, error) {
	sum := benchSummary{Runs: make([]benchRun, 0, runs), AllLedgersExact: true, NothingAckedLost: true, GeneratorSeparated: true}
	var rates, p99s, p50s, srvCPU, genCPU []float64
	for k := range runs {
		r, kind, err := benchOnce(ctx, a)
		if err != nil {
			return sum, fmt.Errorf("serve bench, run %d: %w", k+1, err)
		}
		sum.DB = kind
		sum.Runs = append(sum.Runs, r)
		sum.AllLedgersExact = sum.AllLedgersExact && r.LedgerOK
		sum.NothingAckedLost = sum.NothingAckedLost && r.StoredReports >= r.Acknowledged
		rates, p99s, p50s = append(rates, r.PerSecond), append(p99s, r.P99ms), append(p50s, r.P50ms)
		srvCPU, genCPU = append(srvCPU, r.ServerCPUPerReportUs), append(genCPU, r.GeneratorCPUPerReportUs)
		if !jsonOut {
			fmt.Fprintf(out, "run %d: ", k+1)
			loadgenPrint(out, false, r.Result)
		}
	}
	sum.MedianPerSecond, sum.MedianP99ms, sum.MedianP50ms = median(rates), median(p99s), median(p50s)
	sum.MedianServerCPUus, sum.MedianGeneratorCPUus = median(srvCPU), median(genCPU)
	return sum, nil
}

type benchArgs struct {
	db             string
	clients, items int
	dur, warm      time.Duration
	mech           string
	writers        int
}

// serverCommand is the privrec executable serve bench starts (tests set
// it to a binary that runs privrec).
var serverCommand = func() (string, []string, error) {
	exe, err := os.Executable()
	return exe, nil, err
}

func benchOnce(ctx context.Context, a benchArgs) (benchRun, string, error) {
	dir, err := os.MkdirTemp("", "privrec-bench-*")
	if err != nil {
		return benchRun{}, "", err
	}
	defer os.RemoveAll(dir)
	url := a.db
	if url == "" {
		url = "sqlite:" + filepath.Join(dir, "bench.db")
	}
	admin, err := writeBenchFiles(dir, a.items)
	if err != nil {
		return benchRun{}, "", err
	}
	srv, err := startBenchServer(ctx, dir, url, a)
	if err != nil {
		return benchRun{}, "", err
	}
	defer srv.stop()
	addr, err := srv.addr(filepath.Join(dir, "addr"))
	if err != nil {
		return benchRun{}, "", err
	}
	tr := &http.Transport{MaxIdleConns: a.clients, MaxIdleConnsPerHost: a.clients, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	res, err := loadgen.Run(ctx, loadgen.Options{Server: "http://" + addr, AdminToken: admin, Clients: a.clients, Duration: a.dur, Warmup: a.warm,
		HTTP: &http.Client{Transport: tr, Timeout: time.Minute}})
	if err != nil {
		return benchRun{}, "", err
	}
	if err := srv.stop(); err != nil {
		return benchRun{}, "", err
	}
	r := benchRun{Result: res}
	if u, ok := srv.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && res.StoredReports > 0 {
		r.ServerCPUPerReportUs = float64(u.Utime.Nano()+u.Stime.Nano()) / 1e3 / float64(res.StoredReports)
	}
	return checkBenchStore(ctx, url, r)
}

// writeBenchFiles writes the run's catalogue (item1 … itemN) and a fresh
// admin token into dir and returns the token.
func writeBenchFiles(dir string, items int) (string, error) {
	var cat strings.Builder
	for j := range items {
		fmt.Fprintf(&cat, "item%d\n", j+1)
	}
	var tb [24]byte
	rand.Read(tb[:])
	admin := hex.EncodeToString(tb[:])
	err := errors.Join(os.WriteFile(filepath.Join(dir, "items.txt"), []byte(cat.String()), 0o644), os.WriteFile(filepath.Join(dir, "admin.token"), []byte(admin), 0o600))
	return admin, err
}

// benchServer is the privrec serve process of one bench run.
type benchServer struct {
	cmd     *exec.Cmd
	stderr  *strings.Builder
	stopped bool
}

// startBenchServer starts privrec serve on a new collection at url with
// the files of dir, on a loopback port it writes into dir/addr.
func startBenchServer(ctx context.Context, dir, url string, a benchArgs) (*benchServer, error) {
	exe, pre, err := serverCommand()
	if err != nil {
		return nil, err
	}
	// ε = 1 per report and a budget no run exhausts: the ledger is
	// checked and debited on every report, never refuses; rate limits
	// out of the way.
	cmd := exec.CommandContext(ctx, exe, append(pre, "serve", "--create", "--db", url, "--listen", "127.0.0.1:0", "--addr-file", filepath.Join(dir, "addr"),
		"--items", filepath.Join(dir, "items.txt"), "--mechanism", a.mech, "--scale", "1:5", "--epsilon", "1", "--budget", "1e8",
		"--rate", "1e9", "--burst", "1000000000", "--enroll-rate", "1e9", "--enroll-burst", "1000000000",
		"--writers", strconv.Itoa(a.writers), "--admin-token-file", filepath.Join(dir, "admin.token"), "--web=false", "--log-level", "warn")...)
	s := &benchServer{cmd: cmd, stderr: &strings.Builder{}}
	cmd.Stderr = s.stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the server: %w", err)
	}
	return s, nil
}

// addr waits (up to 30 s) for the server to write its address to file.
func (s *benchServer) addr(file string) (string, error) {
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(file); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b)), nil
		}
		if time.Since(start) > 30*time.Second {
			return "", fmt.Errorf("the server did not start: %s", s.stderr.String())
		}
	}
}

// stop sends the server SIGTERM and waits for it to exit (once).
func (s *benchServer) stop() error {
	if s.stopped {
		return nil
	}
	s.stopped = true
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		return fmt.Errorf("the server: %w: %s", err, s.stderr.String())
	}
	return nil
}

// checkBenchStore completes r from the database after the run: the
// reports stored and whether every ledger is exact; it returns the
// store's kind.
func checkBenchStore(ctx context.Context, url string, r benchRun) (benchRun, string, error) {
	st, err := store.Open(ctx, url)
	if err != nil {
		return r, "", err
	}
	defer st.Close()
	stats, err := st.Stats(ctx)
	if err != nil {
		return r, "", err
	}
	r.StoredReports = stats.Reports
	r.LedgerOK = st.Check(ctx) == nil
	return r, st.Kind(), nil
}
