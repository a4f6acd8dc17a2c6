package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/service/store/storetest"
	"github.com/privrec/privrec/statistic"
)

// dbURL is a fresh database of the kind: an SQLite file, or a schema of
// its own in PRIVREC_TEST_POSTGRES (skipped, saying so, when unset).
func dbURL(t *testing.T, kind string) string {
	t.Helper()
	if kind == "sqlite" {
		return filepath.Join(t.TempDir(), "agg.db")
	}
	return storetest.URL(t, kind)
}

// pair is a leader and a helper over real HTTP, sharing a verification
// secret; the leader's admin token is testToken.
type pair struct {
	leader, helper *Server
	leaderURL      string
	cfg, helperCfg Config // the configurations (for more processes on their databases)
	// helpers serve the helper's URL in turn (more helper processes on
	// its database, behind one address).
	mu      sync.Mutex
	helpers []http.Handler
	turn    int
}

// toHelper passes a request to the next helper process in turn.
func (p *pair) toHelper(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	h := p.helpers[p.turn%len(p.helpers)]
	p.turn++
	p.mu.Unlock()
	h.ServeHTTP(w, r)
}

func newPair(t *testing.T, leaderDB, helperDB string) *pair {
	t.Helper()
	secret := make([]byte, 32)
	rand.Read(secret)
	cfg := func(role dap.Role, db string) Config {
		key, err := dap.NewKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		return Config{Role: role, DB: db, Key: key, Secret: secret, AggregatorToken: testToken, AdminToken: testToken, BudgetRho: 100, MinBatch: 1, BatchSize: 4}
	}
	p := &pair{helperCfg: cfg(dap.Helper, helperDB)}
	var err error
	if p.helper, err = New(context.Background(), p.helperCfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.helper.Close() })
	p.helpers = []http.Handler{p.helper.Handler()}
	hs := httptest.NewServer(http.HandlerFunc(p.toHelper))
	t.Cleanup(hs.Close)
	p.cfg = cfg(dap.Leader, leaderDB)
	p.cfg.HelperURL = hs.URL
	if p.leader, err = New(context.Background(), p.cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.leader.Close() })
	ls := httptest.NewServer(p.leader.Handler())
	t.Cleanup(ls.Close)
	p.leaderURL = ls.URL
	return p
}

// countsTask is a counts task over n items (ρ from σ = 1).
func countsTask(t *testing.T, id string, n int) dap.Task {
	t.Helper()
	c := &statistic.Counts{Items: n}
	mech, err := mechanism.NewGaussianSigma(1, 1e-6, c.Spec().Sensitivity, n)
	if err != nil {
		t.Fatal(err)
	}
	cat := make([]string, n)
	for i := range cat {
		cat[i] = fmt.Sprint("i", i)
	}
	task, err := dap.Lattice{StepBits: 8}.TaskFor(id, statistic.RowPlan{Catalogue: cat}, c, mech)
	if err != nil {
		t.Fatal(err)
	}
	task.MinReports = 1
	return task
}

