package pipeline

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
)

// Rating is one parsed rating in its user's group: the item's ID, the
// value as privrec's parser stores it (float32), and where it came from
// (the index of its source among the pipeline's inputs, and the lines
// First–Last it lies within), for the error output.
type Rating struct {
	Item        string
	Value       float32
	Src         int32
	First, Last int64
}

// Ratings is what the readers emit, keyed by user, to the group by user:
// one user's ratings from one batch of one source (lines First–Last of
// source Src; for a database, one report at seq First = Last), items and
// values side by side. One element per user and batch rather than per
// rating: a file sorted by user (as exports usually are) then sends each
// user's key once per batch, and a runner stores and shuffles one element
// where it stored as many as she has ratings (Prism keeps every element of
// the group in memory, at about 150 bytes of overhead each, which made
// most of its peak at 10⁵ and 10⁶ users).
type Ratings struct {
	Items       []string
	Values      []float32
	Src         int32
	First, Last int64
}

// each calls f with each of rs's ratings.
func (rs *Ratings) each(f func(Rating)) {
	for k, item := range rs.Items {
		f(Rating{Item: item, Value: rs.Values[k], Src: rs.Src, First: rs.First, Last: rs.Last})
	}
}

// batchLines is the number of lines parsed at once (a variable so that
// the fuzz test can cut small files into several batches).
var batchLines = 4096

// parseFn reads one ratings file (local path or any Beam filesystem URL;
// gzip recognised by its magic bytes) with privrec's parser (ratingio) in
// the declared format, batch by batch. A batch that fails to parse is
// re-parsed line by line: each line ratingio refuses goes to the error
// output as "source:line: reason", and the others go on. A header line
// (one ratingio reads as a header, not as a rating) is kept and put in
// front of every later batch.
type parseFn struct {
	Format   string  `json:"format"`
	Cols     string  `json:"cols"`
	Column   string  `json:"column"`
	HasScale bool    `json:"has_scale"`
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	// Sources are the pipeline's inputs, in order (a Rating's Src).
	Sources []string `json:"sources"`
	// Limit, when positive, stops the reading after that many lines (the
	// driver's format check).
	Limit int64 `json:"limit,omitempty"`
}

func (f *parseFn) options() ratingio.Options {
	return ratingio.Options{Format: f.Format, Cols: f.Cols, Column: f.Column, HasScale: f.HasScale, Min: f.Min, Max: f.Max,
		Duplicates: ratings.DupError}
}

// ProcessElement parses the file named path.
func (f *parseFn) ProcessElement(ctx context.Context, path string, emit func(string, Ratings), refuse func(Refusal)) error {
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer fs.Close()
	rc, err := fs.OpenRead(ctx, path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 1<<20)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		// compress/gzip, as ratingio reads gzip (multi-stream included).
		gz, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: gzip: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	lr := bufio.NewReaderSize(r, 1<<20)
	src := int32(-1)
	for i, p := range f.Sources {
		if p == path {
			src = int32(i)
		}
	}
	if src < 0 {
		return fmt.Errorf("%s is not one of the pipeline's inputs", path)
	}
	b := &batcher{fn: f, ctx: ctx, path: path, src: src, emit: emit, refuse: refuse}
	var line int64
	for {
		text, err := lr.ReadBytes('\n')
		if len(text) > 0 {
			line++
			if err := b.add(line, text); err != nil {
				return err
			}
		}
		if f.Limit > 0 && line >= f.Limit {
			break
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A damaged stream is the file's problem, not a row's: refuse
			// the rest of the file by name and position.
			refuse(Refusal{Src: src, Pos: line + 1, Msg: fmt.Sprintf("%s:%d: reading stopped: %v", path, line+1, err)})
			break
		}
	}
	return b.flush()
}

// batcher collects lines and parses them in batches. ratingio decides
// from a text's first data line whether it is a header, so every batch and
// every single line is parsed behind the file's own first line: its header
// (then skipped), or else its first data line, the anchor, whose rating
// is then left out (the batch that holds the anchor is parsed as it is).
type batcher struct {
	fn     *parseFn
	ctx    context.Context
	path   string
	src    int32
	emit   func(string, Ratings)
	refuse func(Refusal)

	checked    bool   // whether the first data line was looked at
	prefix     []byte // the header or the anchor line, newline-terminated
	header     bool   // prefix is a header
	anchorLine int64  // the anchor's line number (0: none)
	anchorUser string
	anchorItem string

	buf       bytes.Buffer
	first     int64 // line number of the batch's first line
	lines     int
	lineStart []int // offsets of the batch's lines in buf
}

