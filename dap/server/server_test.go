package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/privrec/privrec/dap"
)

const testToken = "peer-token-0123456789"

func newTestServer(tb testing.TB, role dap.Role) *Server {
	tb.Helper()
	return newTestServerDB(tb, role, filepath.Join(tb.TempDir(), "agg.db"))
}

// newTestServerDB is newTestServer on the database db.
func newTestServerDB(tb testing.TB, role dap.Role, db string) *Server {
	tb.Helper()
	key, err := dap.NewKeyPair()
	if err != nil {
		tb.Fatal(err)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	s, err := New(context.Background(), Config{Role: role, DB: db, Key: key, Secret: secret,
		AggregatorToken: testToken, AdminToken: testToken, HelperURL: "http://127.0.0.1:1", BudgetRho: 1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// task is a counts task over three items (the helper derives its range,
// norm_sq and sensitivity from the plan).
var task = []byte(`{"id":"t","statistic":"counts","plan":{"row":{"catalogue":["a","b","c"]},"kind":"counts","contribution":{"items":3,"cap":1}},"dimension":3,"step":0.5,"min":0,"bits":2,"norm_sq":4,"relation":"replace-user","sensitivity":4,"rho":0.5,"noise":"each-alone","sigma":5,"min_reports":1}`)

// FuzzHelperRequests: no body sent to the helper's endpoints makes it fail
// with anything but a 4xx (malformed requests change nothing; no panic).
func FuzzHelperRequests(f *testing.F) {
	f.Add(task)
	f.Add([]byte(`{"reports":[{"id":"AAAAAAAAAAAAAAAAAAAAAA==","public_share":"","helper_share":{"enc":"","ciphertext":""}}]}`))
	f.Add([]byte(`{"count":0,"checksum":""}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`{"reports":[{}]}`)) // found by the fuzzer: a report without an id was a 500
	f.Add([]byte(`{"reports":[{"id":"AAAAAAAAAAAAAAAAAAAAAA=="},{"id":"AAAAAAAAAAAAAAAAAAAAAA=="}]}`))
	s := newTestServer(f, dap.Helper)
	h := s.Handler()
	do := func(method, path string, body []byte) int { return peerRequest(h, method, path, body) }
	if c := do(http.MethodPut, "/dap/v1/tasks/t", task); c != http.StatusCreated {
		f.Fatalf("provisioning the seed task: HTTP %d", c)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range []struct{ method, path string }{
			{http.MethodPut, "/dap/v1/tasks/f"},
			{http.MethodPut, "/dap/v1/tasks/t/aggregation_jobs/job-0001"},
			{http.MethodPost, "/dap/v1/tasks/t/aggregate_share"},
		} {
			if c := do(p.method, p.path, body); c >= 500 {
				t.Fatalf("%s %s: HTTP %d for %q", p.method, p.path, c, body)
			}
		}
	})
}

// peerRequest sends body to h as the leader (the aggregators' bearer
// token) and returns the status code.
func peerRequest(h http.Handler, method, path string, body []byte) int {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// An aggregation job naming no report is refused as malformed, the second
// time as the first (found by the fuzzer: a repeated empty job was a 503,
// its stored empty list read back as none).
func TestHelperRefusesEmptyJob(t *testing.T) {
	s := newTestServer(t, dap.Helper)
	h := s.Handler()
	do := func(method, path string, body []byte) int { return peerRequest(h, method, path, body) }
	if c := do(http.MethodPut, "/dap/v1/tasks/t", task); c != http.StatusCreated {
		t.Fatalf("provisioning: HTTP %d", c)
	}
	for i := range 2 {
		if c := do(http.MethodPut, "/dap/v1/tasks/t/aggregation_jobs/job-0001", []byte(`{"reports":[]}`)); c != http.StatusBadRequest {
			t.Fatalf("empty job, attempt %d: HTTP %d, want 400", i+1, c)
		}
	}
}

// FuzzLeaderUpload: a user's upload body never makes the leader fail with
// a 5xx.
func FuzzLeaderUpload(f *testing.F) {
	f.Add([]byte(`{"task_id":"t","id":"AAAAAAAAAAAAAAAAAAAAAA==","public_share":"","leader_share":{"enc":"","ciphertext":""},"helper_share":{"enc":"","ciphertext":""}}`))
	f.Add([]byte(`[]`))
	s := newTestServer(f, dap.Leader)
	var tk dap.Task
	if err := decodeBytes(task, &tk); err != nil {
		f.Fatal(err)
	}
	if err := s.st.putTask(context.Background(), tk); err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/dap/v1/users", nil))
	var e Enrolment
	if err := decodeBytes(rec.Body.Bytes(), &e); err != nil {
		f.Fatal(err)
	}
	bin, err := EncodeReport(&dap.Report{TaskID: "t", ID: make([]byte, dap.ReportIDSize)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(bin)
	f.Fuzz(func(t *testing.T, body []byte) {
		// Each body as JSON and as the binary encoding.
		for _, ct := range []string{"application/json", ReportMediaType} {
			req := httptest.NewRequest(http.MethodPut, "/dap/v1/tasks/t/reports", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+e.Token)
			req.Header.Set("Content-Type", ct)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s: HTTP %d for %q", ct, rec.Code, body)
			}
		}
	})
}

// FuzzLeaderModels: no recipe body makes the leader fail with a 5xx
// (the seed task "t" has a release, so valid recipes are stored).
func FuzzLeaderModels(f *testing.F) {
	f.Add([]byte(`{"name":"m","method":"dpals","epsilon":8,"delta":1e-6,"seed":1,"devices":10,"scale":[1,5],"lattice":{"step_bits":8,"gram_step_bits":9},"tasks":["t"]}`))
	f.Add([]byte(`{"name":"m","method":"","epsilon":1e400,"tasks":["t","t"]}`))
	f.Add([]byte(`{"name":"m","tasks":["../t"]}`))
	s := newTestServer(f, dap.Leader)
	var tk dap.Task
	if err := decodeBytes(task, &tk); err != nil {
		f.Fatal(err)
	}
	if err := s.st.putTask(context.Background(), tk); err != nil {
		f.Fatal(err)
	}
	if _, err := s.st.db.Exec(`INSERT INTO releases (task_id, body) VALUES ('t', '{"task":{},"values":[],"noise_sd":1,"guarantee":""}')`); err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPut, "/dap/v1/admin/models/m", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("HTTP %d for %q", rec.Code, body)
		}
	})
}

func decodeBytes(b []byte, v any) error {
	r, _ := http.NewRequest(http.MethodPost, "/", bytes.NewReader(b))
	return decode(httptest.NewRecorder(), r, maxJSONBody, v)
}

// TestModelRecipes: the leader refuses a recipe that is malformed, named
// otherwise than its path, or over a task without a release (400), without
// the admin token (401), and an unknown model is a 404; nothing is stored.
func TestModelRecipes(t *testing.T) {
	s := newTestServer(t, dap.Leader)
	h := s.Handler()
	do := func(method, path, token string, body []byte) int {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	good := `{"name":"m","method":"dpals","epsilon":8,"delta":1e-6,"seed":1,"devices":10,"scale":[1,5],"lattice":{"step_bits":8,"gram_step_bits":9},"tasks":["t"]}`
	for _, tc := range []struct {
		name, path, token, body string
		want                    int
	}{
		{"no admin token", "/dap/v1/admin/models/m", "", good, http.StatusUnauthorized},
		{"task not released", "/dap/v1/admin/models/m", testToken, good, http.StatusBadRequest},
		{"name differs from the path", "/dap/v1/admin/models/x", testToken, good, http.StatusBadRequest},
		{"unknown field", "/dap/v1/admin/models/m", testToken, `{"name":"m","bogus":1}`, http.StatusBadRequest},
		{"no tasks", "/dap/v1/admin/models/m", testToken, `{"name":"m","method":"dpals","epsilon":8,"devices":10,"scale":[1,5],"tasks":[]}`, http.StatusBadRequest},
		{"scale reversed", "/dap/v1/admin/models/m", testToken, `{"name":"m","method":"dpals","epsilon":8,"devices":10,"scale":[5,1],"tasks":["t"]}`, http.StatusBadRequest},
		{"not JSON", "/dap/v1/admin/models/m", testToken, `{`, http.StatusBadRequest},
	} {
		if c := do(http.MethodPut, tc.path, tc.token, []byte(tc.body)); c != tc.want {
			t.Errorf("%s: HTTP %d, want %d", tc.name, c, tc.want)
		}
	}
	if c := do(http.MethodGet, "/dap/v1/models/m", "", nil); c != http.StatusNotFound {
		t.Errorf("an unknown model: HTTP %d, want 404", c)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/dap/v1/models", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "[]\n" {
		t.Errorf("models after refusals: HTTP %d %q, want an empty list", rec.Code, rec.Body.String())
	}
}
