package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/privrec/privrec/internal/testtier"
	"github.com/privrec/privrec/service/store/storetest"
)

// faultCase is one scenario of TestDapFaults: a process killed with
// SIGKILL at a named step (leaderCrash, helperCrash: "STEP@N", the N-th
// time the step is reached), or a fault the test makes itself (run).
type faultCase struct {
	name                     string
	leaderCrash, helperCrash string
	// run replaces the default run: upload, aggregate, collect.
	run func(r *dapRig, task string, ds []*device, up func(leader string, d *device)) *faultOutcome
	// short: also run under -short (the two scenarios that lost whole
	// tasks before jobs were stored); quick: also in the quick tier (go
	// test ./... without -tags long). The long tier runs every scenario.
	short, quick bool
}

type faultOutcome struct{ note string }

// TestDapFaults is the fault-injection suite of the two aggregators,
// through real processes: a leader and a helper (privrec serve --role,
// this test binary) are killed with SIGKILL at every step of upload,
// aggregation (before, during and after the other side's commit) and
// collection, called concurrently, cut off from each other and run out
// of disk space; after each fault the dead process is restarted and the
// devices and the admin retry. Every scenario must end with every
// acknowledged report counted exactly once in the release (each device
// counts one item: the release reads each count off exactly), every
// device charged its task's ρ once, and the task collected.
func TestDapFaults(t *testing.T) {
	runFaultCases(t, faultCases(), testtier.Quick(), nil)
}

// faultDevices is the number of devices of each fault scenario (jobs of
// 4 reports: 3 jobs).
const faultDevices = 10

// faultCases are the scenarios of the fault suite.
func faultCases() []faultCase {
	return []faultCase{
		{name: "kill -9 leader during an upload, before its commit", leaderCrash: "leader-upload-checked@3"},
		{name: "kill -9 leader after an upload's commit (acknowledgement lost)", leaderCrash: "leader-upload-committed@3", quick: true},
		{name: "kill -9 leader after recording a job, before sending it", leaderCrash: "leader-job-recorded@2"},
		{name: "kill -9 leader after the helper committed a job (was: 600 of 600 lost)", leaderCrash: "leader-job-answered@2", short: true},
		{name: "kill -9 leader after committing a job", leaderCrash: "leader-job-committed@2"},
		{name: "kill -9 helper before its commit of a job", helperCrash: "helper-job-prepared@2"},
		{name: "kill -9 helper after its commit, before answering", helperCrash: "helper-job-committed@2", quick: true},
		{name: "kill -9 leader at collection, after closing the task", leaderCrash: "leader-collect-closed@1"},
		{name: "kill -9 leader at collection, after the helper's share", leaderCrash: "leader-collect-helper-shared@1", quick: true},
		{name: "kill -9 leader at collection, after noising its share", leaderCrash: "leader-collect-noised@1"},
		{name: "kill -9 helper after releasing its share", helperCrash: "helper-share-collected@1"},
		{name: "3 aggregate + 2 collect calls at once (was: 120 of 120 lost)", run: concurrentCalls, short: true},
		{name: "aggregate calls while devices upload", run: aggregateWhileUploading},
		{name: "two leader processes on one database, collecting at once", run: twoLeaders},
		{name: "helper down: 502 with Retry-After, then collectable", run: helperDown},
		{name: "helper stopped (SIGSTOP): timeout, 502, then collectable", run: helperStopped},
		{name: "helper out of disk space: 503 with Retry-After, then collectable", run: helperDiskFull, quick: true},
		{name: "leader out of disk space at upload: 503, nothing stored or charged", run: leaderDiskFull},
	}
}

