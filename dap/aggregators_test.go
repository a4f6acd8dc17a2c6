package dap_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/cloudflare/circl/kem"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/server"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/statistic"
)

const (
	adminToken = "admin-token-0123456789"
	peerToken  = "peer-token-0123456789"
)

// pair is a leader and a helper, each a real HTTP server with its own
// database, key and (seeded, for reproducibility) noise.
type pair struct {
	leader, helper     *httptest.Server
	leaderDB, helperDB string
	cli                *dap.Client
}

func newPair(t *testing.T, seedL, seedH uint64, budget float64) *pair {
	t.Helper()
	dir := t.TempDir()
	secret := make([]byte, 32)
	rand.Read(secret)
	mk := func(role dap.Role, db, helperURL string, seed uint64) *httptest.Server {
		key, err := dap.NewKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		s, err := server.New(context.Background(), server.Config{
			Role: role, DB: db, Key: key, Secret: secret, AggregatorToken: peerToken,
			AdminToken: adminToken, HelperURL: helperURL, BudgetRho: budget, MaxTaskRho: 1,
			Noise: noise.Seeded(seed), BatchSize: 4, MinBatch: 3,
		})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(func() { ts.Close(); s.Close() })
		return ts
	}
	p := &pair{leaderDB: filepath.Join(dir, "leader.db"), helperDB: filepath.Join(dir, "helper.db")}
	p.helper = mk(dap.Helper, p.helperDB, "", seedH)
	p.leader = mk(dap.Leader, p.leaderDB, p.helper.URL, seedL)
	p.cli = &dap.Client{Leader: p.leader.URL, Helper: p.helper.URL}
	return p
}

// testTaskParams is a task of the bias statistics over two items (six
// signed coordinates in [−1, 1], ‖x‖² ≤ 2·1.0025: at step 1/2, range
// [−4, 4) and norm_sq 8, as the helper derives them from the plan).
var testTaskParams = func() dap.Task {
	plan, err := dap.NewPlan(statistic.RowPlan{Catalogue: []string{"a", "b"}, Clamp: &[2]float64{1, 5}},
		&statistic.Bias{Items: 2, Mid: 3, Half: 2, Clip: 2})
	if err != nil {
		panic(err)
	}
	return dap.Task{ID: "pop-1", Statistic: "bias", Plan: plan, Dimension: 6, Step: 0.5, Min: -4, Bits: 3, NormSq: 8, Rho: 0.25, MinReports: 3}
}()

