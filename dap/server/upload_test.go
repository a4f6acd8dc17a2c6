package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/statistic"
)

// uploadRig is a leader (over real HTTP) with one counts task and one
// enrolled user.
type uploadRig struct {
	s     *Server
	url   string
	task  dap.Task
	token string
}

func newUploadRig(t *testing.T) *uploadRig {
	t.Helper()
	s := newTestServer(t, dap.Leader)
	s.cfg.BudgetRho = 10
	c := &statistic.Counts{Items: 20}
	mech, err := mechanism.NewGaussianSigma(1, 1e-6, c.Spec().Sensitivity, 20)
	if err != nil {
		t.Fatal(err)
	}
	cat := make([]string, 20)
	for i := range cat {
		cat[i] = fmt.Sprint("i", i)
	}
	task, err := dap.Lattice{StepBits: 8}.TaskFor("t", statistic.RowPlan{Catalogue: cat}, c, mech)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.st.putTask(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	r := &uploadRig{s: s, url: hs.URL, task: task}
	r.token = r.enrol(t)
	return r
}

// enrol enrols a user and returns her token.
func (r *uploadRig) enrol(t *testing.T) string {
	t.Helper()
	resp, err := http.Post(r.url+"/dap/v1/users", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e Enrolment
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	return e.Token
}

// report shards a valid report; helperKey seals the helper's share (the
// leader's own key when nil: a share the helper could not open).
func (r *uploadRig) report(t *testing.T, leaderKey bool) *dap.Report {
	t.Helper()
	q := make([]int64, r.task.Dimension)
	q[3] = 100
	lk := r.s.cfg.Key.Public
	if !leaderKey {
		other, err := dap.NewKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		lk = other.Public
	}
	rep, err := r.task.Shard(q, lk, r.s.cfg.Key.Public)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (r *uploadRig) put(t *testing.T, ctype string, body io.Reader, length int64) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, r.url+"/dap/v1/tasks/t/reports", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stored is the number of stored reports and the user's spent ρ.
func (r *uploadRig) stored(t *testing.T) (int, float64) {
	t.Helper()
	var n int
	var spent int64
	if err := r.s.st.db.QueryRow(`SELECT count(*) FROM reports`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := r.s.st.db.QueryRow(`SELECT spent_rho_nano FROM users`).Scan(&spent); err != nil {
		t.Fatal(err)
	}
	return n, float64(spent) / 1e9
}

// zeros is an endless body that counts what was read of it.
type zeros struct{ read atomic.Int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.read.Add(int64(len(p)))
	return len(p), nil
}

// TestUploadTooLarge: a 300 MB upload is refused with 413 before it is
// read (a few MB at most cross the socket buffers), in the binary
// encoding and as JSON, with and without a Content-Length; nothing is
// stored or charged.
func TestUploadTooLarge(t *testing.T) {
	r := newUploadRig(t)
	const size = 300 << 20
	for _, tc := range []struct {
		name, ctype string
		length      int64
	}{
		{"binary, Content-Length", ReportMediaType, size},
		{"JSON, Content-Length", "application/json", size},
		{"binary, chunked", ReportMediaType, -1},
	} {
		z := &zeros{}
		var body io.Reader = io.LimitReader(z, size)
		code, msg := r.put(t, tc.ctype, body, tc.length)
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: HTTP %d %s, want 413", tc.name, code, msg)
		}
		if got := z.read.Load(); got > 16<<20 {
			t.Errorf("%s: %d bytes of the body were read before the refusal", tc.name, got)
		}
		t.Logf("%s: HTTP %d after %d of %d bytes: %s", tc.name, code, z.read.Load(), size, strings.TrimSpace(msg))
	}
	if n, spent := r.stored(t); n != 0 || spent != 0 {
		t.Fatalf("after refused uploads: %d reports stored, ρ %v charged", n, spent)
	}
}

// TestUploadIdempotent: the same report sent again is acknowledged again
// (200, repeated) and charged once; another report under its ID, or a
// second report of the user, is 409; nothing more is charged.
func TestUploadIdempotent(t *testing.T) {
	r := newUploadRig(t)
	rep := r.report(t, true)
	b, err := EncodeReport(rep)
	if err != nil {
		t.Fatal(err)
	}
	if code, msg := r.put(t, ReportMediaType, bytes.NewReader(b), int64(len(b))); code != http.StatusCreated {
		t.Fatalf("first upload: HTTP %d %s", code, msg)
	}
	_, once := r.stored(t)
	for i := range 2 {
		code, msg := r.put(t, ReportMediaType, bytes.NewReader(b), int64(len(b)))
		if code != http.StatusOK || !strings.Contains(msg, `"repeated":true`) {
			t.Fatalf("retry %d: HTTP %d %s, want 200 with a repeated receipt", i, code, msg)
		}
	}
	// The same report as JSON is the same report.
	j, _ := json.Marshal(rep)
	if code, msg := r.put(t, "application/json", bytes.NewReader(j), int64(len(j))); code != http.StatusOK {
		t.Fatalf("retry as JSON: HTTP %d %s", code, msg)
	}
	ob, _ := EncodeReport(r.report(t, true))
	if code, msg := r.put(t, ReportMediaType, bytes.NewReader(ob), int64(len(ob))); code != http.StatusConflict {
		t.Errorf("a second report of the user: HTTP %d %s, want 409", code, msg)
	}
	// Another user sending this report (its ID taken by another user's).
	first := r.token
	r.token = r.enrol(t)
	if code, msg := r.put(t, ReportMediaType, bytes.NewReader(b), int64(len(b))); code != http.StatusConflict {
		t.Errorf("another user's report under its ID: HTTP %d %s, want 409", code, msg)
	}
	r.token = first
	var n int
	var spent int64
	r.s.st.db.QueryRow(`SELECT count(*), sum(spent_rho_nano) FROM reports, users WHERE users.id = reports.user_id`).Scan(&n, &spent)
	if n != 1 || float64(spent)/1e9 != once || spent == 0 {
		t.Fatalf("%d reports stored, ρ %v charged; want 1 report charged once (%v)", n, float64(spent)/1e9, once)
	}
}

// TestUploadRefusals: a report whose leader share does not open, JSON
// with a repeated or wrong-case member, and a short body are refused
// (400) and nothing is stored or charged.
func TestUploadRefusals(t *testing.T) {
	r := newUploadRig(t)
	bad, _ := EncodeReport(r.report(t, false))
	good := r.report(t, true)
	j, _ := json.Marshal(good)
	dupKey := strings.Replace(string(j), `{"task_id":"t",`, `{"task_id":"t","task_id":"t",`, 1)
	wrongCase := strings.Replace(string(j), `"task_id"`, `"Task_ID"`, 1)
	gb, _ := EncodeReport(good)
	for _, tc := range []struct {
		name, ctype string
		body        []byte
	}{
		{"leader share sealed to another key", ReportMediaType, bad},
		{"a repeated member", "application/json", []byte(dupKey)},
		{"a member in another case", "application/json", []byte(wrongCase)},
		{"a truncated report", ReportMediaType, gb[:len(gb)-1]},
	} {
		if code, msg := r.put(t, tc.ctype, bytes.NewReader(tc.body), int64(len(tc.body))); code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d %s, want 400", tc.name, code, msg)
		}
	}
	if n, spent := r.stored(t); n != 0 || spent != 0 {
		t.Fatalf("after refusals: %d reports stored, ρ %v charged", n, spent)
	}
}

// TestEnrolLimits: enrolment beyond the rate is 429 with Retry-After,
// beyond --max-users 403.
func TestEnrolLimits(t *testing.T) {
	s := newTestServer(t, dap.Leader)
	s.enrolAddr, s.enrolAll = newLimiter(0.001, 3), newLimiter(1000, 1000)
	h := s.Handler()
	codes := []int{}
	for range 5 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/dap/v1/users", nil))
		codes = append(codes, rec.Code)
		if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if fmt.Sprint(codes) != "[201 201 201 429 429]" {
		t.Errorf("enrolments at a burst of 3: %v", codes)
	}
	s.enrolAddr = newLimiter(1000, 1000)
	s.cfg.MaxUsers = 4
	codes = codes[:0]
	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/dap/v1/users", nil))
		codes = append(codes, rec.Code)
	}
	if fmt.Sprint(codes) != "[201 403]" {
		t.Errorf("enrolments with 3 users and a cap of 4: %v", codes)
	}
}
