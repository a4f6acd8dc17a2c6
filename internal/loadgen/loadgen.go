// Package loadgen is the load generator of `privrec loadgen` and
// `privrec serve bench`: concurrent clients that each enrol with a
// running `privrec serve`, then loop — randomize a fresh report over the
// whole catalogue with the device code, submit it, wait for the
// acknowledgement (which the server sends only once the report's
// group-commit transaction is durable). It talks to the server over
// HTTP only, so it runs in a process of its own; it lives outside
// package service so that the service does not import its own client.
// Enrolment goes through the reference client; reports to a plain-HTTP
// server go through a lean keep-alive sender (wire.go) that spends less
// than half the reference client's CPU per report, so that the cores the
// generator shares with the server are not the bottleneck measured.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/service/api"
)

// Options configure a run.
type Options struct {
	// Server is the base URL of a running privrec serve (local mode, open
	// enrolment with rate limits that let Clients enrol).
	Server string
	// AdminToken, when set, lets the run read the server's commit
	// counters (GET /metrics) and its stored report count.
	AdminToken string
	// Clients is the number of concurrent clients, each its own user on
	// its own keep-alive connection.
	Clients int
	// Duration of the measured window, after Warmup.
	Duration, Warmup time.Duration
	// HTTP is the client to use (nil: a keep-alive transport sized for
	// Clients).
	HTTP *http.Client
}

// Result is what a run measured: acknowledged (durably committed)
// reports per second and the latency of a submission as its client saw
// it (the HTTP round trip, group commit included).
type Result struct {
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
	// GeneratorCPUPerReportUs is this process's CPU time (randomizing
	// and HTTP) per acknowledged report in the window.
	GeneratorCPUPerReportUs float64 `json:"generator_cpu_us_per_report"`
	// Commits and MeanBatch are the server's group commits in the window
	// and writes per commit (with AdminToken; else 0).
	Commits   int64   `json:"commits,omitempty"`
	MeanBatch float64 `json:"mean_batch,omitempty"`
	// StoredReports is the server's report count afterwards (with
	// AdminToken): at least every acknowledged report.
	StoredReports int64 `json:"stored_reports,omitempty"`
	// LoadAverage is the machine's 1-minute load average at the start
	// and the end of the measured window (Linux; absent elsewhere): on a
	// shared machine reports/s says little without it.
	LoadAverage []float64 `json:"load_average_1m,omitempty"`
}

// loadAverage is the 1-minute load average (ok false where the system
// does not say).
func loadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	x, err := strconv.ParseFloat(f[0], 64)
	return x, err == nil
}

// Run drives the server for Warmup + Duration: set-up (configuration,
// device, enrolled clients, their ratings) → clients submitting while the
// window is measured → latency quantiles → the server's own counters.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Clients < 1 || o.Duration <= 0 || o.Warmup < 0 {
		return Result{}, errors.New("loadgen: clients and duration must be positive, warm-up not negative")
	}
	hc := o.HTTP
	if hc == nil {
		tr := &http.Transport{MaxIdleConns: o.Clients, MaxIdleConnsPerHost: o.Clients, IdleConnTimeout: time.Minute}
		defer tr.CloseIdleConnections()
		hc = &http.Client{Transport: tr, Timeout: time.Minute}
	}
	r, err := newRun(ctx, o, hc)
	if err != nil {
		return Result{}, err
	}
	w := r.drive(ctx)
	if len(r.lat) == 0 {
		return Result{}, fmt.Errorf("loadgen: no report was acknowledged (%d errors)", r.errs)
	}
	res := r.result(w)
	if o.AdminToken != "" {
		if err := r.serverCounters(ctx, w, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// run is one load-generation run: its set-up and the clients' tallies.
type run struct {
	o       Options
	hc      *http.Client
	cfg     *api.Config
	dev     *client.Device
	clients []*client.Client
	ratings []client.Ratings // each client's own, fixed

	warmEnd, end time.Time

	mu    sync.Mutex // guards the tallies below
	lat   []time.Duration
	acked int64
	errs  int64
}

// newRun reads the server's configuration, enrols the clients and gives
// each its ratings.
func newRun(ctx context.Context, o Options, hc *http.Client) (*run, error) {
	anon := client.New(o.Server, "")
	anon.HTTP = hc
	cfg, err := anon.Config(ctx)
	if err != nil {
		return nil, fmt.Errorf("loadgen: reading the configuration: %w", err)
	}
	if cfg.Mode != api.ModeLocal {
		return nil, fmt.Errorf("loadgen: the server collects in %s mode; the generator sends local-mode reports", cfg.Mode)
	}
	dev, err := client.NewDevice(cfg)
	if err != nil {
		return nil, err
	}
	r := &run{o: o, hc: hc, cfg: cfg, dev: dev, clients: make([]*client.Client, o.Clients)}
	for k := range r.clients {
		c := client.New(o.Server, "")
		c.HTTP = hc
		if _, err := c.Enroll(ctx); err != nil {
			return nil, fmt.Errorf("loadgen: enrolling client %d: %w", k, err)
		}
		r.clients[k] = c
	}
	r.ratings = clientRatings(o.Clients, cfg)
	return r, nil
}

// clientRatings gives each of n clients a third of the catalogue, rated
// 1..5, from a fixed seed.
func clientRatings(n int, cfg *api.Config) []client.Ratings {
	out := make([]client.Ratings, n)
	src := noise.Seeded(1)
	for k := range out {
		out[k] = client.Ratings{}
		for _, it := range cfg.Items {
			if src.Float64() < 1.0/3 {
				out[k][it.ID] = float64(1 + src.IntN(5))
			}
		}
	}
	return out
}

// window is what was measured around the window: this process's CPU
// time, the load average at both ends and the server's commit counters.
type window struct {
	cpu          time.Duration
	load0, load1 float64
	loadOK       bool
	m0, m1       counters
	merr         error
}

// drive runs the clients for Warmup + Duration and measures the window.
func (r *run) drive(ctx context.Context) window {
	start := time.Now()
	r.warmEnd = start.Add(r.o.Warmup)
	r.end = r.warmEnd.Add(r.o.Duration)
	var wg sync.WaitGroup
	for k := range r.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.client(ctx, k)
		}()
	}
	var w window
	time.Sleep(time.Until(r.warmEnd))
	m0, merr := commitCounters(ctx, r.hc, r.o)
	cpu0 := cpuTime()
	load0, ok0 := loadAverage()
	time.Sleep(time.Until(r.end))
	w.cpu = cpuTime() - cpu0
	load1, ok1 := loadAverage()
	m1, merr1 := commitCounters(ctx, r.hc, r.o)
	wg.Wait()
	w.load0, w.load1, w.loadOK = load0, load1, ok0 && ok1
	w.m0, w.m1, w.merr = m0, m1, errors.Join(merr, merr1)
	return w
}

