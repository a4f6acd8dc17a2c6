package ratingio

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/privrec/privrec/ratings"
)

// The binary format (version 1; docs/DATA.md has the full layout): a
// 64-byte header, the user and item names, zero padding to a multiple of 8,
// the user-major arrays exactly as ratings.Matrix holds them (row offsets
// int64, item indices int32, values float32, optional timestamps int64),
// then the item-major view (column offsets int64, user indices int32,
// values float32), all little-endian, and a trailer of CRC-32C checksums:
// one for the header and names, one per array. Reading is one bulk copy per
// array (in parallel for regular files) plus linear checks: storing the
// item-major view (8 bytes per rating) saves rebuilding it, a random-access
// scatter that costs more than reading it.
const (
	binaryMagic   = "PRVRRATS"
	binaryVersion = 1
	headerSize    = 64
	flagTime      = 1 // timestamps follow the values
	flagColumns   = 2 // the item-major view follows
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// bytesOf views a slice of fixed-size numbers as bytes (no copy).
func bytesOf[T int32 | int64 | float32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// swapBytes reverses each size-byte word (only on big-endian hosts).
func swapBytes(b []byte, size int) {
	for i := 0; i+size <= len(b); i += size {
		for j, k := i, i+size-1; j < k; j, k = j+1, k-1 {
			b[j], b[k] = b[k], b[j]
		}
	}
}

// WriteBinary writes m in privrec's binary ratings format.
func WriteBinary(w io.Writer, m *ratings.Matrix) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := writeBinary(bw, m); err != nil {
		return fmt.Errorf("ratingio: writing binary: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("ratingio: writing binary: %w", err)
	}
	return nil
}

func namesBytes(ids *ratings.IDs) []byte {
	var out []byte
	for _, n := range ids.Names() {
		out = binary.AppendUvarint(out, uint64(len(n)))
		out = append(out, n...)
	}
	return out
}

func writeBinary(w *bufio.Writer, m *ratings.Matrix) error {
	rowPtr, rowCol, rowVal, rowT := m.CSR()
	colPtr, colRow, colVal := m.CSC()
	un, in := namesBytes(m.Users), namesBytes(m.Items)
	head := make([]byte, headerSize, headerSize+len(un)+len(in)+8)
	copy(head, binaryMagic)
	le := binary.LittleEndian
	le.PutUint32(head[8:], binaryVersion)
	flags := uint32(flagColumns)
	if rowT != nil {
		flags |= flagTime
	}
	le.PutUint32(head[12:], flags)
	le.PutUint64(head[16:], uint64(m.NumUsers()))
	le.PutUint64(head[24:], uint64(m.NumItems()))
	le.PutUint64(head[32:], uint64(m.Len()))
	le.PutUint64(head[40:], uint64(len(un)))
	le.PutUint64(head[48:], uint64(len(in)))
	head = append(head, un...)
	head = append(head, in...)
	head = append(head, make([]byte, pad8(len(un)+len(in)))...)
	trailer := le.AppendUint32(nil, crc32.Checksum(head, castagnoli))
	if _, err := w.Write(head); err != nil {
		return err
	}
	arrays := []struct {
		b    []byte
		size int
	}{{bytesOf(rowPtr), 8}, {bytesOf(rowCol), 4}, {bytesOf(rowVal), 4}, {bytesOf(rowT), 8},
		{bytesOf(colPtr), 8}, {bytesOf(colRow), 4}, {bytesOf(colVal), 4}}
	for k, a := range arrays {
		if k == 3 && rowT == nil {
			continue
		}
		b := a.b
		if !littleEndian {
			b = append([]byte(nil), b...)
			swapBytes(b, a.size)
		}
		trailer = le.AppendUint32(trailer, crc32.Checksum(b, castagnoli))
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	_, err := w.Write(trailer)
	return err
}

func pad8(n int) int { return (8 - n%8) % 8 }

// crcReader hashes what it reads.
type crcReader struct {
	r io.Reader
	h hash.Hash32
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	return n, err
}

// readArray reads n numbers. When the stream length is known (checked
// against the header beforehand) it allocates once and reads in place;
// otherwise it grows the slice as data arrives, so a corrupt header cannot
// make it allocate more than the stream holds (times two).
func readArray[T int32 | int64 | float32](ctx context.Context, r io.Reader, n uint64, known bool) ([]T, error) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	const piece = 1 << 24 // bytes per read call, so cancellation is checked
	var s []T
	if known {
		s = make([]T, n)
	} else {
		s = make([]T, 0, min(n, uint64(piece/size)))
	}
	for done := uint64(0); done < n; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		k := min(n-done, uint64(piece/size))
		if !known {
			if uint64(cap(s)) < done+k {
				ns := make([]T, done, min(n, max(2*uint64(cap(s)), done+k)))
				copy(ns, s)
				s = ns
			}
			s = s[:done+k]
		}
		b := bytesOf(s[done : done+k])
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		if !littleEndian {
			swapBytes(b, size)
		}
		done += k
	}
	return s, nil
}

func readNames(r io.Reader, size uint64, count uint64, known bool) ([]string, error) {
	if !known && size > 1<<32 {
		return nil, errors.New("name section larger than 4 GiB")
	}
	buf := make([]byte, 0, min(size, 1<<20))
	for uint64(len(buf)) < size {
		k := min(size-uint64(len(buf)), 1<<20)
		buf = append(buf, make([]byte, k)...)
		if _, err := io.ReadFull(r, buf[uint64(len(buf))-k:]); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, min(count, uint64(len(buf)))) // each name takes at least one byte
	all := string(buf)                                       // one allocation; the names are substrings of it
	for p := 0; p < len(all); {
		l, k := binary.Uvarint(buf[p:])
		if k <= 0 || l > uint64(len(all)-p-k) {
			return nil, errors.New("corrupt name section")
		}
		names = append(names, all[p+k:p+k+int(l)])
		p += k + int(l)
	}
	if uint64(len(names)) != count {
		return nil, fmt.Errorf("name section holds %d names, header says %d", len(names), count)
	}
	return names, nil
}

// section is one array of a binary file.
type section struct {
	what string
	b    []byte // the destination, a byte view of a typed slice
	size int    // bytes per element
	off  int64  // offset from the start of the file
	sum  uint32 // CRC-32C of the bytes read
}

// readBinary reads the binary format from r. size is the stream's length
// in bytes, or -1 if unknown; ra, when not nil, reads the same file at
// absolute offsets (base is the offset of the stream's start), so the
// arrays can be read and checksummed on all cores. It reads as header →
// names → arrays → checksums → values → matrix.
func readBinary(ctx context.Context, r io.Reader, ra io.ReaderAt, base int64, name string, opt Options, size int64) (*ratings.Matrix, error) {
	br := &binReader{name: name, r: r, cr: &crcReader{r: r, h: crc32.New(castagnoli)}, known: size >= 0}
	h, err := br.header(size)
	if err != nil {
		return nil, err
	}
	uNames, iNames, err := br.names(h)
	if err != nil {
		return nil, err
	}
	headSum := br.cr.h.Sum32()
	var a binArrays
	if br.known && ra != nil {
		err = br.arraysAt(ctx, ra, base, h, &a)
	} else {
		err = br.arraysStream(ctx, h, &a)
	}
	if err != nil {
		return nil, err
	}
	if err := br.checksums(headSum, &a); err != nil {
		return nil, err
	}
	if err := br.checkValues(a.rowVal, opt); err != nil {
		return nil, err
	}
	return br.matrix(h, uNames, iNames, &a)
}

// binReader is the state of one binary read: where errors point, the
// stream (raw and checksummed) and whether its length is known.
type binReader struct {
	name  string
	r     io.Reader
	cr    *crcReader
	known bool
}

// bad reports a malformed file.
func (br *binReader) bad(format string, a ...any) error {
	return &ParseError{File: br.name, Reason: "binary ratings file: " + fmt.Sprintf(format, a...)}
}

// badRead reports a failed read: damaged gzip data as the decompressor
// stream reported it (already a *ParseError), anything else as bad()
// wrapping err.
func (br *binReader) badRead(err error, format string, a ...any) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		return pe
	}
	return &ParseError{File: br.name, Reason: "binary ratings file: " + fmt.Sprintf(format, a...), Err: err}
}

