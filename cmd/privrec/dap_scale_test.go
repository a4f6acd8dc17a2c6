//go:build linux

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/server"
	"github.com/privrec/privrec/service/store/storetest"
	"github.com/privrec/privrec/statistic"
)

// BenchmarkDAPScale measures the role servers' throughput and CPU per
// report on each store, with one and with two leader processes sharing
// the leader's database: counts reports at MovieLens-1M's catalogue
// (3 706 items × 9 bits: 546 432 bytes), jobs of 64 reports.
//
//	PRIVREC_TEST_POSTGRES=postgres://… go test -run XXX -bench DAPScale -benchtime 3x ./cmd/privrec
//
// Each sub-benchmark runs a helper and one or two leaders as real
// processes (this test binary run as privrec serve --role, on loopback);
// on PostgreSQL both aggregators' databases are schemas of the test
// database (the PostgreSQL server on this machine). One iteration is one
// round: 64 new devices enrol and shard their reports (not measured),
// upload them with 8 at a time, spread over the leaders (uploads/s), and
// the leaders' aggregate calls run at once (reports/s). upload-cpu-ms and
// agg-cpu-ms are CPU per report (user + system, from /proc) of the
// leader processes, the helper and, on PostgreSQL, the server's backends
// serving them and its WAL writer, checkpointer and background writer.
// Each metric is the median over the rounds.
func BenchmarkDAPScale(b *testing.B) {
	items := make([]string, 3706)
	for j := range items {
		items[j] = strconv.Itoa(j + 1)
	}
	for _, kind := range storetest.Kinds {
		for _, leaders := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/leaders=%d", kind, leaders), func(b *testing.B) {
				sr := newScaleRig(b, kind, leaders)
				task := sr.createTask(scaleTask(b, items))
				sr.round(task, 4) // the leaders' per-task set-up (report size)
				var rounds []scaleRound
				for b.Loop() {
					rounds = append(rounds, sr.round(task, 64))
				}
				for _, name := range sr.leaders {
					sr.kill(name)
				}
				sr.kill("helper")
				reportScale(b, rounds)
			})
		}
	}
}

// scaleRig is a dapRig whose processes' CPU is measured, with that of
// the PostgreSQL server's processes serving them.
type scaleRig struct {
	*dapRig
	leaders []string
	pg      *sql.DB // nil on SQLite
	app     string  // the application_name of the aggregators' PostgreSQL connections
}

func newScaleRig(b *testing.B, kind string, leaders int) *scaleRig {
	sr := &scaleRig{dapRig: newDapRig(b), leaders: []string{"leader", "leader2"}[:leaders]}
	sr.extra["leader"] = []string{"--batch", "64", "--helper-timeout", "10m", "--lock-ttl", "1m"}
	sr.extra["leader2"] = sr.extra["leader"]
	if kind == "postgres" {
		sr.app = "privrec-scale-" + strconv.Itoa(time.Now().Nanosecond())
		leaderDB := storetest.WithParam(storetest.URL(b, kind), "application_name", sr.app)
		helperDB := storetest.WithParam(storetest.URL(b, kind), "application_name", sr.app)
		sr.extra["leader"] = append(sr.extra["leader"], "--db", leaderDB)
		sr.extra["leader2"] = sr.extra["leader"]
		sr.extra["helper"] = []string{"--db", helperDB}
		var err error
		if sr.pg, err = sql.Open("pgx", storetest.Postgres(b)); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sr.pg.Close() })
	}
	sr.start("helper", "")
	for _, name := range sr.leaders {
		sr.start(name, "")
	}
	return sr
}

// scaleTask is a counts task over items (the lattice of privrec dap
// simulate).
func scaleTask(b *testing.B, items []string) dap.Task {
	c := &statistic.Counts{Items: len(items)}
	mech, err := statistic.Mechanism(c.Spec(), 0.5, 1e-6)
	if err != nil {
		b.Fatal(err)
	}
	task, err := dap.Lattice{StepBits: 8}.TaskFor("scale", statistic.RowPlan{Catalogue: items}, c, mech)
	if err != nil {
		b.Fatal(err)
	}
	return task
}