func (p *pair) createTask(t *testing.T, tk dap.Task) dap.Task {
	t.Helper()
	var out dap.Task
	if err := p.cli.Do(context.Background(), http.MethodPost, p.leader.URL, "/dap/v1/admin/tasks", adminToken, tk, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// device enrols a user and returns a client with her token.
func (p *pair) device(t *testing.T) *dap.Client {
	t.Helper()
	var e server.Enrolment
	if err := p.cli.Do(context.Background(), http.MethodPost, p.leader.URL, "/dap/v1/users", "", nil, &e); err != nil {
		t.Fatal(err)
	}
	c := *p.cli
	c.Token = e.Token
	return &c
}

func (p *pair) keys(t *testing.T) (lk, hk kem.PublicKey) {
	t.Helper()
	var err error
	if lk, err = p.cli.PublicKey(context.Background(), p.leader.URL); err != nil {
		t.Fatal(err)
	}
	if hk, err = p.cli.PublicKey(context.Background(), p.helper.URL); err != nil {
		t.Fatal(err)
	}
	return lk, hk
}

var honest = [][]float64{
	{1, -1, 0.5, 0, -2, 0},
	{0.5, 0.5, 0.5, 0.5, 0.5, 0.5},
	{-1.5, 1.5, 0, 0, 0, 1},
	{0, 0, 0, 0, 0, -0.5},
}

// uploadBinary uploads r for a new device in the binary encoding
// (server.ReportMediaType) and returns the leader's receipt.
func (p *pair) uploadBinary(t *testing.T, r *dap.Report) server.Receipt {
	t.Helper()
	var rc server.Receipt
	if code, err := p.putBinary(t, r, &rc); err != nil || code != http.StatusCreated {
		t.Fatalf("binary upload: HTTP %d (%v)", code, err)
	}
	return rc
}

// putBinary uploads r for a new device in the binary encoding and
// returns the HTTP status, decoding a 2xx answer into rc.
func (p *pair) putBinary(t *testing.T, r *dap.Report, rc *server.Receipt) (int, error) {
	t.Helper()
	d := p.device(t)
	b, err := server.EncodeReport(r)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, p.leader.URL+"/dap/v1/tasks/"+r.TaskID+"/reports", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", server.ReportMediaType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(rc)
}

// run uploads the honest contributions as JSON (and, if bad, two
// malicious reports in the binary encoding: an out-of-range contribution
// made by changing the leader's share after sharding, which the leader
// refuses at upload — 400, nothing charged — because the joint
// randomness its preparation derives from the share no longer matches
// the public share's; and a forged proof, which it stores and both
// aggregators reject at aggregation), collects, and returns the release.
func run(t *testing.T, p *pair, bad bool) *server.Release {
	t.Helper()
	ctx := context.Background()
	tk := p.createTask(t, testTaskParams)
	lpk, hpk := p.keys(t)
	upload := func(r *dap.Report, binary bool) {
		var rc server.Receipt
		if binary {
			rc = p.uploadBinary(t, r)
		} else if err := p.device(t).Upload(ctx, r, &rc); err != nil {
			t.Fatal(err)
		}
		if rc.ChargedRho < tk.Rho {
			t.Fatalf("charged ρ %v < the task's %v", rc.ChargedRho, tk.Rho)
		}
	}
	for i, x := range honest {
		q, err := tk.Quantize(x)
		if err != nil {
			t.Fatal(err)
		}
		r, err := tk.Shard(q, lpk, hpk)
		if err != nil {
			t.Fatal(err)
		}
		upload(r, false)
		if bad && i == 1 {
			out, err := tk.ShardOutOfRange(lpk, hpk)
			if err != nil {
				t.Fatal(err)
			}
			if code, _ := p.putBinary(t, out, nil); code != http.StatusBadRequest {
				t.Fatalf("out-of-range report: HTTP %d, want 400 (refused at upload)", code)
			}
			forged, err := tk.ShardForgedProof(lpk, hpk)
			if err != nil {
				t.Fatal(err)
			}
			upload(forged, true)
		}
	}
	var rel server.Release
	if err := p.cli.Do(ctx, http.MethodPost, p.leader.URL, "/dap/v1/admin/tasks/"+tk.ID+"/collect", adminToken, nil, &rel); err != nil {
		t.Fatal(err)
	}
	return &rel
}

func verdicts(t *testing.T, db string) (accepted, rejected int) {
	t.Helper()
	d, err := sql.Open("sqlite", db+"?_query_only=1")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.QueryRow(`SELECT COALESCE(SUM(accepted), 0), COUNT(*) - COALESCE(SUM(accepted), 0) FROM verdicts`).Scan(&accepted, &rejected); err != nil {
		t.Fatal(err)
	}
	return accepted, rejected
}

// TestOutOfRangeRejectedByBoth: an out-of-range contribution is refused
// at upload and a forged proof rejected by both aggregators, and the
// release is exactly what it is without them; it is exactly Σq plus both
// aggregators' noise.
func TestOutOfRangeRejectedByBoth(t *testing.T) {
	clean := run(t, newPair(t, 1, 2, 1), false)
	p := newPair(t, 1, 2, 1)
	dirty := run(t, p, true)
	for _, db := range []string{p.leaderDB, p.helperDB} {
		if a, r := verdicts(t, db); a != len(honest) || r != 1 {
			t.Errorf("%s: %d accepted, %d rejected; want %d and 1", filepath.Base(db), a, r, len(honest))
		}
	}
	tk := dirty.Task
	nl, nh := tk.NewVec(), tk.NewVec()
	tk.AddNoise(nl, noise.Seeded(1))
	tk.AddNoise(nh, noise.Seeded(2))
	noiseInts, _, err := tk.Combine(nl, nh, 0)
	if err != nil {
		t.Fatal(err)
	}
	for j := range tk.Dimension {
		var sum int64
		for _, x := range honest {
			q, _ := tk.Quantize(x)
			sum += q[j]
		}
		want := tk.Step * float64(sum+noiseInts[j])
		if dirty.Values[j] != clean.Values[j] || dirty.Values[j] != want {
			t.Errorf("coordinate %d: with bad reports %v, without %v, want Σq+noise = %v", j, dirty.Values[j], clean.Values[j], want)
		}
	}
	if nl[0] == nh[0] {
		t.Fatal("both aggregators drew the same noise")
	}
}

// TestLeaderRefusals: budget, one report per task, helper policy, auth.
func TestLeaderRefusals(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, 1, 2, 0.3) // budget 0.3: one task of ρ 0.25
	tk := p.createTask(t, testTaskParams)
	lpk, hpk := p.keys(t)
	q, _ := tk.Quantize(honest[0])
	d := p.device(t)
	r1, _ := tk.Shard(q, lpk, hpk)
	if err := d.Upload(ctx, r1, nil); err != nil {
		t.Fatal(err)
	}
	status := func(err error) int {
		var he *dap.HTTPError
		if errors.As(err, &he) {
			return he.Status
		}
		t.Fatalf("not an HTTP refusal: %v", err)
		return 0
	}
	r2, _ := tk.Shard(q, lpk, hpk)
	if s := status(d.Upload(ctx, r2, nil)); s != http.StatusConflict {
		t.Errorf("second report for the task: HTTP %d, want 409", s)
	}
	t2 := testTaskParams
	t2.ID = "pop-2"
	tk2 := p.createTask(t, t2)
	r3, _ := tk2.Shard(q, lpk, hpk)
	if s := status(d.Upload(ctx, r3, nil)); s != http.StatusForbidden {
		t.Errorf("over budget: HTTP %d, want 403", s)
	}
	var l server.Ledger
	if err := d.Do(ctx, http.MethodGet, p.leader.URL, "/dap/v1/ledger", d.Token, nil, &l); err != nil || l.SpentRho != 0.25 {
		t.Errorf("ledger %+v (%v), want ρ 0.25 spent", l, err)
	}
	t3 := testTaskParams
	t3.ID, t3.Rho = "greedy", 2
	if s := status(p.cli.Do(ctx, http.MethodPost, p.leader.URL, "/dap/v1/admin/tasks", adminToken, t3, nil)); s != http.StatusBadRequest {
		t.Errorf("task over the helper's ρ policy: HTTP %d, want 400", s)
	}
	if s := status(p.cli.Do(ctx, http.MethodPost, p.leader.URL, "/dap/v1/admin/tasks/pop-1/collect", "wrong", nil, nil)); s != http.StatusUnauthorized {
		t.Errorf("collect without the admin token: HTTP %d, want 401", s)
	}
	// Fewer valid reports than MinReports: no release.
	if s := status(p.cli.Do(ctx, http.MethodPost, p.leader.URL, "/dap/v1/admin/tasks/pop-1/collect", adminToken, nil, nil)); s != http.StatusBadRequest {
		t.Errorf("collect below min_reports: HTTP %d, want 400", s)
	}
}