// binHeader is the decoded, checked 64-byte header.
type binHeader struct {
	hasTime, hasCols bool
	nU, nI, nnz      uint64
	uLen, iLen       uint64 // bytes of user and item names
	headLen          uint64 // header, names and padding
	nSections        uint64
}

// header reads and checks the header; size, when known, must be the
// length the header implies.
func (br *binReader) header(size int64) (binHeader, error) {
	var raw [headerSize]byte
	if _, err := io.ReadFull(br.cr, raw[:]); err != nil {
		return binHeader{}, br.badRead(err, "truncated header: %v", err)
	}
	le := binary.LittleEndian
	if v := le.Uint32(raw[8:]); v != binaryVersion {
		return binHeader{}, br.bad("version %d; this privrec reads version %d", v, binaryVersion)
	}
	if le.Uint64(raw[56:]) != 0 {
		return binHeader{}, br.bad("reserved header bytes are not zero")
	}
	flags := le.Uint32(raw[12:])
	if flags&^(flagTime|flagColumns) != 0 {
		return binHeader{}, br.bad("unknown flags %#x", flags)
	}
	h := binHeader{
		hasTime: flags&flagTime != 0, hasCols: flags&flagColumns != 0,
		nU: le.Uint64(raw[16:]), nI: le.Uint64(raw[24:]), nnz: le.Uint64(raw[32:]),
		uLen: le.Uint64(raw[40:]), iLen: le.Uint64(raw[48:]),
	}
	const limit = 1 << 40
	if h.nU > maxIndex || h.nI > maxIndex || h.nnz > limit || h.uLen > limit || h.iLen > limit {
		return binHeader{}, br.bad("implausible header (users %d, items %d, ratings %d)", h.nU, h.nI, h.nnz)
	}
	want := h.layout()
	if br.known && uint64(size) != want {
		return binHeader{}, br.bad("the header implies %d bytes but the file has %d (truncated or corrupt)", want, size)
	}
	return h, nil
}

