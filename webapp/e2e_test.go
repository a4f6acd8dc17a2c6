package webapp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/webapp"
)

const adminToken = "test-admin-token-0123456789"

// titles of the test catalogue (item IDs i01…i12).
var titles = []string{"Toy Story (1995)", "Heat (1995)", "Fargo (1996)", "Casablanca (1942)", "Alien (1979)", "Amélie (2001)",
	"Up (2009)", "Vertigo (1958)", "Jaws (1975)", "Brazil (1985)", "Rushmore (1998)", "Ran (1985)"}

// findChromium returns a Chromium binary ($PRIVREC_CHROMIUM, else the
// first of chromium, chromium-browser, google-chrome on PATH). Without
// one the test skips, unless PRIVREC_REQUIRE_CHROMIUM=1 (set by .ci/run),
// when it fails.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PRIVREC_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("PRIVREC_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("no Chromium found (chromium, chromium-browser, google-chrome or $PRIVREC_CHROMIUM) and PRIVREC_REQUIRE_CHROMIUM=1")
	}
	msg := "no Chromium found: install Debian's chromium package (or set PRIVREC_CHROMIUM) to run the browser test"
	sayOnTerminal(fmt.Sprintf("SKIP %s: %s", t.Name(), msg))
	t.Skip(msg)
	return ""
}

