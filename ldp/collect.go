package ldp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// Header is what a collected (perturbed) ratings file records about how it
// was made. It is written as "# key=value" comment lines before the data.
type Header struct {
	Mechanism Mechanism
	Epsilon   float64
	// Units of the values: "normalised" (Laplace: [−1, 1] plus noise) or
	// "levels" (RR: 1…d).
	Units string
	Scale Scale
	// Users and Items are the sizes of the whole matrix the clients covered
	// (every user reported a value or "missing" for every item).
	Users, Items int
	// Reproducible is true when the noise came from a seeded stream.
	Reproducible bool
}

const headerMagic = "# privrec-collect v1"

// Write prints the header lines.
func (h Header) Write(w io.Writer, r Randomizer) error {
	_, err := fmt.Fprintf(w, "%s\n# mechanism=%s epsilon=%s units=%s scale_min=%s scale_max=%s levels=%d users=%d items=%d reproducible=%t\n# per-rating: %s\n# per-user: %s\n",
		headerMagic, h.Mechanism, strconv.FormatFloat(h.Epsilon, 'g', -1, 64), h.Units,
		strconv.FormatFloat(h.Scale.Min, 'g', -1, 64), strconv.FormatFloat(h.Scale.Max, 'g', -1, 64), h.Scale.Levels,
		h.Users, h.Items, h.Reproducible, r.PerRating(), r.PerUser(h.Items))
	return err
}

// ParseHeader reads the header from the first lines of a collected file.
// It returns an error when the file has no privrec-collect header.
func ParseHeader(r io.Reader) (Header, error) {
	br := bufio.NewReader(r)
	var h Header
	first, err := br.ReadString('\n')
	if err != nil && first == "" {
		return h, fmt.Errorf("ldp: reading header: %w", err)
	}
	if strings.TrimRight(first, "\r\n") != headerMagic {
		return h, fmt.Errorf("ldp: not a privrec collect file (first line %q, want %q)", strings.TrimSpace(first), headerMagic)
	}
	line, err := br.ReadString('\n')
	if err != nil && line == "" {
		return h, fmt.Errorf("ldp: reading header: %w", err)
	}
	kv := map[string]string{}
	for _, f := range strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "#")) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return h, fmt.Errorf("ldp: header field %q is not key=value", f)
		}
		kv[k] = v
	}
	num := func(k string) (float64, error) {
		v, err := strconv.ParseFloat(kv[k], 64)
		if err != nil {
			return 0, fmt.Errorf("ldp: header %s=%q: %w", k, kv[k], err)
		}
		return v, nil
	}
	if h.Mechanism, err = ParseMechanism(kv["mechanism"]); err != nil {
		return h, err
	}
	if h.Epsilon, err = num("epsilon"); err != nil {
		return h, err
	}
	if h.Scale.Min, err = num("scale_min"); err != nil {
		return h, err
	}
	if h.Scale.Max, err = num("scale_max"); err != nil {
		return h, err
	}
	for k, dst := range map[string]*int{"levels": &h.Scale.Levels, "users": &h.Users, "items": &h.Items} {
		v, err := strconv.Atoi(kv[k])
		if err != nil || v < 0 {
			return h, fmt.Errorf("ldp: header %s=%q is not a count", k, kv[k])
		}
		*dst = v
	}
	h.Units = kv["units"]
	h.Reproducible = kv["reproducible"] == "true"
	if _, err := New(h.Mechanism, h.Epsilon, h.Scale); err != nil {
		return h, fmt.Errorf("ldp: header: %w", err)
	}
	return h, nil
}

// CollectStats counts what a collection produced.
type CollectStats struct {
	Users, Items, Cells int64
	// Input ratings, kept ratings (rated → present), removed ratings
	// (rated → missing) and invented ratings (missing → present).
	Ratings, Kept, Removed, Invented int64
	// Reported is the number of data lines written (Kept + Invented).
	Reported int64
}

