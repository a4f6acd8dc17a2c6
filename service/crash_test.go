package service_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/internal/testtier"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// The crash test runs the server as a separate process: this test binary
// re-executed with PRIVREC_SERVE_CHILD set (TestMain), so that it can be
// killed with SIGKILL mid-write.
const (
	envChild     = "PRIVREC_SERVE_CHILD"
	envChildDB   = "PRIVREC_SERVE_CHILD_DB"
	envChildAddr = "PRIVREC_SERVE_CHILD_ADDR"
	// envChildCreate: create the collection (the first start).
	envChildCreate = "PRIVREC_SERVE_CHILD_CREATE"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// childOptions is the collection of the child server: 8 items, ε = 1 per
// report, budget 10⁶ (the ledger never refuses in the crash test).
func childOptions() (service.Options, error) {
	ids := make([]string, 8)
	for j := range ids {
		ids[j] = fmt.Sprintf("i%02d", j+1)
	}
	cat, err := model.NewCatalogue(ids, nil)
	if err != nil {
		return service.Options{}, err
	}
	return service.Options{Catalogue: cat, Mechanism: "rr", Epsilon: 1, Budget: 1e6, Scale: model.Range{Min: 1, Max: 5},
		AdminToken: adminToken, Rate: 1e6, Burst: 1 << 20, EnrollRate: 1e6, EnrollBurst: 1 << 20}, nil
}

// runChild serves until SIGTERM/SIGINT, writing its address to the file
// named by PRIVREC_SERVE_CHILD_ADDR once it listens.
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 1 }
	open := store.Open
	if os.Getenv(envChildCreate) != "" {
		open = store.Create
	}
	st, err := open(ctx, os.Getenv(envChildDB))
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	opt, err := childOptions()
	if err != nil {
		return fail(err)
	}
	srv, err := service.New(ctx, st, opt)
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	path := os.Getenv(envChildAddr)
	if err := os.WriteFile(path+".tmp", []byte(ln.Addr().String()), 0o600); err != nil {
		return fail(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fail(err)
	}
	if err := service.Serve(ctx, srv, ln, 10*time.Second); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(err)
	}
	return 0
}

// child is a running server process.
type child struct {
	cmd  *exec.Cmd
	addr string
	done chan error
}

func startChild(t *testing.T, dbURL string, create bool) *child {
	t.Helper()
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addr")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", envChildDB+"="+dbURL, envChildAddr+"="+addrFile)
	if create {
		cmd.Env = append(cmd.Env, envChildCreate+"=1")
	}
	logf, err := os.Create(filepath.Join(dir, "child.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait(); logf.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(addrFile)
		if err == nil {
			c.addr = "http://" + string(b)
			return c
		}
		select {
		case err := <-c.done:
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("the server process exited: %v\n%s", err, log)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.cmd.Process.Kill()
			t.Fatal("the server process did not start")
		}
	}
}

func (c *child) client(token string) *client.Client {
	cl := client.New(c.addr, token)
	cl.HTTP = &http.Client{Timeout: 10 * time.Second}
	return cl
}

// TestCrash kills the server with SIGKILL while 64 clients submit
// reports, restarts it on the same database, and checks that every
// acknowledged report is stored and charged exactly once — a report in
// flight at the kill is stored with its charge or not at all, and
// resubmitting any report stores and charges nothing more. Ten rounds
// on each database (crashRounds, crashClients); every restart is stopped
// with SIGTERM and must exit cleanly. Then the damaged-database rounds.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test runs in the full go test (not -short)")
	}
	rounds := crashRounds
	if testtier.Quick() {
		rounds = min(rounds, 2) // every round in the long tier
	}
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			url := storetest.URL(t, kind)
			for round := range rounds {
				crashRound(t, url, round)
			}
			damagedRounds(t, kind, url)
		})
	}
}

