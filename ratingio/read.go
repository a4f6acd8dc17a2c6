package ratingio

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/privrec/privrec/ratings"
)

// ReadFile reads a ratings file (gzip transparently) in the given format;
// see ReadContext.
func ReadFile(path string, opt Options) (*ratings.Matrix, error) {
	return ReadFileContext(context.Background(), path, opt)
}

// ReadFileContext is ReadFile with a context: cancelling it stops the read.
func ReadFileContext(ctx context.Context, path string, opt Options) (*ratings.Matrix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadContext(ctx, f, path, opt)
}

// ReadContext reads ratings from r; name is the file name used in errors
// and for format detection. Gzip-compressed input is recognised by its
// magic bytes, the binary format by its own, and a UTF-8 byte-order mark at
// the start is skipped. Text is cut into blocks of whole lines that are
// parsed on all cores; the first bad line (in file order) is reported as a
// *ParseError.
func ReadContext(ctx context.Context, r io.Reader, name string, opt Options) (*ratings.Matrix, error) {
	size := int64(-1)  // stream length, when known (binary format checks)
	var ra io.ReaderAt // random access to the same bytes (binary format)
	var base int64
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			if off, err := f.Seek(0, io.SeekCurrent); err == nil {
				size, ra, base = st.Size()-off, f, off
			}
		}
	}
	raw := &countingReader{r: r}
	br := bufio.NewReaderSize(raw, 1<<16)
	var gz *gzipStream
	if isGzip(br) {
		var err error
		if gz, err = newGzipStream(name, raw, br); err != nil {
			return nil, readError(name, err)
		}
		defer gz.Close()
		size, ra = -1, nil
		br = bufio.NewReaderSize(gz, 1<<16)
	}
	if magic, _ := br.Peek(len(binaryMagic)); string(magic) == binaryMagic {
		if opt.Format != "" && opt.Format != "auto" && opt.Format != "binary" {
			return nil, &ParseError{File: name, Reason: fmt.Sprintf("this is a privrec binary ratings file, not %s", opt.Format)}
		}
		if gz != nil {
			gz.setText(false)
		}
		return readBinary(ctx, br, ra, base, name, opt, size)
	}
	if opt.Format == "binary" {
		return nil, &ParseError{File: name, Reason: "not a privrec binary ratings file (bad magic)"}
	}
	return readText(ctx, br, name, opt)
}

// blockSize is the size of the blocks of lines handed to the parsers
// (a variable so tests can exercise block boundaries).
var blockSize = 4 << 20

// blocks cuts a stream into blocks that end at a line break (the last one
// at end of input).
type blocks struct {
	r     io.Reader
	carry []byte
	eof   bool
	err   error // a read error, returned once the lines before it are out
	free  chan []byte
}

// next returns the next block, nil at the end of input.
func (b *blocks) next() ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	var buf []byte
	select {
	case buf = <-b.free:
		buf = buf[:0]
	default:
		buf = make([]byte, 0, min(blockSize+blockSize/4, 1<<16)) // grows for big inputs
	}
	buf = append(buf, b.carry...)
	b.carry = b.carry[:0]
	for {
		if b.eof {
			if len(buf) == 0 {
				return nil, nil
			}
			return buf, nil
		}
		if len(buf) >= blockSize {
			if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
				b.carry = append(b.carry, buf[i+1:]...)
				return buf[:i+1], nil
			}
		}
		if cap(buf)-len(buf) < min(max(blockSize/4, 16), 1<<16) {
			buf = growBuf(buf, max(cap(buf), 16))
		}
		n, err := b.r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			b.eof = true
		} else if err != nil {
			// Hand out the whole lines read before the error, so that a
			// bad line among them is still reported first (file order);
			// the error comes with the next call.
			b.err = err
			if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
				return buf[:i+1], nil
			}
			return nil, err
		}
	}
}

func growBuf(b []byte, n int) []byte {
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}

// firstLine returns the first line of data that is neither blank nor a
// comment (a line starting with '#'), BOM and CR removed, and its 1-based
// line number, or ok=false.
func firstLine(data []byte) (line []byte, no int64, ok bool) {
	data = bytes.TrimPrefix(data, bom)
	for len(data) > 0 {
		no++
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			line, data = data, nil
		} else {
			line, data = data[:i], data[i+1:]
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(line) > 0 && line[0] != '#' {
			return line, no, true
		}
	}
	return nil, 0, false
}