// client is client k's loop: randomize, submit, time the acknowledgement
// (counted only inside the window), until the end or cancellation.
func (r *run) client(ctx context.Context, k int) {
	sub := newSubmitter(r.o.Server, r.clients[k])
	defer sub.close()
	src := noise.Secure()
	var mine []time.Duration
	var n, e int64
	for seq := 0; ; seq++ {
		if time.Now().After(r.end) || ctx.Err() != nil {
			break
		}
		rep, _, err := r.dev.Randomize(r.ratings[k], src, "c"+strconv.Itoa(k)+"-"+strconv.Itoa(seq))
		if err != nil {
			e++
			continue
		}
		t0 := time.Now()
		err = sub.submit(ctx, rep)
		d := time.Since(t0)
		switch {
		case t0.Before(r.warmEnd):
		case err != nil:
			e++
		case t0.Add(d).After(r.end): // acknowledged after the window
		default:
			n++
			mine = append(mine, d)
		}
	}
	r.mu.Lock()
	r.lat = append(r.lat, mine...)
	r.acked += n
	r.errs += e
	r.mu.Unlock()
}

// result summarises the tallies: throughput, latency quantiles and CPU
// per report.
func (r *run) result(w window) Result {
	lat := r.lat
	slices.Sort(lat)
	q := func(p float64) float64 {
		i := min(len(lat)-1, int(p*float64(len(lat))))
		return float64(lat[i].Microseconds()) / 1000
	}
	secs := r.o.Duration.Seconds()
	res := Result{Clients: r.o.Clients, Items: len(r.cfg.Items), Mechanism: r.cfg.Mechanism, Seconds: secs,
		Acknowledged: r.acked, PerSecond: float64(r.acked) / secs,
		P50ms: q(0.50), P90ms: q(0.90), P99ms: q(0.99), MaxMs: float64(lat[len(lat)-1].Microseconds()) / 1000, Errors: r.errs,
		GeneratorCPUPerReportUs: float64(w.cpu.Microseconds()) / float64(r.acked)}
	if w.loadOK {
		res.LoadAverage = []float64{w.load0, w.load1}
	}
	return res
}

// serverCounters adds the server's group commits in the window and its
// stored report count (with AdminToken).
func (r *run) serverCounters(ctx context.Context, w window, res *Result) error {
	if w.merr != nil {
		return w.merr
	}
	res.Commits = int64(w.m1.count - w.m0.count)
	if res.Commits > 0 {
		res.MeanBatch = (w.m1.sum - w.m0.sum) / float64(res.Commits)
	}
	admin := client.New(r.o.Server, r.o.AdminToken)
	admin.HTTP = r.hc
	st, err := admin.Stats(ctx)
	if err != nil {
		return fmt.Errorf("loadgen: reading the server's stats: %w", err)
	}
	res.StoredReports = st.Reports
	return nil
}

// counters are the server's group-commit histogram totals.
type counters struct {
	count uint64
	sum   float64
}

// commitCounters reads privrec_commit_batch_size from GET /metrics
// (Prometheus text format, parsed with the Prometheus library).
func commitCounters(ctx context.Context, hc *http.Client, o Options) (counters, error) {
	if o.AdminToken == "" {
		return counters{}, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(o.Server, "/")+api.PathMetrics, nil)
	if err != nil {
		return counters{}, err
	}
	req.Header.Set("Authorization", "Bearer "+o.AdminToken)
	resp, err := hc.Do(req)
	if err != nil {
		return counters{}, fmt.Errorf("loadgen: reading the metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return counters{}, fmt.Errorf("loadgen: reading the metrics: HTTP %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return counters{}, fmt.Errorf("loadgen: parsing the metrics: %w", err)
	}
	f, ok := fams["privrec_commit_batch_size"]
	if !ok || len(f.GetMetric()) == 0 || f.GetMetric()[0].GetHistogram() == nil {
		return counters{}, errors.New("loadgen: the server exports no privrec_commit_batch_size")
	}
	h := f.GetMetric()[0].GetHistogram()
	return counters{count: h.GetSampleCount(), sum: h.GetSampleSum()}, nil
}

// cpuTime is this process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
