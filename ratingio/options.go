// Package ratingio reads and writes rating data: every dataset format
// privrec knows (MovieLens 100K/1M/CSV, Netflix, Jester, UCI
// restaurant–consumer, generic TSV/CSV), gzip transparently, and a compact
// binary format for big data. Bad input is an error naming the file, line,
// column and reason; nothing is silently dropped or guessed.
//
// docs/DATA.md specifies every format, the detection rules, the error
// messages and the binary layout.
package ratingio

import (
	"github.com/privrec/privrec/ratings"
)

// Options control how a file is read.
type Options struct {
	// Format is one of Formats; "" or "auto" detects it from the file.
	Format string
	// Cols maps columns for tsv/csv, e.g. "user=0,item=1,rating=2,time=3"
	// or by header name "user=userId,item=movieId,rating=rating".
	Cols string
	// Column picks the uci-rc rating column: "rating" (default), "food" or "service".
	Column string
	// Scale, when HasScale, declares the valid rating range [Min, Max].
	HasScale bool
	Min, Max float64
	// Duplicates says how to treat a repeated (user, item).
	Duplicates ratings.DupPolicy
}

// Formats lists the format names accepted by Options.Format.
var Formats = []string{"movielens-100k", "movielens", "movielens-csv", "netflix", "jester-wide", "uci-rc", "tsv", "csv", "binary"}
