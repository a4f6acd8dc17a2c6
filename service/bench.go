package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/service/store"
)

// BenchOptions configure the load benchmark (`privrec serve bench`).
type BenchOptions struct {
	// DB is the database URL ("": an SQLite file in a temporary
	// directory, removed afterwards).
	DB string
	// Clients is the number of concurrent clients (each its own user and
	// its own keep-alive connection).
	Clients int
	// Duration of the measured run, after Warmup.
	Duration, Warmup time.Duration
	// Items is the catalogue size; each report covers all of them.
	Items int
	// Mechanism is rr or laplace.
	Mechanism string
	// Writers is the number of concurrent write transactions (0: the
	// server's default).
	Writers int
	Log     *slog.Logger
}

// BenchResult is what the benchmark measured: acknowledged (durably
// committed) reports per second and the latency of a submission as its
// client saw it (HTTP round trip, including the group commit).
type BenchResult struct {
	DB           string  `json:"db"`
	Clients      int     `json:"clients"`
	Items        int     `json:"items"`
	Mechanism    string  `json:"mechanism"`
	Seconds      float64 `json:"seconds"`
	Acknowledged int64   `json:"acknowledged"`
	PerSecond    float64 `json:"reports_per_second"`
	P50ms        float64 `json:"p50_ms"`
	P90ms        float64 `json:"p90_ms"`
	P99ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
	Errors       int64   `json:"errors"`
	Commits      int64   `json:"commits"`
	// CPUPerReport is the CPU time (user + system, client and server
	// together) this process spent per acknowledged report in the window;
	// Cores the CPU time per second of wall time it got.
	CPUPerReportUs float64 `json:"cpu_us_per_report"`
	Cores          float64 `json:"cores_used"`
	MeanBatch      float64 `json:"mean_batch"`
	// StoredReports and LedgerOK check the run afterwards: the store holds
	// every acknowledged report and every ledger is exact.
	StoredReports int64 `json:"stored_reports"`
	LedgerOK      bool  `json:"ledger_ok"`
}

