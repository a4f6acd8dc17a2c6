package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/server"
	"github.com/privrec/privrec/statistic"
)

// The malicious-leader suite: a real helper and a real leader (privrec
// serve --role, this test binary re-executed as privrec: dapRig), devices running
// `privrec dap contribute`, and the test itself as a leader that breaks
// the protocol (it holds what a leader holds: the verification secret,
// the peer token and a leader key). Every manipulation is refused by the
// party it would harm, or provably teaches the leader nothing new.

// roles is a running helper (--min-batch 3, --max-task-rho 1) and
// leader (the fault suite's dapRig), and what a leader holds.
type roles struct {
	leader, helper, admin string
	leaderDB, helperDB    string
	secret                []byte
	peer                  string
	cli                   *dap.Client
}

const (
	rolesMinBatch   = 3
	rolesMaxTaskRho = 1.0
)

func startRoles(t *testing.T) *roles {
	t.Helper()
	g := newDapRig(t)
	g.start("helper", "", "--min-batch", fmt.Sprint(rolesMinBatch), "--max-task-rho", fmt.Sprint(rolesMaxTaskRho))
	g.start("leader", "")
	secret, err := readBase64File(g.secret, "secret")
	if err != nil {
		t.Fatal(err)
	}
	peer, err := readTokenFile(g.peer, "peer")
	if err != nil {
		t.Fatal(err)
	}
	return &roles{leader: g.url("leader"), helper: g.url("helper"), admin: g.adminToken, leaderDB: filepath.Join(g.dir, "leader.db"), helperDB: filepath.Join(g.dir, "helper.db"),
		secret: secret, peer: peer, cli: &dap.Client{Leader: g.url("leader"), Helper: g.url("helper")}}
}