// cpu is the CPU seconds so far of the aggregator processes and of the
// PostgreSQL processes serving them.
func (sr *scaleRig) cpu() float64 {
	var pids []int
	for _, name := range append([]string{"helper"}, sr.leaders...) {
		pids = append(pids, sr.procs[name].cmd.Process.Pid)
	}
	if sr.pg != nil {
		rows, err := sr.pg.Query(`SELECT pid FROM pg_stat_activity WHERE application_name = $1
			OR backend_type IN ('checkpointer', 'walwriter', 'background writer')`, sr.app)
		if err != nil {
			sr.t.Fatal(err)
		}
		for rows.Next() {
			var pid int
			if err := rows.Scan(&pid); err != nil {
				sr.t.Fatal(err)
			}
			pids = append(pids, pid)
		}
		rows.Close()
	}
	total := 0.0
	for _, pid := range pids {
		if s, ok := procCPU(pid); ok {
			total += s
		}
	}
	return total
}

// scaleRound is one round's throughputs and CPU seconds per report.
type scaleRound struct{ uploadRate, aggRate, uploadCPU, aggCPU float64 }

// round enrols n devices and shards their reports, uploads them 8 at a
// time spread over the leaders, then runs the leaders' aggregate calls
// at once.
func (sr *scaleRig) round(task dap.Task, n int) scaleRound {
	sr.t.Helper()
	ds := sr.scaleDevices(task, n)
	c0, t0 := sr.cpu(), time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sr.upload(sr.leaders[i%len(sr.leaders)], task, ds[i])
			}
		}()
	}
	for i := range ds {
		next <- i
	}
	close(next)
	wg.Wait()
	c1, t1 := sr.cpu(), time.Now()
	accepted := make([]int, len(sr.leaders))
	for i, name := range sr.leaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res server.AggregateResult
			code, body, _ := sr.call(http.MethodPost, sr.url(name)+"/dap/v1/admin/tasks/"+task.ID+"/aggregate", sr.adminToken, nil)
			if code != http.StatusOK {
				sr.t.Errorf("%s: aggregate: HTTP %d %s", name, code, body)
			}
			if json.Unmarshal(body, &res) == nil {
				accepted[i] = res.Accepted
			}
		}()
	}
	wg.Wait()
	c2, t2 := sr.cpu(), time.Now()
	sum := 0
	for _, a := range accepted {
		sum += a
	}
	if sum != n {
		sr.t.Fatalf("the leaders accepted %v reports of %d", accepted, n)
	}
	return scaleRound{uploadRate: float64(n) / t1.Sub(t0).Seconds(), aggRate: float64(n) / t2.Sub(t1).Seconds(),
		uploadCPU: (c1 - c0) / float64(n), aggCPU: (c2 - c1) / float64(n)}
}

// scaleDevices enrols n devices and shards a report for each (device i
// counts items i … i+99).
func (sr *scaleRig) scaleDevices(task dap.Task, n int) []*device {
	sr.t.Helper()
	c := &dap.Client{Leader: sr.url("leader"), Helper: sr.url("helper")}
	lk, err := c.PublicKey(context.Background(), sr.url("leader"))
	if err != nil {
		sr.t.Fatal(err)
	}
	hk, err := c.PublicKey(context.Background(), sr.url("helper"))
	if err != nil {
		sr.t.Fatal(err)
	}
	ds := make([]*device, n)
	for i := range ds {
		var e server.Enrolment
		sr.retry("enrol", func() (int, []byte) {
			code, b, _ := sr.call(http.MethodPost, sr.url("leader")+"/dap/v1/users", "", nil)
			return code, b
		}, http.StatusCreated, &e)
		q := make([]int64, task.Dimension)
		for j := range 100 {
			q[(i+j)%len(q)] = 25 // Σq² = 62 500: within the unit norm (2⁸ lattice units)
		}
		rep, err := task.Shard(q, lk, hk)
		if err != nil {
			sr.t.Fatal(err)
		}
		b, err := server.EncodeReport(rep)
		if err != nil {
			sr.t.Fatal(err)
		}
		ds[i] = &device{token: e.Token, report: b}
	}
	return ds
}

// reportScale reports the medians over the rounds.
func reportScale(b *testing.B, rounds []scaleRound) {
	med := func(f func(scaleRound) float64) float64 {
		v := make([]float64, len(rounds))
		for i, r := range rounds {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(func(r scaleRound) float64 { return r.uploadRate }), "uploads/s")
	b.ReportMetric(med(func(r scaleRound) float64 { return r.aggRate }), "agg-reports/s")
	b.ReportMetric(1000*med(func(r scaleRound) float64 { return r.uploadCPU }), "upload-cpu-ms/report")
	b.ReportMetric(1000*med(func(r scaleRound) float64 { return r.aggCPU }), "agg-cpu-ms/report")
	b.ReportMetric(0, "ns/op")
}
