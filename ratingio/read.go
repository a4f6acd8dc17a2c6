package ratingio

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/privrec/privrec/ratings"
)

// ReadFile reads a ratings file (gzip transparently) in the given format.
// (Interim version: tsv and movielens-100k only; the parallel readers for
// every format replace it.)
func ReadFile(path string, opt Options) (*ratings.Matrix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	switch opt.Format {
	case "", "auto", "tsv", "movielens-100k":
	default:
		return nil, fmt.Errorf("%s: format %q not yet supported", path, opt.Format)
	}
	b := ratings.NewBuilder(opt.Duplicates)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	var line int64
	nf := -1
	for sc.Scan() {
		line++
		s := bytes.TrimRight(sc.Bytes(), "\r")
		if len(s) == 0 {
			continue
		}
		fields := bytes.Split(s, []byte{'\t'})
		if nf < 0 {
			nf = len(fields)
		}
		if len(fields) != nf || (nf != 3 && nf != 4) {
			return nil, fmt.Errorf("%s:%d: want 3 or 4 tab-separated fields, found %d", path, line, len(fields))
		}
		v, err := strconv.ParseFloat(string(fields[2]), 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: column 3: %q is not a number", path, line, fields[2])
		}
		if opt.HasScale && (v < opt.Min || v > opt.Max) {
			return nil, fmt.Errorf("%s:%d: column 3: %v outside the declared scale [%v, %v]", path, line, v, opt.Min, opt.Max)
		}
		var ts int64
		if nf == 4 {
			ts, err = strconv.ParseInt(string(fields[3]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: column 4: %q is not an integer timestamp", path, line, fields[3])
			}
		}
		if err := b.AddTimed(string(fields[0]), string(fields[1]), v, ts, nf == 4, line); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if b.Len() == 0 {
		return nil, fmt.Errorf("%s: empty file (no ratings)", path)
	}
	m, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