// countsPlanTask is the reproduction's task: dp-popularity counts over 20
// items (cap 50), step 2⁻⁸, 9 bits, norm_sq 3 276 800, replace-user,
// ρ rho, min_reports 1, with the stated sensitivity (0: NewTask's
// triangle bound) and σ for it.
func countsPlanTask(t *testing.T, id string, sens, rho float64, mode dap.NoiseMode) dap.Task {
	t.Helper()
	ids := make([]string, 20)
	for j := range ids {
		ids[j] = fmt.Sprintf("i%d", j)
	}
	plan, err := dap.NewPlan(statistic.RowPlan{Catalogue: ids}, &statistic.Counts{Items: 20, Cap: 50})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := dap.NewTask(dap.Task{ID: id, Statistic: "dp-popularity/counts", Plan: plan, Dimension: 20, Step: 1.0 / 256, Bits: 9,
		NormSq: 3276800, Relation: dap.RelationReplace, Sensitivity: sens, Rho: rho, Noise: mode, MinReports: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// plant stores t in the leader's own database, as a malicious leader
// operator can (no helper sees it): devices then read it from GET tasks.
func (r *roles) plant(t *testing.T, tk dap.Task) {
	t.Helper()
	plantTask(t, r.leaderDB, tk, false)
}

// plantTask inserts tk into an aggregator's database, with its empty
// aggregate when withAggregate.
func plantTask(t *testing.T, path string, tk dap.Task, withAggregate bool) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b, _ := json.Marshal(tk)
	if _, err := db.Exec(`INSERT INTO tasks (id, params) VALUES (?, ?)`, tk.ID, string(b)); err != nil {
		t.Fatal(err)
	}
	if !withAggregate {
		return
	}
	zero, err := dap.EncodeVec(tk.NewVec())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO aggregates (task_id, share, count, checksum) VALUES (?, ?, 0, ?)`, tk.ID, zero, make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
}

// reports is how many reports the leader stored for a task.
func (r *roles) reports(t *testing.T, id string) int {
	t.Helper()
	db, err := sql.Open("sqlite", r.leaderDB+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM reports WHERE task_id = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// contribute enrols a device and runs `privrec dap contribute` for task id
// with her ratings of items 3, 7 and 11; it returns stdout, stderr, the
// exit code and her ledger file.
func (r *roles) contribute(t *testing.T, id string, extra ...string) (string, string, int, string) {
	t.Helper()
	dir := t.TempDir()
	tok, ledger, rf := filepath.Join(dir, "token"), filepath.Join(dir, "ledger.json"), filepath.Join(dir, "mine.tsv")
	if err := os.WriteFile(rf, []byte("i3\t5\ni7\t4\ni11\t5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, e, code := runCLI(t, "dap", "enrol", "--leader", r.leader, "--token-file", tok); code != 0 {
		t.Fatalf("enrol: %s %s", o, e)
	}
	args := append([]string{"dap", "contribute", "--leader", r.leader, "--helper", r.helper, "--token-file", tok, "--task", id,
		"--ratings", rf, "--ledger", ledger, "--budget-rho", "5"}, extra...)
	o, e, code := runCLI(t, args...)
	return o, e, code, ledger
}

// refusedByDevice asserts that a device refuses the planted task tk with
// an error containing want, charges nothing and sends nothing.
func (r *roles) refusedByDevice(t *testing.T, tk dap.Task, want string, extra ...string) {
	t.Helper()
	r.plant(t, tk)
	o, e, code, ledger := r.contribute(t, tk.ID, extra...)
	if code == 0 || !strings.Contains(e, want) {
		t.Errorf("device: exit %d, %s %s; want a refusal naming %q", code, o, e, want)
	}
	if l, err := dap.LoadLedger(ledger); err != nil || (l != nil && l.SpentRho() != 0) {
		t.Errorf("device ledger after the refusal: %+v, %v; want nothing charged", l, err)
	}
	if n := r.reports(t, tk.ID); n != 0 {
		t.Errorf("the leader holds %d reports for the refused task", n)
	}
}

// provision PUTs tk to the helper as a leader does; it returns the
// helper's refusal, if any.
func (r *roles) provision(tk dap.Task) error {
	return r.cli.Do(context.Background(), http.MethodPut, r.helper, "/dap/v1/tasks/"+tk.ID, r.peer, tk, nil)
}

// TestDAPMaliciousLeaderRepro: the reproduction (sensitivity
// 1e-6, so σ = 1) is refused by the helper, through the real leader's
// admin API, and by a device that reads it from a leader who planted it,
// each naming the sensitivity it derived (2 560); the honest task
// (σ 57 244) is accepted by both.
func TestDAPMaliciousLeaderRepro(t *testing.T) {
	r := startRoles(t)
	evil := countsPlanTask(t, "pop-evil", 1e-6, 0.001, dap.NoiseEachAlone)
	if evil.Sigma != 1 {
		t.Fatalf("the reproduction's σ is %d, want 1", evil.Sigma)
	}
	const named = "sensitivity 1e-06 stated, 2560 derived"
	err := r.cli.Do(context.Background(), http.MethodPost, r.leader, "/dap/v1/admin/tasks", r.admin, evil, nil)
	if err == nil || !strings.Contains(err.Error(), named) {
		t.Fatalf("admin API: %v; want the helper's refusal naming %q", err, named)
	}
	if err := r.provision(evil); err == nil || !strings.Contains(err.Error(), named) {
		t.Fatalf("helper: %v; want %q", err, named)
	}
	r.refusedByDevice(t, evil, named)

	good := countsPlanTask(t, "pop-good", 2560, 0.001, dap.NoiseEachAlone)
	if good.Sigma != 57244 {
		t.Fatalf("the derived task's σ is %d, want 57244", good.Sigma)
	}
	if err := r.cli.Do(context.Background(), http.MethodPost, r.leader, "/dap/v1/admin/tasks", r.admin, good, nil); err != nil {
		t.Fatal(err)
	}
	o, e, code, ledger := r.contribute(t, good.ID)
	if code != 0 || !strings.Contains(o, "charged ρ 0.001 (derived on this device") || !strings.Contains(o, "replace-user") {
		t.Fatalf("honest task: exit %d: %s %s", code, o, e)
	}
	if l, err := dap.LoadLedger(ledger); err != nil || l.SpentRho() != 0.001 {
		t.Fatalf("device ledger %+v, %v; want ρ 0.001", l, err)
	}
}

// TestDAPMaliciousLeaderTasks: each way a leader can state a task's
// privacy parameters short of its plan is refused by the helper (which
// the leader must provision) and by a device (which reads the task from
// the leader), naming the field and both values.
func TestDAPMaliciousLeaderTasks(t *testing.T) {
	r := startRoles(t)
	other, err := dap.NewPlan(statistic.RowPlan{Catalogue: []string{"a", "b"}}, &statistic.Counts{Items: 2, Cap: 50})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name string
		edit func(*dap.Task)
		want string
	}{
		{"understated sensitivity", func(x *dap.Task) { x.Sensitivity, x.Sigma = 1000, 22361 }, "sensitivity 1000 stated, 2560 derived"},
		{"sigma below what rho needs", func(x *dap.Task) { x.Sigma = 30000 }, "sigma 30000 stated, 57244 derived"},
		{"norm_sq above the plan's clipping", func(x *dap.Task) { x.NormSq *= 4 }, "norm_sq 13107200 stated, 3276800 derived"},
		{"norm_sq below the plan's clipping", func(x *dap.Task) { x.NormSq = 65536 }, "norm_sq 65536 stated, 3276800 derived"},
		{"range wider than the plan's", func(x *dap.Task) { x.Min, x.Bits = -512, 10 }, "[-512, 512) stated, [0, 512) derived"},
		{"dimension other than the plan's", func(x *dap.Task) { x.Plan = other }, "plan has 2 coordinates, task 20"},
		{"no plan", func(x *dap.Task) { x.Plan = nil }, "has no plan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := countsPlanTask(t, fmt.Sprintf("m%d", i), 2560, 0.001, dap.NoiseEachAlone)
			tc.edit(&tk)
			if err := r.provision(tk); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helper: %v; want a refusal naming %q", err, tc.want)
			}
			r.refusedByDevice(t, tk, tc.want)
		})
	}
}

// TestDAPMaliciousLeaderSplitNoise: a split-noise task is refused by a
// device unless she opted in (--allow-split-noise); opted in, she is
// charged and shown the ρ one aggregator's noise alone gives (≈ 2ρ), and
// the output states the weaker guarantee. The helper applies its
// --max-task-rho to that ρ: a split task stating ρ 0.6 (≈ 1.2 alone) is
// refused.
func TestDAPMaliciousLeaderSplitNoise(t *testing.T) {
	r := startRoles(t)
	tk := countsPlanTask(t, "split", 2560, 0.3, dap.NoiseSplit)
	if err := r.cli.Do(context.Background(), http.MethodPost, r.leader, "/dap/v1/admin/tasks", r.admin, tk, nil); err != nil {
		t.Fatal(err)
	}
	_, e, code, _ := r.contribute(t, tk.ID)
	if code == 0 || !strings.Contains(e, "--allow-split-noise") {
		t.Fatalf("split noise without consent: exit %d, %s", code, e)
	}
	o, e, code, ledger := r.contribute(t, tk.ID, "--allow-split-noise", "--json")
	if code != 0 {
		t.Fatalf("split noise with consent: %s %s", o, e)
	}
	var res struct {
		ChargedRho       float64 `json:"charged_rho"`
		LeaderChargedRho float64 `json:"leader_charged_rho"`
		Guarantee        string
		Derived          dap.Derived
	}
	if err := json.Unmarshal([]byte(o), &res); err != nil {
		t.Fatalf("%v: %s", err, o)
	}
	alone := 2560.0 * 2560 / (2 * float64(tk.Sigma) * float64(tk.Sigma))
	if d := res.ChargedRho - alone; d < 0 || d > 1e-12 || !(alone > 0.55 && alone < 0.65) || res.LeaderChargedRho != 0.3 ||
		!strings.Contains(res.Guarantee, "only while both add their noise") || strings.Contains(res.Guarantee, "even if one operator misbehaves") {
		t.Errorf("charged ρ %v (one aggregator alone: %v), leader %v, guarantee %q", res.ChargedRho, alone, res.LeaderChargedRho, res.Guarantee)
	}
	if l, err := dap.LoadLedger(ledger); err != nil || l.SpentRho() < alone {
		t.Errorf("device ledger %+v, %v; want ρ %v", l, err, alone)
	}
	greedy := countsPlanTask(t, "split-greedy", 2560, 0.6, dap.NoiseSplit)
	if err := r.cli.Do(context.Background(), http.MethodPost, r.leader, "/dap/v1/admin/tasks", r.admin, greedy, nil); err == nil || !strings.Contains(err.Error(), "at most 1") {
		t.Errorf("a split task whose one-aggregator ρ exceeds the helper's policy: %v", err)
	}
}

// rogue is the test acting as a malicious leader against the real
// helper: it has the secret, the peer token and a leader key of its own.
type rogue struct {
	r    *roles
	key  dap.KeyPair
	lk   []byte // its public key, which devices seal leader shares to
	hk   []byte // the helper's published key
	task dap.Task
	prep *dap.Preparer
}

func newRogue(t *testing.T, r *roles, tk dap.Task) *rogue {
	t.Helper()
	g := &rogue{r: r, task: tk}
	var err error
	if g.key, err = dap.NewKeyPair(); err != nil {
		t.Fatal(err)
	}
	if g.lk, err = g.key.PublicBytes(); err != nil {
		t.Fatal(err)
	}
	var cfg server.HPKEConfig
	if err := r.cli.Do(context.Background(), http.MethodGet, r.helper, "/dap/v1/hpke_config", "", nil, &cfg); err != nil {
		t.Fatal(err)
	}
	g.hk = cfg.PublicKey
	if err := r.provision(tk); err != nil {
		t.Fatal(err)
	}
	if g.prep, err = dap.NewPreparer(tk, dap.Leader, g.key, r.secret); err != nil {
		t.Fatal(err)
	}
	return g
}

// report is an honest device's report for the rogue's task.
func (g *rogue) report(t *testing.T) *dap.Report {
	t.Helper()
	rep, err := dap.Prepare(g.task, g.lk, g.hk, []string{"i3", "i7", "i11"}, []float64{5, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// job sends reps to the helper in aggregation job jobID for task id (the
// rogue's own task unless it names another) and returns its answer.
func (g *rogue) job(t *testing.T, id, jobID string, reps ...*dap.Report) (server.JobResponse, error) {
	t.Helper()
	var job server.Job
	for _, rep := range reps {
		p, err := g.prep.Prepare(rep.ID, rep.PublicShare, rep.LeaderShare)
		if err != nil {
			t.Fatal(err)
		}
		job.Reports = append(job.Reports, server.JobReport{ID: rep.ID, PublicShare: rep.PublicShare, HelperShare: rep.HelperShare, LeaderPrepShare: p.Share})
	}
	var res server.JobResponse
	err := g.r.cli.Do(context.Background(), http.MethodPut, g.r.helper, "/dap/v1/tasks/"+id+"/aggregation_jobs/"+jobID, g.r.peer, job, &res)
	return res, err
}

// share asks the helper for its aggregate share of the reports reps.
func (g *rogue) share(reps ...*dap.Report) ([]byte, error) {
	sum := make([]byte, 32)
	for _, rep := range reps {
		h := sha256.Sum256(rep.ID)
		for i := range sum {
			sum[i] ^= h[i]
		}
	}
	var res server.ShareResponse
	err := g.r.cli.Do(context.Background(), http.MethodPost, g.r.helper, "/dap/v1/tasks/"+g.task.ID+"/aggregate_share", g.r.peer,
		server.ShareRequest{Count: len(reps), Checksum: sum}, &res)
	return res.Share, err
}

func httpStatus(err error) int {
	var he *dap.HTTPError
	if errors.As(err, &he) {
		return he.Status
	}
	return 0
}

// TestDAPMaliciousLeaderProtocol: a leader that breaks the protocol
// against the real helper. A batch below the helper's own --min-batch is
// never released, whatever the task's min_reports (1); a replayed report
// is not counted again; a report sent for another task does not verify;
// the helper releases its share only of exactly the batch it aggregated
// (not of a subset); a second collection returns the same noised share
// (no fresh noise on the same sum) and no report is aggregated after it.
func TestDAPMaliciousLeaderProtocol(t *testing.T) {
	r := startRoles(t)
	g := newRogue(t, r, countsPlanTask(t, "rogue", 2560, 0.001, dap.NoiseEachAlone))
	first := g.report(t)
	if res, err := g.job(t, g.task.ID, "job-0001", first); err != nil || len(res.Results) != 1 || !res.Results[0].Accepted {
		t.Fatalf("an honest report: %+v, %v", res, err)
	}
	// Tiny batch: one report, min_reports 1.
	if _, err := g.share(first); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at least %d", rolesMinBatch)) {
		t.Fatalf("aggregate share of one report: %v; want the helper's --min-batch refusal", err)
	}
	// Replays: the same job again, and the same report in a new job, are
	// not counted again.
	if _, err := g.job(t, g.task.ID, "job-0001", first); err != nil {
		t.Fatalf("a repeated job: %v", err)
	}
	if res, err := g.job(t, g.task.ID, "job-0002", first); err != nil || len(res.Results) != 1 || res.Results[0].Accepted {
		t.Fatalf("a replayed report in a new job: %+v, %v; want it not accepted again", res, err)
	}
	reps := []*dap.Report{first, g.report(t), g.report(t), g.report(t)}
	if res, err := g.job(t, g.task.ID, "job-0003", reps[1:]...); err != nil || len(res.Results) != 3 || !res.Results[0].Accepted {
		t.Fatalf("three more reports: %+v, %v", res, err)
	}
	for _, claim := range [][]*dap.Report{append(reps, first), append(reps, first, first)} {
		if _, err := g.share(claim...); httpStatus(err) != http.StatusConflict {
			t.Errorf("a share counting the replayed report again (%d reports): %v; want 409", len(claim), err)
		}
	}
	// A report of another task, replayed into this one, does not verify.
	other := newRogue(t, r, countsPlanTask(t, "rogue-other", 2560, 0.001, dap.NoiseEachAlone))
	if res, err := other.job(t, g.task.ID, "job-0004", other.report(t)); err != nil || len(res.Results) != 1 || res.Results[0].Accepted {
		t.Errorf("a report of another task sent for this one: %+v, %v; want it rejected", res, err)
	}
	// Subsets: the helper answers only for the batch it aggregated.
	if _, err := g.share(reps[:3]...); httpStatus(err) != http.StatusConflict {
		t.Errorf("a share of a subset (3 of 4 reports): %v; want 409", err)
	}
	share, err := g.share(reps...)
	if err != nil {
		t.Fatal(err)
	}
	again, err := g.share(reps...)
	if err != nil || string(again) != string(share) {
		t.Errorf("a second collection: %v; the share is the same: %v", err, string(again) == string(share))
	}
	if _, err := g.job(t, g.task.ID, "job-0005", g.report(t)); err == nil {
		t.Error("a report was aggregated after the collection")
	}
	// A task the helper holds without having derived it (stored by an
	// older helper) is checked again before any share leaves.
	old := newRogue(t, r, countsPlanTask(t, "rogue-old", 2560, 0.001, dap.NoiseEachAlone))
	old.task = countsPlanTask(t, "pop-stored", 1e-6, 0.001, dap.NoiseEachAlone)
	plantTask(t, r.helperDB, old.task, true)
	if _, err := old.share(); err == nil || !strings.Contains(err.Error(), "sensitivity 1e-06 stated, 2560 derived") {
		t.Errorf("a share of a stored task with an understated sensitivity: %v", err)
	}
}
