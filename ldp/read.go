package ldp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"

	"github.com/privrec/privrec/ratings"
)

// ReadCollected parses a whole file written by Collect: the header and
// the "user \t item \t value" report lines (comment lines starting with
// '#' are skipped wherever they appear). Values are in the header's units.
// Every report is checked: levels must be integers 1…Levels for RR,
// values finite for Laplace, and no (user, item) may repeat. It is the
// ldp package's own reader, independent of ratingio.
func ReadCollected(r io.Reader) (Header, *ratings.Matrix, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	// ParseHeader reads through its own buffer: give it the header lines
	// only, so the data lines stay in br.
	var head bytes.Buffer
	for range 2 {
		line, err := br.ReadBytes('\n')
		head.Write(line)
		if err != nil {
			break
		}
	}
	h, err := ParseHeader(&head)
	if err != nil {
		return h, nil, err
	}
	b := ratings.NewBuilder(ratings.DupError)
	lineNo := int64(2)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return h, nil, fmt.Errorf("ldp: line %d: longer than %d bytes", lineNo+1, br.Size())
		}
		if len(line) > 0 {
			lineNo++
			if perr := h.addReport(b, line, lineNo); perr != nil {
				return h, nil, perr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return h, nil, fmt.Errorf("ldp: reading line %d: %w", lineNo+1, err)
		}
	}
	m, err := b.Build()
	if err != nil {
		return h, nil, fmt.Errorf("ldp: %w", err)
	}
	if m.NumUsers() > h.Users || m.NumItems() > h.Items {
		return h, nil, fmt.Errorf("ldp: %d users × %d items in the reports, more than the header's population of %d clients × %d catalogue items",
			m.NumUsers(), m.NumItems(), h.Users, h.Items)
	}
	return h, m, nil
}

// addReport parses one data line into b.
func (h Header) addReport(b *ratings.Builder, line []byte, lineNo int64) error {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) == 0 || line[0] == '#' {
		return nil
	}
	f := bytes.Split(line, []byte{'\t'})
	if len(f) != 3 || len(f[0]) == 0 || len(f[1]) == 0 {
		return fmt.Errorf("ldp: line %d: want user \\t item \\t value, got %q", lineNo, truncate(line))
	}
	v, err := strconv.ParseFloat(string(f[2]), 64)
	if err != nil {
		return fmt.Errorf("ldp: line %d: value %q: %w", lineNo, truncate(f[2]), err)
	}
	if h.Units == "levels" || h.Mechanism == RR {
		if v != float64(int(v)) || v < 1 || int(v) > h.Scale.Levels {
			return fmt.Errorf("ldp: line %d: %v is not a level 1…%d", lineNo, v, h.Scale.Levels)
		}
	}
	if err := b.Add(string(f[0]), string(f[1]), v, lineNo); err != nil {
		return fmt.Errorf("ldp: line %d: %w", lineNo, err)
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}

// CountReports reads a collect file's header and counts its report lines
// (non-empty lines not starting with '#') without parsing them: a cheap
// check that a ratings file read elsewhere is this file's data.
func CountReports(r io.Reader) (Header, int64, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var head bytes.Buffer
	for range 2 {
		line, err := br.ReadBytes('\n')
		head.Write(line)
		if err != nil {
			break
		}
	}
	h, err := ParseHeader(&head)
	if err != nil {
		return h, 0, err
	}
	var n int64
	start := true // at the start of a line
	buf := make([]byte, 1<<20)
	for {
		k, err := br.Read(buf)
		for _, c := range buf[:k] {
			switch {
			case c == '\n':
				start = true
			case start:
				start = false
				if c != '#' && c != '\r' {
					n++
				}
			}
		}
		if err == io.EOF {
			return h, n, nil
		}
		if err != nil {
			return h, n, fmt.Errorf("ldp: reading: %w", err)
		}
	}
}