// damagedRounds start the server on a wrong or damaged database: each
// start must be refused, exiting with an error that says what is wrong,
// and create nothing. SQLite: an empty file, a mistyped path, and the
// crash rounds' database with 20 pages of garbage in its middle;
// PostgreSQL: a schema without a collection.
func damagedRounds(t *testing.T, kind, url string) {
	dir := t.TempDir()
	type round struct {
		name, url, want string
	}
	var rounds []round
	switch kind {
	case "sqlite":
		empty := filepath.Join(dir, "empty.db")
		if err := os.WriteFile(empty, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		damaged := filepath.Join(dir, "damaged.db")
		b, err := os.ReadFile(strings.TrimPrefix(url, "sqlite:"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(damaged, b, 0o600); err != nil {
			t.Fatal(err)
		}
		pages := len(b) / 4096
		if pages < 24 {
			t.Fatalf("the crash rounds' database has %d pages, too few to damage 20 in the middle", pages)
		}
		if err := storetest.CorruptPages(damaged, pages/2-10, 20); err != nil {
			t.Fatal(err)
		}
		rounds = []round{
			{"empty file", "sqlite:" + empty, "is an empty file (0 bytes)"},
			{"wrong path", "sqlite:" + filepath.Join(dir, "privrec-typo.db"), "there is no file"},
			{"garbage pages", "sqlite:" + damaged, "the database is damaged"},
		}
	case "postgres":
		rounds = []round{{"schema without a collection", storetest.URL(t, kind), "has none of privrec's tables"}}
	}
	for _, r := range rounds {
		log := startChildRefused(t, r.url)
		if !strings.Contains(log, r.want) {
			t.Errorf("%s: the refusal does not say %q:\n%s", r.name, r.want, log)
		}
		if r.name == "wrong path" {
			if _, err := os.Stat(strings.TrimPrefix(r.url, "sqlite:")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused start on a wrong path created a file: %v", err)
			}
		}
		t.Logf("%s %s: refused to start: %s", kind, r.name, strings.TrimSpace(log))
	}
}

// startChildRefused starts the server on url and expects it to exit with
// an error without ever listening; it returns what the process printed.
func startChildRefused(t *testing.T, url string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", envChildDB+"="+url, envChildAddr+"="+filepath.Join(dir, "addr"))
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the server on %s neither started nor refused within 30 s", url)
	}
	if err == nil {
		t.Fatalf("the server on %s exited 0; want a refusal\n%s", url, out)
	}
	if _, serr := os.Stat(filepath.Join(dir, "addr")); serr == nil {
		t.Fatalf("the server on %s listened; want a refusal", url)
	}
	return string(out)
}

const crashRounds, crashClients = 10, 64

type sent struct {
	token, id string
	rep       api.Report
	ack       *api.Ack // nil: no acknowledgement received
}

func crashRound(t *testing.T, url string, round int) {
	ctx := context.Background()
	c := startChild(t, url, round == 0)
	const users, submitters = crashClients, crashClients
	tokens := make([]string, users)
	enrolErrs := make(chan error, users)
	for u := range tokens {
		go func() {
			e, err := c.client("").Enroll(ctx)
			tokens[u] = e.Token
			enrolErrs <- err
		}()
	}
	for range tokens {
		if err := <-enrolErrs; err != nil {
			t.Fatal(err)
		}
	}
	// Submit until killed.
	var mu sync.Mutex
	var all []*sent
	acked := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c.client(tokens[g%users])
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				s := &sent{token: cl.Token, id: fmt.Sprintf("round%d-g%d-%d", round, g, k)}
				s.rep = api.Report{ID: s.id, Epsilon: 1, Values: make([]*float64, 8)}
				mu.Lock()
				all = append(all, s)
				mu.Unlock()
				ack, _, err := cl.Submit(ctx, s.rep)
				if err != nil {
					return // the server died
				}
				mu.Lock()
				s.ack = &ack
				acked++
				mu.Unlock()
			}
		}()
	}
	// Kill after at least 100 acknowledgements (and ≥ 200 ms of load),
	// plus a random 0–20 ms so that the kill lands anywhere in the commit
	// cycle: mid-batch, mid-fsync, between commit and acknowledgement. The
	// test must pass wherever it lands (no false failures).
	jitter := time.Duration(rand.IntN(20_000)) * time.Microsecond
	start := time.Now()
	for {
		mu.Lock()
		n := acked
		mu.Unlock()
		if n >= 100 && time.Since(start) > 200*time.Millisecond {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("only %d acknowledgements in 20 s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(jitter)
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.done
	close(stop)
	wg.Wait()
	// Restart on the same database.
	c = startChild(t, url, false)
	defer func() {
		// Graceful stop: SIGTERM, clean exit.
		c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-c.done:
			if err != nil {
				t.Errorf("after SIGTERM the server exited with %v", err)
			}
		case <-time.After(20 * time.Second):
			c.cmd.Process.Kill()
			t.Error("the server did not stop within 20 s of SIGTERM")
		}
	}()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Every acknowledged report is there with its acknowledged seq.
	nack, inflight := 0, 0
	stored := map[string]map[string]store.Report{} // token → client ID → report
	for _, s := range all {
		if s.ack == nil {
			inflight++
			continue
		}
		nack++
		if stored[s.token] == nil {
			u, err := st.UserByToken(ctx, hashToken(s.token))
			if err != nil {
				t.Fatal(err)
			}
			reps, err := st.Reports(ctx, u.ID)
			if err != nil {
				t.Fatal(err)
			}
			stored[s.token] = map[string]store.Report{}
			for _, r := range reps {
				stored[s.token][r.ClientID] = r
			}
		}
		r, ok := stored[s.token][s.id]
		if !ok {
			t.Fatalf("acknowledged report %s (seq %d) lost after kill -9", s.id, s.ack.Seq)
		}
		if r.Seq != s.ack.Seq || r.SpentAfter != int64(s.ack.Spent*store.Nano) {
			t.Fatalf("report %s stored as seq %d spent %d, acknowledged as seq %d spent %g", s.id, r.Seq, r.SpentAfter, s.ack.Seq, s.ack.Spent)
		}
	}
	// Every ledger equals its reports' charges (charged exactly once).
	if err := st.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// Resubmitting everything — acknowledged or in flight — stores and
	// charges nothing twice: an acknowledged one returns its original
	// acknowledgement.
	// One goroutine per user, in her submission order.
	before, _ := st.Stats(ctx)
	byUser := map[string][]*sent{}
	for _, s := range all {
		byUser[s.token] = append(byUser[s.token], s)
	}
	var fresh atomic.Int64
	errs := make(chan error, len(byUser))
	for tok, list := range byUser {
		go func() {
			cl := c.client(tok)
			for _, s := range list {
				ack, replayed, err := cl.SubmitRetry(ctx, s.rep, 5)
				if err != nil {
					errs <- err
					return
				}
				if s.ack != nil && (!replayed || ack != *s.ack) {
					errs <- fmt.Errorf("resubmitted %s: %+v replayed=%v, original %+v", s.id, ack, replayed, *s.ack)
					return
				}
				if !replayed {
					fresh.Add(1)
				}
			}
			errs <- nil
		}()
	}
	for range byUser {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	after, _ := st.Stats(ctx)
	if after.Reports != before.Reports+fresh.Load() {
		t.Fatalf("resubmission stored %d reports, %d were new", after.Reports-before.Reports, fresh.Load())
	}
	if err := st.Check(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s round %d: SIGKILL after %d acknowledged reports, all present and charged once; of the %d in flight, %d had committed without their acknowledgement (resubmitted: answered as replays, not charged again) and %d had not (stored once on resubmission); ledgers exact",
		st.Kind(), round, nack, inflight, inflight-int(fresh.Load()), fresh.Load())
}

func hashToken(tok string) []byte {
	return service.TokenHash(tok)
}
