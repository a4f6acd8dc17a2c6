package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// open returns a fresh initialised store of the kind.
func open(t *testing.T, kind string) store.Store {
	t.Helper()
	ctx := context.Background()
	s, err := store.Create(ctx, storetest.URL(t, kind))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Init(ctx, []byte(`{"config":1}`)); err != nil {
		t.Fatal(err)
	}
	return s
}

func hash(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

func enrol(t *testing.T, s store.Store, id string, budget int64) {
	t.Helper()
	err := s.Update(context.Background(), func(tx store.Tx) error {
		return tx.CreateUser(context.Background(), store.NewUser{ID: id, TokenHash: hash("token-" + id), Budget: budget, CreatedMS: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func submit(t *testing.T, s store.Store, sub store.Submission) store.Result {
	t.Helper()
	var res store.Result
	err := s.Update(context.Background(), func(tx store.Tx) error {
		var err error
		res, err = tx.Submit(context.Background(), sub)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func sub(user, id, body string, charge int64) store.Submission {
	return store.Submission{User: user, ClientID: id, BodyHash: hash(body), Charge: charge, Values: []byte(body), Received: 42}
}

// TestStore runs the same suite on every database kind.
func TestStore(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Run("config", func(t *testing.T) { testConfig(t, kind) })
			t.Run("ledger", func(t *testing.T) { testLedger(t, kind) })
			t.Run("rollback", func(t *testing.T) { testRollback(t, kind) })
			t.Run("publish", func(t *testing.T) { testPublish(t, kind) })
			t.Run("concurrent", func(t *testing.T) { testConcurrent(t, kind) })
			t.Run("batch", func(t *testing.T) { testBatch(t, kind) })
		})
	}
}

func testConfig(t *testing.T, kind string) {
	ctx := context.Background()
	url := storetest.URL(t, kind)
	s, err := store.Create(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Config(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Config before Init: %v, want ErrNotFound", err)
	}
	if err := s.Init(ctx, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Reopen: the same configuration is accepted, another refused.
	s, err = store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Init(ctx, []byte(`{"a":1}`)); err != nil {
		t.Fatalf("same configuration refused: %v", err)
	}
	if err := s.Init(ctx, []byte(`{"a":2}`)); !errors.Is(err, store.ErrConfigMismatch) {
		t.Fatalf("other configuration: %v, want ErrConfigMismatch", err)
	}
	if c, err := s.Config(ctx); err != nil || string(c) != `{"a":1}` {
		t.Fatalf("Config = %s, %v", c, err)
	}
}

func testLedger(t *testing.T, kind string) {
	ctx := context.Background()
	s := open(t, kind)
	enrol(t, s, "alice", 3_000)
	enrol(t, s, "bob", 3_000)
	u, err := s.UserByToken(ctx, hash("token-alice"))
	if err != nil || u.ID != "alice" || u.Budget != 3_000 {
		t.Fatalf("UserByToken = %+v, %v", u, err)
	}
	if _, err := s.UserByToken(ctx, hash("nobody")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}
	r1 := submit(t, s, sub("alice", "r1", "[1]", 1_000))
	if r1.Outcome != store.Stored || r1.Spent != 1_000 || r1.Report.SpentAfter != 1_000 {
		t.Fatalf("first report: %+v", r1)
	}
	// The same ID and content: the original, nothing charged.
	d := submit(t, s, sub("alice", "r1", "[1]", 1_000))
	if d.Outcome != store.Duplicate || d.Report.Seq != r1.Report.Seq || d.Spent != 1_000 {
		t.Fatalf("repeat: %+v", d)
	}
	// The same ID, other content: a conflict, nothing charged.
	c := submit(t, s, sub("alice", "r1", "[2]", 1_000))
	if c.Outcome != store.Conflict || c.Spent != 1_000 {
		t.Fatalf("conflict: %+v", c)
	}
	// Another user may use the same client ID.
	if b := submit(t, s, sub("bob", "r1", "[3]", 1_000)); b.Outcome != store.Stored {
		t.Fatalf("bob's r1: %+v", b)
	}
	submit(t, s, sub("alice", "r2", "[1]", 1_000))
	r3 := submit(t, s, sub("alice", "r3", "[1]", 1_000))
	if r3.Outcome != store.Stored || r3.Spent != 3_000 {
		t.Fatalf("third report: %+v", r3)
	}
	over := submit(t, s, sub("alice", "r4", "[1]", 1))
	if over.Outcome != store.OverBudget || over.Spent != 3_000 || over.Budget != 3_000 {
		t.Fatalf("over budget: %+v", over)
	}
	// At budget, a repeat is still answered with the original.
	if d := submit(t, s, sub("alice", "r2", "[1]", 1_000)); d.Outcome != store.Duplicate {
		t.Fatalf("repeat at budget: %+v", d)
	}
	if n := submit(t, s, sub("carol", "r1", "[1]", 1)); n.Outcome != store.NoUser {
		t.Fatalf("unknown user: %+v", n)
	}
	if _, err := s.Report(ctx, "alice", "r4"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused report stored: %v", err)
	}
	reps, err := s.Reports(ctx, "alice")
	if err != nil || len(reps) != 3 {
		t.Fatalf("alice's reports: %d, %v", len(reps), err)
	}
	for _, r := range reps {
		if r.User != "alice" {
			t.Fatalf("alice's list holds %s's report", r.User)
		}
	}
	u, err = s.User(ctx, "alice")
	if err != nil || u.Spent != 3_000 || u.Reports != 3 {
		t.Fatalf("alice = %+v, %v", u, err)
	}
	var seqs []int64
	last, err := s.ScanReports(ctx, 0, func(r store.Report) error { seqs = append(seqs, r.Seq); return nil })
	if err != nil || len(seqs) != 4 || last != seqs[3] {
		t.Fatalf("scan: %v %d %v", seqs, last, err)
	}
	for k := 1; k < len(seqs); k++ {
		if seqs[k] <= seqs[k-1] {
			t.Fatalf("scan out of order: %v", seqs)
		}
	}
	n := 0
	if _, err := s.ScanReports(ctx, seqs[1], func(store.Report) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("scan to seq %d: %d reports, %v", seqs[1], n, err)
	}
	st, err := s.Stats(ctx)
	if err != nil || st != (store.Stats{Users: 2, Reports: 4, Releases: 0, MaxSpent: 3_000}) {
		t.Fatalf("stats = %+v, %v", st, err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

func testRollback(t *testing.T, kind string) {
	ctx := context.Background()
	s := open(t, kind)
	enrol(t, s, "alice", 10_000)
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Submit(ctx, sub("alice", "a", "[1]", 1_000)); err != nil {
			return err
		}
		if err := tx.CreateUser(ctx, store.NewUser{ID: "dave", TokenHash: hash("d"), Budget: 1, CreatedMS: 1}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	if u, _ := s.User(ctx, "alice"); u.Spent != 0 || u.Reports != 0 {
		t.Fatalf("rolled-back charge kept: %+v", u)
	}
	if _, err := s.User(ctx, "dave"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rolled-back user kept: %v", err)
	}
	// A user ID or token hash used twice fails the transaction.
	enrol(t, s, "erin", 1)
	err = s.Update(ctx, func(tx store.Tx) error {
		return tx.CreateUser(ctx, store.NewUser{ID: "frank", TokenHash: hash("token-erin"), Budget: 1, CreatedMS: 1})
	})
	if err == nil {
		t.Fatal("a repeated token hash was accepted")
	}
}

func testPublish(t *testing.T, kind string) {
	ctx := context.Background()
	s := open(t, kind)
	enrol(t, s, "alice", 3_000)
	enrol(t, s, "bob", 3_000)
	submit(t, s, sub("alice", "a", "[1]", 2_000))
	if _, err := s.LatestRelease(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("latest before any: %v", err)
	}
	id, err := s.Publish(ctx, store.NewRelease{CreatedMS: 5, Method: "m", MaxSeq: 1, Doc: []byte(`{"x":1}`),
		Charges: []store.Charge{{User: "alice", Nano: 1_000}, {User: "bob", Nano: 1_000}},
		States:  []store.UserState{{User: "alice", State: []byte(`{"row":[1]}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.LatestRelease(ctx)
	if err != nil || r.ID != id || string(r.Doc) != `{"x":1}` || r.UsersCharged != 2 {
		t.Fatalf("latest = %+v, %v", r, err)
	}
	if st, err := s.UserState(ctx, id, "alice"); err != nil || string(st) != `{"row":[1]}` {
		t.Fatalf("alice's state = %s, %v", st, err)
	}
	if _, err := s.UserState(ctx, id, "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob's state: %v", err)
	}
	// Alice has 0 left: a release charging her anything is refused whole.
	_, err = s.Publish(ctx, store.NewRelease{CreatedMS: 6, Method: "m", Doc: []byte(`{}`),
		Charges: []store.Charge{{User: "bob", Nano: 1_000}, {User: "alice", Nano: 1}}})
	var ob *store.OverBudgetError
	if !errors.As(err, &ob) || ob.User != "alice" || ob.Spent != 3_000 {
		t.Fatalf("over-budget release: %v", err)
	}
	if u, _ := s.User(ctx, "bob"); u.Spent != 1_000 {
		t.Fatalf("refused release charged bob: %+v", u)
	}
	if r, _ := s.LatestRelease(ctx); r.ID != id {
		t.Fatalf("refused release stored: %+v", r)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// testConcurrent: many goroutines each commit reports for one user; the
// ledger ends exactly at the budget and is consistent.
func testConcurrent(t *testing.T, kind string) {
	ctx := context.Background()
	s := open(t, kind)
	enrol(t, s, "alice", 10_000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored := 0
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 4 {
				var res store.Result
				err := s.Update(ctx, func(tx store.Tx) error {
					var err error
					res, err = tx.Submit(ctx, sub("alice", fmt.Sprintf("g%d-%d", g, k), "[1]", 1_000))
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Outcome == store.Stored {
					mu.Lock()
					stored++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	u, _ := s.User(ctx, "alice")
	if stored != 10 || u.Spent != 10_000 || u.Reports != 10 {
		t.Fatalf("stored %d, ledger %+v; want 10 reports, 10 000 spent", stored, u)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNano(t *testing.T) {
	for _, c := range []struct {
		eps  float64
		want int64
	}{{0.1, 100_000_000}, {1, 1_000_000_000}, {1e-9, 1}, {1.0000000001, 1_000_000_001}, {0.3, 300_000_000}} {
		if got, err := store.ChargeNano(c.eps); err != nil || got != c.want {
			t.Errorf("ChargeNano(%v) = %d, %v; want %d", c.eps, got, err, c.want)
		}
	}
	// Ten charges of 0.1 fit a budget of 1 exactly.
	c, _ := store.ChargeNano(0.1)
	b, _ := store.BudgetNano(1)
	if 10*c != b {
		t.Fatalf("10 × %d ≠ %d", c, b)
	}
	for _, bad := range []float64{-1, 2e9} {
		if _, err := store.ChargeNano(bad); err == nil {
			t.Errorf("ChargeNano(%v) accepted", bad)
		}
	}
	if _, err := store.BudgetNano(0); err == nil {
		t.Error("BudgetNano(0) accepted")
	}
}

// testBatch: one batch decides its submissions in order — a repeat within
// the batch answers with the first, charges accumulate, the one past the
// budget is refused, an unknown user is reported — in one transaction.
func testBatch(t *testing.T, kind string) {
	ctx := context.Background()
	s := open(t, kind)
	enrol(t, s, "alice", 2_500)
	enrol(t, s, "bob", 10_000)
	submit(t, s, sub("bob", "old", "[0]", 1_000))
	batch := []store.Submission{
		sub("alice", "a1", "[1]", 1_000),
		sub("bob", "old", "[0]", 1_000),  // stored before: the original
		sub("alice", "a1", "[1]", 1_000), // repeat within the batch
		sub("alice", "a2", "[2]", 1_000),
		sub("alice", "a1", "[9]", 1_000), // same ID, other content
		sub("alice", "a3", "[3]", 1_000), // 3 000 > 2 500
		sub("zed", "z1", "[1]", 1),
		sub("bob", "b1", "[1]", 1_000),
	}
	var res []store.Result
	err := s.Update(ctx, func(tx store.Tx) error {
		var err error
		res, err = tx.SubmitBatch(ctx, batch)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Outcome{store.Stored, store.Duplicate, store.Duplicate, store.Stored, store.Conflict, store.OverBudget, store.NoUser, store.Stored}
	for k, r := range res {
		if r.Outcome != want[k] {
			t.Fatalf("submission %d: %v, want %v (%+v)", k, r.Outcome, want[k], r)
		}
	}
	if res[2].Report.Seq != res[0].Report.Seq || res[2].Report.SpentAfter != 1_000 {
		t.Fatalf("in-batch repeat %+v, first %+v", res[2].Report, res[0].Report)
	}
	if res[3].Report.SpentAfter != 2_000 || res[5].Spent != 2_000 || res[5].Budget != 2_500 {
		t.Fatalf("ledger order: %+v, %+v", res[3], res[5])
	}
	if res[1].Report.SpentAfter != 1_000 || res[7].Report.SpentAfter != 2_000 || res[1].Budget != 10_000 {
		t.Fatalf("bob: %+v, %+v", res[1], res[7])
	}
	for _, u := range []struct {
		id             string
		spent, reports int64
	}{{"alice", 2_000, 2}, {"bob", 2_000, 2}} {
		got, _ := s.User(ctx, u.id)
		if got.Spent != u.spent || got.Reports != u.reports {
			t.Fatalf("%s: %+v", u.id, got)
		}
	}
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
}
