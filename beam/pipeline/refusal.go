package pipeline

import (
	"bufio"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Refusal)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*RefusedSummary)(nil)).Elem())
	register.Emitter1[Refusal]()
	register.Combiner3[RefusedSummary, Refusal, RefusedSummary](&firstRefusedFn{})
	register.Function2x0[RefusedSummary, func(string)](formatRefused)
	register.Function1x1[Refusal, string](refusalMsg)
}

// Refusal is one input row a pipeline refused: where it is (the index of
// its source among the inputs and its line, or a report's seq) and the
// message naming the source, the position and the reason.
type Refusal struct {
	Src int32
	Pos int64
	Msg string
}

func (r Refusal) before(o Refusal) bool {
	switch {
	case r.Src != o.Src:
		return r.Src < o.Src
	case r.Pos != o.Pos:
		return r.Pos < o.Pos
	}
	return r.Msg < o.Msg
}

// firstShown is how many of the first refused rows a pipeline reports
// (the error's first line names the first of them).
const firstShown = 3

// RefusedSummary is the count of refused rows and the first of them by
// source and position (the combine's accumulator and output).
type RefusedSummary struct {
	N     int
	First []Refusal
}

// firstRefusedFn combines the refusals into their count and the
// firstShown first ones (by source and position, whatever the order the
// runner delivers them in), so the driver can name the first refused
// row without reading a list as long as the input.
type firstRefusedFn struct{}

// CreateAccumulator is the empty count.
func (firstRefusedFn) CreateAccumulator() RefusedSummary { return RefusedSummary{} }

// AddInput counts r and keeps it if it is among the first.
func (firstRefusedFn) AddInput(a RefusedSummary, r Refusal) RefusedSummary {
	a.N++
	a.First = keepFirst(append(slices.Clone(a.First), r))
	return a
}

// MergeAccumulators adds the counts and keeps the first of both.
func (firstRefusedFn) MergeAccumulators(a, b RefusedSummary) RefusedSummary {
	return RefusedSummary{N: a.N + b.N, First: keepFirst(append(append([]Refusal(nil), a.First...), b.First...))}
}

// ExtractOutput is the accumulator itself.
func (firstRefusedFn) ExtractOutput(a RefusedSummary) RefusedSummary { return a }

func keepFirst(rs []Refusal) []Refusal {
	slices.SortFunc(rs, func(a, b Refusal) int {
		if a.before(b) {
			return -1
		}
		if b.before(a) {
			return 1
		}
		return 0
	})
	return rs[:min(len(rs), firstShown)]
}

// formatRefused writes the summary as lines: "n\tCOUNT", then one
// "r\tQUOTED MESSAGE" per first row (quoted: a message may hold any
// character of the input).
func formatRefused(a RefusedSummary, emit func(string)) {
	emit("n\t" + strconv.Itoa(a.N))
	for _, r := range a.First {
		emit("r\t" + strconv.Quote(r.Msg))
	}
}

func refusalMsg(r Refusal) string { return r.Msg }

// readRefused reads a pipeline's refusal summary (formatRefused's lines;
// an empty file, or only empty lines, is no refusal).
func readRefused(ctx context.Context, path string) (int, []string, error) {
	f, err := openOutput(ctx, path)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the pipeline's refused rows: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	n, first := 0, []string(nil)
	for line := 1; sc.Scan(); line++ {
		kind, val, _ := strings.Cut(sc.Text(), "\t")
		switch kind {
		case "":
		case "n":
			if n, err = strconv.Atoi(val); err != nil {
				return 0, nil, fmt.Errorf("%s:%d: refused count: %w", path, line, err)
			}
		case "r":
			msg, err := strconv.Unquote(val)
			if err != nil {
				return 0, nil, fmt.Errorf("%s:%d: refused row: %w", path, line, err)
			}
			first = append(first, msg)
		default:
			return 0, nil, fmt.Errorf("%s:%d: unexpected line", path, line)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, nil, fmt.Errorf("reading the pipeline's refused rows: %w", err)
	}
	if n > 0 && len(first) == 0 {
		return 0, nil, fmt.Errorf("%s: %d rows refused but none named", path, n)
	}
	return n, first, nil
}

// RefusedError reports rows the pipeline refused: the run fails before
// any noise is drawn. Its first line is the first refused row (by source
// and position: "source:line: reason") and the count; N, First and the
// message are private, for the operator only. List is the file listing
// every refused row when the operator named a work directory (--work),
// else empty.
//
// Sample, when not empty, is the file whose first rows were all refused
// by the driver's check before any pipeline ran (N counts those rows).
type RefusedError struct {
	N      int
	First  []string
	List   string
	Sample string
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	b.WriteString(e.First[0])
	if e.Sample != "" {
		fmt.Fprintf(&b, " (all %d rows read from the start of %s refused: is --format right? Checked before any pipeline ran; nothing was released)", e.N, e.Sample)
	} else {
		fmt.Fprintf(&b, " (the first of %d input row(s) refused, malformed or repeated; nothing was released", e.N)
		if e.List != "" {
			fmt.Fprintf(&b, "; all are listed in %s", e.List)
		} else if e.N > len(e.First) {
			b.WriteString("; --work DIR lists them all")
		}
		b.WriteString(")")
	}
	for _, m := range e.First[1:] {
		b.WriteString("\n  next refused: " + m)
	}
	return b.String()
}
