package webapp_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/devicemodel"
	"github.com/privrec/privrec/dap/fleet"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
)

// TestBrowserDAPModel: 80 simulated devices train dpals through the two
// aggregators (its bias statistics, one task), the orchestrator publishes
// the model's recipe at the leader, and in headless Chromium a person who
// joined and rated items asks for her recommendations: the page builds
// the dpals model from the recipe and the release with the method's own
// code compiled to WebAssembly, folds in her own row and lists her
// recommendations. They must equal, item for item, the ones Go computes
// from the same recipe and release (devicemodel.Build, client.RecommendFrom)
// and the ones from the orchestrator's own model.
func TestBrowserDAPModel(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test runs in the full go test (not -short)")
	}
	chromium := findChromium(t)
	ctx := context.Background()
	cat := catalogue(t, 40)
	p := startDAP(t, cat, 50)
	rel, rec := publishDPALS(t, p, cat, 80, "dpals-1")
	// A newer model: the page offers both, the newest chosen, and she
	// picks the older one.
	publishDPALS(t, p, cat, 60, "dpals-2")

	bctx := newBrowser(t, ctx, chromium, 90*time.Second)
	if err := chromedp.Run(bctx, chromedp.Navigate(p.leader+"/"), chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery)); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	mine := map[int]float64{0: 5, 3: 1, 5: 4, 8: 5, 13: 2, 21: 4, 34: 1}
	joinAndRate(t, bctx, mine)
	var recs, offered []string
	var note, chosen string
	if err := chromedp.Run(bctx, chromedp.WaitVisible(`body[data-models="2"]`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#dap-model option")].map((o) => o.value)`, &offered),
		chromedp.Value(`#dap-model`, &chosen, chromedp.ByID)); err != nil {
		t.Fatalf("listing the models: %v", err)
	}
	if !slices.Equal(offered, []string{"dpals-1", "dpals-2"}) || chosen != "dpals-2" {
		t.Fatalf("the page offers %v with %q chosen; want both, the newest chosen", offered, chosen)
	}
	if err := chromedp.Run(bctx, chromedp.SetValue(`#dap-model`, "dpals-1", chromedp.ByID),
		chromedp.Click(`#recommend`, chromedp.ByID), chromedp.WaitVisible(`body[data-model="dpals-1"]`, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#recs li")].map((li) => li.dataset.item + "|" + li.textContent)`, &recs),
		chromedp.Text(`#recs-note`, &note, chromedp.ByID)); err != nil {
		t.Fatalf("recommending: %v", err)
	}
	if !strings.Contains(note, "dpals") || !strings.Contains(note, "built in this browser") {
		t.Errorf("the page says %q", note)
	}

	// The same in Go: the recipe and release from the leader, the model
	// built by devicemodel, her row and list by the reference client.
	ratingsOf := client.Ratings{}
	ids := cat.IDs()
	for j, v := range mine {
		ratingsOf[ids[j]] = v
	}
	grec, rels, err := devicemodel.Fetch(ctx, &dap.Client{Leader: p.leader}, "dpals-1")
	if err != nil {
		t.Fatal(err)
	}
	titles := map[string]string{}
	for j, id := range ids {
		titles[id] = cat.Titles()[j]
	}
	m, err := devicemodel.Build(ctx, grec, rels, titles)
	if err != nil {
		t.Fatal(err)
	}
	if m.Rank < 1 {
		t.Fatalf("the dpals model has rank %d: no user part to fold in", m.Rank)
	}
	want := listOf(t, m, ratingsOf)
	if !slices.Equal(recs, want) || len(recs) == 0 {
		t.Errorf("the browser recommends %v; Go from the same release: %v", recs, want)
	}
	orch := rel.Model()
	orch.Titles = m.Titles
	if got := listOf(t, orch, ratingsOf); !slices.Equal(got, want) {
		t.Errorf("the orchestrator's model recommends %v; the device's %v", got, want)
	}
	for _, r := range recs {
		id, _, _ := strings.Cut(r, "|")
		if j, _ := cat.Index(id); mine[j] != 0 {
			t.Errorf("recommended %s, which she rated", id)
		}
	}
	// Nothing about her was sent: the browser's only request body was
	// none (she joined; she did not contribute here).
	for _, r := range p.leaderRec.all() {
		if len(r.body) > 0 && !strings.HasPrefix(r.path, "/dap/v1/admin/") && !strings.HasSuffix(r.path, "/reports") {
			t.Errorf("the leader received a body at %s %s", r.method, r.path)
		}
	}
	t.Logf("browser: dpals (rank %d over %d items, %d task(s)) built and her list computed in the page: %s", m.Rank, len(m.Items), len(rec.Tasks), note)
}

// publishDPALS has n simulated devices (modelData) train dpals at ε = 40
// through the pair's aggregators and publishes its recipe as name; it
// returns the orchestrator's release and the recipe.
func publishDPALS(t *testing.T, p *dapPair, cat *model.Catalogue, n int, name string) (*release.Release, dap.Recipe) {
	t.Helper()
	ctx := context.Background()
	train := modelData(t, cat, n)
	f := &fleet.Fleet{Leader: p.leader, Helper: p.helper, AdminToken: p.admin, BudgetRho: 50}
	if err := f.Enrol(ctx, train.NumUsers()); err != nil {
		t.Fatal(err)
	}
	cfg, err := methods.Configure("dpals", nil)
	if err != nil {
		t.Fatal(err)
	}
	var fe *fleet.Engine
	sc := release.Scale{Min: 1, Max: 5}
	const seed, eps = 3, 40
	env := methods.Env{Epsilon: eps, Delta: 1e-6, Seed: seed, Rand: noise.Seeded(seed), Noise: noise.Secure(),
		Engine: func(plan statistic.RowPlan) (statistic.Engine, error) {
			fe = &fleet.Engine{Fleet: f, Plan: plan, Devices: train.NumUsers(), StepBits: 8, GramStepBits: 9, Prefix: name,
				Ratings: func(u int) ([]string, []float64) { return train.UserRatings(int32(u)) }}
			return fe, nil
		}}
	rel, err := methods.Train(ctx, "dpals", cfg, release.Input{Declared: release.Declared{Scale: &sc, Catalogue: cat}}, env)
	if err != nil {
		t.Fatal(err)
	}
	rec := fe.Recipe(name, "dpals", nil, eps, 1e-6, seed, [2]float64{1, 5})
	if err := f.PublishModel(ctx, rec); err != nil {
		t.Fatal(err)
	}
	return rel, rec
}

// listOf is her top 10 from model m as "item|title" strings.
func listOf(t *testing.T, m *model.Model, r client.Ratings) []string {
	t.Helper()
	recs, err := client.RecommendFrom(m, r, 10)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range recs {
		out = append(out, x.Item+"|"+x.Title)
	}
	return out
}

// modelData is n users' ratings of cat's items (1–5), deterministic, with
// popular and unpopular items and users who agree in pairs of tastes.
func modelData(t *testing.T, cat *model.Catalogue, n int) *ratings.Matrix {
	t.Helper()
	b := ratings.NewBuilder(ratings.DupError)
	ids := cat.IDs()
	for u := range n {
		for j, id := range ids {
			if (u*7+j*3)%(2+j/10) == 0 || j%5 == u%5 {
				v := float64(1 + (u%2*j+j/3+u/7)%5)
				if err := b.Add(fmt.Sprintf("u%d", u), id, v, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}
