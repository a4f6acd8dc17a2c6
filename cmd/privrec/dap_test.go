package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/fleet"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
)

// TestDAPDeviceCommands: an admin creates a counts task, three devices
// enrol and contribute from their own ratings files, a second upload for
// the task is refused without a second charge on the device, and the
// collected release has the catalogue's dimension.
func TestDAPDeviceCommands(t *testing.T) {
	dir := t.TempDir()
	p, err := fleet.StartPair(context.Background(), dir, 5, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	admin := filepath.Join(dir, "admin.token")
	os.WriteFile(admin, []byte(p.AdminToken), 0o600)
	cat := []string{"a", "b", "c"}
	plan, err := dap.NewPlan(statistic.RowPlan{Catalogue: cat}, &statistic.Counts{Items: 3, Cap: 2})
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := json.Marshal(dap.Task{ID: "pop", Statistic: "counts", Plan: plan, Dimension: 3, Step: 1.0 / 16, Bits: 5,
		NormSq: 2 * 256, Relation: dap.RelationReplace, Sensitivity: 2 * 16, Rho: 1, MinReports: 2})
	taskFile := filepath.Join(dir, "task.json")
	os.WriteFile(taskFile, tb, 0o644)
	if o, e, code := runCLI(t, "dap", "task", "--leader", p.LeaderURL, "--admin-token-file", admin, "--file", taskFile); code != 0 {
		t.Fatalf("task: %s %s", o, e)
	}
	for u, lines := range []string{"a\t5\nb\t3\n", "c\t4\n", "a\t1\nb\t2\nc\t3\n"} {
		tok := filepath.Join(dir, "u.token")
		ledger := filepath.Join(dir, "ledger"+string(rune('0'+u)))
		rf := filepath.Join(dir, "r.tsv")
		os.WriteFile(rf, []byte(lines), 0o644)
		if o, e, code := runCLI(t, "dap", "enrol", "--leader", p.LeaderURL, "--token-file", tok); code != 0 {
			t.Fatalf("enrol: %s %s", o, e)
		}
		args := []string{"dap", "contribute", "--leader", p.LeaderURL, "--helper", p.HelperURL, "--token-file", tok, "--task", "pop", "--ratings", rf, "--ledger", ledger, "--budget-rho", "3"}
		o, e, code := runCLI(t, args...)
		if code != 0 || !strings.Contains(o, "two encrypted shares") {
			t.Fatalf("contribute: %s %s", o, e)
		}
		if u == 0 {
			if _, _, code := runCLI(t, args...); code == 0 {
				t.Fatal("a second report for the task was accepted")
			}
			l, err := dap.LoadLedger(ledger)
			if err != nil || l.SpentRho() != 1 {
				t.Fatalf("device ledger after a refused resend: %+v, %v", l, err)
			}
		}
	}
	o, e, code := runCLI(t, "dap", "collect", "--leader", p.LeaderURL, "--admin-token-file", admin, "--task", "pop", "--json")
	if code != 0 {
		t.Fatalf("collect: %s %s", o, e)
	}
	var rel struct{ Values []float64 }
	if err := json.Unmarshal([]byte(o), &rel); err != nil || len(rel.Values) != 3 {
		t.Fatalf("release %s: %v", o, err)
	}
}

func TestServeRoleUsage(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("not base64!\n"), 0o600)
	peer := filepath.Join(dir, "peer")
	os.WriteFile(peer, []byte("short\n"), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"role", []string{"serve", "--role", "boss"}, "leader or helper"},
		{"files", []string{"serve", "--role=helper"}, "are required"},
		{"secret", []string{"serve", "--role", "helper", "--db", filepath.Join(dir, "h.db"), "--key-file", filepath.Join(dir, "k"), "--secret-file", secret, "--peer-token-file", peer}, "not base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e, code := runCLI(t, tc.args...)
			if code != 2 || !strings.Contains(e, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, e, tc.want)
			}
		})
	}
}

