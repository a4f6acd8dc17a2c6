package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/service/store"
)

// dataFlags are the flags every command that reads a ratings file shares.
type dataFlags struct {
	path, format, cols, column, scale, dups string
}

// add registers the flags. The ratings file is --data in every command;
// --in and --ratings, the names some commands used to take, are aliases.
func (d *dataFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&d.path, "data", "", "ratings file (gzip is detected)")
	for _, alias := range []string{"in", "ratings"} {
		fs.StringVar(&d.path, alias, "", "same as --data")
	}
	d.addFormat(fs)
}

// addFormat registers the flags that say how to read a ratings file,
// without the file's own flag.
func (d *dataFlags) addFormat(fs *flag.FlagSet) {
	fs.StringVar(&d.format, "format", "auto", "file format: auto, "+strings.Join(ratingio.Formats, ", "))
	fs.StringVar(&d.cols, "cols", "", "tsv/csv column map, e.g. user=0,item=1,rating=2[,time=3] or by header name user=userId,item=movieId,rating=rating")
	fs.StringVar(&d.column, "column", "rating", "uci-rc rating column: rating, food or service")
	fs.StringVar(&d.scale, "scale", "", "declared rating range MIN:MAX; values outside it are errors")
	fs.StringVar(&d.dups, "duplicates", "error", "repeated (user, item): error, last or mean")
}

func (d *dataFlags) options() (ratingio.Options, error) {
	opt := ratingio.Options{Format: d.format, Cols: d.cols, Column: d.column}
	if d.scale != "" {
		lo, hi, ok := strings.Cut(d.scale, ":")
		a, err1 := strconv.ParseFloat(lo, 64)
		b, err2 := strconv.ParseFloat(hi, 64)
		if !ok || err1 != nil || err2 != nil || !(a < b) {
			return opt, usagef("--scale %q: want MIN:MAX with MIN < MAX", d.scale)
		}
		opt.HasScale, opt.Min, opt.Max = true, a, b
	}
	p, err := ratings.ParseDupPolicy(d.dups)
	if err != nil {
		return opt, usagef("--duplicates: %v", err)
	}
	opt.Duplicates = p
	return opt, nil
}

// read loads the file named by the flags.
func (d *dataFlags) read() (*ratings.Matrix, error) {
	if d.path == "" {
		return nil, usagef("--data FILE is required")
	}
	if store.IsURL(d.path) {
		return d.readStore()
	}
	opt, err := d.options()
	if err != nil {
		return nil, err
	}
	m, err := ratingio.ReadFile(d.path, opt)
	if err != nil {
		return nil, fmt.Errorf("reading ratings: %w", err)
	}
	return m, nil
}
