package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/service/api"
)

// The paths the server routes (besides the web client at /).
var servedPaths = []string{api.PathConfig, api.PathEnroll, api.PathMe, api.PathMyExport, api.PathMyState, api.PathReports,
	api.PathReports + "/{id}", api.PathLatestRelease, api.PathReleases + "/{id}", api.PathAdminReleases, api.PathAdminStats,
	api.PathAdminUsers + "/{id}", api.PathAdminUsers + "/{id}/export", api.PathHealth, api.PathMetrics,
	api.PathLive, api.PathReady, api.PathMyToken, api.PathAdminTokens, api.PathAdminTokens + "/{id}", api.PathAdminToken,
	api.PathAdminUsers + "/{id}/token"}

// spec checks the running server against docs/openapi.yaml, loaded and
// validated as OpenAPI 3.0 by kin-openapi (a maintained OpenAPI library;
// the document is the contract, so the test reads it as any client
// generator would rather than with a hand-written schema walker). Every
// answer's status must be documented for its operation and its body
// must match the documented schema — with additionalProperties false
// assumed wherever a schema lists properties and says nothing else, so
// an undocumented field fails too. seen records which documented
// (path, method, status) were observed.
type spec struct {
	doc  *openapi3.T
	seen map[string]bool
}

func loadSpec(t *testing.T) *spec {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatalf("docs/openapi.yaml does not load as OpenAPI: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("docs/openapi.yaml is not valid OpenAPI 3.0: %v", err)
	}
	return &spec{doc: doc, seen: map[string]bool{}}
}

func key(path, method string, status int) string {
	return fmt.Sprintf("%s %s %d", method, path, status)
}

// call sends a request to s at template's concrete path and checks the
// answer against the document; it returns the status and body.
func (sp *spec) call(t *testing.T, s *testServer, method, template, path, token, body, ctype string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	what := fmt.Sprintf("%s %s → %d", method, path, resp.StatusCode)
	item := sp.doc.Paths.Find(template)
	if item == nil {
		t.Fatalf("%s: path %s is not documented", what, template)
	}
	op := item.GetOperation(method)
	if op == nil {
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("%s: method not documented, and not answered 405", what)
		}
		return resp.StatusCode, b
	}
	ref := op.Responses.Status(resp.StatusCode)
	if ref == nil || ref.Value == nil {
		t.Fatalf("%s: status %d is not documented for %s %s (%s)", what, resp.StatusCode, method, template, b)
	}
	sp.seen[key(template, method, resp.StatusCode)] = true
	// A body the server accepted must be one the document allows (the
	// request schemas say additionalProperties: false).
	if resp.StatusCode < 300 && body != "" {
		if op.RequestBody == nil || op.RequestBody.Value.Content.Get("application/json") == nil {
			t.Fatalf("%s: the server accepted a body the document does not describe", what)
		}
		var rv any
		if err := json.Unmarshal([]byte(body), &rv); err != nil {
			t.Fatalf("%s: request body: %v", what, err)
		}
		if err := op.RequestBody.Value.Content.Get("application/json").Schema.Value.VisitJSON(rv); err != nil {
			t.Fatalf("%s: the server accepted a body the documented schema refuses: %v", what, err)
		}
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		t.Fatalf("%s: Content-Type %q", what, resp.Header.Get("Content-Type"))
	}
	media := ref.Value.Content.Get(mt)
	if media == nil {
		t.Fatalf("%s: content type %s is not documented for this status", what, mt)
	}
	if mt != "application/json" || media.Schema == nil {
		return resp.StatusCode, b
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: body is not JSON: %v", what, err)
	}
	if err := media.Schema.Value.VisitJSON(v); err != nil {
		t.Fatalf("%s: body does not match the documented schema: %v\n%s", what, err, b)
	}
	if err := noExtra(media.Schema.Value, v, "$"); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, b)
	}
	return resp.StatusCode, b
}

