package service_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// parallel runs f(0…n−1) on w goroutines and returns the first error.
func parallel(w, n int, f func(i int) error) error {
	var wg sync.WaitGroup
	next := make(chan int)
	errc := make(chan error, n)
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					errc <- fmt.Errorf("item %d: %w", i, err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errc)
	return <-errc
}

// TestEndToEnd: 1 000 simulated clients enrol, randomize their ratings on
// the device (cells and her mean report) and submit; the collect file the
// server trains on carries every report's mean; the admin trains ldp-rr on
// the stored reports and publishes the release; every client computes her
// own top-10 from the public part and her own ratings. On both databases.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("the 1 000-client end-to-end test runs in the full go test (not -short)")
	}
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) { testEndToEnd(t, kind, 1000) })
	}
}

func testEndToEnd(t *testing.T, kind string, users int) {
	const items = 40
	ctx := context.Background()
	// ε = 40 per report: 5 (the default eighth) for the mean report, the
	// rest over the 40 items (per-item ε = 0.875); room for two reports
	// per user.
	opt := localOptions(t, items)
	opt.Epsilon, opt.Budget = items, 2*items
	opt.MeanEpsilon = service.DefaultMeanEpsilon(opt.Epsilon)
	s := newTestServer(t, kind, opt)
	pop := synthPopulation(users, items, 0.5, 1)
	cfg, err := s.client("").Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != api.ModeLocal || cfg.ReportEpsilon != items || cfg.MeanEpsilon != 5 || cfg.CellEpsilon > 0.875 || cfg.MaxReports != 2 {
		t.Fatalf("configuration %+v", cfg)
	}
	// A report without its mean report is refused, naming the field, and
	// stores and charges nothing.
	if code, e, _ := raw(t, s, "POST", api.PathReports, enrolled(t, s).Token, reportBody("no-mean", items, "["+strings.TrimSuffix(strings.Repeat("null,", items), ",")+"]")); code != 400 || e.Field != "mean" || e.Code != api.CodeMissingField {
		t.Fatalf("a report without a mean: %d %+v", code, e)
	}
	start := time.Now()
	tokens := make([]string, users)
	var mu sync.Mutex
	sentMean := map[int64]float64{} // seq → the mean report the client sent
	err = parallel(32, users, func(u int) error {
		c := s.client("")
		if _, err := c.Enroll(ctx); err != nil {
			return err
		}
		tokens[u] = c.Token
		rep, _, err := client.Randomize(cfg, pop.rated[u], noise.Secure(), client.NewReportID())
		if err != nil {
			return err
		}
		if rep.Mean == nil {
			return fmt.Errorf("the device sent no mean report")
		}
		ack, replayed, err := c.Submit(ctx, rep)
		if err != nil {
			return err
		}
		if !ack.Accepted || replayed || ack.Spent != cfg.ReportEpsilon || ack.Remaining != cfg.Budget-cfg.ReportEpsilon {
			return fmt.Errorf("ack %+v", ack)
		}
		mu.Lock()
		sentMean[ack.Seq] = *rep.Mean
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	collect := time.Since(start)
	checkCollectMeans(t, s, sentMean, pop)
	start = time.Now()
	res, err := s.client(adminToken).Publish(ctx, api.ReleaseRequest{Method: "ldp-rr", Params: map[string]any{"max_rank": 5, "max_iter": 100}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	train := time.Since(start)
	if res.UsersCharged != 0 || res.Reports != int64(users) {
		t.Fatalf("release result: %d users charged, %d reports", res.UsersCharged, res.Reports)
	}
	rel, err := s.client("").LatestRelease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rel.ID != res.ID || rel.Guarantee.Epsilon != cfg.Budget || len(rel.Model.Items) == 0 {
		t.Fatalf("latest release %d (published %d), guarantee %+v", rel.ID, res.ID, rel.Guarantee)
	}
	// The release states what one report's ε is made of: the cells and
	// the mean report.
	if !strings.Contains(rel.Guarantee.Note, "her mean report at ε = 5") {
		t.Fatalf("the release's guarantee does not state the mean report: %s", rel.Guarantee.Note)
	}
	// Every client's own top-10, computed from the public part and her own
	// ratings; the gain is the mean true rating of her top-10 minus the
	// mean true rating of the items she has not rated.
	start = time.Now()
	var gain float64
	for u := range users {
		recs, err := client.Recommend(rel, pop.rated[u], 10)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(10, items-len(pop.rated[u])); len(recs) != want {
			t.Fatalf("user %d: %d recommendations, want %d", u, len(recs), want)
		}
		var top, all float64
		var nall int
		for _, r := range recs {
			if _, rated := pop.rated[u][r.Item]; rated {
				t.Fatalf("user %d: recommended %s, which she rated", u, r.Item)
			}
			var j int
			fmt.Sscanf(r.Item, "i%d", &j)
			top += pop.truth[u][j-1]
		}
		for j := range items {
			if _, rated := pop.rated[u][fmt.Sprintf("i%02d", j+1)]; !rated {
				all += pop.truth[u][j]
				nall++
			}
		}
		gain += top/float64(len(recs)) - all/float64(nall)
	}
	gain /= float64(users)
	recommend := time.Since(start)
	t.Logf("%s: %d clients enrolled, randomized and submitted in %v; ldp-rr trained and published in %v; %d top-10s computed on the clients in %v; mean true rating of the top-10 minus that of unrated items: %+.3f",
		kind, users, collect.Round(time.Millisecond), train.Round(time.Millisecond), users, recommend.Round(time.Millisecond), gain)
	// A randomized test (crypto/rand noise in the reports): over 12 runs
	// the gain was 0.63 ± 0.07 (mean ± sd, range 0.50–0.74); the
	// threshold 0.25 is > 5 sd below the mean, a false-failure rate below
	// 10⁻⁶ under a normal approximation. A broken pipeline (ties, wrong
	// item order, lost signal) gives ≈ 0 or less.
	if gain < 0.25 {
		t.Errorf("the top-10 is no better than the unrated items (gain %+.3f)", gain)
	}
	st, err := s.st.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	charge, _ := store.ChargeNano(cfg.ReportEpsilon)
	if st.Users != int64(users)+1 || st.Reports != int64(users) || st.Releases != 1 || st.MaxSpent != charge {
		t.Fatalf("stats %+v", st)
	}
	if err := s.st.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// Every client's ledger says one report, ε spent.
	for _, u := range []int{0, users / 2, users - 1} {
		stt, err := s.client(tokens[u]).Status(ctx)
		if err != nil || stt.Reports != 1 || stt.Spent != cfg.ReportEpsilon {
			t.Fatalf("status of client %d: %+v, %v", u, stt, err)
		}
	}
	// The public part holds no user.
	if slices.ContainsFunc(rel.Model.Items, func(s string) bool { return len(s) > 1 && s[0] == 'r' }) {
		t.Fatal("a report row leaked into the public items")
	}
}

// checkCollectMeans writes the stored reports as the collect file the
// server trains on and reads it back with the ldp package's reader: the
// header declares the mean report's ε and every report has exactly one
// mean line, the one its client sent (sent: seq → mean); and the
// average of the mean reports is near the population's true average (each
// client's mean of her own ratings), which it could not be if the devices
// sent anything else.
func checkCollectMeans(t *testing.T, s *testServer, sent map[int64]float64, pop population) {
	t.Helper()
	ctx := context.Background()
	cfg := s.srv.Config()
	reps, err := service.ReadLocalReports(ctx, s.st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "reports.collect.tsv")
	if err := service.WriteCollectFile(path, cfg, reps); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := ldp.ReadCollection(f)
	if err != nil {
		t.Fatalf("the collect file the server writes: %v", err)
	}
	if c.Header.MeanEpsilon != cfg.MeanEpsilon || c.Header.Users != len(sent) || len(c.Means) != len(sent) {
		t.Fatalf("collect file: header %+v, %d mean reports, %d reports sent", c.Header, len(c.Means), len(sent))
	}
	var avg float64
	for seq, m := range sent {
		got, ok := c.Means["r"+strconv.FormatInt(seq, 10)]
		if !ok || math.Abs(got-m) > 1e-6 {
			t.Fatalf("report %d: mean line %g (present %v), the client sent %g", seq, got, ok, m)
		}
		avg += got
	}
	avg /= float64(len(sent))
	var truth float64
	for _, r := range pop.rated {
		var sum float64
		for _, v := range r {
			sum += v
		}
		if len(r) == 0 {
			truth += (cfg.Scale.Min + cfg.Scale.Max) / 2
		} else {
			truth += sum / float64(len(r))
		}
	}
	truth /= float64(len(pop.rated))
	// Each mean report's noise is Laplace of effective scale ≈ (5 − 1)/ε_mean
	// (sd √2·b); the average's sd is that over √clients. 8 sd: a false
	// failure below 10⁻¹⁰ (the average of 1 000 is near normal).
	b := (cfg.Scale.Max - cfg.Scale.Min) / cfg.MeanEpsilon
	if sd := math.Sqrt2 * b / math.Sqrt(float64(len(sent))); math.Abs(avg-truth) > 8*sd+1e-3 {
		t.Fatalf("the mean reports average %.4f, the clients' true means %.4f (sd of the average %.4f)", avg, truth, sd)
	}
}

// TestLaplace: the modified Laplace mechanism end to end (200 clients):
// normalised reports within the published bound, each with its mean
// report, which the collect file carries; ldp-laplace trained on them,
// recommendations from the public part.
func TestLaplace(t *testing.T) {
	const items, users = 12, 200
	ctx := context.Background()
	opt := localOptions(t, items)
	opt.Mechanism, opt.Epsilon, opt.Budget, opt.MeanEpsilon = "laplace", 12, 12, 1.5
	s := newTestServer(t, "sqlite", opt)
	cfg, err := s.client("").Config(ctx)
	if err != nil || cfg.Units != "normalised" || !(cfg.MaxAbsValue > 1) || cfg.MeanEpsilon != 1.5 || !(cfg.MaxAbsMean > 5) {
		t.Fatalf("configuration %+v, %v", cfg, err)
	}
	dev, err := client.NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pop := synthPopulation(users, items, 0.5, 9)
	var mu sync.Mutex
	sentMean := map[int64]float64{}
	err = parallel(16, users, func(u int) error {
		c := s.client("")
		if _, err := c.Enroll(ctx); err != nil {
			return err
		}
		rep, _, err := dev.Randomize(pop.rated[u], noise.Secure(), client.NewReportID())
		if err != nil {
			return err
		}
		if rep.Mean == nil {
			return fmt.Errorf("the device sent no mean report")
		}
		ack, _, err := c.Submit(ctx, rep)
		if err != nil {
			return err
		}
		mu.Lock()
		sentMean[ack.Seq] = *rep.Mean
		mu.Unlock()
		// She sees her stored report as sent, mean included.
		if u == 0 {
			got, err := c.Report(ctx, rep.ID)
			if err != nil {
				return err
			}
			if got.Mean == nil || *got.Mean != *rep.Mean {
				return fmt.Errorf("her stored report's mean %v, sent %g", got.Mean, *rep.Mean)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkCollectMeans(t, s, sentMean, pop)
	if _, err := s.client(adminToken).Publish(ctx, api.ReleaseRequest{Method: "ldp-laplace", Params: map[string]any{"max_rank": 3, "max_iter": 50}, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	rel, err := s.client("").LatestRelease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := client.Recommend(rel, pop.rated[0], 3)
	if err != nil || len(recs) == 0 {
		t.Fatalf("recommendations %v, %v", recs, err)
	}
	if err := s.st.Check(ctx); err != nil {
		t.Fatal(err)
	}
}
