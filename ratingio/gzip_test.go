package ratingio

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func gzipBytes(t testing.TB, data []byte, level int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, level)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// lineReached is the line holding the last byte that gzip decompresses from
// z before it fails (0 if none): what a damaged-gzip *ParseError reports.
func lineReached(z []byte) int64 {
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return 0
	}
	out, _ := io.ReadAll(zr)
	if len(out) == 0 {
		return 0
	}
	n := int64(bytes.Count(out, []byte{'\n'}))
	if out[len(out)-1] != '\n' {
		n++
	}
	return n
}

// TestDamagedGzip: every way a gzip stream can be damaged is a *ParseError
// naming the file, saying "damaged gzip file" and where, and unwrapping to
// the decompressor's error.
func TestDamagedGzip(t *testing.T) {
	const lines = 10000
	var text strings.Builder
	for i := 1; i <= lines; i++ {
		text.WriteString(itoa(i%101+1) + "\t" + itoa(i) + "\t" + itoa(i%5+1) + "\t88125" + itoa(i) + "\n")
	}
	good := gzipBytes(t, []byte(text.String()), gzip.BestSpeed)
	stored := gzipBytes(t, []byte(text.String()), gzip.NoCompression) // data bytes appear as they are
	n := len(good)
	with := func(z []byte, f func(z []byte)) []byte {
		z = bytes.Clone(z)
		f(z)
		return z
	}
	flip := func(i int) func([]byte) { return func(z []byte) { z[i] ^= 0xff } }
	corrupt := func(err error) bool {
		var ce flate.CorruptInputError
		return errors.As(err, &ce)
	}
	// digit changes a digit of the last line of stored, so the line still
	// reads and only the CRC can tell.
	digit := func(z []byte) {
		i := bytes.LastIndex(z, []byte("\t88125"+itoa(lines)+"\n"))
		if i < 0 {
			t.Fatal("last line not found in the stored stream")
		}
		z[i+2] ^= 1
	}
	is := func(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

	tests := []struct {
		name   string
		data   []byte
		reason string           // in the message, after "damaged gzip file: "
		offset int              // byte of the compressed stream named in the message, -1: any
		line   int64            // the line reached, -1: as gzip itself gets (lineReached)
		unwrap func(error) bool // the underlying error
	}{
		{"issue 17 fuzz input", []byte("\x1f\x8b\bA00000000000"), "corrupt compressed data", -1, 0, corrupt},
		{"magic only", []byte("\x1f\x8b"), "truncated header", 2, 0, is(io.ErrUnexpectedEOF)},
		{"truncated header", good[:7], "truncated header", 7, 0, is(io.ErrUnexpectedEOF)},
		{"bad compression method", with(good, func(z []byte) { z[2] = 9 }), "bad header", 10, 0, is(gzip.ErrHeader)},
		{"corrupt deflate stream", with(good, func(z []byte) { z[10] = 0xff }), "corrupt compressed data", -1, 0, corrupt},
		{"corrupt stored block header", with(stored, flip(10+5+65535+1)), "corrupt compressed data", 10 + 5 + 65535 + 5, -1, corrupt},
		{"truncated in the middle", good[:n/2], "truncated (the compressed stream ends early)", n / 2, -1, is(io.ErrUnexpectedEOF)},
		{"truncated stored data", stored[:len(stored)/2], "truncated (the compressed stream ends early)", len(stored) / 2, -1, is(io.ErrUnexpectedEOF)},
		{"trailer missing", good[:n-8], "truncated (the compressed stream ends early)", n - 8, lines, is(io.ErrUnexpectedEOF)},
		{"trailer truncated", good[:n-3], "truncated (the compressed stream ends early)", n - 3, lines, is(io.ErrUnexpectedEOF)},
		{"bad CRC", with(good, flip(n-8)), "checksum mismatch", n, lines, is(gzip.ErrChecksum)},
		{"bad length", with(good, flip(n-1)), "checksum mismatch", n, lines, is(gzip.ErrChecksum)},
		{"data corrupt, CRC catches it", with(stored, digit), "checksum mismatch", len(stored), lines, is(gzip.ErrChecksum)},
		{"garbage after the stream", append(bytes.Clone(good), "1\t2\t3\t4\n"...), "bytes after the end of the compressed data that do not start another gzip member", n, lines, is(gzip.ErrHeader)},
		{"a zero byte after the stream", append(bytes.Clone(good), 0), "bytes after the end", n, lines, is(gzip.ErrHeader)},
		{"two members, the second damaged", append(bytes.Clone(good), with(good, flip(n-5))...), "checksum mismatch", 2 * n, 2 * lines, is(gzip.ErrChecksum)},
		{"second member truncated", append(bytes.Clone(good), good[:20]...), "truncated", n + 20, lines, is(io.ErrUnexpectedEOF)},
	}
	for _, tc := range tests {
		for _, bs := range []int{blockSize, 100} {
			t.Run(tc.name+"/block "+itoa(bs), func(t *testing.T) {
				withBlockSize(t, bs, func() {
					for _, format := range []string{"", "movielens-100k", "tsv"} {
						path := writeFile(t, "u.data.gz", string(tc.data))
						_, err := ReadFile(path, Options{Format: format})
						var pe *ParseError
						if !errors.As(err, &pe) {
							t.Fatalf("format %q: error %v (%T) is not a *ParseError", format, err, err)
						}
						if pe.File != path || !strings.Contains(pe.Reason, "damaged gzip file: "+tc.reason) {
							t.Errorf("format %q: %v", format, err)
						}
						if !strings.HasPrefix(err.Error(), path+":") || !strings.Contains(err.Error(), "damaged gzip file") {
							t.Errorf("message %q does not name the file and say damaged gzip", err)
						}
						if tc.offset >= 0 && !strings.Contains(pe.Reason, " at byte "+itoa(tc.offset)+" of the compressed stream") {
							t.Errorf("want byte %d: %v", tc.offset, err)
						}
						if want := tc.line; want >= 0 && pe.Line != want || want < 0 && pe.Line != lineReached(tc.data) {
							t.Errorf("line %d, want %d (gzip reaches %d): %v", pe.Line, want, lineReached(tc.data), err)
						}
						if tc.unwrap != nil && !tc.unwrap(pe.Err) {
							t.Errorf("Err %#v is not the expected decompressor error", pe.Err)
						}
						if !errors.Is(err, pe.Err) {
							t.Errorf("errors.Is(err, its Err) is false")
						}
					}
				})
			})
		}
	}
}

// TestDamagedGzipLineReached: damage in the middle of a text file gives the
// line the decompressed data had reached; a bad line before the damage is
// reported instead (the first problem in file order), whatever the block
// size.
func TestDamagedGzipLineReached(t *testing.T) {
	var text strings.Builder
	for i := 1; i <= 3000; i++ {
		rating := itoa(i%5 + 1)
		if i == 700 {
			rating = "x"
		}
		text.WriteString(itoa(i) + "\t" + itoa(i%7) + "\t" + rating + "\n")
	}
	bad := gzipBytes(t, []byte(text.String()), gzip.BestSpeed)
	cut := bad[:len(bad)*3/4]
	goodText := strings.Replace(text.String(), "\tx\n", "\t1\n", 1)
	okCut := gzipBytes(t, []byte(goodText), gzip.BestSpeed)
	okCut = okCut[:len(okCut)*3/4]
	want := lineReached(okCut)
	if want < 1000 || want > 3000 {
		t.Fatalf("test data: gzip reaches line %d", want)
	}
	for _, bs := range []int{1 << 20, 4096, 7} {
		withBlockSize(t, bs, func() {
			_, err := ReadContext(context.Background(), bytes.NewReader(cut), "x.tsv.gz", Options{})
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line != 700 || pe.Column != 3 {
				t.Errorf("block %d: bad line before damage: %v", bs, err)
			}
			_, err = ReadContext(context.Background(), bytes.NewReader(okCut), "x.tsv.gz", Options{})
			if !errors.As(err, &pe) || pe.Line != want || !strings.Contains(err.Error(), "x.tsv.gz:"+strconv.FormatInt(want, 10)+": damaged gzip file: truncated") {
				t.Errorf("block %d: %v, want line %d", bs, err, want)
			}
		})
	}
}

// TestDamagedGzipBinary: the binary format inside a damaged gzip stream
// (the binary checksums cannot see a bad gzip trailer) and Detect.
func TestDamagedGzipBinary(t *testing.T) {
	var bin bytes.Buffer
	if err := WriteBinary(&bin, randomMatrix(t, 3, 50, true)); err != nil {
		t.Fatal(err)
	}
	z := gzipBytes(t, bin.Bytes(), gzip.BestSpeed)
	if _, err := ReadContext(context.Background(), bytes.NewReader(z), "x.bin.gz", Options{}); err != nil {
		t.Fatalf("intact: %v", err)
	}
	badCRC := bytes.Clone(z)
	badCRC[len(z)-6] ^= 1
	for _, tc := range []struct {
		name   string
		data   []byte
		reason string
		target error
	}{
		{"bad CRC", badCRC, "checksum mismatch", gzip.ErrChecksum},
		{"truncated", z[:len(z)/2], "truncated", io.ErrUnexpectedEOF},
		{"trailer missing", z[:len(z)-8], "truncated", io.ErrUnexpectedEOF},
		{"a zero byte after the stream", append(bytes.Clone(z), 0), "bytes after the end of the compressed data", gzip.ErrHeader},
		{"a second member truncated", append(bytes.Clone(z), z[:5]...), "truncated header", io.ErrUnexpectedEOF},
	} {
		for _, format := range []string{"", "binary"} {
			_, err := ReadContext(context.Background(), bytes.NewReader(tc.data), "x.bin.gz", Options{Format: format})
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != "x.bin.gz" || pe.Line != 0 || !strings.Contains(pe.Reason, "damaged gzip file: "+tc.reason) || !errors.Is(err, tc.target) {
				t.Errorf("%s, format %q: %v", tc.name, format, err)
			}
		}
	}

	// Detect reads the first 64 KiB only, so it sees damage near the start.
	path := writeFile(t, "u.data.gz", "\x1f\x8b\bA00000000000")
	_, err := Detect(path)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.File != path || !strings.Contains(err.Error(), "damaged gzip file: corrupt compressed data") {
		t.Errorf("Detect: %v", err)
	}
	path = writeFile(t, "u.data.gz", "\x1f\x8b\x08")
	if _, err := Detect(path); !errors.As(err, &pe) || !strings.Contains(err.Error(), "damaged gzip file: truncated header") {
		t.Errorf("Detect: %v", err)
	}
}

func TestGzipIOErrorIsNotDamage(t *testing.T) {
	z := gzipBytes(t, []byte("1\t2\t3\n"), gzip.BestSpeed)
	boom := errors.New("disk on fire")
	r := io.MultiReader(bytes.NewReader(z[:12]), iotest.ErrReader(boom))
	_, err := ReadContext(context.Background(), r, "x.tsv.gz", Options{})
	var pe *ParseError
	if !errors.Is(err, boom) || errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "x.tsv.gz: ") {
		t.Errorf("got %v", err)
	}
}

// TestGzipMembers: concatenated gzip files (several members) are one
// stream, as gzip -d reads them.
func TestGzipMembers(t *testing.T) {
	z := append(gzipBytes(t, []byte("1\t10\t4\n2\t10"), gzip.BestSpeed), gzipBytes(t, []byte("\t5\n"), gzip.NoCompression)...)
	z = append(z, gzipBytes(t, nil, gzip.BestSpeed)...)
	z = append(z, gzipBytes(t, []byte("3\t11\t1\n"), gzip.BestSpeed)...)
	m, err := ReadContext(context.Background(), bytes.NewReader(z), "x.tsv.gz", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := triples(m), "1\t10\t4\n2\t10\t5\n3\t11\t1\n"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}
