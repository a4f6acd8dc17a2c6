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
			func(u string, r Rating) { got = append(got, fmt.Sprintf("%q %q %v", u, r.Item, r.Value)) },
			func(s string) { refused = append(refused, s) })
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