// noExtra refuses a member a schema with listed properties does not
// document (unless it says additionalProperties), recursively.
func noExtra(s *openapi3.Schema, v any, at string) error {
	switch v := v.(type) {
	case map[string]any:
		if len(s.Properties) == 0 || s.AdditionalProperties.Has != nil || s.AdditionalProperties.Schema != nil {
			return nil
		}
		for k, x := range v {
			p, ok := s.Properties[k]
			if !ok {
				return fmt.Errorf("%s.%s is not documented", at, k)
			}
			if err := noExtra(p.Value, x, at+"."+k); err != nil {
				return err
			}
		}
	case []any:
		if s.Items == nil {
			return nil
		}
		for k, x := range v {
			if err := noExtra(s.Items.Value, x, fmt.Sprintf("%s[%d]", at, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestOpenAPI: docs/openapi.yaml is valid OpenAPI, documents exactly the
// served paths, and the running server — local and central mode, with
// and without the admin API, with tight rate limits — answers every
// documented (path, method, status) with a body matching its schema.
func TestOpenAPI(t *testing.T) {
	sp := loadSpec(t)
	var documented []string
	for p := range sp.doc.Paths.Map() {
		documented = append(documented, p)
	}
	sort.Strings(documented)
	want := slices.Clone(servedPaths)
	sort.Strings(want)
	if !slices.Equal(documented, want) {
		t.Fatalf("docs/openapi.yaml documents %v; the server routes %v", documented, want)
	}
	ctx := context.Background()
	const j = "application/json"

	// A local-mode collection: ε = 4 per report, budget 8.
	opt := localOptions(t, 8)
	opt.MaxBody = 4096
	a := newTestServer(t, "sqlite", opt)
	good := "[1,null,2,3,null,4,5,null]"
	rep := func(id string) string { return reportBody(id, 4, good) }
	sp.call(t, a, "GET", api.PathConfig, api.PathConfig, "", "", "")
	sp.call(t, a, "GET", api.PathHealth, api.PathHealth, "", "", "")
	sp.call(t, a, "GET", api.PathLatestRelease, api.PathLatestRelease, "", "", "")
	_, b := sp.call(t, a, "POST", api.PathEnroll, api.PathEnroll, "", "", "")
	var en api.Enrolment
	mustJSON(t, b, &en)
	tok := en.Token
	sp.call(t, a, "POST", api.PathEnroll, api.PathEnroll, "", `{"user":"x"}`, j)
	sp.call(t, a, "POST", api.PathEnroll, api.PathEnroll, "", `a=1`, "application/x-www-form-urlencoded")
	sp.call(t, a, "POST", api.PathReports, api.PathReports, tok, rep("r1"), j)
	sp.call(t, a, "POST", api.PathReports, api.PathReports, tok, rep("r1"), j) // replay: 200
	sp.call(t, a, "POST", api.PathReports, api.PathReports, tok, reportBody("r1", 4, "[1,1,1,1,1,1,1,1]"), j)
	sp.call(t, a, "POST", api.PathReports, api.PathReports, tok, rep("r2"), j)
	sp.call(t, a, "POST", api.PathReports, api.PathReports, tok, rep("r3"), j) // over budget: 403
	sp.call(t, a, "POST", api.PathReports, api.PathReports, tok, `{"id":"r4","id":"r5"}`, j)
	sp.call(t, a, "POST", api.PathReports, api.PathReports, tok, rep("r4"), "text/plain")
	sp.call(t, a, "POST", api.PathReports, api.PathReports, tok, `{"id":"big","epsilon":4,"values":[`+strings.Repeat(" ", 5000)+`]}`, j)
	sp.call(t, a, "POST", api.PathReports, api.PathReports, "", rep("r4"), j)
	sp.call(t, a, "GET", api.PathReports, api.PathReports+"?limit=1", tok, "", "")
	sp.call(t, a, "GET", api.PathReports, api.PathReports+"?limit=0", tok, "", "")
	sp.call(t, a, "GET", api.PathReports, api.PathReports, "", "", "")
	sp.call(t, a, "GET", api.PathReports+"/{id}", api.PathReports+"/r1", tok, "", "")
	sp.call(t, a, "GET", api.PathReports+"/{id}", api.PathReports+"/nope", tok, "", "")
	sp.call(t, a, "GET", api.PathReports+"/{id}", api.PathReports+"/r1", "", "", "")
	sp.call(t, a, "GET", api.PathMe, api.PathMe, tok, "", "")
	sp.call(t, a, "GET", api.PathMe, api.PathMe, "", "", "")
	sp.call(t, a, "GET", api.PathMyExport, api.PathMyExport, tok, "", "")
	sp.call(t, a, "GET", api.PathMyExport, api.PathMyExport, "", "", "")
	sp.call(t, a, "GET", api.PathMyState, api.PathMyState, tok, "", "")
	sp.call(t, a, "GET", api.PathMyState, api.PathMyState+"?release=x", tok, "", "")
	sp.call(t, a, "GET", api.PathMyState, api.PathMyState, "", "", "")
	sp.call(t, a, "POST", api.PathAdminReleases, api.PathAdminReleases, adminToken, `{"method":"ldp-rr","params":{"max_rank":2}}`, j)
	sp.call(t, a, "POST", api.PathAdminReleases, api.PathAdminReleases, adminToken, `{"method":"ldp-rr","rank":2}`, j)
	sp.call(t, a, "POST", api.PathAdminReleases, api.PathAdminReleases, adminToken, `{"method":"ldp-rr"}`, "text/plain")
	sp.call(t, a, "POST", api.PathAdminReleases, api.PathAdminReleases, tok, `{"method":"ldp-rr"}`, j)
	sp.call(t, a, "GET", api.PathLatestRelease, api.PathLatestRelease, "", "", "")
	sp.call(t, a, "GET", api.PathReleases+"/{id}", api.PathReleases+"/1", "", "", "")
	sp.call(t, a, "GET", api.PathReleases+"/{id}", api.PathReleases+"/x", "", "", "")
	sp.call(t, a, "GET", api.PathReleases+"/{id}", api.PathReleases+"/99", "", "", "")
	sp.call(t, a, "GET", api.PathAdminStats, api.PathAdminStats, adminToken, "", "")
	sp.call(t, a, "GET", api.PathAdminStats, api.PathAdminStats, tok, "", "")
	sp.call(t, a, "GET", api.PathMetrics, api.PathMetrics, adminToken, "", "")
	sp.call(t, a, "GET", api.PathMetrics, api.PathMetrics, "", "", "")
	me, _ := a.client(tok).Status(ctx)
	sp.call(t, a, "GET", api.PathAdminUsers+"/{id}/export", api.PathAdminUsers+"/"+me.User+"/export", adminToken, "", "")
	sp.call(t, a, "GET", api.PathAdminUsers+"/{id}/export", api.PathAdminUsers+"/u_x/export", adminToken, "", "")
	sp.call(t, a, "GET", api.PathAdminUsers+"/{id}/export", api.PathAdminUsers+"/u_x/export", tok, "", "")
	sp.call(t, a, "DELETE", api.PathAdminUsers+"/{id}", api.PathAdminUsers+"/u_x", adminToken, "", "")
	sp.call(t, a, "DELETE", api.PathAdminUsers+"/{id}", api.PathAdminUsers+"/u_x", tok, "", "")
	sp.call(t, a, "DELETE", api.PathMe, api.PathMe, "", "", "")
	sp.call(t, a, "DELETE", api.PathMe, api.PathMe, tok, "", "")
	sp.call(t, a, "DELETE", api.PathAdminUsers+"/{id}", api.PathAdminUsers+"/"+me.User, adminToken, "", "")
	sp.call(t, a, "GET", api.PathAdminUsers+"/{id}/export", api.PathAdminUsers+"/"+me.User+"/export", adminToken, "", "")
	sp.call(t, a, "PUT", api.PathConfig, api.PathConfig, "", "", "")
	sp.call(t, a, "GET", api.PathLive, api.PathLive, "", "", "")
	sp.call(t, a, "GET", api.PathReady, api.PathReady, "", "", "")
	other := enrolled(t, a)
	// Token administration over HTTP.
	sp.call(t, a, "GET", api.PathAdminTokens, api.PathAdminTokens, adminToken, "", "")
	sp.call(t, a, "GET", api.PathAdminTokens, api.PathAdminTokens, other.Token, "", "")
	_, b = sp.call(t, a, "POST", api.PathAdminTokens, api.PathAdminTokens, adminToken, `{"label":"ops","expires_in_seconds":60}`, j)
	var nt api.NewAdminToken
	mustJSON(t, b, &nt)
	sp.call(t, a, "POST", api.PathAdminTokens, api.PathAdminTokens, adminToken, `{"label":1}`, j)
	sp.call(t, a, "POST", api.PathAdminTokens, api.PathAdminTokens, adminToken, `{}`, "text/plain")
	sp.call(t, a, "POST", api.PathAdminTokens, api.PathAdminTokens, other.Token, `{}`, j)
	sp.call(t, a, "DELETE", api.PathAdminTokens+"/{id}", api.PathAdminTokens+"/adm_nope", adminToken, "", "")
	sp.call(t, a, "DELETE", api.PathAdminTokens+"/{id}", api.PathAdminTokens+"/"+nt.ID, other.Token, "", "")
	sp.call(t, a, "POST", api.PathAdminToken, api.PathAdminToken, other.Token, "", "")
	sp.call(t, a, "POST", api.PathAdminToken, api.PathAdminToken, nt.Token, `{"expires_in_seconds":-5}`, j)
	sp.call(t, a, "POST", api.PathAdminToken, api.PathAdminToken, nt.Token, `{}`, "text/plain")
	_, b = sp.call(t, a, "POST", api.PathAdminToken, api.PathAdminToken, nt.Token, `{"label":"ops, rotated"}`, j)
	mustJSON(t, b, &nt)
	sp.call(t, a, "DELETE", api.PathAdminTokens+"/{id}", api.PathAdminTokens+"/"+nt.ID, adminToken, "", "")
	sp.call(t, a, "POST", api.PathAdminUsers+"/{id}/token", api.PathAdminUsers+"/u_nope/token", adminToken, "", "")
	sp.call(t, a, "POST", api.PathAdminUsers+"/{id}/token", api.PathAdminUsers+"/u_nope/token", other.Token, "", "")
	sp.call(t, a, "DELETE", api.PathAdminUsers+"/{id}/token", api.PathAdminUsers+"/u_nope/token", adminToken, "", "")
	sp.call(t, a, "DELETE", api.PathAdminUsers+"/{id}/token", api.PathAdminUsers+"/u_nope/token", other.Token, "", "")
	om, _ := a.client(other.Token).Status(ctx)
	sp.call(t, a, "DELETE", api.PathAdminUsers+"/{id}/token", api.PathAdminUsers+"/"+om.User+"/token", adminToken, "", "")
	_, b = sp.call(t, a, "POST", api.PathAdminUsers+"/{id}/token", api.PathAdminUsers+"/"+om.User+"/token", adminToken, "", "")
	var oen api.Enrolment
	mustJSON(t, b, &oen)
	other.Token = oen.Token
	sp.call(t, a, "POST", api.PathMyToken, api.PathMyToken, other.Token, "", "")
	sp.call(t, a, "POST", api.PathMyToken, api.PathMyToken, "", "", "")

	// A central-mode collection: a joint release serves each user her
	// own state; a release beyond the budget is refused (403).
	copt := localOptions(t, 8)
	copt.Mechanism, copt.Epsilon, copt.Budget = api.MechanismNone, 0, 1.6
	c := newTestServer(t, "sqlite", copt)
	cfg, _ := c.client("").Config(ctx)
	pop := synthPopulation(30, 8, 0.6, 3)
	var first *client.Client
	for _, r := range pop.rated {
		u := enrolled(t, c)
		first = firstOf(first, u)
		r, _, err := client.Randomize(cfg, r, nil, client.NewReportID())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := u.Submit(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	empty := newTestServer(t, "sqlite", copt)
	sp.call(t, empty, "POST", api.PathAdminReleases, api.PathAdminReleases, adminToken, `{"method":"dp-bias","epsilon":1,"delta":1e-6}`, j) // no data: 409
	for range 3 {                                                                                                                           // the third is over budget
		sp.call(t, c, "POST", api.PathAdminReleases, api.PathAdminReleases, adminToken, `{"method":"dp-bias","epsilon":1,"delta":1e-6,"seed":5}`, j)
	}
	sp.call(t, c, "GET", api.PathMyState, api.PathMyState, first.Token, "", "")
	sp.call(t, c, "GET", api.PathMyExport, api.PathMyExport, first.Token, "", "")
	_, b = sp.call(t, c, "DELETE", api.PathMe, api.PathMe, first.Token, "", "")
	var d api.Deletion
	mustJSON(t, b, &d)
	if d.StatesDeleted != 2 || len(d.Retained.ReleaseCharges) != 2 || d.Retained.Unit != api.UnitRho {
		t.Fatalf("central deletion: %+v", d)
	}
	if err := c.st.Check(ctx); err != nil {
		t.Fatal(err)
	}

	// No admin API (403), enrolment for the admin only (401), and rate
	// limits of one request per user and three enrolments (429).
	lopt := localOptions(t, 8)
	lopt.AdminToken, lopt.Rate, lopt.Burst, lopt.EnrollRate, lopt.EnrollBurst = "", 1e-9, 1, 1e-9, 2
	l := newTestServer(t, "sqlite", lopt)
	_, b = sp.call(t, l, "POST", api.PathEnroll, api.PathEnroll, "", "", "")
	mustJSON(t, b, &en)
	sp.call(t, l, "POST", api.PathEnroll, api.PathEnroll, "", "", "")
	sp.call(t, l, "POST", api.PathEnroll, api.PathEnroll, "", "", "") // 429
	sp.call(t, l, "GET", api.PathMe, api.PathMe, en.Token, "", "")    // the one request
	for _, p := range []struct{ method, path string }{
		{"GET", api.PathMe}, {"DELETE", api.PathMe}, {"GET", api.PathMyExport}, {"GET", api.PathMyState}, {"GET", api.PathReports},
		{"GET", api.PathReports + "/{id}"}, {"POST", api.PathMyToken},
	} {
		sp.call(t, l, p.method, p.path, strings.ReplaceAll(p.path, "{id}", "r1"), en.Token, "", "")
	}
	sp.call(t, l, "POST", api.PathReports, api.PathReports, en.Token, rep("r1"), j)
	for _, p := range []struct{ method, path string }{
		{"POST", api.PathAdminReleases}, {"GET", api.PathAdminStats}, {"GET", api.PathMetrics},
		{"DELETE", api.PathAdminUsers + "/{id}"}, {"GET", api.PathAdminUsers + "/{id}/export"},
		{"GET", api.PathAdminTokens}, {"POST", api.PathAdminTokens}, {"DELETE", api.PathAdminTokens + "/{id}"}, {"POST", api.PathAdminToken},
		{"POST", api.PathAdminUsers + "/{id}/token"}, {"DELETE", api.PathAdminUsers + "/{id}/token"},
	} {
		body := ""
		if p.method == "POST" {
			body = `{"method":"ldp-rr"}`
		}
		sp.call(t, l, p.method, p.path, strings.ReplaceAll(p.path, "{id}", "u_x"), "x", body, j)
	}
	// A collection with a mean report: the configuration states its ε,
	// reports carry it (a report without is refused) and show it back.
	mopt := localOptions(t, 8)
	mopt.MeanEpsilon = 0.5
	mm := newTestServer(t, "sqlite", mopt)
	sp.call(t, mm, "GET", api.PathConfig, api.PathConfig, "", "", "")
	mtok := enrolled(t, mm).Token
	sp.call(t, mm, "POST", api.PathReports, api.PathReports, mtok, `{"id":"m1","epsilon":4,"values":`+good+`,"mean":3.5}`, j)
	sp.call(t, mm, "POST", api.PathReports, api.PathReports, mtok, rep("m2"), j)
	sp.call(t, mm, "GET", api.PathReports+"/{id}", api.PathReports+"/m1", mtok, "", "")
	sp.call(t, mm, "GET", api.PathReports, api.PathReports, mtok, "", "")
	eopt := localOptions(t, 8)
	eopt.EnrollAdminOnly = true
	e := newTestServer(t, "sqlite", eopt)
	sp.call(t, e, "POST", api.PathEnroll, api.PathEnroll, "", "", "")
	// A database that went away: health says so.
	e.st.Close()
	sp.call(t, e, "GET", api.PathHealth, api.PathHealth, "", "", "")
	sp.call(t, e, "GET", api.PathReady, api.PathReady, "", "", "")
	sp.call(t, e, "POST", api.PathMyToken, api.PathMyToken, "prt_any", "", "")
	sp.call(t, e, "POST", api.PathEnroll, api.PathEnroll, adminToken, "", "")
	sp.call(t, e, "POST", api.PathReports, api.PathReports, "prt_any", rep("r1"), j)

	// Every documented answer was seen.
	var missing []string
	for path, item := range sp.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code := range op.Responses.Map() {
				var status int
				fmt.Sscan(code, &status)
				if !sp.seen[key(path, method, status)] {
					missing = append(missing, key(path, method, status))
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("documented but never observed:\n%s", strings.Join(missing, "\n"))
	}
}

// firstOf keeps the first client.
func firstOf(first, c *client.Client) *client.Client {
	if first == nil {
		return c
	}
	return first
}
