package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/service/api"
)

// runCmd runs privrec with args and returns the exit status and stdout.
func runCmd(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	if code != 0 {
		t.Logf("privrec %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return code, out.String()
}

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %q", s)
	}
	return v
}

// TestServeAndClient runs `privrec serve` and drives it with `privrec
// client` as the command-line contract says: enroll --json → {user,
// token}; submit --json → {accepted, spent, remaining}, exit 1 when
// refused; status --json → {spent, remaining, reports}; a release, the
// client's own recommendations, `serve stats --json`, and the stored
// reports read back as training data; then a graceful stop.
func TestServeAndClient(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PRIVREC_LEDGER_DIR", filepath.Join(dir, "ledgers")) // the device ledgers the client keeps by default
	t.Setenv("PRIVREC_LEDGER", "")
	items := filepath.Join(dir, "items.txt")
	var cat strings.Builder
	for j := 1; j <= 12; j++ {
		cat.WriteString("i" + string(rune('a'+j-1)) + "\tItem " + string(rune('A'+j-1)) + "\n")
	}
	must(t, os.WriteFile(items, []byte(cat.String()), 0o644))
	adminFile := filepath.Join(dir, "admin.token")
	admin := "cmd-test-admin-token-0123456789"
	must(t, os.WriteFile(adminFile, []byte(admin+"\n"), 0o600))
	mine := filepath.Join(dir, "mine.tsv")
	must(t, os.WriteFile(mine, []byte("# my ratings\nia\t5\nib\t4\nic\t1\nzz\t3\n"), 0o644))
	db := "sqlite:" + filepath.Join(dir, "serve.db")
	addrFile := filepath.Join(dir, "addr")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run(ctx, []string{"serve", "--create", "--db", db, "--listen", "127.0.0.1:0", "--items", items, "--mechanism", "rr",
			"--scale", "1:5", "--epsilon", "6", "--budget", "12", "--admin-token-file", adminFile, "--addr-file", addrFile, "--log-level", "warn"}, &out, &errb)
		if code != 0 {
			t.Logf("serve: %s", errb.String())
		}
		done <- code
	}()
	var addr string
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(addrFile); err == nil {
			addr = "http://" + strings.TrimSpace(string(b))
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("the server did not start")
		}
	}

	// The browser client is served at / (--web, on by default).
	resp, err := http.Get(addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") || !bytes.Contains(page, []byte("app.js")) {
		t.Fatalf("GET /: %d, CSP %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Security-Policy"), len(page))
	}

	code, out := runCmd(t, "client", "--server", addr, "enroll", "--json")
	e := decodeJSON(t, out)
	token, _ := e["token"].(string)
	if code != 0 || e["user"] == "" || !strings.HasPrefix(token, "prt_") {
		t.Fatalf("enroll: %d %s", code, out)
	}
	for k := range 2 {
		code, out = runCmd(t, "client", "--server", addr, "--token", token, "submit", "--ratings", mine, "--json")
		a := decodeJSON(t, out)
		if code != 0 || a["accepted"] != true || a["spent"] != float64(6*(k+1)) || a["remaining"] != float64(12-6*(k+1)) {
			t.Fatalf("submit %d: %d %s", k+1, code, out)
		}
	}
	// The budget is spent: the device's own ledger (made at enrolment)
	// refuses first, sending nothing; without it the server refuses.
	// Exit 1 and the refusal as JSON either way.
	code, out = runCmd(t, "client", "--server", addr, "--token", token, "submit", "--ratings", mine, "--json")
	r := decodeJSON(t, out)
	if code != 1 || r["accepted"] != false || r["code"] != "device_budget_exceeded" || r["device_spent"] != float64(12) {
		t.Fatalf("over the device's budget: %d %s", code, out)
	}
	code, out = runCmd(t, "client", "--server", addr, "--token", token, "submit", "--ratings", mine, "--ledger", "none", "--json")
	r = decodeJSON(t, out)
	if code != 1 || r["accepted"] != false || r["code"] != "budget_exceeded" || r["remaining"] != float64(0) {
		t.Fatalf("over budget: %d %s", code, out)
	}
	code, out = runCmd(t, "client", "--server", addr, "--token", token, "status", "--json")
	s := decodeJSON(t, out)
	if code != 0 || s["spent"] != float64(12) || s["remaining"] != float64(0) || s["reports"] != float64(2) {
		t.Fatalf("status: %d %s", code, out)
	}
	// A few more users, so that the recovery has data.
	for range 20 {
		_, out = runCmd(t, "client", "--server", addr, "enroll", "--json")
		tok := decodeJSON(t, out)["token"].(string)
		if code, out = runCmd(t, "client", "--server", addr, "--token", tok, "submit", "--ratings", mine, "--json"); code != 0 {
			t.Fatalf("submit: %s", out)
		}
	}
	// A user token cannot publish; the admin's can.
	if code, _ = runCmd(t, "client", "--server", addr, "--token", token, "publish", "--method", "ldp-rr", "--json"); code != 1 {
		t.Fatalf("a user published: exit %d", code)
	}
	code, out = runCmd(t, "client", "--server", addr, "--token", admin, "publish", "--method", "ldp-rr", "--params", `{"max_rank": 3, "max_iter": 50}`, "--seed", "3", "--json")
	p := decodeJSON(t, out)
	if code != 0 || p["id"] != float64(1) || p["reports"] != float64(22) {
		t.Fatalf("publish: %d %s", code, out)
	}
	code, out = runCmd(t, "client", "--server", addr, "recommend", "--ratings", mine, "-k", "3", "--json")
	rec := decodeJSON(t, out)
	list, _ := rec["recommendations"].([]any)
	if code != 0 || rec["release"] != float64(1) || len(list) != 3 {
		t.Fatalf("recommend: %d %s", code, out)
	}
	for _, it := range list {
		if id := it.(map[string]any)["item"]; id == "ia" || id == "ib" || id == "ic" {
			t.Fatalf("recommended %v, which she rated", id)
		}
	}
	code, out = runCmd(t, "serve", "stats", "--db", db, "--json")
	st := decodeJSON(t, out)
	if code != 0 || st["users"] != float64(21) || st["reports"] != float64(22) || st["releases"] != float64(1) || st["max_spent"] != float64(12) || st["ledger_ok"] != true {
		t.Fatalf("serve stats: %d %s", code, out)
	}
	// The stored reports, read as training data: a collect file whose
	// header declares the population of 22 reports over 12 items.
	d := dataFlags{path: db}
	m, err := d.readStore()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(d.path)
	if err != nil {
		t.Fatalf("the collect file: %v", err)
	}
	h, n, err := ldp.CountReports(f)
	f.Close()
	if err != nil || n != int64(m.Len()) || h.Users != 22 || h.Items != 12 || h.Mechanism != ldp.RR {
		t.Fatalf("collect file %s: header %+v, %d reports (matrix %d), %v", d.path, h, n, m.Len(), err)
	}
	// Every report carried its mean report (ε = 6/8, the default eighth),
	// and the collect file has one per report: all 22 — ia 5, ib 4, ic 1
	// are a mean of 3.33 plus noise.
	f, err = os.Open(d.path)
	if err != nil {
		t.Fatal(err)
	}
	coll, err := ldp.ReadCollection(f)
	f.Close()
	if err != nil || coll.Header.MeanEpsilon != 0.75 || len(coll.Means) != 22 {
		t.Fatalf("collect file %s: %+v, %v", d.path, coll, err)
	}
	for row, v := range coll.Means {
		if math.IsNaN(v) || math.IsInf(v, 0) || !strings.HasPrefix(row, "r") {
			t.Fatalf("mean report %s = %g", row, v)
		}
	}
	code, out = runCmd(t, "train", "--data", d.path, "--format", "tsv", "--method", "ldp-rr", "--debias", "--max-rank", "3", "--max-iter", "50",
		"--out", filepath.Join(dir, "offline.model"), "--json")
	if code != 0 {
		t.Fatalf("training on the exported reports: %s", out)
	}
	// The device's own ledger: made when she accepted a budget of 6 (the
	// server now publishes 12). The first report is recorded before it is
	// sent, and the raised budget is reported; the second is refused on
	// the device: nothing is sent, the server still counts one report.
	_, out = runCmd(t, "client", "--server", addr, "enroll", "--json")
	tok2 := decodeJSON(t, out)["token"].(string)
	ledgerFile := filepath.Join(dir, "device-ledger.json")
	must(t, os.WriteFile(ledgerFile, []byte(`{"server": "`+addr+`", "budget": 6, "reports": []}`), 0o600))
	code, out = runCmd(t, "client", "--server", addr, "--token", tok2, "submit", "--ratings", mine, "--ledger", ledgerFile, "--json")
	a := decodeJSON(t, out)
	if code != 0 || a["accepted"] != true || a["device_spent"] != float64(6) || a["device_remaining"] != float64(0) ||
		!strings.Contains(fmt.Sprint(a["ledger_disagreement"]), "allows a budget of 12") {
		t.Fatalf("submit with a device ledger: %d %s", code, out)
	}
	code, out = runCmd(t, "client", "--server", addr, "--token", tok2, "submit", "--ratings", mine, "--ledger", ledgerFile, "--json")
	if a = decodeJSON(t, out); code != 1 || a["accepted"] != false || a["code"] != "device_budget_exceeded" {
		t.Fatalf("over the device's budget: %d %s", code, out)
	}
	code, out = runCmd(t, "client", "--server", addr, "--token", tok2, "status", "--ledger", ledgerFile, "--json")
	if s = decodeJSON(t, out); code != 0 || s["reports"] != float64(1) || s["spent"] != float64(6) || s["device_spent"] != float64(6) {
		t.Fatalf("status with a device ledger: %d %s", code, out)
	}
	if b, _ := os.ReadFile(ledgerFile); strings.Count(string(b), `"id"`) != 1 {
		t.Fatalf("the device ledger after a refusal: %s", b)
	}

	// She takes her data and leaves: export shows her one report; leave
	// needs --yes, then deletes it and revokes her token.
	code, out = runCmd(t, "client", "--server", addr, "--token", tok2, "export")
	if ex := decodeJSON(t, out); code != 0 || len(ex["reports"].([]any)) != 1 {
		t.Fatalf("export: %d %s", code, out)
	}
	if code, _ = runCmd(t, "client", "--server", addr, "--token", tok2, "leave"); code != 2 {
		t.Fatalf("leave without --yes: exit %d", code)
	}
	code, out = runCmd(t, "client", "--server", addr, "--token", tok2, "leave", "--yes", "--json")
	if l := decodeJSON(t, out); code != 0 || l["reports_deleted"] != float64(1) || l["token_revoked"] != true {
		t.Fatalf("leave: %d %s", code, out)
	}
	if code, _ = runCmd(t, "client", "--server", addr, "--token", tok2, "status", "--ledger", "none", "--json"); code != 1 {
		t.Fatalf("status after leaving: exit %d", code)
	}

	// SIGTERM's path: the context ends, the server stops cleanly.
	cancel()
	select {
	case code := <-done:
		if code != 0 && code != 130 {
			t.Fatalf("serve exited %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestServeFlags(t *testing.T) {
	dir := t.TempDir()
	items := filepath.Join(dir, "items.txt")
	must(t, os.WriteFile(items, []byte("a\nb\n"), 0o644))
	db := "sqlite:" + filepath.Join(dir, "x.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--items", items}, "--db"},
		{[]string{"serve", "--db", db, "--scale", "1:5"}, "--items"},
		{[]string{"serve", "--db", db, "--items", items}, "--scale"},
		{[]string{"serve", "--db", db, "--items", items, "--scale", "1:5", "--mechanism", "rr", "--epsilon", "0", "--budget", "1"}, "--epsilon"},
		{[]string{"serve", "--db", db, "--items", items, "--scale", "1:5", "--mechanism", "xx", "--epsilon", "1", "--budget", "1"}, "--mechanism"},
		{[]string{"serve", "--db", db, "--items", items, "--scale", "1:5", "--mechanism", "rr", "--epsilon", "1", "--mean-epsilon", "1", "--budget", "1"}, "--mean-epsilon"},
		{[]string{"serve", "--db", db, "--items", items, "--scale", "1:5", "--mechanism", "rr", "--epsilon", "1", "--mean-epsilon", "-0.1", "--budget", "1"}, "--mean-epsilon"},
		{[]string{"serve", "--db", db, "--items", items, "--scale", "1:5", "--mechanism", "none", "--mean-epsilon", "0.5", "--budget", "1"}, "--mean-epsilon"},
		{[]string{"serve", "--db", db, "--items", items, "--scale", "1:5", "--mechanism", "rr", "--epsilon", "1", "--budget", "1", "--budget-delta", "1e-6"}, "--budget-delta"},
		{[]string{"serve", "--db", db, "--items", items, "--scale", "1:5", "--mechanism", "none", "--budget", "1", "--exhausted", "borrow"}, "--exhausted"},
		{[]string{"serve", "--db", db, "--items", items, "--scale", "1:5", "--mechanism", "none", "--budget", "1", "--budget-delta", "0.5"}, "--budget-delta"},
		{[]string{"serve", "--db", db, "--items", items, "--scale", "1:5", "--mechanism", "none", "--budget", "1", "--period", "-1h"}, "--period"},
		{[]string{"serve", "stats"}, "--db"},
		{[]string{"client", "enroll"}, "--server"},
		{[]string{"client", "--server", "http://127.0.0.1:1", "status"}, "token"},
		{[]string{"client", "--server", "http://127.0.0.1:1", "--token", "t", "submit"}, "--ratings"},
		{[]string{"client", "--server", "http://127.0.0.1:1", "dance"}, "unknown client command"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("privrec %s: exit %d, %q; want a usage error naming %s", strings.Join(c.args, " "), code, errb.String(), c.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestClientRefusesWeakenedCollection: the command-line client keeps a
// device ledger by default, made when she enrols, pinning the collection
// she joined; a server that later says "central" (her true ratings would
// be sent) or raises the per-report ε is refused on the device, exit 1,
// and nothing is sent (issue 23, defect 4: before, only --ledger refused,
// and only a budget overrun).
func TestClientRefusesWeakenedCollection(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PRIVREC_LEDGER_DIR", filepath.Join(dir, "ledgers"))
	t.Setenv("PRIVREC_LEDGER", "")
	items := []api.Item{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}}
	local := &api.Config{Mode: api.ModeLocal, Mechanism: "rr", ReportEpsilon: 2, Budget: 8, Scale: api.Scale{Min: 1, Max: 5, Levels: 5}, Units: "levels",
		Items: items, LedgerUnit: api.UnitEpsilon}
	// The per-item ε the server would publish: 2/4, lowered until the
	// device's own composition is ≤ 2.
	local.CellEpsilon = 0.5
	for client.CheckConfig(local) != nil {
		local.CellEpsilon *= 1 - 1e-12
	}
	central := &api.Config{Mode: api.ModeCentral, Mechanism: api.MechanismNone, Budget: 8, Scale: local.Scale, Units: "rating", Items: items,
		LedgerUnit: api.UnitRho, BudgetRho: 1, BudgetDelta: 1e-6}
	louder := *local
	louder.ReportEpsilon, louder.CellEpsilon = 4, 2*local.CellEpsilon
	var mu sync.Mutex
	serving := local
	var posted []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case api.PathConfig:
			json.NewEncoder(w).Encode(serving)
		case api.PathEnroll:
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(api.Enrolment{User: "u_1", Token: "prt_test"})
		case api.PathReports:
			b, _ := io.ReadAll(r.Body)
			posted = append(posted, string(b))
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(api.Ack{ID: "x", Accepted: true, Seq: int64(len(posted)), Epsilon: serving.ReportEpsilon,
				Spent: serving.ReportEpsilon * float64(len(posted)), Budget: 8, Remaining: 8 - serving.ReportEpsilon*float64(len(posted))})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	mine := filepath.Join(dir, "mine.tsv")
	must(t, os.WriteFile(mine, []byte("a 5\nb 1\n"), 0o644))
	code, out := runCmd(t, "client", "--server", srv.URL, "enroll", "--json")
	if e := decodeJSON(t, out); code != 0 || e["device_ledger"] == nil {
		t.Fatalf("enroll: %d %s", code, out)
	}
	if code, out = runCmd(t, "client", "--server", srv.URL, "--token", "prt_test", "submit", "--ratings", mine, "--json"); code != 0 {
		t.Fatalf("submit to the collection she joined: %d %s", code, out)
	}
	for _, c := range []struct {
		name string
		cfg  *api.Config
		want string
	}{
		{"central mode", central, "true ratings would be sent"},
		{"a larger ε per report", &louder, "a report now costs ε = 4"},
	} {
		mu.Lock()
		serving = c.cfg
		mu.Unlock()
		code, out = runCmd(t, "client", "--server", srv.URL, "--token", "prt_test", "submit", "--ratings", mine, "--json")
		r := decodeJSON(t, out)
		if code != 1 || r["accepted"] != false || r["code"] != "collection_changed" || !strings.Contains(fmt.Sprint(r["error"]), c.want) {
			t.Fatalf("%s: %d %s", c.name, code, out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posted) != 1 {
		t.Fatalf("%d reports reached the server; want only the first", len(posted))
	}
}

// TestServeMeanEpsilonDefault: --mean-epsilon defaults to --epsilon/8 for
// a new collection (--create); an existing collection keeps the one it
// recorded — a collection made before mean reports (none) starts without
// the flag — and an explicit other value is refused naming the flag.
func TestServeMeanEpsilonDefault(t *testing.T) {
	dir := t.TempDir()
	items := filepath.Join(dir, "items.txt")
	must(t, os.WriteFile(items, []byte("a\nb\nc\nd\n"), 0o644))
	serve := func(db string, extra ...string) (*api.Config, int, string) {
		t.Helper()
		addrFile := filepath.Join(t.TempDir(), "addr")
		args := append([]string{"serve", "--db", db, "--listen", "127.0.0.1:0", "--items", items, "--mechanism", "rr",
			"--scale", "1:5", "--epsilon", "2", "--budget", "10", "--web=false", "--log-level", "error", "--addr-file", addrFile}, extra...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		var code int
		var errb bytes.Buffer
		go func() {
			defer close(done)
			var out bytes.Buffer
			code = run(ctx, args, &out, &errb)
		}()
		for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
			if b, err := os.ReadFile(addrFile); err == nil {
				cfg, err := client.New("http://"+strings.TrimSpace(string(b)), "").Config(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				cancel()
				<-done
				return cfg, code, errb.String()
			}
			select {
			case <-done:
				return nil, code, errb.String() // refused before listening
			default:
			}
			if time.Since(start) > 20*time.Second {
				t.Fatal("the server did not start")
			}
		}
	}
	// A new collection: the default eighth.
	fresh := "sqlite:" + filepath.Join(dir, "fresh.db")
	cfg, _, msg := serve(fresh, "--create")
	if cfg == nil || cfg.MeanEpsilon != 0.25 || !strings.Contains(cfg.GuaranteeText+cfg.Guarantee.Note, "mean report") {
		t.Fatalf("a new collection: %+v (%s)", cfg, msg)
	}
	// Restarted without the flag: the recorded 0.25.
	if cfg, _, msg = serve(fresh); cfg == nil || cfg.MeanEpsilon != 0.25 {
		t.Fatalf("restarted: %+v (%s)", cfg, msg)
	}
	// A collection made without mean reports (--mean-epsilon 0, as every
	// collection before them): restarted without the flag it keeps none.
	old := "sqlite:" + filepath.Join(dir, "old.db")
	if cfg, _, msg = serve(old, "--create", "--mean-epsilon", "0"); cfg == nil || cfg.MeanEpsilon != 0 || !(cfg.CellEpsilon > 0.4999 && cfg.CellEpsilon <= 0.5) {
		t.Fatalf("--mean-epsilon 0: %+v (%s)", cfg, msg)
	}
	if cfg, _, msg = serve(old); cfg == nil || cfg.MeanEpsilon != 0 {
		t.Fatalf("an old collection restarted: %+v (%s)", cfg, msg)
	}
	if cfg, code, msg := serve(old, "--mean-epsilon", "0.25"); cfg != nil || code != 1 || !strings.Contains(msg, "--mean-epsilon 0.25 (the database holds 0") {
		t.Fatalf("another mean ε on an old collection: %+v, exit %d: %s", cfg, code, msg)
	}
}
