package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// centralStore makes a central-mode `privrec serve` database of the kind
// (sqlite, or postgres when PRIVREC_TEST_POSTGRES is set; skipped
// otherwise) holding users' reports over a catalogue of items: each user
// sends one to three reports, each with some items null, later reports
// re-rating some items (the latest rating wins), and one user sends only
// nulls; bad, when not empty, is stored as one more report's values. It
// returns the URL, the catalogue file and the catalogue.
func centralStore(t *testing.T, kind string, users, items int, bad string) (url, catFile string, ids []string) {
	t.Helper()
	url = storetest.URL(t, kind)
	catFile, ids = fillCentral(t, url, users, items, bad)
	return url, catFile, ids
}

// fillCentral creates the database at url and fills it (centralStore).
func fillCentral(t *testing.T, url string, users, items int, bad string) (catFile string, ids []string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Create(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for j := range items {
		ids = append(ids, fmt.Sprintf("m%d", j))
	}
	raw, err := json.Marshal(service.Identity{Mode: api.ModeCentral, Mechanism: api.MechanismNone, Budget: 8,
		Scale: api.Scale{Min: 1, Max: 5, Levels: 5}, Units: "rating", Items: ids, LedgerUnit: api.UnitRho, BudgetDelta: 1e-6, BudgetRho: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Init(ctx, raw); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	err = st.Update(ctx, func(tx store.Tx) error {
		report := func(u, k int, vals []byte) error {
			_, err := tx.Submit(ctx, store.Submission{User: fmt.Sprintf("u%d", u), ClientID: fmt.Sprintf("c%d-%d", u, k),
				BodyHash: []byte{byte(u), byte(k)}, Values: vals, Received: int64(1000 + k)})
			return err
		}
		for u := range users + 1 {
			if err := tx.CreateUser(ctx, store.NewUser{ID: fmt.Sprintf("u%d", u), TokenHash: []byte(fmt.Sprintf("h%d", u)), Budget: 1e12}); err != nil {
				return err
			}
			for k := range 1 + r.IntN(3) {
				vals := make([]*float64, items)
				for j := range vals {
					if u < users && r.IntN(3) == 0 {
						v := float64(1 + r.IntN(5))
						vals[j] = &v
					}
				}
				b, _ := json.Marshal(vals)
				if err := report(u, k, b); err != nil {
					return err
				}
			}
		}
		if bad != "" {
			return report(0, 9, []byte(bad))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	catFile = filepath.Join(t.TempDir(), "items.txt")
	if err := os.WriteFile(catFile, []byte(strings.Join(ids, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return catFile, ids
}

// TestMakeCentralDB makes, for a by-hand comparison of the two commands
// (docs/BEAM.md), a central-mode database at PRIVREC_BEAM_MAKE_DB (a new
// sqlite:FILE or an empty PostgreSQL schema) with 3 000 users over 300
// items, and writes its catalogue to PRIVREC_BEAM_MAKE_DB_ITEMS. It
// skips without the variables.
func TestMakeCentralDB(t *testing.T) {
	url, items := os.Getenv("PRIVREC_BEAM_MAKE_DB"), os.Getenv("PRIVREC_BEAM_MAKE_DB_ITEMS")
	if url == "" || items == "" {
		t.Skip("set PRIVREC_BEAM_MAKE_DB and PRIVREC_BEAM_MAKE_DB_ITEMS to make a database")
	}
	_, ids := fillCentral(t, url, 3000, 300, "")
	if err := os.WriteFile(items, []byte(strings.Join(ids, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// storedMatrix is what `privrec train --data URL` trains on in central
// mode: each user's latest rating of each item (service.RatingsMatrix).
func storedMatrix(t *testing.T, url string) *ratings.Matrix {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg, err := service.StoredConfig(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	m, _, _, err := service.RatingsMatrix(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBeamStoreMatchesTrain: the pipelines reading a central-mode
// database's reports table through databaseio make the release `privrec
// train --data URL` makes from it (its in-process read,
// service.RatingsMatrix): the same draws, pre-noise sums to 1e-9, the
// same model file. On SQLite always, on PostgreSQL when
// PRIVREC_TEST_POSTGRES is set (skipped, saying so, otherwise).
// Deterministic: fixed data and seeds.
func TestBeamStoreMatchesTrain(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			url, cat, ids := centralStore(t, kind, 150, 20, "")
			for _, method := range []string{"dp-popularity", "dp-bias"} {
				t.Run(method, func(t *testing.T) {
					want, wantDraws := trainOn(t, method, nil, cat, func() *ratings.Matrix { return storedMatrix(t, url) }, nil, nil)
					got, gotDraws := trainOn(t, method, nil, cat, nil, &Config{Store: url, StoreItems: ids}, nil)
					sameRelease(t, want, got, wantDraws, gotDraws)
				})
			}
		})
	}
}

// TestBeamStoreRefusesBadRows: a report whose stored values cannot be
// read reaches the error output with the database and its seq, and the
// run fails naming the count, before any noise is drawn.
func TestBeamStoreRefusesBadRows(t *testing.T) {
	url, cat, ids := centralStore(t, "sqlite", 20, 5, "[1, 2")
	c, err := model.LoadCatalogue(cat)
	if err != nil {
		t.Fatal(err)
	}
	drew := false
	env := methods.Env{Epsilon: 1, Delta: 1e-6, Noise: noise.Seeded(1), Rand: noise.Seeded(1),
		Tap:    func(mechanism.Draw) error { drew = true; return nil },
		Engine: Config{Store: url, StoreItems: ids, WorkDir: t.TempDir(), Run: runPrism}.Factory(nil)}
	meth, _ := methods.Lookup("dp-popularity")
	_, err = methods.Train(context.Background(), "dp-popularity", meth.New(), release.Input{Declared: release.Declared{Catalogue: c}}, env)
	var re *RefusedError
	if !errors.As(err, &re) || re.N != 1 || drew {
		t.Fatalf("err %v (want 1 row refused), noise drawn: %v", err, drew)
	}
	list, err := os.ReadFile(re.List)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(list), url+": reports seq ") || !strings.Contains(string(list), `user "u0"`) {
		t.Errorf("the error output does not name the database and the row:\n%s", list)
	}
}
