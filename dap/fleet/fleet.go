// Package fleet simulates many devices against a running leader and
// helper (privrec serve --role): each device enrols, keeps her own
// ledger, computes her contribution from her own data only, quantizes,
// shards, seals and uploads it; an administrator then aggregates and
// collects. It measures what a device pays per task (time, bytes) and the
// aggregators' verification throughput. Used by the end-to-end experiment
// (privrec dap simulate) and the tests.
package fleet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudflare/circl/kem"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/server"
)

// Fleet is a set of simulated devices.
type Fleet struct {
	Leader, Helper string
	AdminToken     string
	// BudgetRho is each device's own budget (its ledger).
	BudgetRho float64
	// Workers is the number of devices working at once (0: GOMAXPROCS).
	Workers int
	// AggregateEvery, when positive, has the administrator run the
	// leader's aggregation each time that many more reports have been
	// uploaded, while the devices keep uploading (as a deployment would,
	// rather than after the last device): the leader drops each judged
	// report's shares, so its database holds about AggregateEvery reports'
	// shares instead of all of them. Zero aggregates once, after every
	// upload (verification then runs alone and its throughput is measured
	// without the devices' load).
	AggregateEvery int
	HTTP           *http.Client

	tokens  []string
	ledgers []*dap.Ledger
	cli     *dap.Client
}

// Enrol enrols n devices.
func (f *Fleet) Enrol(ctx context.Context, n int) error {
	f.cli = &dap.Client{Leader: f.Leader, Helper: f.Helper, HTTP: f.HTTP}
	f.tokens = make([]string, n)
	f.ledgers = make([]*dap.Ledger, n)
	return f.each(ctx, n, func(u int) error {
		var e server.Enrolment
		if err := f.cli.Do(ctx, http.MethodPost, f.Leader, "/dap/v1/users", "", nil, &e); err != nil {
			return err
		}
		l, err := dap.NewLedger(f.Leader, f.BudgetRho)
		if err != nil {
			return err
		}
		f.tokens[u], f.ledgers[u] = e.Token, l
		return nil
	})
}

// Ledger is device u's own ledger.
func (f *Fleet) Ledger(u int) *dap.Ledger { return f.ledgers[u] }