// TestDapFaultsPostgres runs TestDapFaults's scenarios with both
// aggregators on PostgreSQL (each its own schema; the two leader
// processes of "two leader processes" share the leader's): the same
// exactly-once outcome. The disk-full scenarios are SQLite's (the
// aggregator watches the file system of its database file; PostgreSQL's
// server watches its own). Long tier only; needs PRIVREC_TEST_POSTGRES.
func TestDapFaultsPostgres(t *testing.T) {
	if testtier.Quick() || testing.Short() {
		t.Skip("long tier (go test -tags long): the fault suite on PostgreSQL")
	}
	storetest.Postgres(t)
	var cases []faultCase
	for _, fc := range faultCases() {
		if !strings.Contains(fc.name, "disk space") {
			cases = append(cases, fc)
		}
	}
	runFaultCases(t, cases, false, func(t *testing.T, r *dapRig) {
		leader, helper := storetest.URL(t, "postgres"), storetest.URL(t, "postgres")
		for _, name := range []string{"leader", "leader2"} {
			r.extra[name] = []string{"--db", leader}
		}
		r.extra["helper"] = []string{"--db", helper}
	})
}

// runFaultCases runs fault scenarios (in the quick tier only those marked
// quick or short; setup, when set, points the rig's processes at their
// databases) and logs the table of outcomes.
func runFaultCases(t *testing.T, cases []faultCase, quickTier bool, setup func(*testing.T, *dapRig)) {
	var table []string
	for _, fc := range cases {
		if (testing.Short() && !fc.short) || (quickTier && !fc.short && !fc.quick) {
			continue
		}
		t.Run(fc.name, func(t *testing.T) {
			start := time.Now()
			r := newDapRig(t)
			if setup != nil {
				setup(t, r)
			}
			r.start("helper", fc.helperCrash)
			r.start("leader", fc.leaderCrash)
			task := r.createTask(exactTask(t, "exact", faultDevices))
			ds := r.devices(task, faultDevices)
			up := func(leader string, d *device) { r.upload(leader, task, d) }
			var out *faultOutcome
			if fc.run != nil {
				out = fc.run(r, task.ID, ds, up)
			} else {
				for _, d := range ds {
					up("leader", d)
				}
				r.aggregate("leader", task.ID)
			}
			rel := r.collect("leader", task.ID)
			lost, double := r.tally(rel, task, ds)
			repeats := 0
			for _, d := range ds {
				if d.repeat {
					repeats++
				}
			}
			if lost != 0 || double != 0 {
				t.Errorf("%d of %d acknowledged reports lost, %d counted twice", lost, faultDevices, double)
			}
			for _, c := range []string{fc.leaderCrash, fc.helperCrash} {
				role := "leader"
				if strings.HasPrefix(c, "helper") {
					role = "helper"
				}
				if c != "" && !strings.Contains(r.log(role), "fault injection: killing this process") {
					t.Errorf("the %s never reached step %s: the scenario did not happen", role, c)
				}
			}
			note := ""
			if out != nil {
				note = out.note
			}
			if repeats > 0 {
				note += fmt.Sprintf("%d upload(s) acknowledged again as repeated, charged once", repeats)
			}
			table = append(table, fmt.Sprintf("| %s | %d | %d | %d | yes | %.1f s | %s |", fc.name, faultDevices, lost, double, time.Since(start).Seconds(), note))
		})
	}
	t.Logf("\n| scenario | acknowledged | lost | double | collected | time | note |\n|---|---|---|---|---|---|---|\n%s", strings.Join(table, "\n"))
}

// concurrentCalls: after the uploads, three aggregate and two collect
// calls at once; each answers 200 (the aggregate calls divide the jobs,
// the collections take turns).
func concurrentCalls(r *dapRig, task string, ds []*device, up func(string, *device)) *faultOutcome {
	for _, d := range ds {
		up("leader", d)
	}
	var wg sync.WaitGroup
	codes := make([]int, 5)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			what := "aggregate"
			if i >= 3 {
				what = "collect"
			}
			codes[i], _, _ = r.call(http.MethodPost, r.url("leader")+"/dap/v1/admin/tasks/"+task+"/"+what, r.adminToken, nil)
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			r.t.Errorf("concurrent call %d: HTTP %d", i, c)
		}
	}
	return &faultOutcome{note: fmt.Sprintf("answers %v", codes)}
}

