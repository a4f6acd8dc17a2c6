package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
)

func init() {
	registerData(&command{name: "stats", summary: "summarise a ratings file: users, items, density, rating histogram, ratings per user/item", run: runDataStats})
}

const dataStatsSynopsis = `
Read a ratings file (any format privrec knows; gzip is detected) and
summarise it: number of users, items and ratings, density, the rating
range and histogram (every distinct value when there are at most 32,
else 20 equal-width bins), and quantiles of the number of ratings per user
and per item. Bad input fails with the file, line, column and reason.`

const dataStatsExample = `  privrec data stats --data ml-100k/u.data --format movielens-100k
  privrec data stats --data rating_final.csv --format uci-rc --column food --json
  privrec data stats --data ratings.csv.gz --json        # format detected from the header`

type statsReport struct {
	File   string `json:"file"`
	Format string `json:"format"`
	ratings.Stats
}

func runDataStats(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("data stats --data FILE [--format F] [--json]", dataStatsSynopsis, dataStatsExample)
	var d dataFlags
	d.add(fs)
	jsonOut := fs.Bool("json", false, "print a JSON object on stdout")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	m, err := d.read()
	if err != nil {
		return err
	}
	format := d.format
	if format == "" || format == "auto" {
		if format, err = ratingio.Detect(d.path); err != nil {
			return fmt.Errorf("detecting the format: %w", err)
		}
	}
	r := statsReport{File: d.path, Format: format, Stats: m.Stats()}
	if *jsonOut {
		return writeJSON(out, r)
	}
	return printStats(out, r)
}

func printStats(out io.Writer, r statsReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)\n", r.File, r.Format)
	fmt.Fprintf(&b, "  users    %d\n  items    %d\n  ratings  %d\n  density  %.4g\n", r.Users, r.Items, r.Ratings, r.Density)
	fmt.Fprintf(&b, "  ratings  min %g  max %g  mean %.4g  timestamps %v\n", r.RatingMin, r.RatingMax, r.RatingMean, r.HasTime)
	b.WriteString("  histogram\n")
	top := 1
	for _, h := range r.Histogram {
		top = max(top, h.Count)
	}
	for _, h := range r.Histogram {
		label := fmt.Sprintf("%g", h.Lo)
		if h.Hi != h.Lo {
			label = fmt.Sprintf("[%.3g, %.3g)", h.Lo, h.Hi)
		}
		bar := strings.Repeat("#", int(40*float64(h.Count)/float64(top)+0.5)) // longest bar: 40
		fmt.Fprintf(&b, "    %-18s %10d %s\n", label, h.Count, bar)
	}
	for _, q := range []struct {
		name string
		q    ratings.Quantiles
	}{{"per user", r.PerUser}, {"per item", r.PerItem}} {
		fmt.Fprintf(&b, "  ratings %s: min %g  p05 %g  p25 %g  median %g  p75 %g  p95 %g  max %g  mean %.4g\n",
			q.name, q.q.Min, q.q.P05, q.q.P25, q.q.Median, q.q.P75, q.q.P95, q.q.Max, q.q.Mean)
	}
	_, err := io.WriteString(out, b.String())
	return err
}
