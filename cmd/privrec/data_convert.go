package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratingio"
)

func init() {
	registerData(&command{name: "convert", summary: "convert a ratings file to canonical TSV or privrec's compact binary format", run: runDataConvert})
}

const dataConvertSynopsis = `
Read a ratings file in any format privrec knows and write it as
  --to tsv      canonical TSV: user \t item \t rating [\t time], original IDs,
                user-major order, no header (read it back with --format tsv)
  --to binary   privrec's compact binary format (docs/DATA.md): the rating
                store as it sits in memory (both views), read back about 7 times
                faster than movielens text
The output is written through a temporary file renamed into place, so on
any error nothing is written. Duplicate (user, item) pairs must be resolved
while reading (--duplicates last|mean); the output never has any.`

const dataConvertExample = `  privrec data convert --data ratings.dat --format movielens --to binary --out ml10m.bin
  privrec data stats --data ml10m.bin                  # binary is detected
  privrec data convert --data ml10m.bin --to tsv --out ml10m.tsv --json`

type convertReport struct {
	In      string  `json:"in"`
	Out     string  `json:"out"`
	To      string  `json:"to"`
	Users   int     `json:"users"`
	Items   int     `json:"items"`
	Ratings int     `json:"ratings"`
	Seconds float64 `json:"seconds"`
}

func runDataConvert(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("data convert --data FILE [--format F] --to tsv|binary --out FILE [--json]", dataConvertSynopsis, dataConvertExample)
	var d dataFlags
	d.add(fs)
	to := fs.String("to", "", "output format: tsv or binary")
	outPath := fs.String("out", "", "output file (written atomically)")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	var write func(io.Writer) error
	switch *to {
	case "tsv", "binary":
	case "":
		return usagef("--to is required (tsv or binary)")
	default:
		return usagef("--to %q: want tsv or binary", *to)
	}
	if *outPath == "" {
		return usagef("--out is required")
	}
	if err := atomicfile.CheckTarget(*outPath); err != nil {
		return usagef("--out %v", err) // before reading the data
	}
	start := time.Now()
	m, err := d.read()
	if err != nil {
		return err
	}
	if *to == "tsv" {
		write = func(w io.Writer) error { return ratingio.WriteTSV(w, m) }
	} else {
		write = func(w io.Writer) error { return ratingio.WriteBinary(w, m) }
	}
	if err := model.WriteFileAtomic(*outPath, write); err != nil {
		return fmt.Errorf("writing %s: %w", *outPath, err)
	}
	r := convertReport{In: d.path, Out: *outPath, To: *to, Users: m.NumUsers(), Items: m.NumItems(), Ratings: m.Len(), Seconds: time.Since(start).Seconds()}
	if *jsonOut {
		return writeJSON(out, r)
	}
	_, err = fmt.Fprintf(out, "wrote %s (%s): %d users, %d items, %d ratings in %.2fs\n", r.Out, r.To, r.Users, r.Items, r.Ratings, r.Seconds)
	return err
}