// aggregateWhileUploading: aggregate calls run while the devices upload.
func aggregateWhileUploading(r *dapRig, task string, ds []*device, up func(string, *device)) *faultOutcome {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	calls := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if c, b, _ := r.call(http.MethodPost, r.url("leader")+"/dap/v1/admin/tasks/"+task+"/aggregate", r.adminToken, nil); c != http.StatusOK {
				r.t.Errorf("aggregate while uploading: HTTP %d %s", c, b)
				return
			}
			calls++
		}
	}()
	for _, d := range ds {
		up("leader", d)
	}
	close(stop)
	wg.Wait()
	return &faultOutcome{note: fmt.Sprintf("%d aggregate calls during the uploads", calls)}
}

// twoLeaders: a second leader process serves the same database; the
// devices upload to either, and both collect at once.
func twoLeaders(r *dapRig, task string, ds []*device, up func(string, *device)) *faultOutcome {
	r.start("leader2", "")
	for i, d := range ds {
		up([]string{"leader", "leader2"}[i%2], d)
	}
	var wg sync.WaitGroup
	rels := make([][]float64, 2)
	for i, name := range []string{"leader", "leader2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rels[i] = r.collect(name, task).Values
		}()
	}
	wg.Wait()
	for j := range rels[0] {
		if rels[0][j] != rels[1][j] {
			r.t.Errorf("the two leaders published different releases: %v and %v", rels[0], rels[1])
			break
		}
	}
	return &faultOutcome{note: "both collects returned the same release"}
}

// helperDown: the helper is killed before aggregation; the admin's call
// is answered 502 with Retry-After, and after the helper is back the task
// is collected.
func helperDown(r *dapRig, task string, ds []*device, up func(string, *device)) *faultOutcome {
	for _, d := range ds {
		up("leader", d)
	}
	r.kill("helper")
	code, b, h := r.call(http.MethodPost, r.url("leader")+"/dap/v1/admin/tasks/"+task+"/collect", r.adminToken, nil)
	if code != http.StatusBadGateway || h.Get("Retry-After") == "" {
		r.t.Errorf("collect with the helper down: HTTP %d (Retry-After %q) %s, want 502 with Retry-After", code, h.Get("Retry-After"), b)
	}
	r.start("helper", "")
	return &faultOutcome{note: fmt.Sprintf("HTTP %d, Retry-After %s", code, h.Get("Retry-After"))}
}

// helperStopped: the helper is frozen (SIGSTOP) during aggregation; the
// leader's call to it times out (--helper-timeout) and the admin gets a
// 502; after SIGCONT the task is collected.
func helperStopped(r *dapRig, task string, ds []*device, up func(string, *device)) *faultOutcome {
	for _, d := range ds {
		up("leader", d)
	}
	p := r.procs["helper"]
	_ = p.cmd.Process.Signal(sigStop)
	t0 := time.Now()
	code, b, _ := r.call(http.MethodPost, r.url("leader")+"/dap/v1/admin/tasks/"+task+"/aggregate", r.adminToken, nil)
	took := time.Since(t0)
	_ = p.cmd.Process.Signal(sigCont)
	if code != http.StatusBadGateway {
		r.t.Errorf("aggregate with the helper stopped: HTTP %d %s, want 502", code, b)
	}
	return &faultOutcome{note: fmt.Sprintf("HTTP %d after %.1f s", code, took.Seconds())}
}

// helperDiskFull: the helper restarted with more free space required
// than there is; aggregation is answered 503 with Retry-After, nothing
// is counted; with room again the task is collected.
func helperDiskFull(r *dapRig, task string, ds []*device, up func(string, *device)) *faultOutcome {
	for _, d := range ds {
		up("leader", d)
	}
	r.kill("helper")
	r.start("helper", "", "--min-free-disk", "1000000TiB")
	code, b, h := r.call(http.MethodPost, r.url("leader")+"/dap/v1/admin/tasks/"+task+"/aggregate", r.adminToken, nil)
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		r.t.Errorf("aggregate with the helper's disk full: HTTP %d (Retry-After %q) %s, want 503 with Retry-After", code, h.Get("Retry-After"), b)
	}
	ready, _, _ := r.call(http.MethodGet, r.url("helper")+"/readyz", "", nil)
	if ready != http.StatusServiceUnavailable {
		r.t.Errorf("the helper's /readyz with its disk full: HTTP %d, want 503", ready)
	}
	r.kill("helper")
	r.start("helper", "")
	return &faultOutcome{note: fmt.Sprintf("HTTP %d, Retry-After %s; helper /readyz %d", code, h.Get("Retry-After"), ready)}
}

