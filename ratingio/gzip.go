package ratingio

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// countingReader counts the bytes read through it and remembers the first
// error from r other than io.EOF (an I/O error, as opposed to damage that
// the decompressor finds in the bytes).
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// isGzip reports whether the buffered stream starts with the gzip magic.
func isGzip(br *bufio.Reader) bool {
	magic, _ := br.Peek(2)
	return len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b
}

// gzipStream decompresses a gzip stream and reports every problem the
// decompressor finds (bad header, corrupt deflate data, checksum mismatch,
// truncation, garbage after the last member) as a *ParseError naming the
// file, the byte offset in the compressed stream and, for text, the line
// the decompressed data had reached. I/O errors of the underlying reader
// are passed on unchanged.
type gzipStream struct {
	name string
	raw  *countingReader // the compressed bytes read so far
	br   *bufio.Reader   // between raw and the decompressor (a flate.Reader, so gzip adds no buffer of its own)
	gz   *gzip.Reader
	text bool  // report the line reached
	out  int64 // decompressed bytes so far
	nl   int64 // newlines among them
	last byte  // the last decompressed byte
	err  error // the first error returned, so every later call gives the same
	pe   *ParseError
}

// newGzipStream reads the gzip header from br, which reads raw.
func newGzipStream(name string, raw *countingReader, br *bufio.Reader) (*gzipStream, error) {
	s := &gzipStream{name: name, raw: raw, br: br, text: true}
	gz, err := gzip.NewReader(br)
	if err != nil {
		return nil, s.fail(err, true)
	}
	// Members are chained here rather than by gzip itself, to tell bytes
	// after the last member apart from a damaged member.
	gz.Multistream(false)
	s.gz = gz
	return s, nil
}

func (s *gzipStream) Read(p []byte) (int, error) {
	for {
		if s.err != nil {
			return 0, s.err
		}
		n, err := s.gz.Read(p)
		if n > 0 {
			s.out += int64(n)
			s.nl += int64(bytes.Count(p[:n], []byte{'\n'}))
			s.last = p[n-1]
		}
		if err == io.EOF {
			// The end of a member: the end of the file, or another member
			// (concatenated gzip files are one stream).
			err = s.nextMember()
		} else if err != nil {
			s.err = s.fail(err, false)
			err = s.err
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// nextMember starts the next gzip member after one has ended: io.EOF at
// the end of the input, nil when a member follows, otherwise an error
// (which Read then keeps returning).
func (s *gzipStream) nextMember() error {
	switch _, err := s.br.Peek(1); {
	case err == io.EOF:
		s.err = io.EOF
	case err != nil:
		s.err = s.fail(err, false)
	case !isGzip(s.br):
		s.err = s.fail(errTrailing, false)
	default:
		if err := s.gz.Reset(s.br); err != nil {
			s.err = s.fail(err, true)
		} else {
			s.gz.Multistream(false)
		}
	}
	return s.err
}

// errTrailing is the Err of a *ParseError for bytes after the last gzip
// member that do not start another one; it is gzip.ErrHeader, as a reader
// that chains members itself reports it.
var errTrailing = gzip.ErrHeader

// Close releases the decompressor.
func (s *gzipStream) Close() error {
	if s.gz == nil {
		return nil
	}
	return s.gz.Close()
}

// setText says whether the decompressed data is text (then damage is
// also located by line) or the binary format (by byte offset only).
func (s *gzipStream) setText(text bool) {
	s.text = text
	if s.pe != nil {
		s.pe.Line = s.line()
	}
}

// line is the line holding the last decompressed byte (0 before any data,
// and for binary data).
func (s *gzipStream) line() int64 {
	if !s.text || s.out == 0 {
		return 0
	}
	if s.last == '\n' {
		return s.nl
	}
	return s.nl + 1
}

// fail turns an error of the decompressor into a *ParseError; an I/O error
// of the underlying reader is returned as it is.
func (s *gzipStream) fail(err error, header bool) error {
	if s.raw.err != nil && errors.Is(err, s.raw.err) {
		return err
	}
	off := s.raw.n - int64(s.br.Buffered()) // compressed bytes consumed
	var what string
	var ce flate.CorruptInputError
	switch {
	case errors.As(err, &ce):
		what = "corrupt compressed data"
	case errors.Is(err, gzip.ErrChecksum):
		what = "checksum mismatch (the data does not match the CRC-32 or length in the gzip trailer)"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		what = "truncated (the compressed stream ends early)"
		if header {
			what = "truncated header"
		}
	case errors.Is(err, gzip.ErrHeader) && header:
		what = "bad header"
	case errors.Is(err, errTrailing):
		what = "bytes after the end of the compressed data that do not start another gzip member"
	default:
		what = "unexpected error: " + err.Error()
	}
	s.pe = &ParseError{
		File:   s.name,
		Line:   s.line(),
		Reason: fmt.Sprintf("damaged gzip file: %s at byte %d of the compressed stream", what, off),
		Err:    err,
	}
	return s.pe
}

// readError adds the file name to an error from reading the input, unless
// it is already a *ParseError (damaged gzip data) that names it.
func readError(name string, err error) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}