func (f *Fleet) each(ctx context.Context, n int, fn func(u int) error) error {
	w := f.Workers
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(w, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				u := int(next.Add(1) - 1)
				if u >= n || ctx.Err() != nil {
					return
				}
				if err := fn(u); err != nil {
					once.Do(func() { first = fmt.Errorf("device %d: %w", u, err) })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// upload sends a device's report to the leader in the binary encoding
// (server.ReportMediaType). dap.Client.Upload, the browser's path, sends
// JSON; at 1.8 MB of shares that costs the leader about 30 ms of JSON
// scanning and base64 per report (a third of its work outside Prio3 at
// MovieLens-1M), which the simulation of 6 040 devices avoids.
func (f *Fleet) upload(ctx context.Context, token string, r *dap.Report) error {
	b, err := server.EncodeReport(r)
	if err != nil {
		return err
	}
	path := "/dap/v1/tasks/" + r.TaskID + "/reports"
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, strings.TrimRight(f.Leader, "/")+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("fleet: upload: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", server.ReportMediaType)
	hc := f.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("fleet: upload: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusCreated {
		return &dap.HTTPError{Status: resp.StatusCode, Method: http.MethodPut, Path: path, Message: strings.TrimSpace(string(msg))}
	}
	return nil
}

// Stats are one task's measured costs.
type Stats struct {
	Task    string `json:"task"`
	Devices int    `json:"devices"`
	// Device side, means over devices: seconds to compute, quantize,
	// shard and seal one report, and its payload bytes.
	DeviceSeconds float64 `json:"device_seconds"`
	ReportBytes   int     `json:"report_bytes"`
	// Upload is the wall time for all devices to upload (Workers at once).
	UploadSeconds float64 `json:"upload_seconds"`
	// Aggregation: wall time of the leader's verification and aggregation
	// of every report (with the helper), summed over the administrator's
	// calls (with AggregateEvery, most of them ran while devices were
	// sharding and uploading on the same machine), and reports per second
	// of that time; AggregateAfterUploadSeconds is the part after the last
	// upload, which the release waits for.
	AggregateSeconds            float64 `json:"aggregate_seconds"`
	AggregateCalls              int     `json:"aggregate_calls"`
	AggregateAfterUploadSeconds float64 `json:"aggregate_after_upload_seconds"`
	ReportsPerSecond            float64 `json:"reports_per_second"`
	Accepted                    int     `json:"accepted"`
	Rejected                    int     `json:"rejected"`
	CollectSeconds              float64 `json:"collect_seconds"`
}

// Run creates task t at the aggregators, has devices 0…n−1 contribute
// (contribute(u) is device u's contribution, from her own data),
// aggregates and collects; it returns the release. It reads as task →
// uploads (with the administrator aggregating alongside) → the last
// aggregation → collection.
func (f *Fleet) Run(ctx context.Context, t dap.Task, n int, contribute func(u int) []float64) (*server.Release, Stats, error) {
	r := &taskRun{f: f, st: Stats{Task: t.ID, Devices: n}}
	if err := r.prepare(ctx, t); err != nil {
		return nil, r.st, err
	}
	start := time.Now()
	if err := r.uploadAll(ctx, n, contribute); err != nil {
		return nil, r.st, err
	}
	r.st.UploadSeconds = time.Since(start).Seconds()
	r.st.DeviceSeconds = float64(r.devNanos.Load()) / 1e9 / float64(n)
	r.st.ReportBytes = int(r.bytes.Load() / int64(n))
	start = time.Now()
	if err := r.aggregate(ctx); err != nil {
		return nil, r.st, err
	}
	r.st.AggregateAfterUploadSeconds = time.Since(start).Seconds()
	r.st.AggregateSeconds = float64(r.aggNanos.Load()) / 1e9
	r.st.ReportsPerSecond = float64(r.st.Accepted+r.st.Rejected) / r.st.AggregateSeconds
	start = time.Now()
	var rel server.Release
	if err := f.cli.Do(ctx, http.MethodPost, f.Leader, "/dap/v1/admin/tasks/"+r.id+"/collect", f.AdminToken, nil, &rel); err != nil {
		return nil, r.st, err
	}
	r.st.CollectSeconds = time.Since(start).Seconds()
	return &rel, r.st, nil
}

// taskRun is one task's run: what the devices read from the aggregators
// and the costs measured.
type taskRun struct {
	f                  *Fleet
	id                 string      // the task's ID as the leader created it
	pub                dap.Task    // the task as the leader publishes it
	derived            dap.Derived // the privacy parameters each device derives
	lk, hk             kem.PublicKey
	st                 Stats
	devNanos, bytes    atomic.Int64
	uploaded, aggNanos atomic.Int64
}

// prepare creates the task and reads what every device reads: the
// aggregators' public keys and the published task, from whose plan each
// device derives her privacy parameters (dap.Derive) before her ledger
// pays what she derived. The simulated devices are identical, so one
// derivation serves them all; their users accept the noise mode the
// experiment chose (a split-noise run models users who opted in).
func (r *taskRun) prepare(ctx context.Context, t dap.Task) error {
	f := r.f
	if err := f.cli.Do(ctx, http.MethodPost, f.Leader, "/dap/v1/admin/tasks", f.AdminToken, t, &t); err != nil {
		return err
	}
	r.id = t.ID
	var err error
	if r.lk, err = f.cli.PublicKey(ctx, f.Leader); err != nil {
		return err
	}
	if r.hk, err = f.cli.PublicKey(ctx, f.Helper); err != nil {
		return err
	}
	if r.pub, err = f.cli.Task(ctx, r.id); err != nil {
		return err
	}
	r.derived, err = dap.Consent{SplitNoise: true}.Check(r.pub)
	return err
}

// aggregate has the leader verify and aggregate the reports uploaded so
// far (with the helper).
func (r *taskRun) aggregate(ctx context.Context) error {
	f := r.f
	t0 := time.Now()
	var ar server.AggregateResult
	if err := f.cli.Do(ctx, http.MethodPost, f.Leader, "/dap/v1/admin/tasks/"+r.id+"/aggregate", f.AdminToken, nil, &ar); err != nil {
		return err
	}
	r.aggNanos.Add(int64(time.Since(t0)))
	r.st.AggregateCalls++
	r.st.Accepted += ar.Accepted
	r.st.Rejected += ar.Rejected
	return nil
}

// uploadAll has every device contribute and upload, while the
// administrator aggregates alongside (one call at a time, poked by each
// upload, stopping when the uploads end).
func (r *taskRun) uploadAll(ctx context.Context, n int, contribute func(u int) []float64) error {
	poke := make(chan struct{}, 1)
	uploadsDone := make(chan struct{})
	aggDone := make(chan error, 1)
	go func() { aggDone <- r.aggregateAlongside(ctx, poke, uploadsDone) }()
	err := r.f.each(ctx, n, func(u int) error {
		if err := r.device(ctx, u, contribute); err != nil {
			return err
		}
		select {
		case poke <- struct{}{}:
		default:
		}
		return nil
	})
	close(uploadsDone)
	if aerr := <-aggDone; err == nil {
		err = aerr
	}
	return err
}

// aggregateAlongside aggregates each time AggregateEvery more reports
// have been uploaded, until the uploads end.
func (r *taskRun) aggregateAlongside(ctx context.Context, poke, uploadsDone <-chan struct{}) error {
	var err error
	for done := int64(0); r.f.AggregateEvery > 0 && err == nil; {
		select {
		case <-uploadsDone:
			return nil
		case <-poke:
		}
		if n := r.uploaded.Load(); n-done >= int64(r.f.AggregateEvery) {
			done = n
			err = r.aggregate(ctx)
		}
	}
	<-uploadsDone
	return err
}

// device is device u's part: compute, quantize, shard and seal her contribution,
// charge her ledger, upload.
func (r *taskRun) device(ctx context.Context, u int, contribute func(u int) []float64) error {
	t0 := time.Now()
	q, err := r.pub.Quantize(contribute(u))
	if err != nil {
		return err
	}
	rep, err := r.pub.Shard(q, r.lk, r.hk)
	if err != nil {
		return err
	}
	r.devNanos.Add(int64(time.Since(t0)))
	r.bytes.Add(int64(rep.Size()))
	if err := r.f.ledgers[u].Charge(r.derived); err != nil {
		return err
	}
	if err := r.f.upload(ctx, r.f.tokens[u], rep); err != nil {
		return err
	}
	r.uploaded.Add(1)
	return nil
}