// TestDAPSimulateArith: `privrec dap simulate --arith-only` runs its
// default methods (dp-bias and dp-ease) on a small ratings file, dp-ease
// covering no more items than a device's budget affords (270 field
// elements: the bias statistics' 26 × 10 fit, and the Gram over 6 items,
// 21 × 10, but not over 7, 28 × 10), and a budget below one field
// element is refused before anything runs.
func TestDAPSimulateArith(t *testing.T) {
	dir := t.TempDir()
	var data, items strings.Builder
	for j := range 12 {
		fmt.Fprintf(&items, "i%d\n", j)
	}
	for u := range 60 {
		for j := range 12 {
			if (u*5+j*7)%4 != 0 {
				fmt.Fprintf(&data, "u%d\ti%d\t%d\n", u, j, 1+(u+j)%5)
			}
		}
	}
	df, itf := filepath.Join(dir, "r.tsv"), filepath.Join(dir, "items.txt")
	os.WriteFile(df, []byte(data.String()), 0o644)
	os.WriteFile(itf, []byte(items.String()), 0o644)
	o, e, code := runCLI(t, "dap", "simulate", "--data", df, "--items", itf, "--scale", "1:5", "--arith-only", "--seeds", "1",
		"--max-report-elements", "270", "--params", "dp-ease.cover_scale=10", "--json")
	if code != 0 {
		t.Fatalf("simulate: %s %s", o, e)
	}
	var res []simResult
	if err := json.Unmarshal([]byte(o), &res); err != nil {
		t.Fatalf("%v: %s", err, o)
	}
	if len(res) != 2 || res[0].Method != "dp-bias" || res[1].Method != "dp-ease" {
		t.Fatalf("results %+v: want dp-bias then dp-ease", res)
	}
	if r := res[1]; r.CoveredDAP != 6 || r.CoveredCentral != 12 || !(r.DAP.Recall >= 0) {
		t.Errorf("dp-ease covered %d items through the aggregators (want 6) and %d centrally (want 12); Recall@20 %v", r.CoveredDAP, r.CoveredCentral, r.DAP.Recall)
	}
	if _, e, code := runCLI(t, "dap", "simulate", "--data", df, "--items", itf, "--scale", "1:5", "--max-report-elements", "0"); code == 0 || !strings.Contains(e, "--max-report-elements") {
		t.Errorf("a zero budget: exit %d, %s", code, e)
	}
}

// TestDAPRecommend: dpals trained through two aggregators by 40 devices,
// its recipe published; `privrec dap recommend` builds the model from the
// recipe and release and prints the same list as the orchestrator's own
// model gives her ratings; an unknown model is an error.
func TestDAPRecommend(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p, err := fleet.StartPair(ctx, dir, 50, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ids := make([]string, 10)
	for j := range ids {
		ids[j] = fmt.Sprintf("i%d", j)
	}
	cat, err := model.NewCatalogue(ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := ratings.NewBuilder(ratings.DupError)
	for u := range 40 {
		for j, id := range ids {
			if (u*5+j*7)%4 != 0 {
				if err := b.Add(fmt.Sprintf("u%d", u), id, float64(1+(u+j)%5), 0); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	train, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet.Fleet{Leader: p.LeaderURL, Helper: p.HelperURL, AdminToken: p.AdminToken, BudgetRho: 50}
	if err := f.Enrol(ctx, train.NumUsers()); err != nil {
		t.Fatal(err)
	}
	var fe *fleet.Engine
	cfg, err := methods.Configure("dpals", nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := release.Scale{Min: 1, Max: 5}
	env := methods.Env{Epsilon: 40, Delta: 1e-6, Seed: 1, Rand: noise.Seeded(1), Noise: noise.Secure(),
		Engine: func(plan statistic.RowPlan) (statistic.Engine, error) {
			fe = &fleet.Engine{Fleet: f, Plan: plan, Devices: train.NumUsers(), StepBits: 8, GramStepBits: 9, Prefix: "r",
				Ratings: func(u int) ([]string, []float64) { return train.UserRatings(int32(u)) }}
			return fe, nil
		}}
	rel, err := methods.Train(ctx, "dpals", cfg, release.Input{Declared: release.Declared{Scale: &sc, Catalogue: cat}}, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.PublishModel(ctx, fe.Recipe("dpals-r", "dpals", nil, 40, 1e-6, 1, [2]float64{1, 5})); err != nil {
		t.Fatal(err)
	}
	rf := filepath.Join(dir, "mine.tsv")
	os.WriteFile(rf, []byte("i0\t5\ni3\t1\ni4\t4\n"), 0o644)
	o, e, code := runCLI(t, "dap", "recommend", "--leader", p.LeaderURL, "--model", "dpals-r", "--ratings", rf, "--k", "4", "--json")
	if code != 0 {
		t.Fatalf("recommend: %s %s", o, e)
	}
	var got struct {
		Method          string
		Recommendations []model.Recommendation
	}
	if err := json.Unmarshal([]byte(o), &got); err != nil {
		t.Fatalf("%v: %s", err, o)
	}
	want, err := client.RecommendFrom(rel.Model(), client.Ratings{"i0": 5, "i3": 1, "i4": 4}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got.Method != "dpals" || len(got.Recommendations) != 4 || fmt.Sprint(got.Recommendations) != fmt.Sprint(want) {
		t.Errorf("privrec dap recommend: %s %+v; the orchestrator's model: %+v", got.Method, got.Recommendations, want)
	}
	if _, e, code := runCLI(t, "dap", "recommend", "--leader", p.LeaderURL, "--model", "nope", "--ratings", rf); code == 0 || !strings.Contains(e, "nope") {
		t.Errorf("an unknown model: exit %d, %s", code, e)
	}
}