// do sends a JSON request to url and decodes a 2xx answer into out.
func do(t *testing.T, method, url, token string, body []byte, ctype string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 && out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// contribute enrols a device and uploads its report of task (item i
// counted once); it returns the device's token and report.
func (p *pair) contribute(t *testing.T, task dap.Task, i int) (string, []byte) {
	t.Helper()
	var e Enrolment
	if c := do(t, http.MethodPost, p.leaderURL+"/dap/v1/users", "", nil, "", &e); c != http.StatusCreated {
		t.Fatalf("enrol: HTTP %d", c)
	}
	q := make([]int64, task.Dimension)
	q[i%task.Dimension] = 255
	rep, err := task.Shard(q, p.leader.cfg.Key.Public, p.helper.cfg.Key.Public)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeReport(rep)
	if err != nil {
		t.Fatal(err)
	}
	if c := do(t, http.MethodPut, p.leaderURL+"/dap/v1/tasks/"+task.ID+"/reports", e.Token, b, ReportMediaType, nil); c != http.StatusCreated {
		t.Fatalf("upload %d: HTTP %d", i, c)
	}
	return e.Token, b
}

// TestStoreKinds runs a task through a leader and a helper on each kind
// of database: uploads (one retried: acknowledged again, charged once),
// aggregation and collection count every report once at both
// aggregators, and collecting again returns the same release.
func TestStoreKinds(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			p := newPair(t, dbURL(t, kind), dbURL(t, kind))
			task := countsTask(t, "t", 8)
			tb, _ := json.Marshal(task)
			if c := do(t, http.MethodPost, p.leaderURL+"/dap/v1/admin/tasks", testToken, tb, "application/json", &task); c != http.StatusCreated {
				t.Fatalf("create task: HTTP %d", c)
			}
			const n = 10
			var tok string
			var body []byte
			for i := range n {
				tok, body = p.contribute(t, task, i)
			}
			var rc Receipt
			if c := do(t, http.MethodPut, p.leaderURL+"/dap/v1/tasks/t/reports", tok, body, ReportMediaType, &rc); c != http.StatusOK || !rc.Repeated {
				t.Fatalf("retried upload: HTTP %d %+v, want 200, repeated", c, rc)
			}
			var l Ledger
			do(t, http.MethodGet, p.leaderURL+"/dap/v1/ledger", tok, nil, "", &l)
			if want := float64(nanoRho(task.Rho)) / 1e9; l.SpentRho != want {
				t.Errorf("charged ρ %v after a retried upload, want %v once", l.SpentRho, want)
			}
			var res AggregateResult
			if c := do(t, http.MethodPost, p.leaderURL+"/dap/v1/admin/tasks/t/aggregate", testToken, nil, "", &res); c != http.StatusOK || res.Accepted != n {
				t.Fatalf("aggregate: HTTP %d %+v, want %d accepted", c, res, n)
			}
			var rel, again Release
			if c := do(t, http.MethodPost, p.leaderURL+"/dap/v1/admin/tasks/t/collect", testToken, nil, "", &rel); c != http.StatusOK {
				t.Fatalf("collect: HTTP %d", c)
			}
			if c := do(t, http.MethodPost, p.leaderURL+"/dap/v1/admin/tasks/t/collect", testToken, nil, "", &again); c != http.StatusOK || fmt.Sprint(rel.Values) != fmt.Sprint(again.Values) {
				t.Fatalf("collect again: HTTP %d, values %v then %v", c, rel.Values, again.Values)
			}
			for _, s := range []*Server{p.leader, p.helper} {
				a, err := s.st.aggregate(context.Background(), s.st.db, &task)
				if err != nil || a.count != n {
					t.Errorf("%v: aggregate of %d reports (%v), want %d", s.cfg.Role, a.count, err, n)
				}
			}
		})
	}
}

// TestStoreStartChecks: a database that is not there is refused without
// CreateNew, an existing one with it, and one made for the other role
// with another key, on each kind of database.
func TestStoreStartChecks(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			db := dbURL(t, kind)
			key, err := dap.NewKeyPair()
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Role: dap.Helper, DB: db, Key: key, Secret: make([]byte, 32), AggregatorToken: testToken, Mode: OpenExisting}
			if _, err := New(context.Background(), cfg); !errors.Is(err, ErrNoDatabase) {
				t.Errorf("opening a missing database: %v, want ErrNoDatabase", err)
			}
			cfg.Mode = CreateNew
			s, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if _, err := New(context.Background(), cfg); !errors.Is(err, ErrExists) {
				t.Errorf("creating over an existing database: %v, want ErrExists", err)
			}
			cfg.Mode = OpenExisting
			s, err = New(context.Background(), cfg)
			if err != nil {
				t.Fatalf("reopening: %v", err)
			}
			s.Close()
			other, _ := dap.NewKeyPair()
			cfg.Key = other
			if _, err := New(context.Background(), cfg); !errors.Is(err, ErrMismatch) {
				t.Errorf("opening with another key: %v, want ErrMismatch", err)
			}
		})
	}
}

// TestStoreConcurrentCharges: one user's uploads to several tasks at
// once are each charged (no charge lost between concurrent
// transactions, as PostgreSQL's would be without the ledger row lock).
func TestStoreConcurrentCharges(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			p := newPair(t, dbURL(t, kind), dbURL(t, kind))
			const k = 8
			tasks := make([]dap.Task, k)
			for i := range tasks {
				tasks[i] = countsTask(t, fmt.Sprint("t", i), 4)
				if err := p.leader.st.putTask(context.Background(), tasks[i]); err != nil {
					t.Fatal(err)
				}
			}
			var e Enrolment
			do(t, http.MethodPost, p.leaderURL+"/dap/v1/users", "", nil, "", &e)
			var wg sync.WaitGroup
			codes := make([]int, k)
			for i := range tasks {
				rep, err := tasks[i].Shard(make([]int64, 4), p.leader.cfg.Key.Public, p.helper.cfg.Key.Public)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := EncodeReport(rep)
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest(http.MethodPut, p.leaderURL+"/dap/v1/tasks/"+tasks[i].ID+"/reports", bytes.NewReader(b))
					req.Header.Set("Authorization", "Bearer "+e.Token)
					req.Header.Set("Content-Type", ReportMediaType)
					if resp, err := http.DefaultClient.Do(req); err == nil {
						codes[i] = resp.StatusCode
						resp.Body.Close()
					}
				}()
			}
			wg.Wait()
			var l Ledger
			do(t, http.MethodGet, p.leaderURL+"/dap/v1/ledger", e.Token, nil, "", &l)
			if want := float64(k*nanoRho(tasks[0].Rho)) / 1e9; l.SpentRho != want || fmt.Sprint(codes) != fmt.Sprint([]int{201, 201, 201, 201, 201, 201, 201, 201}) {
				t.Errorf("%d concurrent uploads (%v): ρ %v charged, want %v", k, codes, l.SpentRho, want)
			}
		})
	}
}

