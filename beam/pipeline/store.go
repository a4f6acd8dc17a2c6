package pipeline

import (
	"fmt"
	"reflect"
	"strconv"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/databaseio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver

	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*ReportRow)(nil)).Elem())
	register.DoFn3x0[ReportRow, func(string, Ratings), func(Refusal)](&reportFn{})
}

// ReportRow is one row of the reports table of a `privrec serve`
// database, as databaseio reads it: the report's sequence number, its
// user and its stored values (a JSON array over the collection's
// catalogue, null where she gave no rating).
type ReportRow struct {
	Seq  int64  `column:"seq"`
	User string `column:"user_id"`
	Vals string `column:"vals"`
}

// storeShards is the number of queries the reports table is read with
// (seq modulo storeShards): databaseio runs each query in one worker, so
// the shards are read in parallel.
const storeShards = 4

// readStore reads the reports table of the central-mode database at url
// through Beam's databaseio and turns each report into its ratings keyed
// by user (reportFn); rows it cannot read go to the second output.
func readStore(s beam.Scope, url string, items []string) (beam.PCollection, beam.PCollection, error) {
	driver, dsn, err := store.SQLDriver(url)
	if err != nil {
		return beam.PCollection{}, beam.PCollection{}, err
	}
	s = s.Scope("privrec.reports")
	rows := make([]beam.PCollection, storeShards)
	for k := range rows {
		q := fmt.Sprintf("SELECT seq, user_id, vals FROM reports WHERE seq %% %d = %d", storeShards, k)
		rows[k] = databaseio.Query(s, driver, dsn, q, reflect.TypeOf(ReportRow{}))
	}
	ratings, refused := beam.ParDo2(s, &reportFn{Items: items, Source: store.Redact(url)}, beam.Flatten(s, rows...))
	return ratings, refused, nil
}

// reportFn turns one stored report into its user's ratings, as the
// in-process central read (service.RatingsMatrix) takes them: each
// present value j is a rating of catalogue item Items[j], at position
// (its seq), so that the user's latest rating of an item wins when her
// reports are grouped (contributeFn with Latest). A report with no value
// is emitted too (empty), so that a user whose reports hold no value is
// counted as a user, as in process. A row whose values cannot be read
// goes to the error output with the database and its seq.
type reportFn struct {
	Items  []string `json:"items"`
	Source string   `json:"source"`
}

// ProcessElement handles one report.
func (f *reportFn) ProcessElement(r ReportRow, emit func(string, Ratings), refuse func(Refusal)) {
	vals, err := api.DecodeValues([]byte(r.Vals))
	if err == nil && len(vals) > len(f.Items) {
		err = fmt.Errorf("%d values for %d catalogue items", len(vals), len(f.Items))
	}
	if err != nil {
		refuse(Refusal{Pos: r.Seq, Msg: fmt.Sprintf("%s: reports seq %s (user %q): %v", f.Source, strconv.FormatInt(r.Seq, 10), r.User, err)})
		return
	}
	rs := Ratings{Items: []string{}, Values: []float32{}, Src: 0, First: r.Seq, Last: r.Seq}
	for j, v := range vals {
		if v != nil {
			rs.Items = append(rs.Items, f.Items[j])
			rs.Values = append(rs.Values, float32(*v))
		}
	}
	emit(r.User, rs)
}