// layout sets headLen and nSections and returns the file length the
// header implies.
func (h *binHeader) layout() uint64 {
	names := h.uLen + h.iLen
	h.headLen = headerSize + names + uint64(pad8(int(names%8)))
	h.nSections = 3
	arrays := 8*(h.nU+1) + 8*h.nnz
	if h.hasTime {
		h.nSections++
		arrays += 8 * h.nnz
	}
	if h.hasCols {
		h.nSections += 3
		arrays += 8*(h.nI+1) + 8*h.nnz
	}
	return h.headLen + arrays + 4*(1+h.nSections)
}

// names reads the user and item names and the padding after them.
func (br *binReader) names(h binHeader) (uNames, iNames []string, err error) {
	uNames, err = readNames(br.cr, h.uLen, h.nU, br.known)
	if err != nil {
		return nil, nil, br.badRead(err, "user names: %v", err)
	}
	iNames, err = readNames(br.cr, h.iLen, h.nI, br.known)
	if err != nil {
		return nil, nil, br.badRead(err, "item names: %v", err)
	}
	if _, err := io.ReadFull(br.cr, make([]byte, pad8(int((h.uLen+h.iLen)%8)))); err != nil {
		return nil, nil, br.badRead(err, "truncated: %v", err)
	}
	return uNames, iNames, nil
}

// binArrays are the arrays of a binary file, their sections (in file
// order, each with its checksum) and the trailer of stored checksums.
type binArrays struct {
	rowPtr, rowT, colPtr []int64
	rowCol, colRow       []int32
	rowVal, colVal       []float32
	secs                 []*section
	trailer              []byte
}

// arraysAt allocates every array once and reads each on its own core.
func (br *binReader) arraysAt(ctx context.Context, ra io.ReaderAt, base int64, h binHeader, a *binArrays) error {
	a.trailer = make([]byte, 4*(1+h.nSections))
	a.rowPtr, a.rowCol, a.rowVal = make([]int64, h.nU+1), make([]int32, h.nnz), make([]float32, h.nnz)
	add := func(what string, b []byte, size int) { a.secs = append(a.secs, &section{what: what, b: b, size: size}) }
	add("row offsets", bytesOf(a.rowPtr), 8)
	add("item indices", bytesOf(a.rowCol), 4)
	add("values", bytesOf(a.rowVal), 4)
	if h.hasTime {
		a.rowT = make([]int64, h.nnz)
		add("timestamps", bytesOf(a.rowT), 8)
	}
	if h.hasCols {
		a.colPtr, a.colRow, a.colVal = make([]int64, h.nI+1), make([]int32, h.nnz), make([]float32, h.nnz)
		add("column offsets", bytesOf(a.colPtr), 8)
		add("user indices", bytesOf(a.colRow), 4)
		add("column values", bytesOf(a.colVal), 4)
	}
	off := base + int64(h.headLen)
	for _, s := range a.secs {
		s.off = off
		off += int64(len(s.b))
	}
	if err := readSections(ctx, ra, a.secs); err != nil {
		return wrapCtx(err, br.bad("%v", err))
	}
	if _, err := ra.ReadAt(a.trailer, off); err != nil {
		return br.bad("missing checksums: %v", err)
	}
	return nil
}

