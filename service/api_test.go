package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// raw sends a request and returns the status, the decoded error (if the
// answer is one) and the body.
func raw(t testing.TB, s *testServer, method, path, token, body string) (int, api.Error, []byte) {
	t.Helper()
	return rawType(t, s, method, path, token, body, "application/json")
}

// rawType is raw with a Content-Type of the caller's (sent only with a
// body; "-" sends none).
func rawType(t testing.TB, s *testServer, method, path, token, body, ctype string) (int, api.Error, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" && ctype != "-" {
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
	b, _ := io.ReadAll(resp.Body)
	var e api.Error
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s %s: %d answer is not a JSON error: %q", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, e, b
}

func enrolled(t testing.TB, s *testServer) *client.Client {
	t.Helper()
	c := s.client("")
	if _, err := c.Enroll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func reportBody(id string, eps any, vals string) string {
	return fmt.Sprintf(`{"id":%q,"epsilon":%v,"values":%s}`, id, eps, vals)
}

// TestBadInput tries every kind of malformed request: each gets a 4xx
// JSON error naming the field, and nothing is stored or charged. With
// PRIVREC_BADINPUT_TABLE=FILE it writes the table of docs/SERVICE.md.
func TestBadInput(t *testing.T) {
	const items = 8
	opt := localOptions(t, items) // ε = 4 per report, budget 8
	opt.MaxBody = 4096
	s := newTestServer(t, "sqlite", opt)
	alice := enrolled(t, s)
	bob := enrolled(t, s)
	// Bob's report, which Alice will try to read.
	if _, _, err := bob.Submit(context.Background(), api.Report{ID: "bob-1", Epsilon: 4, Values: make([]*float64, items)}); err != nil {
		t.Fatal(err)
	}
	good := "[1,null,2,3,null,4,5,null]"
	big := `{"id":"big","epsilon":4,"values":[` + strings.Repeat(" ", 5000) + `]}`
	tok := alice.Token
	cases := []struct {
		name, method, path, token, body string
		status                          int
		code, field                     string
	}{
		{"repeated key", "POST", api.PathReports, tok, `{"id":"k2","id":"k2b","epsilon":4,"values":` + good + `}`, 400, api.CodeDuplicateField, "id"},
		{"keys in another case", "POST", api.PathReports, tok, `{"ID":"k1","EPSILON":4,"VALUES":` + good + `}`, 400, api.CodeUnknownField, "ID"},
		{"wrong Content-Type", "POST", api.PathReports, tok, reportBody("a", 4, good), 415, api.CodeMediaType, ""},
		{"no Content-Type", "POST", api.PathReports, tok, reportBody("a", 4, good), 415, api.CodeMediaType, ""},
		{"enrolment with a null body", "POST", api.PathEnroll, "", `null`, 400, api.CodeWrongType, ""},
		{"enrolment as a form", "POST", api.PathEnroll, "", `a=1`, 415, api.CodeMediaType, ""},
		{"release: repeated key", "POST", api.PathAdminReleases, adminToken, `{"method":"ldp-rr","method":"dp-bias"}`, 400, api.CodeDuplicateField, "method"},
		{"malformed JSON", "POST", api.PathReports, tok, `{"id": "a", `, 400, api.CodeMalformedJSON, ""},
		{"not JSON at all", "POST", api.PathReports, tok, `id=a&epsilon=4`, 400, api.CodeMalformedJSON, ""},
		{"empty body", "POST", api.PathReports, tok, ``, 400, api.CodeMalformedJSON, ""},
		{"an array, not an object", "POST", api.PathReports, tok, `[1,2,3]`, 400, api.CodeWrongType, ""},
		{"trailing data", "POST", api.PathReports, tok, reportBody("a", 4, good) + `{}`, 400, api.CodeMalformedJSON, ""},
		{"unknown field (another user)", "POST", api.PathReports, tok, `{"id":"a","epsilon":4,"values":` + good + `,"user":"u_0"}`, 400, api.CodeUnknownField, "user"},
		{"id of wrong type", "POST", api.PathReports, tok, `{"id":7,"epsilon":4,"values":` + good + `}`, 400, api.CodeWrongType, "id"},
		{"epsilon of wrong type", "POST", api.PathReports, tok, `{"id":"a","epsilon":"4","values":` + good + `}`, 400, api.CodeWrongType, "epsilon"},
		{"values of wrong type", "POST", api.PathReports, tok, `{"id":"a","epsilon":4,"values":"1,2"}`, 400, api.CodeWrongType, "values"},
		{"a value of wrong type (string)", "POST", api.PathReports, tok, reportBody("a", 4, `[1,null,2,"3",null,4,5,null]`), 400, api.CodeWrongType, "values[3]"},
		{"a value of wrong type (bool)", "POST", api.PathReports, tok, reportBody("a", 4, `[1,null,true,3,null,4,5,null]`), 400, api.CodeWrongType, "values[2]"},
		{"a value of wrong type (object)", "POST", api.PathReports, tok, reportBody("a", 4, `[1,{},2,3,null,4,5,null]`), 400, api.CodeWrongType, "values[1]"},
		{"missing id", "POST", api.PathReports, tok, `{"epsilon":4,"values":` + good + `}`, 400, api.CodeMissingField, "id"},
		{"missing epsilon", "POST", api.PathReports, tok, `{"id":"a","values":` + good + `}`, 400, api.CodeMissingField, "epsilon"},
		{"missing values", "POST", api.PathReports, tok, `{"id":"a","epsilon":4}`, 400, api.CodeMissingField, "values"},
		{"id with a space", "POST", api.PathReports, tok, reportBody("a b", 4, good), 400, api.CodeInvalidValue, "id"},
		{"id too long", "POST", api.PathReports, tok, reportBody(strings.Repeat("x", 65), 4, good), 400, api.CodeInvalidValue, "id"},
		{"too few values", "POST", api.PathReports, tok, reportBody("a", 4, "[1,2,3]"), 400, api.CodeInvalidValue, "values"},
		{"level 0", "POST", api.PathReports, tok, reportBody("a", 4, "[0,null,2,3,null,4,5,null]"), 400, api.CodeOutOfRange, "values[0]"},
		{"level 6 (d = 5)", "POST", api.PathReports, tok, reportBody("a", 4, "[1,null,2,3,null,4,6,null]"), 400, api.CodeOutOfRange, "values[6]"},
		{"level 2.5", "POST", api.PathReports, tok, reportBody("a", 4, "[1,null,2.5,3,null,4,5,null]"), 400, api.CodeOutOfRange, "values[2]"},
		{"value 1e400", "POST", api.PathReports, tok, reportBody("a", 4, "[1e400,null,2,3,null,4,5,null]"), 400, api.CodeOutOfRange, "values[0]"},
		{"epsilon 0", "POST", api.PathReports, tok, reportBody("a", 0, good), 400, api.CodeBadEpsilon, "epsilon"},
		{"epsilon negative", "POST", api.PathReports, tok, reportBody("a", -4, good), 400, api.CodeBadEpsilon, "epsilon"},
		{"epsilon not the configured one", "POST", api.PathReports, tok, reportBody("a", 3, good), 400, api.CodeBadEpsilon, "epsilon"},
		{"epsilon 1e400", "POST", api.PathReports, tok, reportBody("a", "1e400", good), 400, api.CodeOutOfRange, "epsilon"},
		{"body over the size limit", "POST", api.PathReports, tok, big, 413, api.CodeTooLarge, ""},
		{"no token", "POST", api.PathReports, "", reportBody("a", 4, good), 401, api.CodeUnauthorized, ""},
		{"unknown token", "POST", api.PathReports, "prt_bogus", reportBody("a", 4, good), 401, api.CodeUnauthorized, ""},
		{"admin token as a user", "POST", api.PathReports, adminToken, reportBody("a", 4, good), 401, api.CodeUnauthorized, ""},
		{"wrong method", "PUT", api.PathReports, tok, reportBody("a", 4, good), 405, api.CodeMethod, ""},
		{"another user's report", "GET", api.PathReports + "/bob-1", tok, "", 404, api.CodeNotFound, "id"},
		{"enrolment with a body field", "POST", api.PathEnroll, "", `{"user":"u_1"}`, 400, api.CodeUnknownField, "user"},
		{"release without the admin token", "POST", api.PathAdminReleases, "", `{"method":"ldp-rr"}`, 401, api.CodeUnauthorized, ""},
		{"release with a user token", "POST", api.PathAdminReleases, tok, `{"method":"ldp-rr"}`, 401, api.CodeUnauthorized, ""},
		{"release: unknown field", "POST", api.PathAdminReleases, adminToken, `{"method":"ldp-rr","rank":3}`, 400, api.CodeUnknownField, "rank"},
		{"release: missing method", "POST", api.PathAdminReleases, adminToken, `{}`, 400, api.CodeMissingField, "method"},
		{"release: method of another mechanism", "POST", api.PathAdminReleases, adminToken, `{"method":"ldp-laplace"}`, 400, api.CodeInvalidValue, "method"},
		{"release: negative epsilon", "POST", api.PathAdminReleases, adminToken, `{"method":"ldp-rr","epsilon":-1}`, 400, api.CodeBadEpsilon, "epsilon"},
		{"release: delta ≥ 1", "POST", api.PathAdminReleases, adminToken, `{"method":"ldp-rr","delta":2}`, 400, api.CodeOutOfRange, "delta"},
		{"release: bad fold_lambda", "POST", api.PathAdminReleases, adminToken, `{"method":"ldp-rr","params":{"fold_lambda":"x"}}`, 400, api.CodeOutOfRange, "params.fold_lambda"},
		{"release id not a number", "GET", api.PathReleases + "/abc", "", "", 400, api.CodeInvalidValue, "id"},
		{"unknown release", "GET", api.PathReleases + "/99", "", "", 404, api.CodeNotFound, "id"},
		{"unknown endpoint", "GET", "/v1/nope", "", "", 404, api.CodeNotFound, ""},
	}
	// The Content-Type of the cases that send another than JSON.
	ctypes := map[string]string{"wrong Content-Type": "text/plain", "no Content-Type": "-", "enrolment as a form": "application/x-www-form-urlencoded"}
	var table bytes.Buffer
	table.WriteString("| request | status | code | field | message |\n|---|---|---|---|---|\n")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctype, ok := ctypes[c.name]
			if !ok {
				ctype = "application/json"
			}
			status, e, b := rawType(t, s, c.method, c.path, c.token, c.body, ctype)
			if status != c.status || e.Code != c.code || e.Field != c.field {
				t.Fatalf("%s %s: %d %s field %q (%s); want %d %s field %q", c.method, c.path, status, e.Code, e.Field, b, c.status, c.code, c.field)
			}
			if e.Message == "" || e.Status != status {
				t.Fatalf("error without a message or status: %s", b)
			}
			msg := strings.ReplaceAll(e.Message, "|", "\\|")
			fmt.Fprintf(&table, "| %s: `%s %s` | %d | %s | %s | %s |\n", c.name, c.method, c.path, status, e.Code, e.Field, msg)
		})
	}
	// Nothing was stored or charged: Alice has no report, and the store
	// holds Bob's one report and no release.
	st, err := alice.Status(context.Background())
	if err != nil || st.Spent != 0 || st.Reports != 0 {
		t.Fatalf("after the bad requests Alice's ledger is %+v, %v", st, err)
	}
	stats, err := s.st.Stats(context.Background())
	if err != nil || stats.Reports != 1 || stats.Releases != 0 || stats.Users != 2 {
		t.Fatalf("after the bad requests the store holds %+v, %v", stats, err)
	}
	if path := os.Getenv("PRIVREC_BADINPUT_TABLE"); path != "" {
		if err := os.WriteFile(path, table.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// docs/SERVICE.md shows exactly these answers.
	doc, err := os.ReadFile("../docs/SERVICE.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, bytes.TrimSpace(table.Bytes())) {
		t.Error("docs/SERVICE.md's Bad input table differs from what the server answers; regenerate it with PRIVREC_BADINPUT_TABLE=table.md go test -run TestBadInput ./service/")
	}
}

// TestIsolation: a user reads and writes only her own data. No endpoint
// takes a user ID: the token alone names the user.
func TestIsolation(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			s := newTestServer(t, kind, localOptions(t, 8))
			alice, bob := enrolled(t, s), enrolled(t, s)
			one := 3.0
			vals := []*float64{&one, nil, nil, nil, nil, nil, nil, nil}
			if _, _, err := alice.Submit(ctx, api.Report{ID: "shared-id", Epsilon: 4, Values: vals}); err != nil {
				t.Fatal(err)
			}
			// Bob cannot read Alice's report, even knowing its ID.
			if _, err := bob.Report(ctx, "shared-id"); !isStatus(err, 404) {
				t.Fatalf("Bob read Alice's report: %v", err)
			}
			// Bob's submission with Alice's report ID is his own report:
			// Alice's ledger does not move.
			ack, replayed, err := bob.Submit(ctx, api.Report{ID: "shared-id", Epsilon: 4, Values: make([]*float64, 8)})
			if err != nil || replayed || !ack.Accepted {
				t.Fatalf("Bob's report: %+v %v %v", ack, replayed, err)
			}
			sa, _ := alice.Status(ctx)
			sb, _ := bob.Status(ctx)
			if sa.Spent != 4 || sa.Reports != 1 || sb.Spent != 4 || sb.Reports != 1 || sa.User == sb.User {
				t.Fatalf("ledgers: Alice %+v, Bob %+v", sa, sb)
			}
			// Each lists her own reports only, with her own values.
			ra, _ := alice.Reports(ctx)
			rb, _ := bob.Reports(ctx)
			if len(ra) != 1 || len(rb) != 1 || ra[0].Values[0] == nil || rb[0].Values[0] != nil {
				t.Fatalf("lists: Alice %+v, Bob %+v", ra, rb)
			}
			// A body naming another user is refused.
			status, e, _ := raw(t, s, "POST", api.PathReports, bob.Token, `{"id":"x","epsilon":4,"values":[null,null,null,null,null,null,null,null],"user":"`+sa.User+`"}`)
			if status != 400 || e.Field != "user" {
				t.Fatalf("a report naming another user: %d %+v", status, e)
			}
			// The admin API is not open to users.
			if _, err := bob.Stats(ctx); !isStatus(err, 401) {
				t.Fatalf("a user read the stats: %v", err)
			}
			if err := s.st.Check(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func isStatus(err error, status int) bool {
	e, ok := err.(*api.Error)
	return ok && e.Status == status
}

// TestIdempotent: a resubmitted report is neither stored nor charged
// twice; its answer is the original acknowledgement.
func TestIdempotent(t *testing.T) {
	ctx := context.Background()
	s := newTestServer(t, "sqlite", localOptions(t, 8))
	c := enrolled(t, s)
	cfg, _ := c.Config(ctx)
	rep, _, err := client.Randomize(cfg, client.Ratings{"i01": 5, "i02": 1}, noise.Secure(), "r-1")
	if err != nil {
		t.Fatal(err)
	}
	a1, replayed, err := c.Submit(ctx, rep)
	if err != nil || replayed {
		t.Fatal(err, replayed)
	}
	// Spend the rest of the budget, then resubmit the first report.
	rep2, _, _ := client.Randomize(cfg, client.Ratings{}, noise.Secure(), "r-2")
	if _, _, err := c.Submit(ctx, rep2); err != nil {
		t.Fatal(err)
	}
	a2, replayed, err := c.Submit(ctx, rep)
	if err != nil || !replayed || a2 != a1 {
		t.Fatalf("resubmission: %+v replayed=%v %v; original %+v", a2, replayed, err, a1)
	}
	// The same ID with other content is a conflict. The first value is
	// changed whatever the randomizer drew (a fixed replacement would equal
	// the drawn report now and then and make this test flaky).
	other := rep
	other.Values = append([]*float64(nil), rep.Values...)
	five := 5.0
	if other.Values[0] == nil {
		other.Values[0] = &five
	} else {
		other.Values[0] = nil
	}
	if _, _, err := c.Submit(ctx, other); !isStatus(err, 409) {
		t.Fatalf("same ID, other content: %v", err)
	}
	// A third report is over budget: refused with the budget in the error.
	rep3, _, _ := client.Randomize(cfg, client.Ratings{}, noise.Secure(), "r-3")
	_, _, err = c.Submit(ctx, rep3)
	e, ok := err.(*api.Error)
	if !ok || e.Status != 403 || e.Code != api.CodeBudgetExceeded || e.Remaining == nil || *e.Remaining != 0 || !strings.Contains(e.Message, "budget") {
		t.Fatalf("over budget: %v", err)
	}
	st, _ := c.Status(ctx)
	if st.Reports != 2 || st.Spent != 8 || st.Remaining != 0 {
		t.Fatalf("ledger %+v", st)
	}
}

// TestLedgerConcurrent: 64 concurrent submitters for one user never
// overspend: exactly the reports the budget allows are stored; and 64
// concurrent copies of one report are stored and charged once. Run with
// the race detector in CI.
func TestLedgerConcurrent(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			opt := localOptions(t, 8)
			opt.Epsilon, opt.Budget = 1, 10 // ten reports
			s := newTestServer(t, kind, opt)
			c := enrolled(t, s)
			var mu sync.Mutex
			outcomes := map[int]int{}
			var wg sync.WaitGroup
			for g := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := range 2 {
						_, _, err := c.Submit(ctx, api.Report{ID: fmt.Sprintf("g%d-%d", g, k), Epsilon: 1, Values: make([]*float64, 8)})
						status := 201
						if err != nil {
							e, ok := err.(*api.Error)
							if !ok {
								t.Error(err)
								return
							}
							status = e.Status
						}
						mu.Lock()
						outcomes[status]++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if outcomes[201] != 10 || outcomes[403] != 118 {
				t.Fatalf("outcomes %v, want 10 stored and 118 refused", outcomes)
			}
			st, _ := c.Status(ctx)
			if st.Spent != 10 || st.Reports != 10 {
				t.Fatalf("ledger %+v", st)
			}
			// 64 copies of one report from another user: one stored.
			d := enrolled(t, s)
			replays := 0
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, replayed, err := d.Submit(ctx, api.Report{ID: "same", Epsilon: 1, Values: make([]*float64, 8)})
					if err != nil {
						t.Error(err)
						return
					}
					if replayed {
						mu.Lock()
						replays++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if sd, _ := d.Status(ctx); sd.Spent != 1 || sd.Reports != 1 || replays != 63 {
				t.Fatalf("64 copies: ledger %+v, %d replays", sd, replays)
			}
			if err := s.st.Check(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	opt := localOptions(t, 8)
	opt.Rate, opt.Burst = 0.001, 3
	opt.EnrollRate, opt.EnrollBurst = 0.001, 2
	s := newTestServer(t, "sqlite", opt)
	c := enrolled(t, s)
	enrolled(t, s)
	if _, err := s.client("").Enroll(context.Background()); !isStatus(err, 429) {
		t.Fatalf("third enrolment from one address: %v", err)
	}
	for k := range 4 {
		_, err := c.Status(context.Background())
		if k < 3 && err != nil {
			t.Fatal(err)
		}
		if k == 3 && !isStatus(err, 429) {
			t.Fatalf("fourth call: %v, want 429", err)
		}
	}
}

func TestAdminOnlyEnrolment(t *testing.T) {
	opt := localOptions(t, 8)
	opt.EnrollAdminOnly = true
	s := newTestServer(t, "sqlite", opt)
	if _, err := s.client("").Enroll(context.Background()); !isStatus(err, 401) {
		t.Fatalf("enrolment without the admin token: %v", err)
	}
	if e, err := s.client(adminToken).Enroll(context.Background()); err != nil || e.Token == "" {
		t.Fatalf("admin enrolment: %+v %v", e, err)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	s := newTestServer(t, "sqlite", localOptions(t, 8))
	c := enrolled(t, s)
	if _, _, err := c.Submit(context.Background(), api.Report{ID: "a", Epsilon: 4, Values: make([]*float64, 8)}); err != nil {
		t.Fatal(err)
	}
	status, _, b := raw(t, s, "GET", api.PathHealth, "", "")
	if status != 200 || !strings.Contains(string(b), `"ok"`) {
		t.Fatalf("healthz: %d %s", status, b)
	}
	// The metrics count users, reports and refusals exactly: admin only
	// (issue 23, defect 9: they were public).
	for _, tok := range []string{"", c.Token} {
		if status, e, _ := raw(t, s, "GET", api.PathMetrics, tok, ""); status != 401 || e.Code != api.CodeUnauthorized {
			t.Fatalf("metrics with token %q: %d %+v", tok, status, e)
		}
	}
	status, _, b = raw(t, s, "GET", api.PathMetrics, adminToken, "")
	for _, want := range []string{`privrec_reports_total{outcome="stored"} 1`, `privrec_enrolments_total 1`, "privrec_commit_seconds_bucket", `privrec_http_requests_total{code="201",route="/v1/reports"} 1`} {
		if status != 200 || !strings.Contains(string(b), want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
	// No token or value in the metrics.
	if strings.Contains(string(b), c.Token) {
		t.Fatal("a token in the metrics")
	}
}

// TestConfigMismatch: a database made for one collection refuses a
// server started with other settings, naming the flag.
func TestConfigMismatch(t *testing.T) {
	ctx := context.Background()
	url := storetest.URL(t, "sqlite")
	st, err := store.Create(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	opt := localOptions(t, 8)
	srv, err := service.New(ctx, st, opt)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	opt.Epsilon = 2
	if _, err := service.New(ctx, st, opt); err == nil || !strings.Contains(err.Error(), "--epsilon 2") {
		t.Fatalf("other ε: %v", err)
	}
	opt = localOptions(t, 9)
	if _, err := service.New(ctx, st, opt); err == nil || !strings.Contains(err.Error(), "--items") {
		t.Fatalf("other catalogue: %v", err)
	}
	// A central collection's ledger: another budget δ or period is
	// another ledger.
	st2, err := store.Create(ctx, storetest.URL(t, "sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	copt := centralOptions(t, 8, 2)
	srv, err = service.New(ctx, st2, copt)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	copt.BudgetDelta = 1e-8
	if _, err := service.New(ctx, st2, copt); err == nil || !strings.Contains(err.Error(), "--budget-delta 1e-08") {
		t.Fatalf("other budget δ: %v", err)
	}
	copt = centralOptions(t, 8, 2)
	copt.Period = 24 * time.Hour
	if _, err := service.New(ctx, st2, copt); err == nil || !strings.Contains(err.Error(), "--period 24h0m0s") {
		t.Fatalf("other period: %v", err)
	}
	// Policies are not part of the ledger: a restart may change them.
	copt = centralOptions(t, 8, 2)
	copt.Exhausted, copt.MaxDelta = api.ExhaustedSkip, 1e-4
	srv, err = service.New(ctx, st2, copt)
	if err != nil {
		t.Fatalf("another policy: %v", err)
	}
	srv.Close()
}

// central switches options to central mode.
func central(o *service.Options) { o.Mechanism, o.Epsilon = api.MechanismNone, 0 }

// TestBuildConfig: bad settings are refused naming the flag.
func TestBuildConfig(t *testing.T) {
	base := localOptions(t, 8)
	for _, c := range []struct {
		name string
		edit func(*service.Options)
		want string
	}{
		{"no catalogue", func(o *service.Options) { o.Catalogue = nil }, "--items"},
		{"unknown mechanism", func(o *service.Options) { o.Mechanism = "gauss" }, "--mechanism"},
		{"ε ≤ 0", func(o *service.Options) { o.Epsilon = 0 }, "--epsilon"},
		{"ε > budget", func(o *service.Options) { o.Epsilon = 9 }, "--epsilon"},
		{"no budget", func(o *service.Options) { o.Budget = 0 }, "--budget"},
		{"bad scale", func(o *service.Options) { o.Scale = model.Range{Min: 5, Max: 1} }, "--scale"},
		{"rr without levels", func(o *service.Options) { o.Scale = model.Range{Min: 0.5, Max: 5} }, "--levels"},
		{"levels for laplace", func(o *service.Options) { o.Mechanism, o.Levels = "laplace", 5 }, "--levels"},
		{"ε in central mode", func(o *service.Options) { o.Mechanism = "none" }, "--epsilon"},
		{"budget δ in local mode", func(o *service.Options) { o.BudgetDelta = 1e-6 }, "--budget-delta"},
		{"period in local mode", func(o *service.Options) { o.Period = time.Hour }, "--period"},
		{"max δ in local mode", func(o *service.Options) { o.MaxDelta = 1e-6 }, "--max-delta"},
		{"exhausted in local mode", func(o *service.Options) { o.Exhausted = "skip" }, "--exhausted"},
		{"central: budget δ ≥ 1", func(o *service.Options) { central(o); o.BudgetDelta = 1 }, "--budget-delta"},
		{"central: budget δ too large", func(o *service.Options) { central(o); o.BudgetDelta = 0.01 }, "--budget-delta"},
		{"central: negative budget δ", func(o *service.Options) { central(o); o.BudgetDelta = -1e-6 }, "--budget-delta"},
		{"central: NaN budget δ", func(o *service.Options) { central(o); o.BudgetDelta = math.NaN() }, "--budget-delta"},
		{"central: tiny budget", func(o *service.Options) { central(o); o.Budget = 1e-5 }, "--budget"},
		{"central: max δ ≥ 1", func(o *service.Options) { central(o); o.MaxDelta = 1 }, "--max-delta"},
		{"central: unknown policy", func(o *service.Options) { central(o); o.Exhausted = "borrow" }, "--exhausted"},
		{"central: negative period", func(o *service.Options) { central(o); o.Period = -time.Hour }, "--period"},
		{"central: fractional period", func(o *service.Options) { central(o); o.Period = 1500 * time.Millisecond }, "--period"},
		{"mean ε = ε", func(o *service.Options) { o.MeanEpsilon = o.Epsilon }, "--mean-epsilon"},
		{"mean ε > ε", func(o *service.Options) { o.MeanEpsilon = 2 * o.Epsilon }, "--mean-epsilon"},
		{"negative mean ε", func(o *service.Options) { o.MeanEpsilon = -0.5 }, "--mean-epsilon"},
		{"NaN mean ε", func(o *service.Options) { o.MeanEpsilon = math.NaN() }, "--mean-epsilon"},
		{"infinite mean ε", func(o *service.Options) { o.MeanEpsilon = math.Inf(1) }, "--mean-epsilon"},
		{"central: mean ε", func(o *service.Options) { central(o); o.MeanEpsilon = 0.5 }, "--mean-epsilon"},
	} {
		o := base
		c.edit(&o)
		if _, err := service.BuildConfig(o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
	cfg, err := service.BuildConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.CheckConfig(cfg); err != nil {
		t.Fatalf("the server's own configuration fails the client's check: %v", err)
	}
	lap := base
	lap.Mechanism = "laplace"
	cfg, err = service.BuildConfig(lap)
	if err != nil || cfg.Units != "normalised" || !(cfg.MaxAbsValue > 1) {
		t.Fatalf("laplace configuration %+v, %v", cfg, err)
	}
	if err := client.CheckConfig(cfg); err != nil {
		t.Fatal(err)
	}
}

// TestBuildConfigMean: the mean report's ε comes out of the per-report ε,
// the cells share the rest, and the composed guarantee (ldp.Guarantees:
// n cells and the mean) is within the per-report ε the ledger debits, for
// both mechanisms; the published guarantee states the composition.
func TestBuildConfigMean(t *testing.T) {
	for _, c := range []struct {
		mech          string
		items         int
		eps, meanEps  float64
		wantMeanInTxt bool
	}{
		{"rr", 8, 4, 0.5, true},
		{"rr", 40, 40, service.DefaultMeanEpsilon(40), true},
		{"laplace", 12, 12, 1.5, true},
		{"laplace", 12, 12, 1e-3, true},
		{"rr", 8, 4, 0, false},
		{"laplace", 12, 12, 0, false},
	} {
		t.Run(fmt.Sprintf("%s/n=%d/ε=%g/mean=%g", c.mech, c.items, c.eps, c.meanEps), func(t *testing.T) {
			o := localOptions(t, c.items)
			o.Mechanism, o.Epsilon, o.Budget, o.MeanEpsilon = c.mech, c.eps, 2*c.eps, c.meanEps
			cfg, err := service.BuildConfig(o)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ReportEpsilon != c.eps || cfg.MeanEpsilon != c.meanEps {
				t.Fatalf("report ε %g, mean ε %g", cfg.ReportEpsilon, cfg.MeanEpsilon)
			}
			// The cells get what the mean leaves (less a rounding margin).
			want := (c.eps - c.meanEps) / float64(c.items)
			if !(cfg.CellEpsilon <= want && cfg.CellEpsilon > want*(1-1e-9)) {
				t.Fatalf("cell ε %.17g, want just below (ε − mean ε)/n = %.17g", cfg.CellEpsilon, want)
			}
			m, err := ldp.ParseMechanism(cfg.Mechanism)
			if err != nil {
				t.Fatal(err)
			}
			r, err := ldp.New(m, cfg.CellEpsilon, ldp.Scale{Min: cfg.Scale.Min, Max: cfg.Scale.Max, Levels: cfg.Scale.Levels})
			if err != nil {
				t.Fatal(err)
			}
			perRating, perUser, err := ldp.Guarantees(r, c.items, cfg.MeanEpsilon)
			if err != nil {
				t.Fatal(err)
			}
			if perUser.Epsilon > cfg.ReportEpsilon {
				t.Fatalf("composed per-user ε %.17g exceeds the per-report ε %g", perUser.Epsilon, cfg.ReportEpsilon)
			}
			if perRating.Epsilon < c.meanEps {
				t.Fatalf("per-rating ε %g leaves out the mean report's %g", perRating.Epsilon, c.meanEps)
			}
			if cfg.Guarantee.Epsilon != c.eps {
				t.Fatalf("published guarantee ε %g, want %g", cfg.Guarantee.Epsilon, c.eps)
			}
			note := cfg.Guarantee.Note
			if got := strings.Contains(note, fmt.Sprintf("Laplace noise at ε = %g (the mean report)", c.meanEps)); got != c.wantMeanInTxt {
				t.Fatalf("the guarantee's note names the mean report: %v, want %v\n%s", got, c.wantMeanInTxt, note)
			}
			if c.meanEps > 0 {
				if !(cfg.MaxAbsMean > math.Max(math.Abs(cfg.Scale.Min), math.Abs(cfg.Scale.Max))) {
					t.Fatalf("max_abs_mean %g does not cover the scale", cfg.MaxAbsMean)
				}
			} else if cfg.MaxAbsMean != 0 || !strings.Contains(note, "no mean report") {
				t.Fatalf("max_abs_mean %g, note %q without a mean report", cfg.MaxAbsMean, note)
			}
			if err := client.CheckConfig(cfg); err != nil {
				t.Fatalf("the server's own configuration fails the client's check: %v", err)
			}
			// A server claiming a mean report the cells leave no room for
			// is refused on the device.
			if c.meanEps > 0 {
				bad := *cfg
				bad.MeanEpsilon = 2 * c.meanEps
				if err := client.CheckConfig(&bad); err == nil || !strings.Contains(err.Error(), "mean report") {
					t.Fatalf("a mean ε beyond the per-report ε: %v", err)
				}
			}
		})
	}
}