// Bench runs a server on a loopback port and Clients concurrent clients
// in this process: each client enrols, then loops — randomize a fresh
// report over the whole catalogue on the "device" (the ldp code), submit
// it, wait for the acknowledgement. Both share the machine's cores.
func Bench(ctx context.Context, o BenchOptions) (BenchResult, error) {
	if o.Clients < 1 || o.Items < 1 || o.Duration <= 0 {
		return BenchResult{}, fmt.Errorf("bench: --clients, --items and --duration must be positive")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Mechanism == "" {
		o.Mechanism = "rr"
	}
	url := o.DB
	if url == "" {
		dir, err := os.MkdirTemp("", "privrec-bench-*")
		if err != nil {
			return BenchResult{}, err
		}
		defer os.RemoveAll(dir)
		url = "sqlite:" + filepath.Join(dir, "bench.db")
	}
	st, err := store.Create(ctx, url)
	if err != nil {
		return BenchResult{}, err
	}
	defer st.Close()
	ids := make([]string, o.Items)
	for j := range ids {
		ids[j] = fmt.Sprintf("item%d", j+1)
	}
	cat, err := model.NewCatalogue(ids, nil)
	if err != nil {
		return BenchResult{}, err
	}
	// ε = 1 per report, a budget no run exhausts: the ledger is checked
	// and debited on every report, never refuses.
	opt := Options{Catalogue: cat, Mechanism: o.Mechanism, Epsilon: 1, Budget: 1e8, Scale: model.Range{Min: 1, Max: 5},
		Rate: 1e9, Burst: 1 << 30, EnrollRate: 1e9, EnrollBurst: 1 << 30, Writers: o.Writers, Log: o.Log}
	srv, err := New(ctx, st, opt)
	if err != nil {
		return BenchResult{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return BenchResult{}, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- Serve(sctx, srv, ln, 10*time.Second) }()
	defer func() { stop(); <-served }()
	base := "http://" + ln.Addr().String()
	cfg, err := client.New(base, "").Config(ctx)
	if err != nil {
		return BenchResult{}, err
	}
	dev, err := client.NewDevice(cfg)
	if err != nil {
		return BenchResult{}, err
	}
	tr := &http.Transport{MaxIdleConns: o.Clients, MaxIdleConnsPerHost: o.Clients, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	clients := make([]*client.Client, o.Clients)
	for k := range clients {
		c := client.New(base, "")
		c.HTTP = &http.Client{Transport: tr, Timeout: time.Minute}
		if _, err := c.Enroll(ctx); err != nil {
			return BenchResult{}, fmt.Errorf("bench: enrolling: %w", err)
		}
		clients[k] = c
	}
	// Each client's own ratings: a third of the catalogue, fixed.
	ratings := make([]client.Ratings, o.Clients)
	src := noise.Seeded(1)
	for k := range ratings {
		ratings[k] = client.Ratings{}
		for _, id := range ids {
			if src.Float64() < 1.0/3 {
				ratings[k][id] = float64(1 + src.IntN(5))
			}
		}
	}
	var (
		mu    sync.Mutex
		lat   []time.Duration
		acked int64
		errs  int64
	)
	var commits0, ops0 int64
	start := time.Now()
	warmEnd := start.Add(o.Warmup)
	end := warmEnd.Add(o.Duration)
	var wg sync.WaitGroup
	for k, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := noise.Secure()
			var mine []time.Duration
			var n, e int64
			for seq := 0; ; seq++ {
				now := time.Now()
				if now.After(end) || ctx.Err() != nil {
					break
				}
				rep, _, err := dev.Randomize(ratings[k], src, "c"+strconv.Itoa(k)+"-"+strconv.Itoa(seq))
				if err != nil {
					e++
					continue
				}
				t0 := time.Now()
				_, _, err = c.Submit(ctx, rep)
				d := time.Since(t0)
				if t0.Before(warmEnd) {
					continue
				}
				if err != nil {
					e++
					continue
				}
				if t0.Add(d).After(end) {
					continue // acknowledged after the window
				}
				n++
				mine = append(mine, d)
			}
			mu.Lock()
			lat = append(lat, mine...)
			acked += n
			errs += e
			mu.Unlock()
		}()
	}
	// Commit counters at the start of the window.
	time.Sleep(time.Until(warmEnd))
	commits0, ops0 = srv.b.commits.Load(), srv.b.ops.Load()
	cpu0 := cpuTime()
	time.Sleep(time.Until(end))
	commits1, ops1 := srv.b.commits.Load(), srv.b.ops.Load()
	cpu := cpuTime() - cpu0
	wg.Wait()
	if len(lat) == 0 {
		return BenchResult{}, errors.New("bench: no report was acknowledged")
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		i := min(len(lat)-1, int(p*float64(len(lat))))
		return float64(lat[i].Microseconds()) / 1000
	}
	res := BenchResult{DB: st.Kind(), Clients: o.Clients, Items: o.Items, Mechanism: o.Mechanism, Seconds: o.Duration.Seconds(),
		Acknowledged: acked, PerSecond: float64(acked) / o.Duration.Seconds(),
		P50ms: q(0.50), P90ms: q(0.90), P99ms: q(0.99), MaxMs: float64(lat[len(lat)-1].Microseconds()) / 1000,
		Errors: errs, Commits: commits1 - commits0}
	res.Cores = cpu.Seconds() / o.Duration.Seconds()
	if acked > 0 {
		res.CPUPerReportUs = float64(cpu.Microseconds()) / float64(acked)
	}
	if res.Commits > 0 {
		res.MeanBatch = float64(ops1-ops0) / float64(res.Commits)
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		return res, err
	}
	res.StoredReports = stats.Reports
	res.LedgerOK = st.Check(ctx) == nil
	return res, nil
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