// arraysStream reads one array after the other, each with its own
// checksum, then the trailer, and checks that nothing follows.
func (br *binReader) arraysStream(ctx context.Context, h binHeader, a *binArrays) error {
	a.trailer = make([]byte, 4*(1+h.nSections))
	type step struct {
		what string
		read func() error
	}
	cr, known := br.cr, br.known
	steps := []step{
		{"row offsets", func() (err error) { a.rowPtr, err = readArray[int64](ctx, cr, h.nU+1, known); return }},
		{"item indices", func() (err error) { a.rowCol, err = readArray[int32](ctx, cr, h.nnz, known); return }},
		{"values", func() (err error) { a.rowVal, err = readArray[float32](ctx, cr, h.nnz, known); return }},
	}
	if h.hasTime {
		steps = append(steps, step{"timestamps", func() (err error) { a.rowT, err = readArray[int64](ctx, cr, h.nnz, known); return }})
	}
	if h.hasCols {
		steps = append(steps, []step{
			{"column offsets", func() (err error) { a.colPtr, err = readArray[int64](ctx, cr, h.nI+1, known); return }},
			{"user indices", func() (err error) { a.colRow, err = readArray[int32](ctx, cr, h.nnz, known); return }},
			{"column values", func() (err error) { a.colVal, err = readArray[float32](ctx, cr, h.nnz, known); return }},
		}...)
	}
	for _, st := range steps {
		cr.h.Reset()
		if err := st.read(); err != nil {
			return wrapCtx(err, br.badRead(err, "%s: %v", st.what, err))
		}
		a.secs = append(a.secs, &section{what: st.what, sum: cr.h.Sum32()})
	}
	return br.trailer(a.trailer)
}

// trailer reads the stored checksums and reads on to the end, which also
// lets a gzip stream check its own checksum and length.
func (br *binReader) trailer(trailer []byte) error {
	if _, err := io.ReadFull(br.r, trailer); err != nil {
		return br.badRead(err, "missing checksums: %v", err)
	}
	if n, err := br.r.Read(trailer[:1]); n != 0 {
		return br.bad("trailing data after the checksums")
	} else if err != nil && !errors.Is(err, io.EOF) {
		return br.badRead(err, "after the checksums: %v", err)
	}
	return nil
}

// checksums compares the computed checksums with the stored ones.
func (br *binReader) checksums(headSum uint32, a *binArrays) error {
	le := binary.LittleEndian
	if le.Uint32(a.trailer) != headSum {
		return br.bad("checksum mismatch in the header or names (corrupt file)")
	}
	for k, s := range a.secs {
		if le.Uint32(a.trailer[4*(k+1):]) != s.sum {
			return br.bad("checksum mismatch in the %s (corrupt file)", s.what)
		}
	}
	return nil
}

// checkValues refuses NaN, ±Inf and, with a declared scale, values off it.
func (br *binReader) checkValues(vals []float32, opt Options) error {
	lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
	if opt.HasScale {
		lo, hi = float32(opt.Min), float32(opt.Max)
	}
	for k, v := range vals {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 || v < lo || v > hi { // NaN or ±Inf, or off the scale
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return br.bad("rating %d is %v", k, v)
			}
			return br.bad("rating %d (%v) is outside the declared scale %v:%v", k, v, opt.Min, opt.Max)
		}
	}
	return nil
}

// matrix builds the matrix from the names and arrays (ratings checks the
// arrays' consistency).
func (br *binReader) matrix(h binHeader, uNames, iNames []string, a *binArrays) (*ratings.Matrix, error) {
	users, err := ratings.IDsFrom(uNames)
	if err != nil {
		return nil, br.bad("%v", err)
	}
	items, err := ratings.IDsFrom(iNames)
	if err != nil {
		return nil, br.bad("%v", err)
	}
	var m *ratings.Matrix
	if h.hasCols {
		m, err = ratings.FromViews(users, items, a.rowPtr, a.rowCol, a.rowVal, a.rowT, a.colPtr, a.colRow, a.colVal)
	} else {
		m, err = ratings.FromCSR(users, items, int(h.nI), a.rowPtr, a.rowCol, a.rowVal, a.rowT)
	}
	if err != nil {
		return nil, br.bad("%v", err)
	}
	return m, nil
}

// readSections reads and checksums the sections with ReadAt, largest
// first, on all cores.
func readSections(ctx context.Context, ra io.ReaderAt, secs []*section) error {
	order := slices.Clone(secs)
	slices.SortStableFunc(order, func(a, b *section) int { return len(b.b) - len(a.b) })
	work := make(chan *section, len(order))
	for _, s := range order {
		work <- s
	}
	close(work)
	workers := min(runtime.GOMAXPROCS(0), len(order))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				const piece = 1 << 24 // bytes per call, so cancellation is checked
				for p := 0; p < len(s.b); p += piece {
					if err := ctx.Err(); err != nil {
						errs[w] = err
						return
					}
					b := s.b[p:min(p+piece, len(s.b))]
					if _, err := ra.ReadAt(b, s.off+int64(p)); err != nil {
						errs[w] = fmt.Errorf("%s: %w", s.what, err)
						return
					}
					s.sum = crc32.Update(s.sum, castagnoli, b)
				}
				if !littleEndian {
					swapBytes(s.b, s.size)
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func wrapCtx(err, other error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return other
}
