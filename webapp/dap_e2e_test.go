package webapp_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/fleet"
	"github.com/privrec/privrec/dap/server"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/accountant"
	"github.com/privrec/privrec/statistic"
	"github.com/privrec/privrec/webapp"
)

// dapPair is a leader (serving the browser device at /) and a helper,
// in-process on loopback, each with its own SQLite file and HPKE key, and
// a recorder of every request each receives.
type dapPair struct {
	leader, helper       string // base URLs
	leaderRec, helperRec *recorder
	leaderDB, helperDB   string
	admin                string
	leaderSrv, helperSrv *server.Server
	leaderKey, helperKey dap.KeyPair // to open her shares in the test (both operators colluding)
	secret               []byte
}

func startDAP(t *testing.T, cat *model.Catalogue, budgetRho float64) *dapPair {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	p := &dapPair{admin: adminToken, leaderDB: filepath.Join(dir, "leader.db"), helperDB: filepath.Join(dir, "helper.db")}
	secret := bytes.Repeat([]byte{7}, 32)
	p.secret = secret
	const peer = "test-peer-token-0123456789"
	newServer := func(role dap.Role, db, helperURL string) *server.Server {
		key, err := dap.NewKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		if role == dap.Leader {
			p.leaderKey = key
		} else {
			p.helperKey = key
		}
		s, err := server.New(ctx, server.Config{Role: role, DB: db, Key: key, Secret: secret, AggregatorToken: peer,
			AdminToken: adminToken, HelperURL: helperURL, BudgetRho: budgetRho, MinBatch: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	p.helperSrv = newServer(dap.Helper, p.helperDB, "")
	p.helperRec = &recorder{next: p.helperSrv.Handler()}
	hs := httptest.NewServer(p.helperRec)
	t.Cleanup(hs.Close)
	p.helper = hs.URL
	p.leaderSrv = newServer(dap.Leader, p.leaderDB, p.helper)
	page, err := webapp.NewDAP(webapp.DAPOptions{HelperURL: p.helper, Catalogue: cat})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/dap/", p.leaderSrv.Handler())
	mux.Handle("/", page)
	p.leaderRec = &recorder{next: mux}
	ls := httptest.NewServer(p.leaderRec)
	t.Cleanup(ls.Close)
	p.leader = ls.URL
	return p
}

// countsTask provisions a dp-popularity counts task over the catalogue at
// both aggregators, as the aggregators' engine builds it (fleet.Engine.TaskFor).
func (p *dapPair) countsTask(t *testing.T, id string, cat *model.Catalogue, cap, rho float64) dap.Task {
	t.Helper()
	return p.countsTaskNoise(t, id, cat, cap, rho, dap.NoiseEachAlone)
}

// countsTaskNoise is countsTask in the given noise mode.
func (p *dapPair) countsTaskNoise(t *testing.T, id string, cat *model.Catalogue, cap, rho float64, mode dap.NoiseMode) dap.Task {
	t.Helper()
	c := &statistic.Counts{Items: cat.Len(), Cap: cap}
	mech, err := statistic.Mechanism(c.Spec(), rho, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	e := &fleet.Engine{Plan: statistic.RowPlan{Catalogue: cat.IDs()}, StepBits: 8, GramStepBits: 9, Noise: mode}
	task, err := e.TaskFor(id, c, mech)
	if err != nil {
		t.Fatal(err)
	}
	var got dap.Task
	dc := &dap.Client{Leader: p.leader, Helper: p.helper}
	if err := dc.Do(context.Background(), http.MethodPost, p.leader, "/dap/v1/admin/tasks", p.admin, task, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// puts lists the report uploads the leader received (task path → bodies).
func (p *dapPair) puts() []recorded {
	var out []recorded
	for _, r := range p.leaderRec.all() {
		if r.method == http.MethodPut && strings.HasSuffix(r.path, "/reports") {
			out = append(out, r)
		}
	}
	return out
}

func catalogue(t *testing.T, n int) *model.Catalogue {
	t.Helper()
	ids, names := make([]string, n), make([]string, n)
	for j := range ids {
		ids[j] = fmt.Sprintf("m%04d", j+1)
		names[j] = fmt.Sprintf("Film number %d", j+1)
	}
	cat, err := model.NewCatalogue(ids, names)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// joinAndRate joins at the leader through the page and rates items (by
// their index in the catalogue) through its form.
func joinAndRate(t *testing.T, bctx context.Context, mine map[int]float64) {
	t.Helper()
	if err := chromedp.Run(bctx, chromedp.Click(`#enrol`, chromedp.ByID),
		chromedp.WaitVisible(`#ledger:not(:empty)`, chromedp.ByQuery)); err != nil {
		t.Fatalf("joining: %v", err)
	}
	for j, v := range mine {
		js := fmt.Sprintf(`(() => { const s = document.getElementById("rate-%d"); s.value = "%g"; s.dispatchEvent(new Event("change")); return s.value; })()`, j, v)
		var got string
		if err := chromedp.Run(bctx, chromedp.Evaluate(js, &got)); err != nil || got != fmt.Sprint(v) {
			t.Fatalf("rating item %d: %q, %v", j, got, err)
		}
	}
}

// prepare presses the task's "Prepare my shares" (by keyboard) and waits
// for the preview.
func prepare(bctx context.Context, task string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.Evaluate(`delete document.body.dataset.prepared`, nil),
		chromedp.Focus(fmt.Sprintf(`tr[data-task=%q] button`, task), chromedp.ByQuery), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(fmt.Sprintf(`body[data-prepared=%q]`, task), chromedp.ByQuery),
	}
}

// pendingShares is what the page prepared: its sizes and time.
type pendingShares struct {
	Task   string `json:"task"`
	Report string `json:"report"`
	// ReportBin is the upload body, base64 (dap.EncodeReport).
	ReportBin []byte         `json:"reportBin"`
	Sizes     map[string]int `json:"sizes"`
	MS        float64        `json:"ms"`
}

func readPending(t *testing.T, bctx context.Context) pendingShares {
	t.Helper()
	var s string
	if err := chromedp.Run(bctx, chromedp.Evaluate(`localStorage.getItem("privrec.dap.pending") || ""`, &s)); err != nil {
		t.Fatal(err)
	}
	var p pendingShares
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		t.Fatalf("the page's pending shares %q: %v", s, err)
	}
	return p
}

// TestBrowserDAP: in headless Chromium, a person joins a two-aggregator
// collection served by the leader, rates items, prepares her shares for a
// dp-popularity counts task over 40 items (the page shows two encrypted
// shares and their sizes), and sends them; five simulated devices
// contribute through the Go reference client; the collection runs and her
// recommendations are computed in the browser from the release. It checks
// that the report the leader stored is the one the page showed, that both
// aggregators verified and counted it, that the browser's own ledger
// counted the task's ρ, that a second contribution to the task and a task
// over her budget are refused in the browser (nothing sent), that the
// leader refuses the same report again, that the helper's key was fetched
// from the helper itself, and that the recommendations are the release's
// best items she has not rated.
func TestBrowserDAP(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test runs in the full go test (not -short)")
	}
	chromium := findChromium(t)
	start := time.Now()
	ctx := context.Background()
	cat := catalogue(t, 40)
	p := startDAP(t, cat, 1.5)
	task := p.countsTask(t, "pop-1", cat, 1, 1)
	p.countsTask(t, "pop-2", cat, 1, 1) // 1 + 1 > her budget 1.5

	bctx := newBrowser(t, ctx, chromium, 90*time.Second)
	if err := chromedp.Run(bctx, chromedp.Navigate(p.leader+"/"), chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery)); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	shots := screenshotDir(t)
	var guarantee string
	if err := chromedp.Run(bctx, chromedp.Text(`#guarantee`, &guarantee, chromedp.ByID), chromedp.EmulateViewport(420, 1150),
		scrollTop("guarantee-h"), screenshot(filepath.Join(shots, "browser-dap-guarantee.png")), chromedp.EmulateViewport(420, 900)); err != nil {
		t.Fatal(err)
	}
	leaderHost, helperHost := strings.TrimPrefix(p.leader, "http://"), strings.TrimPrefix(p.helper, "http://")
	for _, want := range []string{"never leave this device", "two secret shares", "unless both operators collude", "even if one of the two aggregators is dishonest", "computed in this browser",
		"What the leader (" + leaderHost + ") receives: your token", "share 1 (which only it can open)",
		"What the helper (" + helperHost + ") receives: share 2, passed on by the leader without your token"} {
		if !strings.Contains(guarantee, want) {
			t.Errorf("the guarantee does not say %q: %s", want, guarantee)
		}
	}
	mine := map[int]float64{0: 5, 2: 4, 4: 5, 7: 3, 11: 4, 30: 2}
	joinAndRate(t, bctx, mine)

	// Prepare: two encrypted shares and their sizes are shown.
	var shares string
	if err := chromedp.Run(bctx, prepare(bctx, "pop-1"), chromedp.Text(`#shares`, &shares, chromedp.ByID)); err != nil {
		t.Fatalf("preparing: %v", err)
	}
	pend := readPending(t, bctx)
	if err := chromedp.Run(bctx, chromedp.EmulateViewport(420, 1000), scrollTop("tasks-h"),
		screenshot(filepath.Join(shots, "browser-dap-shares.png"))); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Share 1, encrypted", "the leader only", "Share 2, encrypted", "the helper only", fmt.Sprint(pend.Sizes["leader_share"]), fmt.Sprint(pend.Sizes["helper_share"])} {
		if !strings.Contains(shares, want) {
			t.Errorf("the shares table does not show %q: %s", want, shares)
		}
	}
	if len(p.puts()) != 0 {
		t.Fatal("preparing sent a report")
	}
	// The first send fails (three tries, 503): the task is counted once in
	// her browser, and Send again sends the same bytes.
	p.leaderRec.mu.Lock()
	p.leaderRec.failPuts = 3
	p.leaderRec.mu.Unlock()
	var failed string
	if err := chromedp.Run(bctx, chromedp.Click(`#send`, chromedp.ByID), chromedp.WaitVisible(`#sent.bad:not(:empty)`, chromedp.ByQuery),
		chromedp.Text(`#sent`, &failed, chromedp.ByID)); err != nil {
		t.Fatalf("sending: %v", err)
	}
	if !strings.Contains(failed, "try again with the same shares") {
		t.Errorf("after a failed send the page says %q", failed)
	}
	if err := chromedp.Run(bctx, chromedp.Click(`#send`, chromedp.ByID), chromedp.WaitVisible(`#sent.ok`, chromedp.ByQuery)); err != nil {
		t.Fatalf("sending again: %v", err)
	}
	puts := p.puts()
	if len(puts) != 4 {
		t.Fatalf("the leader received %d uploads, want 3 failed and 1 stored", len(puts))
	}
	for _, r := range puts {
		if r.path != "/dap/v1/tasks/pop-1/reports" || !bytes.Equal(r.body, pend.ReportBin) || r.ctype != dap.ReportMediaType {
			t.Fatalf("an upload to %s (%s) differs from the report the page prepared", r.path, r.ctype)
		}
	}
	puts = puts[3:]
	// The upload is the binary encoding of the report the page showed as
	// JSON, and smaller.
	rep, err := dap.DecodeReport(puts[0].body)
	if err != nil {
		t.Fatal(err)
	}
	var shown dap.Report
	if err := json.Unmarshal([]byte(pend.Report), &shown); err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, rep), mustJSON(t, shown); a != b {
		t.Error("the binary upload is not the report the page showed")
	}
	if pend.Sizes["body"] != len(puts[0].body) || pend.Sizes["json"] != len(pend.Report) || len(puts[0].body) >= len(pend.Report) {
		t.Errorf("sizes %v: upload %d bytes, JSON %d", pend.Sizes, len(puts[0].body), len(pend.Report))
	}
	if got := len(rep.LeaderShare.Enc) + len(rep.LeaderShare.Ciphertext); got != pend.Sizes["leader_share"] || got < 16*task.Dimension*task.Bits {
		t.Errorf("leader share %d bytes, page said %d (%d field elements)", got, pend.Sizes["leader_share"], task.Dimension*task.Bits)
	}
	if got := len(rep.HelperShare.Enc) + len(rep.HelperShare.Ciphertext); got != pend.Sizes["helper_share"] || got == 0 {
		t.Errorf("helper share %d bytes, page said %d", got, pend.Sizes["helper_share"])
	}
	// What her shares hold, opened with both aggregators' keys (only the
	// two operators together can do this): exactly the quantized
	// contribution the Go reference client computes from her ratings.
	if got, want := p.open(t, task, &rep), goContribution(t, task, cat, mine); !slices.Equal(got, want) {
		t.Errorf("her shares hold %v; the Go client computes %v", got, want)
	}
	// The browser's request bodies: enrolment (empty) and the report.
	for _, r := range p.leaderRec.all() {
		if len(r.body) > 0 && !strings.HasPrefix(r.path, "/dap/v1/admin/") && r.path != "/dap/v1/tasks/pop-1/reports" {
			t.Errorf("the leader received a body at %s %s", r.method, r.path)
		}
	}
	// The helper's key came from the helper (cross-origin, CORS).
	var helperKeyFetches int
	for _, r := range p.helperRec.all() {
		if r.method == http.MethodGet && r.path == "/dap/v1/hpke_config" {
			helperKeyFetches++
		}
	}
	if helperKeyFetches == 0 {
		t.Error("the page did not fetch the helper's key from the helper")
	}
	var token, user, ledgerText string
	if err := chromedp.Run(bctx, chromedp.Evaluate(`JSON.parse(localStorage.getItem("privrec.dap.account")).token`, &token),
		chromedp.Evaluate(`JSON.parse(localStorage.getItem("privrec.dap.account")).user`, &user),
		chromedp.Evaluate(`localStorage.getItem("privrec.dap.ledger")`, &ledgerText)); err != nil {
		t.Fatal(err)
	}
	led, err := dap.ReadLedger(strings.NewReader(ledgerText), "the browser's")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(math.Ceil(task.Rho*1e9 - 1e-6)); led.Tasks["pop-1"] != want || led.BudgetRho != 1.5 || len(led.Tasks) != 1 {
		t.Errorf("the browser's ledger %+v: want pop-1 at %d nano-ρ of 1.5", led, want)
	}

	// A second contribution to pop-1, and pop-2 (over her budget): refused
	// by the browser, nothing sent.
	var refusal, overBudget string
	if err := chromedp.Run(bctx,
		chromedp.Evaluate(`onPrepare("pop-1").then(() => document.getElementById("sent").textContent)`, &refusal, awaitPromise),
		prepareRefused("pop-2", &overBudget)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(refusal, "already sent a report for the task") {
		t.Errorf("a second contribution to pop-1: the page says %q", refusal)
	}
	if !strings.Contains(overBudget, "over the device's budget") {
		t.Errorf("pop-2 over the budget: the page says %q", overBudget)
	}
	if n := len(p.puts()); n != 4 {
		t.Errorf("after the refusals the leader received %d uploads, want 4", n)
	}
	// The same report again (her token; a retry after a lost
	// acknowledgement) is acknowledged again, not charged again.
	req, _ := http.NewRequest(http.MethodPut, p.leader+"/dap/v1/tasks/pop-1/reports", bytes.NewReader(puts[0].body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", dap.ReportMediaType)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Errorf("the same report again: %v", err)
	} else {
		var rc server.Receipt
		if json.NewDecoder(resp.Body).Decode(&rc); resp.StatusCode != http.StatusOK || !rc.Repeated {
			t.Errorf("the same report again: HTTP %d %+v, want 200, repeated", resp.StatusCode, rc)
		}
		resp.Body.Close()
	}

	// Five other devices through the Go reference client.
	rng := rand.New(rand.NewPCG(1, 2))
	ids := cat.IDs()
	for u := range 5 {
		c := &dap.Client{Leader: p.leader, Helper: p.helper}
		var e server.Enrolment
		if err := c.Do(ctx, http.MethodPost, p.leader, "/dap/v1/users", "", nil, &e); err != nil {
			t.Fatal(err)
		}
		c.Token = e.Token
		var its []string
		var vals []float64
		for j := range ids {
			if rng.Float64() < 0.8/float64(1+j/4) {
				its, vals = append(its, ids[j]), append(vals, float64(1+rng.IntN(5)))
			}
		}
		dl, _ := dap.NewLedger(p.leader, 1.5)
		if _, _, err := c.Contribute(ctx, "pop-1", its, vals, dl, nil, nil); err != nil {
			t.Fatalf("device %d: %v", u, err)
		}
	}
	// The collection: verify, aggregate, noise, release.
	dc := &dap.Client{Leader: p.leader}
	var agg server.AggregateResult
	if err := dc.Do(ctx, http.MethodPost, p.leader, "/dap/v1/admin/tasks/pop-1/aggregate", p.admin, nil, &agg); err != nil {
		t.Fatal(err)
	}
	if agg.Accepted != 6 || agg.Rejected != 0 {
		t.Errorf("aggregation %+v, want 6 accepted", agg)
	}
	var rel server.Release
	if err := dc.Do(ctx, http.MethodPost, p.leader, "/dap/v1/admin/tasks/pop-1/collect", p.admin, nil, &rel); err != nil {
		t.Fatal(err)
	}
	// Both aggregators stored and accepted her report.
	for _, db := range []string{p.leaderDB, p.helperDB} {
		if got := verdict(t, db, rep.ID); got != 1 {
			t.Errorf("%s: her report's verdict %d, want accepted", filepath.Base(db), got)
		}
	}
	if n := countRows(t, p.leaderDB, `SELECT COUNT(*) FROM reports WHERE task_id = 'pop-1' AND report_id = ? AND user_id = ?`, rep.ID, user); n != 1 {
		t.Errorf("the leader stored %d rows of her report", n)
	}
	if n := countRows(t, p.leaderDB, `SELECT spent_rho_nano FROM users WHERE id = ?`, user); int64(n) != led.Tasks["pop-1"] {
		t.Errorf("the leader charged her %d nano-ρ, her browser %d", n, led.Tasks["pop-1"])
	}

	// Her recommendations, computed in the browser from the release.
	var recs []string
	if err := chromedp.Run(bctx, chromedp.Click(`#recommend`, chromedp.ByID), chromedp.WaitVisible(`body[data-recs]`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#recs li")].map((li) => li.dataset.item + "|" + li.textContent)`, &recs)); err != nil {
		t.Fatalf("recommending: %v", err)
	}
	m, err := dap.ReleasedModel(rel.Task, rel.Values, nil)
	if err != nil {
		t.Fatal(err)
	}
	ratings := client.Ratings{}
	for j, v := range mine {
		ratings[ids[j]] = v
	}
	want, err := client.RecommendFrom(m, ratings, 10)
	if err != nil {
		t.Fatal(err)
	}
	var wantRecs []string
	for _, r := range want {
		j, _ := cat.Index(r.Item)
		wantRecs = append(wantRecs, r.Item+"|"+cat.Titles()[j])
	}
	if !slices.Equal(recs, wantRecs) {
		t.Errorf("the browser recommends %v; from the release: %v", recs, wantRecs)
	}
	for _, r := range recs {
		id, _, _ := strings.Cut(r, "|")
		if j, _ := cat.Index(id); mine[j] != 0 {
			t.Errorf("recommended %s, which she rated", id)
		}
	}
	var state string
	if err := chromedp.Run(bctx, chromedp.Text(`tr[data-task="pop-1"]`, &state, chromedp.ByQuery),
		scrollTop("tasks-h"), screenshot(filepath.Join(shots, "browser-dap-recommendations.png"))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(state, "you contributed; published") {
		t.Errorf("task pop-1's row: %q", state)
	}
	splitNoiseConsent(t, bctx, p, cat, shots)
	t.Logf("browser device: %d-item counts task, shares computed in %.1f ms, %d bytes on the wire (binary; %d as JSON; leader share %d, helper share %d); whole test %v",
		task.Dimension, pend.MS, pend.Sizes["body"], pend.Sizes["json"], pend.Sizes["leader_share"], pend.Sizes["helper_share"], time.Since(start).Round(time.Millisecond))
}

// splitNoiseConsent: a split-noise (honest-but-curious) task is refused
// in the browser without her consent, nothing sent; the page says why in
// plain words and offers the box, off. Ticked, the page shows, and her
// browser's ledger is charged, the ρ one aggregator's noise alone gives
// (shown as ε at the collection's δ, with ρ beside it), not the stated ρ
// the leader charges; the browser's count then exceeds the leader's by
// exactly that on purpose, without a disagreement warning.
func splitNoiseConsent(t *testing.T, bctx context.Context, p *dapPair, cat *model.Catalogue, shots string) {
	t.Helper()
	split := p.countsTaskNoise(t, "split-1", cat, 1, 0.2, dap.NoiseSplit)
	d, err := dap.Derive(split)
	if err != nil {
		t.Fatal(err)
	}
	eps, err := accountant.ZCDPToApprox(d.ChargeRho, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	if !(d.ChargeRho > 1.8*split.Rho && d.ChargeRho < 2.2*split.Rho) {
		t.Fatalf("the split task's one-aggregator ρ %v is not ≈ 2 × %v", d.ChargeRho, split.Rho)
	}
	before := len(p.puts())
	var guarantee, consentBox, row, refusal string
	var checked bool
	if err := chromedp.Run(bctx, chromedp.Reload(), chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery),
		chromedp.Text(`#guarantee`, &guarantee, chromedp.ByID),
		chromedp.WaitVisible(`#split-consent`, chromedp.ByID), chromedp.Text(`#split-consent`, &consentBox, chromedp.ByID),
		chromedp.Evaluate(`document.getElementById("allow-split").checked`, &checked),
		chromedp.Text(`tr[data-task="split-1"]`, &row, chromedp.ByQuery),
		prepareRefused("split-1", &refusal)); err != nil {
		t.Fatalf("the split task without consent: %v", err)
	}
	if checked {
		t.Error("the split-noise box is ticked by default")
	}
	for _, want := range []string{"each operator adds only half of the noise", "tick the box in step 3"} {
		if !strings.Contains(guarantee, want) {
			t.Errorf("the guarantee does not say %q: %s", want, guarantee)
		}
	}
	for _, want := range []string{"each operator adds only half of the noise", "leaves its half out", "charges you that weaker figure", "Off by default"} {
		if !strings.Contains(consentBox, want) {
			t.Errorf("the consent box does not say %q: %s", want, consentBox)
		}
	}
	epsText, rhoText := "ε = "+jsFmt(eps)+" at δ = 1e-6", "ρ = "+jsFmt(d.ChargeRho)+" zCDP"
	for _, want := range []string{"ε = " + jsFmt(eps) + " (ρ = " + jsFmt(d.ChargeRho) + ") against one operator alone", "needs your consent"} {
		if !strings.Contains(row, want) {
			t.Errorf("the split task's row does not say %q: %s", want, row)
		}
	}
	for _, want := range []string{"Not prepared: task split-1 splits the noise", "each adds half", epsText, "tick the box above"} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the refusal does not say %q: %s", want, refusal)
		}
	}
	if n := len(p.puts()); n != before {
		t.Fatalf("refused without consent, yet %d uploads were sent", n-before)
	}
	// The device code refuses it too, whatever the page's script does.
	var direct string
	if err := chromedp.Run(bctx, chromedp.Evaluate(`(async () => {
		const task = await api("GET", "/dap/v1/tasks/split-1");
		return privrec.dapLedgerReserve(localStorage.getItem("privrec.dap.ledger"), task, false);
	})()`, &direct, awaitPromise)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(direct, "refused without the user's consent") {
		t.Errorf("the device code without consent: %s", direct)
	}

	// With her consent: prepared, shown and charged at the one-aggregator ρ.
	var spend, sent, ledgerLine string
	if err := chromedp.Run(bctx, chromedp.Click(`#allow-split`, chromedp.ByID), prepare(bctx, "split-1"),
		chromedp.Text(`#spend`, &spend, chromedp.ByID), chromedp.EmulateViewport(420, 1200), scrollTop("tasks-h"),
		chromedp.Evaluate(`document.querySelector("#tasks").parentElement.scrollLeft = 0`, nil),
		screenshot(filepath.Join(shots, "browser-dap-split-consent.png")), chromedp.EmulateViewport(420, 900),
		chromedp.Click(`#send`, chromedp.ByID), chromedp.WaitVisible(`#sent.ok`, chromedp.ByQuery),
		chromedp.Text(`#sent`, &sent, chromedp.ByID),
		chromedp.WaitVisible(`#ledger:not(:empty)`, chromedp.ByQuery), chromedp.Text(`#ledger`, &ledgerLine, chromedp.ByID)); err != nil {
		t.Fatalf("the split task with consent: %v", err)
	}
	for _, want := range []string{"Task split-1 costs you " + epsText + " (" + rhoText + ") against one operator alone", "you opted in; this is what you are charged"} {
		if !strings.Contains(spend, want) {
			t.Errorf("the preview does not say %q: %s", want, spend)
		}
	}
	if want := "The leader charged ρ = " + jsFmt(split.Rho); !strings.Contains(sent, want) || !strings.Contains(sent, "This browser counts the task at ρ = "+jsFmt(d.ChargeRho)) {
		t.Errorf("after sending the page says %q", sent)
	}
	if strings.Contains(ledgerLine, "Warning") || !strings.Contains(ledgerLine, "more than the leader: the split-noise tasks you opted in to") {
		t.Errorf("the ledger line: %s", ledgerLine)
	}
	var ledgerText string
	if err := chromedp.Run(bctx, chromedp.Evaluate(`localStorage.getItem("privrec.dap.ledger")`, &ledgerText)); err != nil {
		t.Fatal(err)
	}
	led, err := dap.ReadLedger(strings.NewReader(ledgerText), "the browser's")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := led.Tasks["split-1"], int64(math.Ceil(d.ChargeRho*1e9-1e-6)); got != want {
		t.Errorf("the browser's ledger charged split-1 %d nano-ρ, want the one-aggregator %d (stated %v)", got, want, split.Rho)
	}
	if n := len(p.puts()); n != before+1 {
		t.Errorf("with consent %d uploads were sent, want 1", n-before)
	}
}

// jsFmt is the page's fmt (common.js): integers as they are, others
// rounded to three decimals.
func jsFmt(x float64) string {
	return strconv.FormatFloat(math.Round(x*1000)/1000, 'f', -1, 64)
}

func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

// open prepares a report at both aggregators' sides and combines the two
// output shares: the device's quantized contribution.
func (p *dapPair) open(t *testing.T, task dap.Task, r *dap.Report) []int64 {
	t.Helper()
	l, err := dap.NewPreparer(task, dap.Leader, p.leaderKey, p.secret)
	if err != nil {
		t.Fatal(err)
	}
	h, err := dap.NewPreparer(task, dap.Helper, p.helperKey, p.secret)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := l.Prepare(r.ID, r.PublicShare, r.LeaderShare)
	if err != nil {
		t.Fatal(err)
	}
	ph, err := h.Prepare(r.ID, r.PublicShare, r.HelperShare)
	if err != nil {
		t.Fatal(err)
	}
	ol, err := l.Finish(pl, pl.Share, ph.Share)
	if err != nil {
		t.Fatal(err)
	}
	oh, err := h.Finish(ph, pl.Share, ph.Share)
	if err != nil {
		t.Fatal(err)
	}
	q, _, err := task.Combine(ol, oh, 1)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// goContribution is what the Go client quantizes for these ratings.
func goContribution(t *testing.T, task dap.Task, cat *model.Catalogue, mine map[int]float64) []int64 {
	t.Helper()
	d, err := dap.NewDevice(task)
	if err != nil {
		t.Fatal(err)
	}
	ids := cat.IDs()
	var its []string
	var vals []float64
	for j, v := range mine {
		its, vals = append(its, ids[j]), append(vals, v)
	}
	q, err := task.Quantize(d.Contribute(d.RowOf(its, vals)))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Max(q) == 0 {
		t.Fatal("her contribution is zero")
	}
	return q
}

// prepareRefused clicks Prepare for a task and reads the refusal.
func prepareRefused(task string, out *string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.Evaluate(`document.getElementById("sent").className = ""`, nil),
		chromedp.Click(fmt.Sprintf(`tr[data-task=%q] button`, task), chromedp.ByQuery),
		chromedp.WaitVisible(`#sent.bad:not(:empty)`, chromedp.ByQuery),
		chromedp.Text(`#sent`, out, chromedp.ByID),
	}
}

func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func countRows(t *testing.T, path, q string, args ...any) int {
	t.Helper()
	var n int
	if err := openDB(t, path).QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return n
}

// verdict is an aggregator's recorded verdict on a report (−1: none).
func verdict(t *testing.T, path string, id []byte) int {
	t.Helper()
	var v int
	err := openDB(t, path).QueryRow(`SELECT accepted FROM verdicts WHERE task_id = 'pop-1' AND report_id = ?`, id).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return -1
	}
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return v
}

// TestBrowserDAPCost measures the browser device at MovieLens-1M's
// catalogue size (3 706 items, the dp-popularity counts task at step 2⁻⁸:
// 9 bits per item): the time to compute, quantize, shard and seal her
// shares in WebAssembly inside Chromium, and the bytes sent. It runs
// only with PRIVREC_BROWSER_COST=1 (docs/AGGREGATION.md quotes it).
func TestBrowserDAPCost(t *testing.T) {
	if os.Getenv("PRIVREC_BROWSER_COST") != "1" {
		t.Skip("set PRIVREC_BROWSER_COST=1 to measure the browser device at 3 706 items")
	}
	chromium := findChromium(t)
	cat := catalogue(t, 3706)
	p := startDAP(t, cat, 50)
	task := p.countsTask(t, "ml1m-counts", cat, 50, 1.052)
	bctx := newBrowser(t, context.Background(), chromium, 5*time.Minute)
	if err := chromedp.Run(bctx, chromedp.Navigate(p.leader+"/"), chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery)); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	mine := map[int]float64{}
	for j := 0; j < 3706; j += 37 {
		mine[j] = float64(1 + j%5)
	}
	joinAndRate(t, bctx, mine)
	var times []float64
	var pend pendingShares
	for range 3 {
		t0 := time.Now()
		if err := chromedp.Run(bctx, prepare(bctx, task.ID)); err != nil {
			t.Fatal(err)
		}
		pend = readPending(t, bctx)
		times = append(times, pend.MS)
		t.Logf("prepare: %.0f ms in WebAssembly (click to preview %v)", pend.MS, time.Since(t0).Round(time.Millisecond))
	}
	t0 := time.Now()
	if err := chromedp.Run(bctx, chromedp.Click(`#send`, chromedp.ByID), chromedp.WaitVisible(`#sent.ok`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	slices.Sort(times)
	t.Logf("browser device, %d items × %d bits: shares in %.0f / %.0f / %.0f ms (min/median/max of 3); payload %d bytes (leader share %d, helper share %d, public share %d), %d bytes on the wire in the binary encoding (%d as JSON); upload %v",
		task.Dimension, task.Bits, times[0], times[1], times[2], pend.Sizes["payload"], pend.Sizes["leader_share"], pend.Sizes["helper_share"], pend.Sizes["public_share"], pend.Sizes["body"], pend.Sizes["json"], time.Since(t0).Round(time.Millisecond))

	// The dpals model at this catalogue, built in the page: 24 devices
	// train it through the aggregators, its recipe is published, and the
	// page builds it from the release and folds her row in, three times.
	publishDPALS(t, p, cat, 24, "dpals-ml1m")
	var builds []float64
	for range 3 {
		var ms float64
		if err := chromedp.Run(bctx, chromedp.Evaluate(`delete document.body.dataset.model`, nil), chromedp.Click(`#recommend`, chromedp.ByID),
			chromedp.WaitVisible(`body[data-model="dpals-ml1m"]`, chromedp.ByQuery),
			chromedp.Evaluate(`Number(document.getElementById("recs-note").textContent.match(/in (\d+) ms/)[1])`, &ms)); err != nil {
			t.Fatal(err)
		}
		builds = append(builds, ms)
	}
	slices.Sort(builds)
	t.Logf("browser device: dpals over %d items built from its release and her list computed in %.0f / %.0f / %.0f ms (min/median/max of 3)", len(cat.IDs()), builds[0], builds[1], builds[2])
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
