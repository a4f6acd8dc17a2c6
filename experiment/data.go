package experiment

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/privrec/privrec/ratings"
)

// Split is one run's data: the training ratings, the held-out test ratings
// and, for synthetic data, the full true matrix (for ARE).
type Split struct {
	Train, Test, Truth *ratings.Matrix
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
