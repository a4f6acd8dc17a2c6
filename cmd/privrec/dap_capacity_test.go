//go:build linux

package main

import (
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/server"
	"github.com/privrec/privrec/statistic"
	"github.com/privrec/privrec/statistic/gram"
	"github.com/privrec/privrec/topn"
)

// BenchmarkDAPCapacity is the aggregators' CPU per report against the
// crypto floor, measured side by side in one run, at MovieLens-1M's
// catalogue (3 706 items): dp-popularity's counts (3 706 × 9 bits) and
// dp-ease's Gram at privrec dap simulate's default device budget (228
// covered items: 26 106 × 10 bits).
//
//	go test -run XXX -bench DAPCapacity -benchtime 5x ./cmd/privrec
//
// Each sub-benchmark runs a leader and a helper as real processes (this
// test binary run as privrec serve --role, on loopback, SQLite stores,
// jobs of 64 reports) and creates one task. One iteration is one round:
// new devices enrol and shard their reports (not measured), then upload
// them one by one, and the leader aggregates them with the helper.
// leader-ms/report and helper-ms/report are each process's CPU (user +
// system, from /proc) over the uploads and the aggregation, per report;
// floor-ms/report is the crypto floor, measured in this process on the
// same reports: both aggregators' preparation (dap.Preparer: open the
// HPKE-sealed share, Prio3SumVec prep init, decide the proof on both
// prep shares, output share), one report at a time. x-floor is (leader +
// helper)/floor; leader-x-floor and helper-x-floor compare each side
// with its own part of the floor. Each metric is the median over the
// rounds. With PRIVREC_CPUPROFILE=cpu.out each process writes its CPU
// profile to cpu.out.leader and cpu.out.helper.
func BenchmarkDAPCapacity(b *testing.B) {
	items := make([]string, 3706)
	for j := range items {
		items[j] = strconv.Itoa(j + 1)
	}
	for _, c := range capacityCases(len(items), 48) {
		b.Run(c.name, func(b *testing.B) {
			r := newDapRig(b)
			r.extra["leader"] = []string{"--batch", "64", "--helper-timeout", "10m", "--lock-ttl", "1m"}
			r.start("helper", "")
			r.start("leader", "")
			task := r.capacityTask("cap-"+c.name, items, c.stat(b))
			r.capacityRound(task, items, 1) // the leader's per-task set-up (its report size)
			var rounds []capacityRound
			for b.Loop() {
				rounds = append(rounds, r.capacityRound(task, items, c.reports))
			}
			r.stop("leader")
			r.stop("helper")
			reportCapacity(b, rounds)
		})
	}
}

// capacityCase is one report kind of the aggregator benchmarks: its name,
// the reports a round uploads, and the statistic a device contributes.
type capacityCase struct {
	name    string
	reports int
	stat    func(b *testing.B) statistic.Contribution
}

// capacityCases are the benchmarks' two report kinds at a catalogue of n
// items: dp-popularity's counts (counts reports a round) and dp-ease's
// Gram over the first 228 items (16 a round).
func capacityCases(n, counts int) []capacityCase {
	return []capacityCase{
		{"counts", counts, func(*testing.B) statistic.Contribution { return &statistic.Counts{Items: n} }},
		{"gram", 16, func(b *testing.B) statistic.Contribution { return capacityGram(b, n, 228) }},
	}
}

