package experiment

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/transform"
)

// Split is one run's data: the training ratings, the held-out test ratings
// and, for synthetic data, the full true matrix (for ARE); and the public
// facts of the source a deployment would declare.
type Split struct {
	Train, Test, Truth *ratings.Matrix
	// Held, with protocol "users", are the held-out users (Test is nil).
	Held *transform.UserSplit
	// Scale is the rating scale the source's ratings lie in, when the
	// source knows it (a generator's, or the file dataset's declared
	// scale after any rescaling); nil: undeclared.
	Scale *release.Scale
	// Items is the source's full item list before splitting (train and
	// test items), declared as the catalogue; nil: the items of Train,
	// Test and Truth.
	Items []string
	// Users is the number of users of the source, declared as the
	// population; 0: the users of Train, Test and Truth.
	Users int
}

// Generator makes one run's data for a dataset spec. It must be
// deterministic in seed. d.Params already holds the swept value (for a
// sweep with target "data"); dataDir resolves relative file names.
type Generator func(ctx context.Context, d DataSpec, seed uint64, dataDir string) (*Split, error)

var (
	genMu      sync.Mutex
	generators = map[string]Generator{}
)

// RegisterGenerator makes a data source available to configs by name
// ("source": name). It panics on a duplicate name (a programming error).
func RegisterGenerator(name string, g Generator) {
	genMu.Lock()
	defer genMu.Unlock()
	if _, dup := generators[name]; dup || name == "file" {
		panic("experiment: duplicate generator " + name)
	}
	generators[name] = g
}

// Generators lists the registered data sources (besides "file").
func Generators() []string {
	genMu.Lock()
	defer genMu.Unlock()
	out := make([]string, 0, len(generators))
	for n := range generators {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func generator(name string) (Generator, error) {
	if name == "file" {
		return fileSource, nil
	}
	genMu.Lock()
	defer genMu.Unlock()
	g, ok := generators[name]
	if !ok {
		return nil, fmt.Errorf("unknown data source %q (known: file, %v)", name, Generators())
	}
	return g, nil
}

// param returns a generator parameter or its default.
func (d DataSpec) param(name string, def float64) float64 {
	if v, ok := d.Params[name]; ok {
		return v
	}
	return def
}

// str returns a generator string option or its default.
func (d DataSpec) str(name, def string) string {
	if v, ok := d.Strings[name]; ok && v != "" {
		return v
	}
	return def
}

// withParam returns a copy of d with one parameter set.
func (d DataSpec) withParam(name string, v float64) DataSpec {
	p := make(map[string]float64, len(d.Params)+1)
	for k, x := range d.Params {
		p[k] = x
	}
	p[name] = v
	d.Params = p
	return d
}

// Generate makes one run's data for a dataset spec (any source) with the
// given seed.
func Generate(ctx context.Context, d DataSpec, seed uint64, dataDir string) (*Split, error) {
	g, err := generator(d.Source)
	if err != nil {
		return nil, err
	}
	return g(ctx, d, seed, dataDir)
}

// scaleOf turns a validated [min, max] pair into a scale (nil for none).
func scaleOf(r []float64) *release.Scale {
	if len(r) != 2 {
		return nil
	}
	return &release.Scale{Min: r[0], Max: r[1]}
}

// declared builds the public facts a run's method is given: the rating
// scale (the dataset spec's, which overrides a generator's, unless the
// file was rescaled), the catalogue (every item of the source, train and
// test — declared, as a real deployment declares its catalogue) and the
// population (the source's number of users).
func declared(d DataSpec, s *Split) (release.Declared, error) {
	var decl release.Declared
	decl.Scale = s.Scale
	if d.Scale != nil && d.Rescale == nil {
		decl.Scale = scaleOf(d.Scale)
	}
	items, users := s.Items, s.Users
	if items == nil || users == 0 {
		seenI, seenU := map[string]bool{}, map[string]bool{}
		var all []string
		var nu int
		for _, m := range []*ratings.Matrix{s.Train, s.Test, s.Truth} {
			if m == nil {
				continue
			}
			for _, n := range m.Items.Names() {
				if !seenI[n] {
					seenI[n] = true
					all = append(all, n)
				}
			}
			for _, n := range m.Users.Names() {
				if !seenU[n] {
					seenU[n] = true
					nu++
				}
			}
		}
		if items == nil {
			items = all
		}
		if users == 0 {
			users = nu
		}
	}
	cat, err := model.NewCatalogue(items, nil)
	if err != nil {
		return decl, fmt.Errorf("dataset %s: %w", d.Name, err)
	}
	decl.Catalogue, decl.Population = cat, users
	return decl, nil
}
