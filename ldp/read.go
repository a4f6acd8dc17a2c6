package ldp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/privrec/privrec/ratings"
)

// Collection is what a collect file holds: its header, the per-cell
// reports (values in the header's units) and, when the header declares a
// mean report (MeanEpsilon > 0), every client's mean report by user ID
// (original rating scale).
type Collection struct {
	Header  Header
	Reports *ratings.Matrix
	Means   map[string]float64
}

// ReadCollected parses a whole file written by Collect: the header and
// the "user \t item \t value" report lines (comment lines starting with
// '#' are skipped wherever they appear). Values are in the header's units.
// Every report is checked: levels must be integers 1…Levels for RR,
// values finite for Laplace, and no (user, item) may repeat. It is the
// ldp package's own reader, independent of ratingio. ReadCollection also
// returns the mean reports.
func ReadCollected(r io.Reader) (Header, *ratings.Matrix, error) {
	c, err := ReadCollection(r)
	return c.Header, c.Reports, err
}

// ReadCollection is ReadCollected with the mean reports ("#mean" lines),
// which are checked as meanLine describes. It never returns a nil
// Collection; on error only its Header may be set.
func ReadCollection(r io.Reader) (*Collection, error) {
	c := &Collection{}
	br, h, err := readHeader(r)
	c.Header = h
	if err != nil {
		return c, err
	}
	b := ratings.NewBuilder(ratings.DupError)
	means := map[string]float64{}
	lineNo := int64(2)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return c, fmt.Errorf("ldp: line %d: longer than %d bytes", lineNo+1, br.Size())
		}
		if len(line) > 0 {
			lineNo++
			var perr error
			if bytes.HasPrefix(line, []byte(MeanPrefix)) {
				perr = h.meanLine(means, line, lineNo)
			} else {
				perr = h.addReport(b, line, lineNo)
			}
			if perr != nil {
				return c, perr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return c, fmt.Errorf("ldp: reading line %d: %w", lineNo+1, err)
		}
	}
	m, err := b.Build()
	if err != nil {
		return c, fmt.Errorf("ldp: %w", err)
	}
	if m.NumUsers() > h.Users || m.NumItems() > h.Items {
		return c, fmt.Errorf("ldp: %d users × %d items in the reports, more than the header's population of %d clients × %d catalogue items",
			m.NumUsers(), m.NumItems(), h.Users, h.Items)
	}
	if err := h.checkMeans(means, m); err != nil {
		return c, err
	}
	c.Reports = m
	if h.MeanEpsilon > 0 {
		c.Means = means
	}
	return c, nil
}

// meanLine parses one "#mean \t user \t value" line into means: the
// header must declare a mean report, the user must be named once, and the
// value must be finite.
func (h Header) meanLine(means map[string]float64, line []byte, lineNo int64) error {
	if h.MeanEpsilon == 0 {
		return fmt.Errorf("ldp: line %d: a mean report, but the header declares none (no mean_epsilon)", lineNo)
	}
	f := bytes.Split(bytes.TrimRight(line[len(MeanPrefix):], "\r\n"), []byte{'\t'})
	if len(f) != 2 || len(f[0]) == 0 {
		return fmt.Errorf("ldp: line %d: want #mean \\t user \\t value, got %q", lineNo, truncate(line))
	}
	v, err := strconv.ParseFloat(string(f[1]), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("ldp: line %d: mean report %q is not a finite number", lineNo, truncate(f[1]))
	}
	u := string(f[0])
	if _, dup := means[u]; dup {
		return fmt.Errorf("ldp: line %d: a second mean report for client %q", lineNo, u)
	}
	means[u] = v
	return nil
}

// checkMeans checks a collection with mean reports has one per client: as
// many as the header's clients, covering every user with reports.
func (h Header) checkMeans(means map[string]float64, m *ratings.Matrix) error {
	if h.MeanEpsilon == 0 {
		return nil
	}
	if len(means) != h.Users {
		return fmt.Errorf("ldp: %d mean reports, but the header declares %d clients, each of which sends one", len(means), h.Users)
	}
	if m == nil {
		return nil
	}
	for _, u := range m.Users.Names() {
		if _, ok := means[u]; !ok {
			return fmt.Errorf("ldp: client %q sent cell reports but no mean report", u)
		}
	}
	return nil
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
	h, n, _, err := ScanReports(r)
	return h, n, err
}

// readHeader parses the header of a collect file read from r and
// returns the reader its data lines follow in. ParseHeader reads through
// its own buffer: it is given the header lines only, so the data lines
// stay in the returned reader.
func readHeader(r io.Reader) (*bufio.Reader, Header, error) {
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
	return br, h, err
}

// ScanReports is CountReports that also parses the mean reports ("#mean"
// lines; nil when the header declares none), checked as in ReadCollection
// (their users are checked against the cell reports by the caller, which
// holds those).
func ScanReports(r io.Reader) (Header, int64, map[string]float64, error) {
	br, h, err := readHeader(r)
	if err != nil {
		return h, 0, nil, err
	}
	var n int64
	means := map[string]float64{}
	lineNo := int64(2)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return h, n, nil, fmt.Errorf("ldp: line %d: longer than %d bytes", lineNo+1, br.Size())
		}
		if len(line) > 0 {
			lineNo++
			switch {
			case bytes.HasPrefix(line, []byte(MeanPrefix)):
				if err := h.meanLine(means, line, lineNo); err != nil {
					return h, n, nil, err
				}
			case line[0] != '#' && line[0] != '\r' && line[0] != '\n':
				n++
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return h, n, nil, fmt.Errorf("ldp: reading line %d: %w", lineNo+1, err)
		}
	}
	if err := h.checkMeans(means, nil); err != nil {
		return h, n, nil, err
	}
	if h.MeanEpsilon == 0 {
		means = nil
	}
	return h, n, means, nil
}