// TestTwoLeadersShareJobs: two leader servers on one database (as two
// processes would be) aggregate one task at once, with two helper servers
// on the helper's database taking the jobs in turn; the leaders divide the
// jobs (each claims its own) and every report is counted once, at the
// leader and at the helper, on each kind of database.
func TestTwoLeadersShareJobs(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			leaderDB := dbURL(t, kind)
			p := newPair(t, leaderDB, dbURL(t, kind))
			cfg := p.cfg
			cfg.Mode = OpenExisting
			second, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer second.Close()
			hcfg := p.helperCfg
			hcfg.Mode = OpenExisting
			helper2, err := New(context.Background(), hcfg)
			if err != nil {
				t.Fatal(err)
			}
			defer helper2.Close()
			p.mu.Lock()
			p.helpers = append(p.helpers, helper2.Handler())
			p.mu.Unlock()
			task := countsTask(t, "t", 8)
			tb, _ := json.Marshal(task)
			if c := do(t, http.MethodPost, p.leaderURL+"/dap/v1/admin/tasks", testToken, tb, "application/json", &task); c != http.StatusCreated {
				t.Fatalf("create task: HTTP %d", c)
			}
			const n = 40 // jobs of 4: 10 jobs
			for i := range n {
				p.contribute(t, task, i)
			}
			var wg sync.WaitGroup
			res := make([]AggregateResult, 2)
			errs := make([]error, 2)
			for i, s := range []*Server{p.leader, second} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res[i], errs[i] = s.Aggregate(context.Background(), "t")
				}()
			}
			wg.Wait()
			if errs[0] != nil || errs[1] != nil || res[0].Accepted+res[1].Accepted != n || res[0].Rejected+res[1].Rejected != 0 {
				t.Fatalf("two leaders aggregating at once: %+v, %+v (errors %v, %v), want %d accepted in all", res[0], res[1], errs[0], errs[1], n)
			}
			t.Logf("%s: the two leaders accepted %d and %d reports", kind, res[0].Accepted, res[1].Accepted)
			if _, err := second.Collect(context.Background(), "t"); err != nil {
				t.Fatal(err)
			}
			for _, s := range []*Server{p.leader, p.helper} {
				a, err := s.st.aggregate(context.Background(), s.st.db, &task)
				if err != nil || a.count != n {
					t.Errorf("%v: aggregate of %d reports (%v), want %d", s.cfg.Role, a.count, err, n)
				}
			}
		})
	}
}

