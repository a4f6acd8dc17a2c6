package pipeline

import (
	"bytes"
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"

	"github.com/privrec/privrec/statistic"
)

// TestFactoredMatchesDense: an ALS step's factored parts (per rated item
// her factor, keyed by item, the outer products formed in slabSumFn)
// give bit for bit the sum of its dense parts (the expanded slabs split
// by block, blockSumFn) and of the in-process engine statistic.Sum, with
// the factored combine split into random bundles merged in random order;
// and they are several times smaller on the wire. With and without bias
// refinement, some items inactive. Deterministic seeds.
func TestFactoredMatchesDense(t *testing.T) {
	enc, err := coder.RowEncoderForStruct(reflect.TypeOf(Part{}))
	if err != nil {
		t.Fatal(err)
	}
	const n, users = 50, 300
	for _, bias := range []float64{0, 0.5} {
		st := alsStep(n, 6)
		st.BiasScale = bias
		r := rand.New(rand.NewPCG(7, uint64(10*bias)))
		for j := range n {
			st.Active[j] = j%7 != 3
			st.Weight[j] = 1 + r.Float64()
		}
		if err := st.Validate(); err != nil {
			t.Fatal(err)
		}
		cat := make([]string, n)
		for j := range cat {
			cat[j] = strconv.Itoa(j)
		}
		rows := make([][]Rating, users)
		inRows := make([]statistic.Row, users) // the same, as the in-process engine reads them
		for u := range rows {
			js := r.Perm(n)[:1+r.IntN(20)]
			slices.Sort(js)
			for _, j := range js {
				v := float32(1 + r.IntN(5))
				rows[u] = append(rows[u], Rating{Item: cat[j], Value: v})
				inRows[u].Items = append(inRows[u].Items, int32(j))
				inRows[u].Vals = append(inRows[u].Vals, v)
			}
			r.Shuffle(len(rows[u]), func(a, b int) { rows[u][a], rows[u][b] = rows[u][b], rows[u][a] })
		}
		want, err := statistic.Sum(context.Background(), users, func(u int) statistic.Row { return inRows[u] }, st)
		if err != nil {
			t.Fatal(err)
		}
		kind, plan, err := statistic.Encode(st)
		if err != nil {
			t.Fatal(err)
		}
		dim, width := st.Spec().Dim, st.SlabDim()
		run := func(c statistic.Contribution) (map[int][]Part, int) {
			fn := &contributeFn{Kind: kind, Rows: statistic.RowPlan{Catalogue: cat}, Sources: []string{"t"}}
			fn.Setup()
			fn.c = c
			parts := map[int][]Part{}
			size := 0
			var buf bytes.Buffer
			for u := range rows {
				err := fn.ProcessElement(strconv.Itoa(u), groups(rows[u], 1+u%3), plan, func(key int, p Part) {
					buf.Reset()
					if err := enc(p, &buf); err != nil {
						t.Fatal(err)
					}
					size += buf.Len()
					parts[key] = append(parts[key], p)
				}, func(r Refusal) { t.Fatalf("refused: %s", r.Msg) }, func(int) {})
				if err != nil {
					t.Fatal(err)
				}
			}
			return parts, size
		}
		denseParts, denseBytes := run(denseOnly{st})
		dense := make([]float64, dim)
		var bfn blockSumFn
		for b, ps := range denseParts {
			a := bfn.CreateAccumulator()
			for _, p := range ps {
				a = bfn.AddInput(a, p)
			}
			copy(dense[b*statistic.BlockSize:], bfn.ExtractOutput(a)[:min(statistic.BlockSize, dim-b*statistic.BlockSize)])
		}
		factParts, factBytes := run(st)
		fact := make([]float64, dim)
		sfn := &slabSumFn{Kind: kind, Width: width}
		if err := sfn.Setup(); err != nil {
			t.Fatal(err)
		}
		forms := map[string]int{} // the accumulators' forms met (factors, dense slab) and merged
		for key, ps := range factParts {
			if key < 0 || (key+1)*width > dim {
				t.Fatalf("factored key %d outside the %d slabs", key, dim/width)
			}
			for _, p := range ps {
				if p.Idx != nil || len(p.Val) != st.Rank+2+boolInt(bias > 0) {
					t.Fatalf("key %d: a factored part has %d offsets and %d values", key, len(p.Idx), len(p.Val))
				}
			}
			// Random bundles, merged in random order.
			var accs []Acc
			for lo := 0; lo < len(ps); {
				hi := min(len(ps), lo+1+r.IntN(8))
				a := sfn.CreateAccumulator()
				for _, p := range ps[lo:hi] {
					a = sfn.AddInput(a, p)
				}
				forms[accKind(a)]++
				accs = append(accs, a)
				lo = hi
			}
			r.Shuffle(len(accs), func(i, j int) { accs[i], accs[j] = accs[j], accs[i] })
			for len(accs) > 1 {
				i := r.IntN(len(accs) - 1)
				forms[accKind(accs[i])+"+"+accKind(accs[i+1])]++
				accs[i] = sfn.MergeAccumulators(accs[i], accs[i+1])
				accs = append(accs[:i+1], accs[i+2:]...)
			}
			copy(fact[key*width:], sfn.ExtractOutput(accs[0]))
		}
		for _, f := range []string{"factors", "dense", "factors+factors", "factors+dense", "dense+factors", "dense+dense"} {
			if forms[f] == 0 {
				t.Fatalf("bias %g: accumulator forms met %v, none %q", bias, forms, f)
			}
		}
		nonzero := 0
		for i := range want {
			if dense[i] != want[i] || fact[i] != want[i] {
				t.Fatalf("bias %g, coordinate %d: in process %v, dense parts %v, factored parts %v", bias, i, want[i], dense[i], fact[i])
			}
			if want[i] != 0 {
				nonzero++
			}
		}
		if nonzero < dim/2 {
			t.Fatalf("only %d of %d coordinates are non-zero: the test data do not exercise the slabs", nonzero, dim)
		}
		t.Logf("bias %g: %d coordinates equal; %d bytes of factored parts, %d of dense parts (%.1f×)", bias, dim, factBytes, denseBytes, float64(denseBytes)/float64(factBytes))
		if 3*factBytes > denseBytes {
			t.Errorf("factored parts %d bytes, dense %d: expected at least 3× smaller", factBytes, denseBytes)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// groups yields a user's ratings to contributeFn as the group by user
// does, in elements of up to per ratings each (a reader's batches).
func groups(rs []Rating, per int) func(*Ratings) bool {
	k := 0
	return func(x *Ratings) bool {
		if k == len(rs) {
			return false
		}
		*x = Ratings{Src: rs[k].Src, First: rs[k].First, Last: rs[k].Last}
		for n := 0; n < per && k < len(rs); n, k = n+1, k+1 {
			x.Items = append(x.Items, rs[k].Item)
			x.Values = append(x.Values, rs[k].Value)
		}
		return true
	}
}
