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
	key, err := dap.NewKeyPair()
	if err != nil {
		tb.Fatal(err)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	s, err := New(context.Background(), Config{Role: role, DB: filepath.Join(tb.TempDir(), "agg.db"), Key: key, Secret: secret,
		AggregatorToken: testToken, AdminToken: testToken, HelperURL: "http://127.0.0.1:1", BudgetRho: 1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

var task = []byte(`{"id":"t","statistic":"s","dimension":3,"step":0.5,"min":-4,"bits":3,"norm_sq":20,"relation":"add-remove-user","sensitivity":4.5,"rho":0.5,"noise":"each-alone","sigma":5,"min_reports":1}`)

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
	do := func(method, path string, body []byte) int {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if c := do(http.MethodPut, "/dap/v1/tasks/t", task); c != http.StatusCreated {
		f.Fatalf("provisioning the seed task: HTTP %d", c)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range []struct{ method, path string }{
			{http.MethodPut, "/dap/v1/tasks/f"},
			{http.MethodPost, "/dap/v1/tasks/t/aggregation_jobs"},
			{http.MethodPost, "/dap/v1/tasks/t/aggregate_share"},
		} {
			if c := do(p.method, p.path, body); c >= 500 {
				t.Fatalf("%s %s: HTTP %d for %q", p.method, p.path, c, body)
			}
		}
	})
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

func decodeBytes(b []byte, v any) error {
	r, _ := http.NewRequest(http.MethodPost, "/", bytes.NewReader(b))
	return decode(r, v)
}
