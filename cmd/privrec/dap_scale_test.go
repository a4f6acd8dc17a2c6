//go:build linux

package main

import (
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
)

// BenchmarkDAPScale measures the role servers' throughput and CPU per
// report on each store, with one and with two leader processes sharing
// the leader's database, at MovieLens-1M's catalogue (3 706 items):
// dp-popularity's counts (3 706 × 9 bits, 546 kB reports) and dp-ease's
// Gram at the default device budget (228 covered items, 26 106 × 10
// bits, 4.2 MB reports), jobs of 64 reports.
//
//	PRIVREC_TEST_POSTGRES=postgres://… go test -run XXX -bench DAPScale -benchtime 3x ./cmd/privrec
//
// Each sub-benchmark runs a helper and one or two leaders as real
// processes (this test binary run as privrec serve --role, on loopback);
// on PostgreSQL both aggregators' databases are schemas of the test
// database (the PostgreSQL server on this machine). One iteration is one
// round: 64 new devices (16 for the Gram) enrol and shard their reports
// (BenchmarkDAPCapacity's devices; not measured),
// upload them with 8 at a time, spread over the leaders (uploads/s), and
// the leaders' aggregate calls run at once (reports/s). upload-cpu-ms and
// agg-cpu-ms are CPU per report (user + system, from /proc) of the
// leader processes, the helper and, on PostgreSQL, the server's backends
// serving them and its WAL writer, checkpointer and background writer
// (pg-cpu-ms: that part, both phases); agg-leader-ms and agg-helper-ms
// split the aggregation's between the sides. Each metric is the median
// over the rounds.
func BenchmarkDAPScale(b *testing.B) {
	items := make([]string, 3706)
	for j := range items {
		items[j] = strconv.Itoa(j + 1)
	}
	for _, c := range capacityCases(len(items), 64) {
		for _, kind := range storetest.Kinds {
			for _, leaders := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/%s/leaders=%d", c.name, kind, leaders), func(b *testing.B) {
					sr := newScaleRig(b, kind, leaders)
					task := sr.capacityTask("scale-"+c.name, items, c.stat(b))
					sr.round(task, items, 4) // the leaders' per-task set-up (report size)
					var rounds []scaleRound
					for b.Loop() {
						rounds = append(rounds, sr.round(task, items, c.reports))
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

// scaleCPU is CPU seconds: of the leader processes, the helper and the
// PostgreSQL processes serving them.
type scaleCPU struct{ leaders, helper, pg float64 }

func (c scaleCPU) minus(o scaleCPU, n int) scaleCPU {
	return scaleCPU{(c.leaders - o.leaders) / float64(n), (c.helper - o.helper) / float64(n), (c.pg - o.pg) / float64(n)}
}

func (c scaleCPU) total() float64 { return c.leaders + c.helper + c.pg }

// cpu is the CPU seconds so far of the aggregator processes and of the
// PostgreSQL processes serving them.
func (sr *scaleRig) cpu() scaleCPU {
	var c scaleCPU
	for _, name := range sr.leaders {
		s, _ := procCPU(sr.procs[name].cmd.Process.Pid)
		c.leaders += s
	}
	c.helper, _ = procCPU(sr.procs["helper"].cmd.Process.Pid)
	if sr.pg == nil {
		return c
	}
	rows, err := sr.pg.Query(`SELECT pid FROM pg_stat_activity WHERE application_name = $1
		OR backend_type IN ('checkpointer', 'walwriter', 'background writer')`, sr.app)
	if err != nil {
		sr.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			sr.t.Fatal(err)
		}
		s, _ := procCPU(pid)
		c.pg += s
	}
	return c
}

// scaleRound is one round's throughputs and CPU seconds per report.
type scaleRound struct {
	uploadRate, aggRate float64
	uploadCPU, aggCPU   scaleCPU
}

// round enrols n devices and shards their reports, uploads them 8 at a
// time spread over the leaders, then runs the leaders' aggregate calls
// at once.
func (sr *scaleRig) round(task dap.Task, items []string, n int) scaleRound {
	sr.t.Helper()
	ds, _ := sr.capacityDevices(task, items, n)
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
		uploadCPU: c1.minus(c0, n), aggCPU: c2.minus(c1, n)}
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
	b.ReportMetric(1000*med(func(r scaleRound) float64 { return r.uploadCPU.total() }), "upload-cpu-ms/report")
	b.ReportMetric(1000*med(func(r scaleRound) float64 { return r.aggCPU.total() }), "agg-cpu-ms/report")
	b.ReportMetric(1000*med(func(r scaleRound) float64 { return r.uploadCPU.pg + r.aggCPU.pg }), "pg-cpu-ms/report")
	b.ReportMetric(1000*med(func(r scaleRound) float64 { return r.aggCPU.leaders }), "agg-leader-ms/report")
	b.ReportMetric(1000*med(func(r scaleRound) float64 { return r.aggCPU.helper }), "agg-helper-ms/report")
	b.ReportMetric(0, "ns/op")
}
