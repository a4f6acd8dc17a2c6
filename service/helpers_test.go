package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

const adminToken = "test-admin-token-0123456789"

// catalogue returns n items "i01", … with titles.
func catalogue(t testing.TB, n int) *model.Catalogue {
	t.Helper()
	ids := make([]string, n)
	titles := make([]string, n)
	for j := range n {
		ids[j] = fmt.Sprintf("i%02d", j+1)
		titles[j] = fmt.Sprintf("Item %d", j+1)
	}
	c, err := model.NewCatalogue(ids, titles)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// localOptions is a local-DP collection over n items: randomized response
// on 1…5, ε = 0.5 per item (ε = n/2 per report), room for two reports.
func localOptions(t testing.TB, n int) service.Options {
	return service.Options{Catalogue: catalogue(t, n), Mechanism: "rr", Epsilon: float64(n) / 2, Budget: float64(n),
		Scale: model.Range{Min: 1, Max: 5}, AdminToken: adminToken, Rate: 1e6, Burst: 1 << 20, EnrollRate: 1e6, EnrollBurst: 1 << 20,
		Log: testLogger()}
}

func testLogger() *slog.Logger {
	if os.Getenv("PRIVREC_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// testServer is a server on a fresh database of one kind.
type testServer struct {
	srv *service.Server
	ts  *httptest.Server
	st  store.Store
	url string // database URL
}

func newTestServer(t testing.TB, kind string, opt service.Options) *testServer {
	t.Helper()
	url := storetest.URL(t, kind)
	return startOn(t, url, opt)
}

func startOn(t testing.TB, url string, opt service.Options) *testServer {
	t.Helper()
	st, err := store.Create(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	s := serveStore(t, st, opt)
	s.url = url
	return s
}

// serveStore is a server over st (which it closes at the end).
func serveStore(t testing.TB, st store.Store, opt service.Options) *testServer {
	t.Helper()
	srv, err := service.New(context.Background(), st, opt)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		st.Close()
	})
	return &testServer{srv: srv, ts: ts, st: st}
}

func (s *testServer) client(token string) *client.Client {
	c := client.New(s.ts.URL, token)
	c.HTTP = s.ts.Client()
	return c
}

// population is synthetic ground truth: users' ratings on 1…5 of a
// rank-2 taste model plus item quality; each user rates each item with
// probability density.
type population struct {
	truth [][]float64 // users × items, every cell (for checking)
	rated []client.Ratings
}

func synthPopulation(users, items int, density float64, seed uint64) population {
	r := rand.New(rand.NewPCG(seed, 7))
	q := make([]float64, items)
	v := make([][2]float64, items)
	for j := range items {
		q[j] = 3 * (r.Float64() - 0.5)
		v[j] = [2]float64{r.NormFloat64(), r.NormFloat64()}
	}
	var p population
	for range users {
		u := [2]float64{r.NormFloat64(), r.NormFloat64()}
		row := make([]float64, items)
		rt := client.Ratings{}
		for j := range items {
			x := 3 + q[j] + 0.7*(u[0]*v[j][0]+u[1]*v[j][1])
			row[j] = math.Min(5, math.Max(1, math.Round(x)))
			if r.Float64() < density {
				rt[fmt.Sprintf("i%02d", j+1)] = row[j]
			}
		}
		p.truth = append(p.truth, row)
		p.rated = append(p.rated, rt)
	}
	return p
}