// Collect randomizes every user of m over the whole item set exactly as
// her device would, and writes the header and one "user \t item \t value"
// line per present report to w, in user order. Each user gets her own
// stream split from src (fresh crypto/rand for noise.Secure()). Users are
// processed in blocks by workers goroutines; only one dense row per user in
// flight is held, so memory stays O(workers · block · items) beyond m.
func Collect(ctx context.Context, w io.Writer, m *ratings.Matrix, r Randomizer, src *noise.Source, workers int) (CollectStats, error) {
	var st CollectStats
	nu, ni := m.NumUsers(), m.NumItems()
	st.Users, st.Items, st.Cells, st.Ratings = int64(nu), int64(ni), int64(nu)*int64(ni), int64(m.Len())
	for _, ids := range []*ratings.IDs{m.Users, m.Items} {
		for _, n := range ids.Names() {
			if n == "" || strings.ContainsAny(n, "\t\r\n") {
				return st, fmt.Errorf("ldp: identifier %q cannot be written as TSV", n)
			}
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	h := Header{Mechanism: r.Mechanism(), Epsilon: r.Epsilon(), Units: r.Units(), Scale: r.Scale(),
		Users: nu, Items: ni, Reproducible: src.Reproducible()}
	if err := h.Write(bw, r); err != nil {
		return st, fmt.Errorf("ldp: writing header: %w", err)
	}
	// The blocks below are large (≈ 1 MB); they go straight to w after the
	// header, without a second copy through bufio.
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("ldp: writing header: %w", err)
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	const block = 32
	nblocks := (nu + block - 1) / block
	type result struct {
		buf                     *[]byte
		kept, removed, invented int64
		err                     error
	}
	// Each block's result goes to its own 1-slot channel; the writer drains
	// them in order, so output order (and seeded output) is deterministic.
	slots := make([]chan result, nblocks)
	for b := range slots {
		slots[b] = make(chan result, 1)
	}
	srcs := make([]*noise.Source, nu)
	for u := range srcs {
		srcs[u] = src.Split()
	}
	// Identifiers with their separators appended once, not per report.
	users := make([][]byte, nu)
	for u, n := range m.Users.Names() {
		users[u] = append([]byte(n), '\t')
	}
	items := make([][]byte, ni)
	for j, n := range m.Items.Names() {
		items[j] = append([]byte(n), '\t')
	}
	// Output buffers are recycled: at most workers + (blocks in flight)
	// exist at a time, each grown once to a block's size.
	var pool sync.Pool
	next := make(chan int, nblocks)
	for b := range nblocks {
		next <- b
	}
	close(next)
	levels := h.Units == "levels"
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := make([]float64, ni)
			out := make([]float64, ni)
			for b := range next {
				select {
				case <-stop:
					return
				default:
				}
				var res result
				if err := ctx.Err(); err != nil {
					res.err = err
					slots[b] <- res
					continue
				}
				bp, _ := pool.Get().(*[]byte)
				if bp == nil {
					bp = new([]byte)
				}
				buf := (*bp)[:0]
				for u := b * block; u < min(nu, (b+1)*block); u++ {
					for j := range in {
						in[j] = Missing
					}
					its, vals := m.UserRow(int32(u))
					for k, it := range its {
						in[it] = float64(vals[k])
					}
					if err := r.Randomize(srcs[u], in, out); err != nil {
						res.err = fmt.Errorf("user %s: %w", m.Users.Name(int32(u)), err)
						break
					}
					srcs[u] = nil
					name := users[u]
					for j, v := range out {
						rated := !IsMissing(in[j])
						if IsMissing(v) {
							if rated {
								res.removed++
							}
							continue
						}
						if rated {
							res.kept++
						} else {
							res.invented++
						}
						buf = append(buf, name...)
						buf = append(buf, items[j]...)
						if levels {
							buf = strconv.AppendInt(buf, int64(v), 10)
						} else {
							buf = AppendReport(buf, v)
						}
						buf = append(buf, '\n')
					}
				}
				*bp = buf
				res.buf = bp
				slots[b] <- res
			}
		}()
	}
	var firstErr error
	for b := range nblocks {
		res := <-slots[b]
		if res.err != nil {
			firstErr = res.err
			close(stop)
			break
		}
		st.Kept += res.kept
		st.Removed += res.removed
		st.Invented += res.invented
		if _, err := w.Write(*res.buf); err != nil {
			firstErr = fmt.Errorf("ldp: writing: %w", err)
			close(stop)
			break
		}
		pool.Put(res.buf)
	}
	wg.Wait()
	if firstErr != nil {
		return st, firstErr
	}
	st.Reported = st.Kept + st.Invented
	return st, nil
}

// ReportDecimals is the number of decimal places AppendReport writes: the
// reports are noisy with Laplace scale 2/ε ≥ 2/700 in normalised units, so
// a rounding error of at most 5·10⁻⁷ (post-processing, no privacy cost) is
// far below the noise.
const ReportDecimals = 6

// AppendReport appends v in fixed-point notation with ReportDecimals
// decimal places, trailing zeros removed ("-2.118813", "0.5", "3"). It is
// several times faster than strconv.AppendFloat(…, 'g', 7, 64), which
// dominated collect's formatting cost. Values of magnitude ≥ 10¹² (not
// produced by the mechanisms) and non-finite values fall back to
// strconv's shortest representation.
func AppendReport(b []byte, v float64) []byte {
	const scale = 1e6 // 10^ReportDecimals
	a := math.Abs(v)
	if !(a < 1e12) {
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	n := uint64(math.Round(a * scale))
	if n == 0 {
		return append(b, '0')
	}
	if v < 0 {
		b = append(b, '-')
	}
	b = strconv.AppendUint(b, n/scale, 10)
	f := n % scale
	if f == 0 {
		return b
	}
	var d [ReportDecimals + 1]byte
	d[0] = '.'
	for k := ReportDecimals; k >= 1; k-- {
		d[k] = byte('0' + f%10)
		f /= 10
	}
	end := ReportDecimals + 1
	for d[end-1] == '0' {
		end--
	}
	return append(b, d[:end]...)
}

// DetectScale infers the rating scale of m: [min, max] of its values and,
// when every value lies on an integer-spaced or half-integer-spaced grid,
// the number of levels. Callers should prefer a declared scale.
func DetectScale(m *ratings.Matrix) Scale {
	lo, hi := m.Range()
	sc := Scale{Min: lo, Max: hi}
	for _, step := range []float64{1, 0.5} {
		ok := true
		m.All(func(e ratings.Entry) bool {
			k := (float64(e.Value) - lo) / step
			if math.Abs(k-math.Round(k)) > 1e-6 {
				ok = false
				return false
			}
			return true
		})
		if ok && hi > lo {
			sc.Levels = int(math.Round((hi-lo)/step)) + 1
			break
		}
	}
	return sc
}