// capacityGram is a Gram over the first m of n items, unit norm.
func capacityGram(b *testing.B, n, m int) *gram.Gram {
	cov := make([]int, m)
	for j := range cov {
		cov[j] = j
	}
	cols, err := topn.NewColumns(n, cov)
	if err != nil {
		b.Fatal(err)
	}
	g, err := gram.NewGram(cols, nil, 1)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// capacityRound is one round's CPU seconds per report.
type capacityRound struct{ leader, helper, leaderFloor, helperFloor float64 }

// capacityTask creates the task of c at the aggregators (the lattice of
// privrec dap simulate).
func (r *dapRig) capacityTask(id string, items []string, c statistic.Contribution) dap.Task {
	r.t.Helper()
	mech, err := statistic.Mechanism(c.Spec(), 0.5, 1e-6)
	if err != nil {
		r.t.Fatal(err)
	}
	task, err := dap.Lattice{StepBits: 8, GramStepBits: 9}.TaskFor(id, statistic.RowPlan{Catalogue: items}, c, mech)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.createTask(task)
}

// capacityRound shards n new devices' reports for task, uploads and
// aggregates them, and measures the floor on the same reports.
func (r *dapRig) capacityRound(task dap.Task, items []string, n int) capacityRound {
	r.t.Helper()
	ds, reps := r.capacityDevices(task, items, n)
	lf, hf := r.capacityFloor(task, reps)
	l0, h0 := r.procCPU("leader"), r.procCPU("helper")
	for _, d := range ds {
		r.upload("leader", task, d)
	}
	var res server.AggregateResult
	r.retry("aggregate", func() (int, []byte) {
		code, b, _ := r.call(http.MethodPost, r.url("leader")+"/dap/v1/admin/tasks/"+task.ID+"/aggregate", r.adminToken, nil)
		return code, b
	}, http.StatusOK, &res)
	l1, h1 := r.procCPU("leader"), r.procCPU("helper")
	if res.Accepted != n || res.Rejected != 0 {
		r.t.Fatalf("task %s: %d accepted, %d rejected of %d reports", task.ID, res.Accepted, res.Rejected, n)
	}
	return capacityRound{leader: (l1 - l0) / float64(n), helper: (h1 - h0) / float64(n), leaderFloor: lf, helperFloor: hf}
}

// capacityDevices enrols n devices and shards each one's report: 100
// rated items, 40 of them among the first 228 (the Gram's covered items).
func (r *dapRig) capacityDevices(task dap.Task, items []string, n int) ([]*device, []*dap.Report) {
	r.t.Helper()
	lk, hk := r.keys()
	dev, err := dap.NewDevice(task)
	if err != nil {
		r.t.Fatal(err)
	}
	ds, reps := make([]*device, n), make([]*dap.Report, n)
	for i := range ds {
		e := r.enrol()
		ids, vals := make([]string, 100), make([]float64, 100)
		for j := range ids {
			k := 228 + (13*i+29*j)%(len(items)-228)
			if j < 40 {
				k = (11*i + 5*j) % 228
			}
			ids[j], vals[j] = items[k], float64(1+(i+j)%5)
		}
		q, err := task.Quantize(dev.Contribute(dev.RowOf(ids, vals)))
		if err != nil {
			r.t.Fatal(err)
		}
		if reps[i], err = task.Shard(q, lk, hk); err != nil {
			r.t.Fatal(err)
		}
		body, err := server.EncodeReport(reps[i])
		if err != nil {
			r.t.Fatal(err)
		}
		ds[i] = &device{token: e.Token, report: body}
	}
	return ds, reps
}

// capacityFloor is each aggregator's preparation of the reports, in
// this process with the aggregators' own keys, in CPU seconds per report.
func (r *dapRig) capacityFloor(task dap.Task, reps []*dap.Report) (leader, helper float64) {
	r.t.Helper()
	secret := make([]byte, 32) // any shared secret: both preparers here use it
	var ps [2]*dap.Preparer
	for i, role := range []string{"leader", "helper"} {
		b, err := readBase64File(filepath.Join(r.dir, role+".key"), "--key-file")
		if err != nil {
			r.t.Fatal(err)
		}
		k, err := dap.UnmarshalKeyPair(b)
		if err != nil {
			r.t.Fatal(err)
		}
		if ps[i], err = dap.NewPreparer(task, dap.Role(i), k, secret); err != nil {
			r.t.Fatal(err)
		}
	}
	var side [2]float64 // each aggregator's CPU seconds
	timed := func(i int, f func() error) {
		c0 := processCPU()
		if err := f(); err != nil {
			r.t.Fatal(err)
		}
		side[i] += processCPU() - c0
	}
	for _, rep := range reps {
		pr := make([]*dap.Prepared, 2)
		for i, sealed := range []dap.Sealed{rep.LeaderShare, rep.HelperShare} {
			timed(i, func() (err error) {
				pr[i], err = ps[i].Prepare(rep.ID, rep.PublicShare, sealed)
				return err
			})
		}
		for i := range ps {
			timed(i, func() error {
				_, err := ps[i].Finish(pr[i], pr[0].Share, pr[1].Share)
				return err
			})
		}
	}
	n := float64(len(reps))
	return side[0] / n, side[1] / n
}

// procCPU is a rig process's CPU seconds so far.
func (r *dapRig) procCPU(name string) float64 {
	r.t.Helper()
	s, ok := procCPU(r.procs[name].cmd.Process.Pid)
	if !ok {
		r.t.Skip("no per-process CPU time here (/proc)")
	}
	return s
}

// processCPU is this process's CPU seconds so far (user + system).
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// reportCapacity reports the rounds' medians.
func reportCapacity(b *testing.B, rounds []capacityRound) {
	med := func(f func(capacityRound) float64) float64 {
		xs := make([]float64, len(rounds))
		for i, r := range rounds {
			xs[i] = f(r)
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	b.ReportMetric(1000*med(func(r capacityRound) float64 { return r.leader }), "leader-ms/report")
	b.ReportMetric(1000*med(func(r capacityRound) float64 { return r.helper }), "helper-ms/report")
	b.ReportMetric(1000*med(func(r capacityRound) float64 { return r.leaderFloor + r.helperFloor }), "floor-ms/report")
	b.ReportMetric(med(func(r capacityRound) float64 { return (r.leader + r.helper) / (r.leaderFloor + r.helperFloor) }), "x-floor")
	b.ReportMetric(med(func(r capacityRound) float64 { return r.leader / r.leaderFloor }), "leader-x-floor")
	b.ReportMetric(med(func(r capacityRound) float64 { return r.helper / r.helperFloor }), "helper-x-floor")
}