// leaderDiskFull: the leader restarted with more free space required
// than there is refuses uploads with 503 (nothing stored, nothing
// charged: the device retries once there is room) and /readyz is 503.
func leaderDiskFull(r *dapRig, task string, ds []*device, up func(string, *device)) *faultOutcome {
	r.kill("leader")
	r.start("leader", "", "--min-free-disk", "1000000TiB")
	req, _ := http.NewRequest(http.MethodPut, r.url("leader")+"/dap/v1/tasks/"+task+"/reports", strings.NewReader(string(ds[0].report)))
	req.Header.Set("Authorization", "Bearer "+ds[0].token)
	req.Header.Set("Content-Type", "application/dap-report")
	resp, err := r.hc.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		r.t.Errorf("upload with the leader's disk full: HTTP %d, want 503 with Retry-After", resp.StatusCode)
	}
	ready, _, _ := r.call(http.MethodGet, r.url("leader")+"/readyz", "", nil)
	if ready != http.StatusServiceUnavailable {
		r.t.Errorf("the leader's /readyz with its disk full: HTTP %d, want 503", ready)
	}
	code, b, _ := r.call(http.MethodGet, r.url("leader")+"/dap/v1/ledger", ds[0].token, nil)
	if code != http.StatusOK || !strings.Contains(string(b), `"spent_rho":0`) {
		r.t.Errorf("ledger after a refused upload: HTTP %d %s, want nothing spent", code, b)
	}
	r.kill("leader")
	r.start("leader", "")
	for _, d := range ds {
		up("leader", d)
	}
	return &faultOutcome{note: fmt.Sprintf("upload HTTP %d, /readyz %d, ledger unchanged", resp.StatusCode, ready)}
}

// The signals that freeze and thaw a process.
var sigStop, sigCont = syscall.SIGSTOP, syscall.SIGCONT

// TestDapLeadersOnPostgres: two leader processes (privrec serve --role
// leader, this test binary) on one PostgreSQL database, with a helper on
// SQLite, aggregate one task at once: the devices upload to either, both
// leaders' aggregate calls run together and divide the jobs between them
// (each leader commits some), and the release collected by one counts
// every acknowledged report exactly once, each device charged once.
// Needs PRIVREC_TEST_POSTGRES (skipped, saying so, otherwise).
func TestDapLeadersOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	url := storetest.URL(t, "postgres")
	const n = 40 // jobs of 4: 10 jobs
	r := newDapRig(t)
	r.extra["leader"] = []string{"--db", url}
	r.extra["leader2"] = []string{"--db", url}
	r.start("helper", "")
	r.start("leader", "")
	r.start("leader2", "")
	task := r.createTask(exactTask(t, "exact", n))
	ds := r.devices(task, n)
	for i, d := range ds {
		r.upload([]string{"leader", "leader2"}[i%2], task, d)
	}
	var wg sync.WaitGroup
	for _, name := range []string{"leader", "leader2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, b, _ := r.call(http.MethodPost, r.url(name)+"/dap/v1/admin/tasks/exact/aggregate", r.adminToken, nil); code != http.StatusOK {
				t.Errorf("%s: aggregate: HTTP %d %s", name, code, b)
			}
		}()
	}
	wg.Wait()
	holders := jobHolders(t, url)
	if len(holders) != 2 {
		t.Errorf("the jobs were done by %d leader processes (%v), want both", len(holders), holders)
	}
	rel := r.collect("leader2", task.ID)
	if lost, double := r.tally(rel, task, ds); lost != 0 || double != 0 {
		t.Errorf("%d of %d acknowledged reports lost, %d counted twice", lost, n, double)
	}
	t.Logf("jobs done per leader process: %v", holders)
}

// jobHolders counts the done aggregation jobs of each leader process (a
// claim is named PROCESS.RUN).
func jobHolders(t *testing.T, url string) map[string]int {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(context.Background(), `SELECT holder FROM jobs WHERE done = 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		proc, _, _ := strings.Cut(h, ".")
		out[proc]++
	}
	return out
}
