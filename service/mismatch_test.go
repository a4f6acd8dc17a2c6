package service_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// TestMismatchNamesSetting: a restart with one setting changed is
// refused naming exactly that setting and no other (adding one item used
// to blame --epsilon, since the per-item ε follows from the catalogue's
// size).
func TestMismatchNamesSetting(t *testing.T) {
	ctx := context.Background()
	st, err := store.Create(ctx, storetest.URL(t, "sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	base := func() service.Options {
		o := localOptions(t, 8)
		o.Epsilon, o.Budget = 4, 8
		return o
	}
	srv, err := service.New(ctx, st, base())
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	ids := catalogue(t, 8).IDs()
	withItems := func(list []string) func(*service.Options) {
		return func(o *service.Options) {
			c, err := model.NewCatalogue(list, nil)
			if err != nil {
				t.Fatal(err)
			}
			o.Catalogue = c
		}
	}
	swapped := slices.Clone(ids)
	swapped[2], swapped[3] = swapped[3], swapped[2]
	flags := []string{"--mechanism", "--epsilon", "--mean-epsilon", "--budget ", "--scale", "--levels", "--items", "--period", "--budget-delta"}
	for _, c := range []struct {
		name string
		edit func(*service.Options)
		flag string
		want string
	}{
		{"one item added", withItems(append(slices.Clone(ids), "i09")), "--items", "--items adds 1 item (i09) after the recorded ones: to add them as a new collection version, start once with --add-items"},
		{"one item removed", withItems(ids[:7]), "--items", "--items lacks 1 item (i08)"},
		{"one item renamed", withItems(append(slices.Clone(ids[:7]), "x")), "--items", "--items adds 1 item (x); --items lacks 1 item (i08)"},
		{"two items swapped", withItems(swapped), "--items", `another order (line 3 is "i04", the database's item 3 is "i03"`},
		{"epsilon", func(o *service.Options) { o.Epsilon = 2 }, "--epsilon", "--epsilon 2 (the database holds 4)"},
		{"budget", func(o *service.Options) { o.Budget = 12 }, "--budget ", "--budget 12 (the database holds 8)"},
		{"mean epsilon", func(o *service.Options) { o.MeanEpsilon = 0.5 }, "--mean-epsilon", "--mean-epsilon 0.5 (the database holds 0: its reports carry no mean report"},
		{"scale", func(o *service.Options) { o.Scale = model.Range{Min: 1, Max: 10} }, "--scale", "--scale 1:10 (the database holds 1:5)"},
		{"mechanism", func(o *service.Options) { o.Mechanism = "laplace" }, "--mechanism", "--mechanism laplace (the database holds rr)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := base()
			c.edit(&o)
			_, err := service.New(ctx, st, o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant it to say %q", err, c.want)
			}
			for _, f := range flags {
				if f != c.flag && strings.Contains(err.Error(), f) {
					t.Errorf("the refusal also blames %s: %v", f, err)
				}
			}
		})
	}
}