// skipped reports whether ratingio skips the line: empty (after its line
// ending) or a comment.
func skipped(line []byte) bool {
	line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte{'\n'}), []byte{'\r'})
	return len(line) == 0 || line[0] == '#'
}

func withNewline(b []byte) []byte {
	if bytes.HasSuffix(b, []byte{'\n'}) {
		return b
	}
	return append(b, '\n')
}

func (b *batcher) add(line int64, text []byte) error {
	if !b.checked && !skipped(text) {
		b.checked = true
		b.prefix = withNewline(bytes.Clone(text))
		m, err := ratingio.ReadContext(b.ctx, bytes.NewReader(text), b.path, b.fn.options())
		switch {
		case err == nil && m.Len() == 0:
			// A header: every later batch is read behind it.
			b.header = true
			return nil
		case err == nil:
			items, _ := m.UserRow(0)
			b.anchorLine, b.anchorUser, b.anchorItem = line, m.Users.Name(0), m.Items.Name(items[0])
		default:
			b.prefix = nil // a malformed first line: refused below like any other
		}
	}
	if b.lines == 0 {
		b.first = line
		b.buf.Reset()
		b.lineStart = b.lineStart[:0]
	}
	b.lineStart = append(b.lineStart, b.buf.Len())
	b.buf.Write(withNewline(text))
	b.lines++
	if b.lines == batchLines {
		return b.flush()
	}
	return nil
}

// parse reads text behind the prefix unless text holds the anchor line
// (holds: whether it does) and emits its ratings as found within lines
// first–last, one Ratings per user, the anchor's rating left out when it
// was only the prefix.
func (b *batcher) parse(text []byte, holds bool, first, last int64) error {
	var in bytes.Buffer
	behind := b.prefix != nil && !holds
	if behind {
		in.Write(b.prefix)
	}
	in.Write(text)
	m, err := ratingio.ReadContext(b.ctx, &in, b.path, b.fn.options())
	if err != nil {
		return err
	}
	for u := range int32(m.NumUsers()) {
		items, vals := m.UserRow(u)
		user := m.Users.Name(u)
		rs := Ratings{Items: make([]string, 0, len(items)), Values: make([]float32, 0, len(items)), Src: b.src, First: first, Last: last}
		for k, j := range items {
			item := m.Items.Name(j)
			if behind && !b.header && user == b.anchorUser && item == b.anchorItem {
				continue
			}
			rs.Items = append(rs.Items, item)
			rs.Values = append(rs.Values, vals[k])
		}
		if len(rs.Items) > 0 {
			b.emit(user, rs)
		}
	}
	return nil
}

// flush parses the batch: whole, or line by line when it fails.
func (b *batcher) flush() error {
	if b.lines == 0 {
		return nil
	}
	defer func() { b.lines = 0 }()
	if err := b.ctx.Err(); err != nil {
		return err
	}
	last := b.first + int64(b.lines) - 1
	holds := b.anchorLine >= b.first && b.anchorLine <= last
	err := b.parse(b.buf.Bytes(), holds, b.first, last)
	if err == nil {
		return nil
	}
	var pe *ratingio.ParseError
	if !errors.As(err, &pe) {
		return fmt.Errorf("%s: lines %d–%d: %w", b.path, b.first, last, err)
	}
	data := b.buf.Bytes()
	for k, start := range b.lineStart {
		end := len(data)
		if k+1 < len(b.lineStart) {
			end = b.lineStart[k+1]
		}
		text := data[start:end]
		if skipped(text) {
			continue // empty or a comment, as ratingio skips them
		}
		n := b.first + int64(k)
		err := b.parse(text, n == b.anchorLine, n, n)
		switch {
		case err == nil:
		case errors.As(err, &pe):
			pe.Line = n
			// ratingio's hint to leave --format out does not hold here:
			// privrec-beam needs the format named.
			msg := strings.Replace(pe.Error(), " (or leave --format out to detect it)", "", 1)
			var de *ratings.DuplicateError
			if errors.As(err, &de) && b.anchorLine > 0 {
				msg = fmt.Sprintf("%s:%d: user %q rated item %q again (first at %s:%d)", b.path, n, b.anchorUser, b.anchorItem, b.path, b.anchorLine)
			}
			b.refuse(Refusal{Src: b.src, Pos: n, Msg: msg})
		default:
			return fmt.Errorf("%s:%d: %w", b.path, n, err)
		}
	}
	return nil
}
