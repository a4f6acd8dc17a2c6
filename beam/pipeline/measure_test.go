package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"

	"github.com/privrec/privrec/mf"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/statistic"
	"github.com/privrec/privrec/statistic/gram"
	"github.com/privrec/privrec/topn"
)

// TestMeasureElementCosts measures, on the ratings file named by
// PRIVREC_BEAM_MEASURE (tsv; PRIVREC_BEAM_ITEMS its catalogue), what the
// scale-out plan in docs/BEAM.md rests on: the encoded bytes a pipeline
// shuffles per rating (the group by user) and per user and statistic
// (the parts going to the combine), with Beam's row coder, and the CPU
// cost per rating of parsing and per user of each contribution, outside
// any runner. It skips without the variables.
func TestMeasureElementCosts(t *testing.T) {
	path, items := os.Getenv("PRIVREC_BEAM_MEASURE"), os.Getenv("PRIVREC_BEAM_ITEMS")
	if path == "" || items == "" {
		t.Skip("set PRIVREC_BEAM_MEASURE and PRIVREC_BEAM_ITEMS to measure")
	}
	cat, err := model.LoadCatalogue(items)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := coder.RowEncoderForStruct(reflect.TypeOf(Ratings{}))
	if err != nil {
		t.Fatal(err)
	}
	partEnc, err := coder.RowEncoderForStruct(reflect.TypeOf(Part{}))
	if err != nil {
		t.Fatal(err)
	}
	byUser := map[string][]Rating{}
	var ratingBytes, n, elements int
	var buf bytes.Buffer
	f := &parseFn{Format: "tsv", HasScale: true, Min: 1, Max: 5, Sources: []string{path}}
	start := time.Now()
	err = f.ProcessElement(context.Background(), path, func(u string, rs Ratings) {
		buf.Reset()
		if err := enc(rs, &buf); err != nil {
			t.Fatal(err)
		}
		ratingBytes += buf.Len() + len(u) + 1 // the key: a length-prefixed string
		elements++
		rs.each(func(r Rating) {
			n++
			byUser[u] = append(byUser[u], r)
		})
	}, func(r Refusal) { t.Fatalf("refused: %s", r.Msg) })
	if err != nil {
		t.Fatal(err)
	}
	parse := time.Since(start)
	t.Logf("%d ratings, %d users, %d elements (a user's ratings of one batch): parse+encode %.0f ns/rating, %.1f shuffled bytes/rating (group by user)",
		n, len(byUser), elements, float64(parse.Nanoseconds())/float64(n), float64(ratingBytes)/float64(n))
	m := 200
	cover := make([]int, m)
	for q := range cover {
		cover[q] = q
	}
	cols, err := topn.NewColumns(cat.Len(), cover)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gram.NewGram(cols, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	als := alsStep(cat.Len(), 32)
	for _, c := range []statistic.Contribution{
		&statistic.Counts{Items: cat.Len(), Cap: 50},
		&statistic.Bias{Items: cat.Len(), Mid: 3, Half: 2, Clip: 1.5, Spread: true},
		g,
		denseOnly{als}, // the ALS step's dense parts (before the factored parts)
		als,
	} {
		kind, plan, err := statistic.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		fn := &contributeFn{Kind: kind, Rows: statistic.RowPlan{Catalogue: cat.IDs(), Clamp: &[2]float64{1, 5}}, Sources: []string{path}}
		fn.Setup()
		fn.c = c // as decoded from plan (denseOnly: the same statistic, not factored)
		// The combine (without lifting): a factored statistic's outer
		// products are formed there, so its cost is timed apart.
		var comb interface {
			AddInput(Acc, Part) Acc
		} = &blockSumFn{}
		if _, ok := c.(statistic.Factored); ok {
			comb = &slabSumFn{Kind: kind, Width: c.(statistic.Factored).SlabDim()}
		}
		accs := map[int]Acc{}
		var combineTime time.Duration
		var partBytes, parts int
		start := time.Now()
		for u, rs := range byUser {
			err := fn.ProcessElement(u, groups(rs, len(rs)), plan, func(key int, p Part) {
				buf.Reset()
				if err := partEnc(p, &buf); err != nil {
					t.Fatal(err)
				}
				partBytes += buf.Len() + len(binary.AppendUvarint(nil, uint64(key))) // + the key (a varint)
				parts++
				t0 := time.Now()
				accs[key] = comb.AddInput(accs[key], p)
				combineTime += time.Since(t0)
			}, func(r Refusal) { t.Fatalf("refused: %s", r.Msg) }, func(int) {})
			if err != nil {
				t.Fatal(err)
			}
		}
		d := time.Since(start) - combineTime
		name := c.Spec().Name
		if _, ok := c.(statistic.Factored); ok {
			name += ", factored parts"
		} else if _, ok := c.(denseOnly); ok {
			name += ", dense parts"
		}
		nu := float64(len(byUser))
		t.Logf("%s (%d coordinates): contribute+encode %.0f ns/user, combine %.0f ns/user, %.2f parts/user, %.0f shuffled bytes/user before combiner lifting",
			name, c.Spec().Dim, float64(d.Nanoseconds())/nu, float64(combineTime.Nanoseconds())/nu, float64(parts)/nu, float64(partBytes)/nu)
	}
}

// denseOnly hides a statistic.Factored's factors: the contribution's
// parts are then its dense blocks, as before the factored parts.
type denseOnly struct{ statistic.Contribution }

// alsStep is an ALS step statistic over n items at rank k with every item
// active, unit weights and small random public factors (dpals' default
// clips and ridge).
func alsStep(n, k int) *mf.ALSStepStatistic {
	r := rand.New(rand.NewPCG(1, 2))
	st := &mf.ALSStepStatistic{Step: 1, Rank: k, V: make([]float64, n*k), Mean: 3.5, ItemBias: make([]float64, n),
		Weight: make([]float64, n), Active: make([]bool, n), UserLambda: 30, UserDamping: 5, UserClip: 0.3, ResidualClip: 1, RHSScale: 0.3}
	for i := range st.V {
		st.V[i] = 0.2 * r.NormFloat64()
	}
	for j := range n {
		st.Weight[j], st.Active[j] = 1, true
	}
	if err := st.Validate(); err != nil {
		panic(err)
	}
	return st
}