// readText reads text as first block (the format settled by its first
// line) → blocks parsed on all cores → the first bad line in file order,
// else the matrix assembled from the parsed blocks.
func readText(ctx context.Context, r io.Reader, name string, opt Options) (*ratings.Matrix, error) {
	bl := &blocks{r: r}
	first, line1, no1, err := firstBlock(bl, name)
	if err != nil {
		return nil, err
	}
	s, err := newSpec(&opt, name, line1, no1)
	if err != nil {
		return nil, teach(err, &opt, nil, name, line1, no1)
	}
	chunks, readErr := parseBlocks(ctx, bl, s, first)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A bad line comes before a read error (e.g. damaged gzip data) that
	// follows it in the file: whichever the reading loop met first, report
	// the first problem in file order.
	n := 0
	for _, c := range chunks {
		if c.err != nil {
			c.err.File = name
			return nil, teach(c.err, &opt, s, name, line1, no1)
		}
		n += c.user.len()
	}
	if readErr != nil {
		return nil, readError(name, readErr)
	}
	if n == 0 {
		reason := "empty file: no ratings"
		if s.header {
			reason = "no ratings after the header line"
		}
		return nil, &ParseError{File: name, Reason: reason}
	}
	return assemble(ctx, name, chunks, s.hasTime, opt.Duplicates)
}

// firstBlock reads the first block, extended until it holds the first
// non-blank line whole, and returns that line and its number.
func firstBlock(bl *blocks, name string) (first, line1 []byte, no1 int64, err error) {
	first, err = bl.next()
	if err != nil {
		return nil, nil, 0, readError(name, err)
	}
	for {
		if _, _, ok := firstLine(first); ok || bl.eof {
			break
		}
		more, err := bl.next()
		if err != nil {
			return nil, nil, 0, readError(name, err)
		}
		first = append(first, more...)
	}
	line1, no1, ok := firstLine(first)
	if !ok {
		return nil, nil, 0, &ParseError{File: name, Reason: "empty file: no ratings"}
	}
	return first, line1, no1, nil
}

// blockParser parses blocks on all cores; once a block has a bad line,
// later blocks are neither parsed nor read.
type blockParser struct {
	s      *spec
	bl     *blocks
	work   chan *chunk
	stopAt atomic.Int64 // lowest chunk index with an error
	wg     sync.WaitGroup
}

// parseBlocks parses first and the blocks after it; it returns the
// chunks in file order and the error that stopped reading, if any.
func parseBlocks(ctx context.Context, bl *blocks, s *spec, first []byte) ([]*chunk, error) {
	workers := runtime.GOMAXPROCS(0)
	bl.free = make(chan []byte, workers+2)
	p := &blockParser{s: s, bl: bl, work: make(chan *chunk, workers)}
	p.stopAt.Store(1<<62 - 1)
	for range workers {
		go p.worker()
	}
	chunks, err := p.feed(ctx, first)
	close(p.work)
	p.wg.Wait()
	return chunks, err
}

// worker parses chunks and recycles their blocks.
func (p *blockParser) worker() {
	for c := range p.work {
		if int64(c.idx) < p.stopAt.Load() {
			p.s.parse(c)
			if c.err != nil {
				p.stop(int64(c.idx))
			}
		}
		if !c.first {
			select {
			case p.bl.free <- c.data:
			default:
			}
		}
		c.data = nil
		p.wg.Done()
	}
}

// stop lowers stopAt to idx.
func (p *blockParser) stop(idx int64) {
	for {
		cur := p.stopAt.Load()
		if idx >= cur || p.stopAt.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// feed hands the blocks to the workers until the input ends, the context
// is cancelled, a block is known bad or reading fails.
func (p *blockParser) feed(ctx context.Context, data []byte) ([]*chunk, error) {
	var chunks []*chunk
	line := int64(1)
	for data != nil {
		if ctx.Err() != nil || int64(len(chunks)) > p.stopAt.Load() {
			break
		}
		c := &chunk{idx: len(chunks), data: data, firstLine: line, first: len(chunks) == 0}
		line += int64(bytes.Count(data, []byte{'\n'}))
		chunks = append(chunks, c)
		p.wg.Add(1)
		p.work <- c
		var err error
		if data, err = p.bl.next(); err != nil {
			return chunks, err
		}
	}
	return chunks, nil
}

// Detect names the format of a file as ReadFile with Format "auto" would:
// "binary" by its magic bytes, otherwise from the file name and the first
// non-blank line (after gunzipping). It fails when that is ambiguous.
func Detect(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	raw := &countingReader{r: f}
	br := bufio.NewReaderSize(raw, 1<<16)
	var r io.Reader = br
	if isGzip(br) {
		gz, err := newGzipStream(path, raw, br)
		if err != nil {
			return "", readError(path, err)
		}
		defer gz.Close()
		r = gz
	}
	head := make([]byte, 1<<16)
	n, err := io.ReadFull(r, head)
	if err != nil && (err != io.ErrUnexpectedEOF && err != io.EOF) {
		return "", readError(path, err)
	}
	head = head[:n]
	if bytes.HasPrefix(head, []byte(binaryMagic)) {
		return "binary", nil
	}
	line, _, ok := firstLine(head)
	if !ok {
		return "", &ParseError{File: path, Reason: "empty file: no ratings"}
	}
	return detect(path, line)
}
