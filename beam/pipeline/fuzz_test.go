package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/service/api"
)

// FuzzParse compares the pipeline's batched parser with ratingio reading
// the whole file: when ratingio reads it, the parser refuses nothing and
// emits exactly its ratings; when ratingio refuses a line (not as a
// repeat), the parser refuses at least one; every refusal names the file.
// Batches of 3 lines exercise the header and anchor handling.
func FuzzParse(f *testing.F) {
	f.Add([]byte("1\t1\t5\n1\t2\t3\n2\t1\t4\n3\t3\t2\n4\t1\t1\n"))
	f.Add([]byte("user\titem\trating\nu1\ti1\t5\nu2\ti1\t4\nu3\ti2\t3\nu4\ti9\t1\n"))
	f.Add([]byte("# comment\n1\t1\t5\n\n2\t1\tfive\n3\t1\t4\n"))
	f.Add([]byte("a\tb\tc\n1\t1\t5\n1\t1\t4\n"))
	f.Add([]byte("1\t1\t5\t100\n2\t1\t4\n"))
	old := batchLines
	batchLines = 3
	f.Cleanup(func() { batchLines = old })
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "r.tsv")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var got, refused []string
		err := (&parseFn{Format: "tsv", Sources: []string{path}}).ProcessElement(ctx, path,
			func(u string, rs Ratings) {
				rs.each(func(r Rating) { got = append(got, fmt.Sprintf("%q %q %v", u, r.Item, r.Value)) })
			},
			func(r Refusal) { refused = append(refused, r.Msg) })
		if err != nil {
			return // a problem of the whole file (none is expected from a local file)
		}
		for _, r := range refused {
			if !strings.HasPrefix(r, path+":") {
				t.Fatalf("refusal %q does not name the file", r)
			}
		}
		m, rerr := ratingio.ReadContext(ctx, bytes.NewReader(data), path, ratingio.Options{Format: "tsv"})
		var pe *ratingio.ParseError
		var de *ratings.DuplicateError
		switch {
		case rerr == nil:
			if len(refused) > 0 {
				t.Fatalf("refused %q, but ratingio reads the file", refused)
			}
			var want []string
			for u := range int32(m.NumUsers()) {
				items, vals := m.UserRow(u)
				for k, j := range items {
					want = append(want, fmt.Sprintf("%q %q %v", m.Users.Name(u), m.Items.Name(j), vals[k]))
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("emitted %q, ratingio reads %q", got, want)
			}
		case errors.As(rerr, &pe) && pe.Line > 0 && !errors.As(rerr, &de) && len(refused) == 0:
			t.Fatalf("ratingio refuses line %d (%v), the parser refused nothing", pe.Line, rerr)
		}
	})
}

// FuzzReportRow: a stored report's values, whatever they are, either
// become ratings of catalogue items at the report's seq (plus the one
// marker of no item) — exactly the values api.DecodeValues reads — or the
// row is refused naming the database and its seq; never a panic.
func FuzzReportRow(f *testing.F) {
	f.Add(int64(1), "[5, null, 3]")
	f.Add(int64(2), "[null, null]")
	f.Add(int64(3), "[1, 2, 3, 4, 5]")
	f.Add(int64(4), "[1, 2")
	f.Add(int64(5), `{"a": 1}`)
	f.Add(int64(6), "[1e400]")
	items := []string{"a", "b", "c", "d"}
	f.Fuzz(func(t *testing.T, seq int64, vals string) {
		fn := &reportFn{Items: items, Source: "sqlite:x.db"}
		var got []Rating
		var refused []string
		elements := 0
		fn.ProcessElement(ReportRow{Seq: seq, User: "u", Vals: vals},
			func(u string, rs Ratings) {
				elements++
				rs.each(func(r Rating) { got = append(got, r) })
			},
			func(r Refusal) { refused = append(refused, r.Msg) })
		want, err := api.DecodeValues([]byte(vals))
		if err != nil || len(want) > len(items) {
			if len(refused) != 1 || elements != 0 || !strings.HasPrefix(refused[0], fmt.Sprintf("sqlite:x.db: reports seq %d ", seq)) {
				t.Fatalf("values %q: refused %q, emitted %v", vals, refused, got)
			}
			return
		}
		if len(refused) != 0 || elements != 1 {
			t.Fatalf("values %q: refused %q, emitted %d elements: %v (want one, even empty: it counts the user)", vals, refused, elements, got)
		}
		k := 0
		for j, v := range want {
			if v == nil {
				continue
			}
			if k >= len(got) || got[k].Item != items[j] || got[k].Value != float32(*v) || got[k].First != seq {
				t.Fatalf("values %q: emitted %v", vals, got)
			}
			k++
		}
		if k != len(got) {
			t.Fatalf("values %q: %d ratings emitted, want %d", vals, len(got), k)
		}
	})
}