// sayOnTerminal writes a line to the terminal running the tests, if any:
// `go test ./...` shows a passing package's output (a skip included) only
// with -v, and prints neither its stdout nor its stderr otherwise, so a
// skipped browser test would go unnoticed. (Without a terminal — CI — it
// writes nothing; CI sets PRIVREC_REQUIRE_CHROMIUM=1, which fails instead.)
func sayOnTerminal(line string) {
	f, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

// recorded is one request the server received.
type recorded struct {
	method, path string
	body         []byte
	ctype        string
}

// recorder keeps every request body the server receives, then passes the
// request on.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
	next http.Handler
	// config, when set, is served as GET /v1/config in place of the
	// server's (a server that changes its configuration).
	config []byte
	// failPuts answers this many next PUT requests 503 without passing
	// them on (recorded all the same): a flaky network or server.
	failPuts int
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, recorded{r.Method, r.URL.Path, b, r.Header.Get("Content-Type")})
	cfg := rc.config
	fail := r.Method == http.MethodPut && rc.failPuts > 0
	if fail {
		rc.failPuts--
	}
	rc.mu.Unlock()
	if fail {
		http.Error(w, `{"error":"unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	if cfg != nil && r.URL.Path == api.PathConfig {
		w.Header().Set("Content-Type", "application/json")
		w.Write(cfg)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	rc.next.ServeHTTP(w, r)
}

func (rc *recorder) all() []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

// startServer starts `privrec serve` in-process on SQLite, with the web
// app at /: ε = 6 per report, budget 12; the mean report at ε = 0.75 (the
// default eighth) and randomized response on 1…5 over 12 titled items at
// per-item ε = 5.25/12 = 0.4375.
func startServer(t *testing.T) (*service.Server, store.Store, *recorder, string) {
	t.Helper()
	return startServerWith(t, nil)
}

// startServerWith is startServer with the options changed by change.
func startServerWith(t *testing.T, change func(*service.Options)) (*service.Server, store.Store, *recorder, string) {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, len(titles))
	for j := range ids {
		ids[j] = fmt.Sprintf("i%02d", j+1)
	}
	cat, err := model.NewCatalogue(ids, titles)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Create(ctx, "sqlite:"+filepath.Join(t.TempDir(), "privrec.db"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := webapp.New()
	if err != nil {
		t.Fatal(err)
	}
	opt := service.Options{Catalogue: cat, Mechanism: "rr", Epsilon: 6, MeanEpsilon: service.DefaultMeanEpsilon(6), Budget: 12,
		Scale: model.Range{Min: 1, Max: 5}, AdminToken: adminToken, Rate: 1e6, Burst: 1 << 20, EnrollRate: 1e6, EnrollBurst: 1 << 20,
		Log: slog.New(slog.DiscardHandler), Root: root}
	if change != nil {
		change(&opt)
	}
	srv, err := service.New(ctx, st, opt)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	rec := &recorder{next: srv.Handler()}
	ts := httptest.NewServer(rec)
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		st.Close()
	})
	return srv, st, rec, ts.URL
}

// simulate enrols n Go reference clients whose ratings follow a rank-2
// taste model and submits one randomized report each, so that training
// has data.
func simulate(t *testing.T, url string, cfg *api.Config, n int) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 5))
	items := len(cfg.Items)
	q := make([]float64, items)
	v := make([][2]float64, items)
	for j := range items {
		q[j] = 3 * (r.Float64() - 0.5)
		v[j] = [2]float64{r.NormFloat64(), r.NormFloat64()}
	}
	dev, err := client.NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		u := [2]float64{r.NormFloat64(), r.NormFloat64()}
		rt := client.Ratings{}
		for j, it := range cfg.Items {
			if r.Float64() < 0.5 {
				rt[it.ID] = math.Min(5, math.Max(1, math.Round(3+q[j]+0.7*(u[0]*v[j][0]+u[1]*v[j][1]))))
			}
		}
		c := client.New(url, "")
		if _, err := c.Enroll(ctx); err != nil {
			t.Fatal(err)
		}
		rep, _, err := dev.Randomize(rt, noise.Secure(), client.NewReportID())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Submit(ctx, rep); err != nil {
			t.Fatal(err)
		}
	}
}

// countRandom counts the page's calls of crypto.getRandomValues (installed
// before any page script runs): the Go runtime's crypto/rand must reach it.
const countRandom = `(() => {
  const orig = crypto.getRandomValues.bind(crypto);
  window.__randomCalls = 0; window.__randomBytes = 0;
  crypto.getRandomValues = (a) => { window.__randomCalls++; window.__randomBytes += a.byteLength; return orig(a); };
})();`

// TestBrowser drives the web app in a real headless Chromium: the page
// loads the WebAssembly device code, a person joins, rates four items,
// prepares her report (drawn in the browser with noise from
// crypto.getRandomValues), checks what will leave her device and the ε it
// spends, and sends it; the server stored exactly those bytes — the
// randomized report, not her ratings — and charged her ledger; after a
// release is trained, her recommendations appear, computed in the browser.
// Every step is done with the keyboard only (focus, keys).
// It measures load → interactive and saves screenshots
// ($PRIVREC_SCREENSHOT_DIR, else a temporary directory).
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test runs in the full go test (not -short)")
	}
	chromium := findChromium(t)
	start := time.Now()
	_, st, rec, url := startServer(t)
	ctx := context.Background()
	cfg, err := client.New(url, "").Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shots := screenshotDir(t)

	bctx := newBrowser(t, ctx, chromium, 90*time.Second)

	// Every URL the page requests, to check that nothing is fetched from
	// outside the server.
	var urlMu sync.Mutex
	var urls []string
	chromedp.ListenTarget(bctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			urlMu.Lock()
			urls = append(urls, e.Request.URL)
			urlMu.Unlock()
		}
	})
	ready := chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery)
	if err := chromedp.Run(bctx, network.Enable(), chromedp.EmulateViewport(420, 900),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(countRandom).Do(ctx)
			return err
		})); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}

	// Load → interactive: cold loads (cache disabled), the time from
	// navigation start until the module is initialised, the configuration
	// checked and the buttons enabled.
	// Then warm loads (cache on: revalidated by ETag, the compiled
	// module possibly cached by the browser).
	for _, cold := range []bool{true, false} {
		var loads []float64
		for range 5 {
			var ms float64
			if err := chromedp.Run(bctx, network.SetCacheDisabled(cold), chromedp.Navigate(url+"/"), ready,
				chromedp.Evaluate(`window.privrecInteractive`, &ms)); err != nil {
				t.Fatalf("loading the page: %v", err)
			}
			loads = append(loads, ms)
		}
		slices.Sort(loads)
		kind := "cold"
		if !cold {
			kind = "warm"
		}
		t.Logf("page load → interactive (%s, 5 loads): median %.0f ms (min %.0f, max %.0f)", kind, loads[2], loads[0], loads[4])
	}

	// Join, by keyboard.
	var who string
	if err := chromedp.Run(bctx, chromedp.Focus(`#enrol`, chromedp.ByID), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(`#ledger:not(:empty)`, chromedp.ByQuery), chromedp.Text(`#who`, &who, chromedp.ByID)); err != nil {
		t.Fatalf("joining: %v", err)
	}
	if !strings.Contains(who, "joined as") {
		t.Fatalf("after joining the page says %q", who)
	}
	// The top of the page: what is protected, in plain words.
	var guarantee string
	if err := chromedp.Run(bctx, chromedp.Text(`#guarantee`, &guarantee, chromedp.ByID), chromedp.EmulateViewport(420, 1100),
		scrollTop(`guarantee-h`), screenshot(filepath.Join(shots, "browser-guarantee.png")), chromedp.EmulateViewport(420, 900)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"never leave this device", "randomized response at ε = 0.43", "kept with probability 24% and otherwise replaced by one of the other 5 values",
		"ε = 6 differentially private", "at most ε = 12", "computed in this browser"} {
		if !strings.Contains(guarantee, want) {
			t.Errorf("the guarantee does not say %q: %s", want, guarantee)
		}
	}
	// Rate four items, by keyboard: focus the select, type the rating.
	mine := map[string]float64{"i01": 5, "i03": 4, "i05": 2, "i08": 1}
	for item, v := range mine {
		var j int
		fmt.Sscanf(item, "i%d", &j)
		sel := fmt.Sprintf(`#rate-%d`, j-1)
		var got string
		if err := chromedp.Run(bctx, chromedp.Focus(sel, chromedp.ByQuery), chromedp.KeyEvent(fmt.Sprint(v)),
			chromedp.Value(sel, &got, chromedp.ByQuery)); err != nil {
			t.Fatalf("rating %s: %v", item, err)
		}
		if got != fmt.Sprint(v) {
			t.Fatalf("rating %s by typing %g: the select holds %q", item, v, got)
		}
	}
	var stored string
	if err := chromedp.Run(bctx, chromedp.Evaluate(`localStorage.getItem("privrec.ratings")`, &stored)); err != nil {
		t.Fatal(err)
	}
	var inBrowser map[string]float64
	if err := json.Unmarshal([]byte(stored), &inBrowser); err != nil || !mapsEqual(inBrowser, mine) {
		t.Fatalf("ratings in localStorage %s (%v), want %v", stored, err, mine)
	}

	// Prepare: the report is drawn in the browser; crypto.getRandomValues
	// is called for it.
	var calls0, calls1 int
	var shown, spend, meanText string
	if err := chromedp.Run(bctx, chromedp.Evaluate(`window.__randomCalls`, &calls0),
		chromedp.Focus(`#prepare`, chromedp.ByID), chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#preview`, chromedp.ByID),
		chromedp.Evaluate(`window.__randomCalls`, &calls1),
		chromedp.TextContent(`#report-json`, &shown, chromedp.ByID), chromedp.Text(`#spend`, &spend, chromedp.ByID),
		chromedp.Text(`#report-mean`, &meanText, chromedp.ByID)); err != nil {
		t.Fatalf("preparing the report: %v", err)
	}
	// The page shows the mean report that leaves with the cells: the
	// value in the bytes sent, said to be her noised mean rating at the
	// mean report's ε.
	var shownMean struct{ Mean *float64 }
	if err := json.Unmarshal([]byte(shown), &shownMean); err != nil || shownMean.Mean == nil {
		t.Fatalf("the report shown carries no mean report: %s (%v)", shown, err)
	}
	if want := fmt.Sprintf("%g", math.Round(*shownMean.Mean*1000)/1000); !strings.Contains(meanText, "Also sent: "+want+", your noised mean rating at ε = 0.75") {
		t.Errorf("the page says %q about the mean report %s", meanText, want)
	}
	if calls1 <= calls0 {
		t.Errorf("randomizing did not call crypto.getRandomValues (%d calls before, %d after)", calls0, calls1)
	}
	if !strings.Contains(spend, "spends ε = 6 of your budget ε = 12") {
		t.Errorf("the page says %q about the ε spent", spend)
	}
	var caption, cols string
	if err := chromedp.Run(bctx, chromedp.Text(`#report-caption`, &caption, chromedp.ByID), chromedp.Text(`#report-table thead`, &cols, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(caption, "(randomized)") || !strings.Contains(cols, "Your rating (stays here)") || !strings.Contains(cols, "Sent (randomized)") {
		t.Errorf("local mode: the report table reads %q / %q", caption, cols)
	}
	// Two draws from the same ratings differ: the module's noise is fresh
	// in the browser. A randomized check: per cell the chance that two
	// draws agree is p² + 5q² ≈ 0.173 at per-item ε = 0.4375 (p =
	// e^ε/(e^ε+5), q = 1/(e^ε+5)), so all 12 cells agree with probability
	// ≈ 7·10⁻¹⁰.
	var twice []string
	if err := chromedp.Run(bctx, chromedp.Evaluate(fmt.Sprintf(`(async () => {
		const cfg = await (await fetch("/v1/config")).text();
		const r = %q;
		return [0, 1].map(() => JSON.stringify(JSON.parse(JSON.parse(privrec.randomize(cfg, r)).report).values));
	})()`, stored), &twice, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil {
		t.Fatalf("drawing twice: %v", err)
	}
	if len(twice) != 2 || twice[0] == twice[1] {
		t.Errorf("two draws from the same ratings gave the same report values %v", twice)
	}
	// The rating page: sections 2 and 3 on a tall phone-width viewport.
	if err := chromedp.Run(bctx, chromedp.EmulateViewport(420, 1780), scrollTop(`rate-h`), screenshot(filepath.Join(shots, "browser-rating.png")),
		chromedp.EmulateViewport(420, 900)); err != nil {
		t.Fatal(err)
	}

	// Send, by keyboard.
	var sent string
	if err := chromedp.Run(bctx, chromedp.Focus(`#send`, chromedp.ByID), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(`#sent.ok`, chromedp.ByQuery), chromedp.Text(`#sent`, &sent, chromedp.ByID)); err != nil {
		t.Fatalf("sending: %v", err)
	}
	if !strings.Contains(sent, "charged ε = 6") || !strings.Contains(sent, "spent ε = 6 of your budget ε = 12") {
		t.Errorf("after sending the page says %q", sent)
	}
	checkSent(t, rec.all(), shown, mine, cfg)

	// The server stored her report and charged her ledger.
	var accJSON string
	if err := chromedp.Run(bctx, chromedp.Evaluate(`localStorage.getItem("privrec.account")`, &accJSON)); err != nil {
		t.Fatal(err)
	}
	var acc struct{ User, Token string }
	if err := json.Unmarshal([]byte(accJSON), &acc); err != nil {
		t.Fatal(err)
	}
	me := client.New(url, acc.Token)
	status, err := me.Status(ctx)
	if err != nil || status.Reports != 1 || status.Spent != cfg.ReportEpsilon || status.Remaining != cfg.Budget-cfg.ReportEpsilon {
		t.Fatalf("her ledger %+v, %v", status, err)
	}
	reps, err := me.Reports(ctx)
	if err != nil || len(reps) != 1 {
		t.Fatalf("her stored reports %v, %v", reps, err)
	}
	var shownRep api.Report
	if err := json.Unmarshal([]byte(shown), &shownRep); err != nil {
		t.Fatal(err)
	}
	if reps[0].ID != shownRep.ID || !valuesEqual(reps[0].Values, shownRep.Values) || shownRep.Mean == nil || reps[0].Mean == nil || *reps[0].Mean != *shownRep.Mean {
		t.Fatalf("stored report %+v, shown %+v", reps[0], shownRep)
	}

	// Her browser's own ledger recorded the report before it left; a
	// browser whose ledger holds a smaller accepted budget (6: the report
	// sent used it up) refuses the next report itself, although the
	// service would still take one.
	var ledJSON string
	if err := chromedp.Run(bctx, chromedp.Evaluate(`localStorage.getItem("privrec.ledger")`, &ledJSON)); err != nil {
		t.Fatal(err)
	}
	led, err := client.ReadLedger(strings.NewReader(ledJSON), "privrec.ledger")
	if err != nil || led.Server != url || led.Budget != cfg.Budget || len(led.Reports) != 1 ||
		led.Reports[0] != (client.LedgerEntry{ID: shownRep.ID, Epsilon: cfg.ReportEpsilon}) {
		t.Fatalf("the browser's ledger %s (%v), want report %s at ε = %g within budget %g", ledJSON, err, shownRep.ID, cfg.ReportEpsilon, cfg.Budget)
	}
	var spend2 string
	var sendOff bool
	if err := chromedp.Run(bctx,
		chromedp.Evaluate(`(() => { const l = JSON.parse(localStorage.getItem("privrec.ledger")); l.budget = 6; localStorage.setItem("privrec.ledger", JSON.stringify(l)); })()`, nil),
		chromedp.Focus(`#prepare`, chromedp.ByID), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(`#preview`, chromedp.ByID), chromedp.Text(`#spend`, &spend2, chromedp.ByID),
		chromedp.Evaluate(`document.getElementById("send").disabled`, &sendOff)); err != nil {
		t.Fatalf("preparing past the browser's budget: %v", err)
	}
	if !strings.Contains(spend2, "This browser will not send it") || !strings.Contains(spend2, "refused on this device") || !sendOff {
		t.Errorf("past the browser's own budget the page says %q (send disabled: %v)", spend2, sendOff)
	}
	if st2, err := me.Status(ctx); err != nil || st2.Reports != 1 {
		t.Fatalf("after the browser's refusal the service holds %+v, %v", st2, err)
	}
	if err := chromedp.Run(bctx, chromedp.Evaluate(`document.getElementById("preview").hidden = true`, nil)); err != nil {
		t.Fatal(err)
	}

	// Before any release the page says there is none yet.
	var note string
	if err := chromedp.Run(bctx, chromedp.Focus(`#recommend`, chromedp.ByID), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(`#recs-note:not(:empty)`, chromedp.ByQuery), chromedp.Text(`#recs-note`, &note, chromedp.ByID)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(note, "No recommendations yet") {
		t.Errorf("before any release the page says %q", note)
	}

	// Other people's reports, a release, her recommendations.
	simulate(t, url, cfg, 300)
	if _, err := client.New(url, adminToken).Publish(ctx, api.ReleaseRequest{Method: "ldp-rr", Params: map[string]any{"max_rank": 3, "max_iter": 50}, Seed: 1}); err != nil {
		t.Fatalf("training a release: %v", err)
	}
	stats, err := st.Stats(ctx)
	charge, _ := store.ChargeNano(cfg.ReportEpsilon)
	if err != nil || stats.Reports != 301 || stats.Releases != 1 || stats.MaxSpent != charge {
		t.Fatalf("store stats %+v, %v", stats, err)
	}
	var recs []string
	var recsText, recsKind string
	if err := chromedp.Run(bctx, chromedp.Focus(`#recommend`, chromedp.ByID), chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`body[data-recs]`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#recs li")].map(li => li.firstChild.textContent)`, &recs),
		chromedp.Text(`#recs`, &recsText, chromedp.ByID), chromedp.Text(`#recs-kind`, &recsKind, chromedp.ByID),
		scrollTop(`recs-h`), screenshot(filepath.Join(shots, "browser-recommendations.png"))); err != nil {
		t.Fatalf("recommendations: %v", err)
	}
	// A rating model (ldp-rr): predicted ratings on the scale.
	if !strings.Contains(recsText, "predicted rating") || !strings.Contains(recsKind, "predicts you would give it (1–5)") {
		t.Errorf("ldp-rr's list reads %q (%q)", recsText, recsKind)
	}
	// Eight unrated items: all of them, titled, none she rated.
	if len(recs) != 8 {
		t.Fatalf("recommendations %q, want the 8 unrated items", recs)
	}
	for _, r := range recs {
		j := slices.Index(titles, r)
		if j < 0 {
			t.Fatalf("recommendation %q is not a catalogue title", r)
		}
		if _, rated := mine[fmt.Sprintf("i%02d", j+1)]; rated {
			t.Fatalf("recommended %q, which she rated", r)
		}
	}
	// The service switches to central mode (issue 23, defect 4): the
	// browser, which joined a local-mode collection, refuses visibly —
	// Prepare and Send disabled, the reason shown — and sends nothing,
	// even when asked to send the report it had prepared.
	central := *cfg
	central.Mode, central.Mechanism, central.ReportEpsilon, central.CellEpsilon, central.Units = api.ModeCentral, api.MechanismNone, 0, 0, "rating"
	central.MaxReports, central.LedgerUnit, central.BudgetRho, central.BudgetDelta = 0, api.UnitRho, 1, 1e-6
	cb, err := json.Marshal(central)
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	rec.config = cb
	rec.mu.Unlock()
	before := len(rec.all())
	var blocked string
	var prepOff bool
	if err := chromedp.Run(bctx, chromedp.Navigate(url+"/"), ready,
		chromedp.WaitVisible(`#blocked`, chromedp.ByID), chromedp.Text(`#blocked`, &blocked, chromedp.ByID),
		chromedp.Evaluate(`document.getElementById("prepare").disabled`, &prepOff),
		chromedp.Evaluate(`(async () => { await onPrepare(); await onSend(); })()`, nil,
			func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil {
		t.Fatalf("a server switched to central mode: %v", err)
	}
	if !strings.Contains(blocked, "central mode") || !strings.Contains(blocked, "true ratings") || !prepOff {
		t.Errorf("after the switch to central mode the page says %q (prepare disabled: %v)", blocked, prepOff)
	}
	for _, r := range rec.all()[before:] {
		if r.method == http.MethodPost {
			t.Errorf("after the switch to central mode the page sent %s %s %s", r.method, r.path, r.body)
		}
	}
	rec.mu.Lock()
	rec.config = nil
	rec.mu.Unlock()

	// Her data at the service: the export button shows everything stored
	// about her; the leave button deletes her reports and token there and
	// says what stays (her ledger).
	var exportJSON, exportNote string
	if err := chromedp.Run(bctx, chromedp.Navigate(url+"/"), ready,
		chromedp.Click(`#export`, chromedp.ByID), chromedp.WaitVisible(`#export-note.ok`, chromedp.ByQuery),
		chromedp.Text(`#export-note`, &exportNote, chromedp.ByID), chromedp.TextContent(`#export-json`, &exportJSON, chromedp.ByID)); err != nil {
		t.Fatalf("exporting: %v", err)
	}
	var ex api.Export
	if err := json.Unmarshal([]byte(exportJSON), &ex); err != nil || ex.User != acc.User || len(ex.Reports) != 1 || ex.Reports[0].ID != shownRep.ID ||
		ex.Ledger.Spent != cfg.ReportEpsilon || !strings.Contains(exportNote, "1 report") {
		t.Fatalf("the export shown: %s (%v); note %q", exportJSON, err, exportNote)
	}
	var leaveNote string
	var enrolOn bool
	if err := chromedp.Run(bctx, chromedp.Evaluate(`window.confirm = () => true`, nil),
		chromedp.Click(`#leave`, chromedp.ByID), chromedp.WaitVisible(`#leave-note.ok`, chromedp.ByQuery),
		chromedp.Text(`#leave-note`, &leaveNote, chromedp.ByID), chromedp.Evaluate(`!document.getElementById("enrol").disabled && localStorage.getItem("privrec.account") === null`, &enrolOn)); err != nil {
		t.Fatalf("leaving: %v", err)
	}
	if !strings.Contains(leaveNote, "1 report") || !strings.Contains(leaveNote, "ledger") || !enrolOn {
		t.Errorf("after leaving the page says %q (join enabled, account forgotten: %v)", leaveNote, enrolOn)
	}
	if _, err := me.Status(ctx); err == nil {
		t.Error("her token still works after she left")
	}
	if left, err := st.ExportUser(ctx, acc.User); err != nil || len(left.Reports) != 0 || left.DeletedMS == 0 || left.User.Spent != charge {
		t.Fatalf("the service after she left: %+v, %v", left, err)
	}

	// Nothing was requested from outside the server.
	urlMu.Lock()
	defer urlMu.Unlock()
	for _, u := range urls {
		if !strings.HasPrefix(u, url+"/") {
			t.Errorf("the page requested %s, outside the server %s", u, url)
		}
	}
	t.Logf("browser end-to-end in %v (screenshots in %s)", time.Since(start).Round(time.Millisecond), shots)
}

// checkSent: the only request body that carries anything about her is
// POST /v1/reports, and it is byte for byte the report the page showed as
// what will leave the device — randomized, not her ratings, with the mean
// report the configuration asks for. A randomized check: the report
// equals her true vector (12 cells, 8 of them "missing") with probability
// p¹² ≈ 3·10⁻⁸ at per-item ε = 0.4375 (p = e^ε/(e^ε+5) ≈ 0.237, the chance
// a cell is reported as it is).
func checkSent(t *testing.T, reqs []recorded, shown string, mine map[string]float64, cfg *api.Config) {
	t.Helper()
	var bodies []recorded
	for _, r := range reqs {
		if len(r.body) > 0 {
			bodies = append(bodies, r)
		}
	}
	if len(bodies) != 1 || bodies[0].method != http.MethodPost || bodies[0].path != api.PathReports {
		t.Fatalf("request bodies sent by the page: %v, want one POST %s", bodies, api.PathReports)
	}
	body := bodies[0].body
	if string(body) != shown {
		t.Fatalf("the page sent\n%s\nbut showed\n%s", body, shown)
	}
	rep, e := api.DecodeReport(bytes.NewReader(body), cfg)
	if e != nil {
		t.Fatalf("the sent report fails the server's decoder: %v", e)
	}
	truth := make([]*float64, len(cfg.Items))
	for j, it := range cfg.Items {
		if v, ok := mine[it.ID]; ok {
			truth[j] = &v
		}
	}
	if valuesEqual(rep.Values, truth) {
		t.Fatalf("the sent report equals her true ratings %s", body)
	}
	if cfg.MeanEpsilon > 0 && rep.Mean == nil {
		t.Fatalf("the sent report carries no mean report: %s", body)
	}
	var stored string
	if b, err := json.Marshal(mine); err == nil {
		stored = string(b)
	}
	if bytes.Contains(body, []byte(stored)) {
		t.Fatalf("the sent body contains her ratings as stored")
	}
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func valuesEqual(a, b []*float64) bool {
	return slices.EqualFunc(a, b, func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) })
}

// newBrowser starts headless Chromium with a fresh profile (stopped when
// the test ends) and returns its context, which ends after timeout.
func newBrowser(t *testing.T, ctx context.Context, chromium string, timeout time.Duration) context.Context {
	t.Helper()
	// The profile directory is removed after the browser has gone (the
	// cleanups run last-registered first), retrying while Chromium's
	// helper processes still write to it: t.TempDir's single RemoveAll
	// failed the test now and then with "directory not empty".
	profile, err := os.MkdirTemp("", "privrec-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 {
			if err = os.RemoveAll(profile); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("leaving the browser profile %s: %v", profile, err)
	})
	actx, cancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium), chromedp.UserDataDir(profile),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(420, 900))
	t.Cleanup(cancel)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	bctx, cancel = context.WithTimeout(bctx, timeout)
	t.Cleanup(cancel)
	return bctx
}

// screenshotDir is where the browser tests save their screenshots:
// $PRIVREC_SCREENSHOT_DIR (docs/ for the ones in docs/BROWSER.md), else a
// temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("PRIVREC_SCREENSHOT_DIR"); d != "" {
		return d
	}
	return t.TempDir()
}

// screenshot saves the viewport as PNG.
func screenshot(path string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var b []byte
		if err := chromedp.CaptureScreenshot(&b).Do(ctx); err != nil {
			return fmt.Errorf("screenshot: %w", err)
		}
		return os.WriteFile(path, b, 0o644)
	})
}

// scrollTop scrolls the element with this ID to the top of the viewport.
func scrollTop(id string) chromedp.Action {
	return chromedp.Evaluate(fmt.Sprintf(`document.getElementById(%q).scrollIntoView({block: "start"})`, id), nil)
}
