package experiment

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Row is one finished run: its cell, its seed, its metrics and the
// guarantee the method reported, with its numbers.
type Row struct {
	Key      string
	Dataset  string
	Method   string // registered name
	Label    string
	Param    string  // swept parameter name ("" when none)
	Value    float64 // swept value (NaN when none)
	Epsilon  float64 // requested ε (NaN for non-private methods)
	Run      int
	Seed     uint64
	Metrics  map[string]float64 // rmse, mae, accuracy, are, …; absent when not applicable
	N        int
	Seconds  float64
	GEpsilon float64 // the guarantee's (provable) ε; +Inf when none
	GDelta   float64
	GRho     float64
	GUnit    string
	GNotion  string
	GStatus  string
	GClaimed float64
	GNote    string
}

// header is the results.csv header; the metric columns follow Metrics.
var header = append(append([]string{"key", "dataset", "method", "label", "param", "value", "epsilon", "run", "seed"},
	Metrics...), "n", "seconds", "g_epsilon", "g_delta", "g_rho", "g_unit", "g_notion", "g_status", "g_claimed_epsilon", "g_note")

func fmtF(x float64) string {
	if math.IsNaN(x) {
		return ""
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

func parseF(s string) (float64, error) {
	if s == "" {
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

func (r *Row) record() []string {
	rec := []string{r.Key, r.Dataset, r.Method, r.Label, r.Param, fmtF(r.Value), fmtF(r.Epsilon),
		strconv.Itoa(r.Run), strconv.FormatUint(r.Seed, 10)}
	for _, m := range Metrics {
		v, ok := r.Metrics[m]
		if !ok {
			v = math.NaN()
		}
		rec = append(rec, fmtF(v))
	}
	return append(rec, strconv.Itoa(r.N), fmtF(r.Seconds), fmtF(r.GEpsilon), fmtF(r.GDelta), fmtF(r.GRho),
		r.GUnit, r.GNotion, r.GStatus, fmtF(r.GClaimed), r.GNote)
}

func rowFrom(rec []string) (*Row, error) {
	if len(rec) != len(header) {
		return nil, fmt.Errorf("want %d fields, got %d", len(header), len(rec))
	}
	r := &Row{Key: rec[0], Dataset: rec[1], Method: rec[2], Label: rec[3], Param: rec[4], Metrics: map[string]float64{}}
	var err error
	fl := func(s string) float64 {
		v, e := parseF(s)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	r.Value, r.Epsilon = fl(rec[5]), fl(rec[6])
	if r.Run, err = strconv.Atoi(rec[7]); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if r.Seed, err = strconv.ParseUint(rec[8], 10, 64); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	i := 9
	for _, m := range Metrics {
		if v := fl(rec[i]); !math.IsNaN(v) {
			r.Metrics[m] = v
		}
		i++
	}
	if r.N, err = strconv.Atoi(rec[i]); err != nil {
		return nil, fmt.Errorf("n: %w", err)
	}
	r.Seconds, r.GEpsilon, r.GDelta, r.GRho = fl(rec[i+1]), fl(rec[i+2]), fl(rec[i+3]), fl(rec[i+4])
	r.GUnit, r.GNotion, r.GStatus = rec[i+5], rec[i+6], rec[i+7]
	r.GClaimed, r.GNote = fl(rec[i+8]), rec[i+9]
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ReadResults reads a results.csv. A last line cut short by a crash is
// ignored (and reported in torn); any other bad line is an error.
func ReadResults(path string) (rows []*Row, torn bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading results: %w", err)
	}
	return parseResults(path, b)
}

func parseResults(path string, b []byte) (rows []*Row, torn bool, err error) {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		// The last record was being written when the process died.
		cut := bytes.LastIndexByte(b, '\n')
		b, torn = b[:cut+1], true
	}
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	first := true
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, torn, fmt.Errorf("%s: %w", path, err)
		}
		line, _ := r.FieldPos(0)
		if first {
			first = false
			if strings.Join(rec, ",") != strings.Join(header, ",") {
				return nil, torn, fmt.Errorf("%s: header does not match this version of privrec (want %s)", path, strings.Join(header, ","))
			}
			continue
		}
		row, err := rowFrom(rec)
		if err != nil {
			return nil, torn, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		rows = append(rows, row)
	}
	return rows, torn, nil
}

// resultsWriter appends rows to results.csv, each synced to disk before
// Append returns, so a crash loses at most the run in progress.
type resultsWriter struct {
	mu sync.Mutex
	f  *os.File
}

// openResults opens (creating, with header) results.csv for appending,
// dropping a torn last line first.
func openResults(path string, torn bool) (*resultsWriter, error) {
	if torn {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("repairing results: %w", err)
		}
		cut := bytes.LastIndexByte(b, '\n')
		if err := os.Truncate(path, int64(cut+1)); err != nil {
			return nil, fmt.Errorf("repairing results: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening results: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening results: %w", err)
	}
	w := &resultsWriter{f: f}
	if st.Size() == 0 {
		if err := w.write(header); err != nil {
			f.Close()
			return nil, err
		}
	}
	return w, nil
}

func (w *resultsWriter) write(rec []string) error {
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	if err := cw.Write(rec); err != nil {
		return fmt.Errorf("encoding result: %w", err)
	}
	cw.Flush()
	// One write call per record, then fsync: the file holds whole records
	// except possibly a torn last one, which ReadResults discards.
	if _, err := w.f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("syncing results: %w", err)
	}
	return nil
}

// Append writes one row durably.
func (w *resultsWriter) Append(r *Row) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.write(r.record())
}

func (w *resultsWriter) Close() error { return w.f.Close() }

// WriteResults writes rows to w as CSV with the results header.
func WriteResults(w io.Writer, rows []*Row) error {
	bw := bufio.NewWriter(w)
	cw := csv.NewWriter(bw)
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, r := range rows {
		if err := cw.Write(r.record()); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return bw.Flush()
}