// BenchmarkStoreUpload is the leader's write of one upload (the report
// row and the user's charge, one durable transaction) on each store, one
// writer at a time (serial: what one SQLite writer can commit per second)
// and from 8 goroutines at once (parallel: PostgreSQL commits them side
// by side). Reports of 546 432 bytes (counts at MovieLens-1M's
// catalogue); ns/op is wall time per upload.
//
//	PRIVREC_TEST_POSTGRES=postgres://… go test -run XXX -bench StoreUpload -benchtime 200x -count 3 ./dap/server
func BenchmarkStoreUpload(b *testing.B) {
	for _, kind := range storetest.Kinds {
		for _, par := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/writers=%d", kind, par), func(b *testing.B) {
				db := filepath.Join(b.TempDir(), "agg.db")
				if kind != "sqlite" {
					db = storetest.URL(b, kind)
				}
				s := newTestServerDB(b, dap.Leader, db)
				s.cfg.BudgetRho = 1e6
				task := dap.Task{ID: "t", Rho: 0.5}
				if _, err := s.st.db.Exec(`INSERT INTO tasks (id, params) VALUES ('t', '{}')`); err != nil {
					b.Fatal(err)
				}
				body := make([]byte, 546432)
				rand.Read(body)
				hash := sha256.Sum256(body)
				tx, err := s.st.db.BeginTx(context.Background(), nil)
				if err != nil {
					b.Fatal(err)
				}
				for i := range b.N {
					uid := fmt.Sprint("u", i)
					if _, err := tx.ExecContext(context.Background(), `INSERT INTO users (id, token_hash) VALUES (?, ?)`, uid, []byte(uid)); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
				var next atomic.Int64
				b.SetParallelism(par)
				b.SetBytes(int64(len(body)))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						uid := fmt.Sprint("u", next.Add(1)-1)
						id := make([]byte, dap.ReportIDSize)
						rand.Read(id)
						if _, err := s.storeReport(context.Background(), &task, uid, id, body, hash[:]); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// TestUploadBatchRefusals: uploads committed together (SQLite's group
// commit; side by side on PostgreSQL) are decided one by one: of 16 sent
// at once, the 8 second reports of their users are refused (409) and
// undo only their own writes; the 8 first reports are stored, each user
// charged once.
func TestUploadBatchRefusals(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			p := newPair(t, dbURL(t, kind), dbURL(t, kind))
			task := countsTask(t, "t", 4)
			if err := p.leader.st.putTask(context.Background(), task); err != nil {
				t.Fatal(err)
			}
			const users = 8
			tokens := make([]string, users)
			bodies := make([][]byte, 2*users)
			for i := range tokens {
				var e Enrolment
				do(t, http.MethodPost, p.leaderURL+"/dap/v1/users", "", nil, "", &e)
				tokens[i] = e.Token
			}
			for i := range bodies {
				rep, err := task.Shard(make([]int64, 4), p.leader.cfg.Key.Public, p.helper.cfg.Key.Public)
				if err != nil {
					t.Fatal(err)
				}
				bodies[i], _ = EncodeReport(rep)
			}
			codes := make([]int, len(bodies))
			var wg sync.WaitGroup
			for i := range bodies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest(http.MethodPut, p.leaderURL+"/dap/v1/tasks/t/reports", bytes.NewReader(bodies[i]))
					req.Header.Set("Authorization", "Bearer "+tokens[i%users])
					req.Header.Set("Content-Type", ReportMediaType)
					if resp, err := http.DefaultClient.Do(req); err == nil {
						codes[i] = resp.StatusCode
						resp.Body.Close()
					}
				}()
			}
			wg.Wait()
			created, conflicts := 0, 0
			for _, c := range codes {
				switch c {
				case http.StatusCreated:
					created++
				case http.StatusConflict:
					conflicts++
				}
			}
			var n int
			var spent int64
			p.leader.st.db.QueryRow(`SELECT count(*) FROM reports`).Scan(&n)
			p.leader.st.db.QueryRow(`SELECT sum(spent_rho_nano) FROM users`).Scan(&spent)
			if created != users || conflicts != users || n != users || spent != users*nanoRho(task.Rho) {
				t.Errorf("answers %v: %d stored, %d nano-ρ charged; want %d created, %d refused, each user charged once", codes, n, spent, users, users)
			}
		})
	}
}

// TestCommitUploadsBatch: one batch of four uploads — a report, a second
// report of the same user, another user's report and one of an unknown
// user — stores the first and third and refuses the others, which change
// nothing.
func TestCommitUploadsBatch(t *testing.T) {
	s := newTestServer(t, dap.Leader)
	s.cfg.BudgetRho = 100
	task := countsTask(t, "t", 4)
	if err := s.st.putTask(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"a", "b"} {
		if _, err := s.st.db.Exec(`INSERT INTO users (id, token_hash) VALUES (?, ?)`, u, []byte(u)); err != nil {
			t.Fatal(err)
		}
	}
	req := func(uid string, id byte) *uploadReq {
		rid := make([]byte, dap.ReportIDSize)
		rid[0] = id
		return &uploadReq{t: &task, uid: uid, id: rid, row: []byte{id}, done: make(chan uploadRes, 1)}
	}
	batch := []*uploadReq{req("a", 1), req("a", 2), req("b", 3), req("nobody", 4)}
	s.commitUploads(batch)
	var errs []bool
	for _, r := range batch {
		errs = append(errs, (<-r.done).err != nil)
	}
	var n int
	var spent int64
	s.st.db.QueryRow(`SELECT count(*) FROM reports`).Scan(&n)
	s.st.db.QueryRow(`SELECT sum(spent_rho_nano) FROM users`).Scan(&spent)
	if fmt.Sprint(errs) != "[false true false true]" || n != 2 || spent != 2*nanoRho(task.Rho) {
		t.Errorf("refused %v, %d stored, %d nano-ρ charged; want [false true false true], 2 stored, 2 charges", errs, n, spent)
	}
}

