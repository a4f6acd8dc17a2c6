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

// Run drives the server for Warmup + Duration.
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
	anon := client.New(o.Server, "")
	anon.HTTP = hc
	cfg, err := anon.Config(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("loadgen: reading the configuration: %w", err)
	}
	if cfg.Mode != api.ModeLocal {
		return Result{}, fmt.Errorf("loadgen: the server collects in %s mode; the generator sends local-mode reports", cfg.Mode)
	}
	dev, err := client.NewDevice(cfg)
	if err != nil {
		return Result{}, err
	}
	clients := make([]*client.Client, o.Clients)
	for k := range clients {
		c := client.New(o.Server, "")
		c.HTTP = hc
		if _, err := c.Enroll(ctx); err != nil {
			return Result{}, fmt.Errorf("loadgen: enrolling client %d: %w", k, err)
		}
		clients[k] = c
	}
	// Each client's own ratings: a third of the catalogue, fixed.
	ratings := make([]client.Ratings, o.Clients)
	src := noise.Seeded(1)
	for k := range ratings {
		ratings[k] = client.Ratings{}
		for _, it := range cfg.Items {
			if src.Float64() < 1.0/3 {
				ratings[k][it.ID] = float64(1 + src.IntN(5))
			}
		}
	}
	var (
		mu    sync.Mutex
		lat   []time.Duration
		acked int64
		errs  int64
	)
	start := time.Now()
	warmEnd := start.Add(o.Warmup)
	end := warmEnd.Add(o.Duration)
	var wg sync.WaitGroup
	for k, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := newSubmitter(o.Server, c)
			defer sub.close()
			src := noise.Secure()
			var mine []time.Duration
			var n, e int64
			for seq := 0; ; seq++ {
				if time.Now().After(end) || ctx.Err() != nil {
					break
				}
				rep, _, err := dev.Randomize(ratings[k], src, "c"+strconv.Itoa(k)+"-"+strconv.Itoa(seq))
				if err != nil {
					e++
					continue
				}
				t0 := time.Now()
				err = sub.submit(ctx, rep)
				d := time.Since(t0)
				switch {
				case t0.Before(warmEnd):
				case err != nil:
					e++
				case t0.Add(d).After(end): // acknowledged after the window
				default:
					n++
					mine = append(mine, d)
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			acked += n
			errs += e
			mu.Unlock()
		}()
	}
	time.Sleep(time.Until(warmEnd))
	m0, merr := commitCounters(ctx, hc, o)
	cpu0 := cpuTime()
	load0, ok0 := loadAverage()
	time.Sleep(time.Until(end))
	cpu := cpuTime() - cpu0
	load1, ok1 := loadAverage()
	m1, merr1 := commitCounters(ctx, hc, o)
	wg.Wait()
	if len(lat) == 0 {
		return Result{}, fmt.Errorf("loadgen: no report was acknowledged (%d errors)", errs)
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		i := min(len(lat)-1, int(p*float64(len(lat))))
		return float64(lat[i].Microseconds()) / 1000
	}
	res := Result{Clients: o.Clients, Items: len(cfg.Items), Mechanism: cfg.Mechanism, Seconds: o.Duration.Seconds(),
		Acknowledged: acked, PerSecond: float64(acked) / o.Duration.Seconds(),
		P50ms: q(0.50), P90ms: q(0.90), P99ms: q(0.99), MaxMs: float64(lat[len(lat)-1].Microseconds()) / 1000, Errors: errs,
		GeneratorCPUPerReportUs: float64(cpu.Microseconds()) / float64(acked)}
	if ok0 && ok1 {
		res.LoadAverage = []float64{load0, load1}
	}
	if o.AdminToken != "" {
		if err := errors.Join(merr, merr1); err != nil {
			return res, err
		}
		res.Commits = int64(m1.count - m0.count)
		if res.Commits > 0 {
			res.MeanBatch = (m1.sum - m0.sum) / float64(res.Commits)
		}
		admin := client.New(o.Server, o.AdminToken)
		admin.HTTP = hc
		st, err := admin.Stats(ctx)
		if err != nil {
			return res, fmt.Errorf("loadgen: reading the server's stats: %w", err)
		}
		res.StoredReports = st.Reports
	}
	return res, nil
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