// TestFailDatabaseUnavailable: PostgreSQL refusing a statement (here a
// full disk, SQLSTATE 53100) or not answering is a 503 with Retry-After,
// as SQLite's errors are; an error of unknown cause stays a 500.
func TestFailDatabaseUnavailable(t *testing.T) {
	s := newTestServer(t, dap.Leader)
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("dap store: report: %w", &pgconn.PgError{Code: "53100", Message: "could not extend file"}), http.StatusServiceUnavailable},
		{fmt.Errorf("store: %w", &pgconn.ConnectError{}), http.StatusServiceUnavailable},
		{errors.New("something else"), http.StatusInternalServerError},
	} {
		rec := httptest.NewRecorder()
		s.fail(rec, tc.err)
		if rec.Code != tc.want || (tc.want == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") == "") {
			t.Errorf("%v: HTTP %d (Retry-After %q) %s, want %d", tc.err, rec.Code, rec.Header().Get("Retry-After"), rec.Body, tc.want)
		}
	}
}

// TestStoreRefusesForeignSchema: an aggregator's database is made only
// in an empty PostgreSQL schema: one holding another application's tables
// is refused, and nothing is added to it.
func TestStoreRefusesForeignSchema(t *testing.T) {
	url := storetest.URL(t, "postgres")
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE other_app (id INTEGER)`); err != nil {
		t.Fatal(err)
	}
	key, err := dap.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), Config{Role: dap.Helper, DB: url, Key: key, Secret: make([]byte, 32), AggregatorToken: testToken, Mode: CreateNew})
	if err == nil || !strings.Contains(err.Error(), "other tables") {
		t.Fatalf("creating in a schema with another table: %v, want a refusal naming it", err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d tables in the schema after the refusal (%v), want only the other application's", n, err)
	}
}

// TestStoreMovesJobMembership: an SQLite leader database made before
// report_jobs (each report's job in reports.job_id) gets the table when
// it is opened, with its reports' jobs: a report recorded in a job and
// the reports still pending are all aggregated, once.
func TestStoreMovesJobMembership(t *testing.T) {
	ctx := context.Background()
	p := newPair(t, dbURL(t, "sqlite"), dbURL(t, "sqlite"))
	task := countsTask(t, "t", 8)
	tb, _ := json.Marshal(task)
	if c := do(t, http.MethodPost, p.leaderURL+"/dap/v1/admin/tasks", testToken, tb, "application/json", &task); c != http.StatusCreated {
		t.Fatalf("create task: HTTP %d", c)
	}
	const n = 3
	for i := range n {
		p.contribute(t, task, i)
	}
	db := p.leader.st.db
	var first []byte
	if err := db.QueryRow(`SELECT report_id FROM reports ORDER BY report_id LIMIT 1`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	// The database as the previous schema left it: the first report in a
	// job recorded before a crash, the others pending, no report_jobs.
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO jobs (task_id, job_id, ids, expires_ms) VALUES ('t', 'oldjob01', ?, 0)`, []any{first}},
		{`UPDATE reports SET job_id = 'oldjob01' WHERE report_id = ?`, []any{first}},
		{`DROP TABLE report_jobs`, nil},
		{`UPDATE meta SET value = '3' WHERE key = 'schema_version'`, nil},
	} {
		if _, err := db.Exec(q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	p.leader.Close()
	l, err := New(ctx, p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.leader = l // closed by newPair's cleanup
	var moved, inJob int
	l.st.db.QueryRow(`SELECT count(*), count(job_id) FROM report_jobs`).Scan(&moved, &inJob)
	if moved != n || inJob != 1 {
		t.Fatalf("report_jobs has %d reports, %d in a job; want %d, 1", moved, inJob, n)
	}
	if pending, err := l.st.pending(ctx, "t"); err != nil || pending != n {
		t.Fatalf("pending %d (%v), want %d", pending, err, n)
	}
	res, err := l.Aggregate(ctx, "t")
	if err != nil || res.Accepted != n || res.Rejected != 0 {
		t.Fatalf("aggregate: %+v (%v), want %d accepted", res, err, n)
	}
	a, err := l.st.aggregate(ctx, l.st.db, &task)
	if err != nil || a.count != n {
		t.Fatalf("aggregate of %d reports (%v), want %d", a.count, err, n)
	}
}
