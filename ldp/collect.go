package ldp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

// Header is what a collected (perturbed) ratings file records about how it
// was made: the mechanism and ε, and facts declared before any rating was
// read — the rating scale the clients were told, the size of the item
// catalogue every report covers, and the number of clients. Nothing in it
// is computed from the ratings, so it is as public as the reports. It is
// written as "# key=value" comment lines before the data.
type Header struct {
	Mechanism Mechanism
	Epsilon   float64
	// Units of the values: "normalised" (Laplace: [−1, 1] plus noise) or
	// "levels" (RR: 1…d).
	Units string
	// Scale is the declared rating scale (--scale, --levels).
	Scale Scale
	// Users is the number of clients, each of which sent one report (a
	// report may have no present cell and then has no data line); Items
	// is the size of the declared catalogue (--items) every report covers,
	// rated or missing.
	Users, Items int
	// Sampler names how the clients drew their noise (SamplerFixedTime).
	Sampler string
	// Reproducible is true when the noise came from a seeded stream.
	Reproducible bool
	// MeanEpsilon is the ε of the mean report each client sent beside her
	// vector (MeanReporter; a "#mean" line per client), 0 when none was.
	MeanEpsilon float64
}

// HeaderMagic is the first line of a collect file. Version 1 files
// (privrec before the declared population) took the population, and
// without --scale the scale, from the raw ratings; they are refused.
const (
	HeaderMagic   = "# privrec-collect v2"
	headerMagicV1 = "# privrec-collect v1"
)

// Write prints the header lines. The per-rating and per-user guarantees
// printed compose the cells with the mean report (Guarantees).
func (h Header) Write(w io.Writer, r Randomizer) error {
	per, user, err := Guarantees(r, h.Items, h.MeanEpsilon)
	if err != nil {
		return err
	}
	mean := ""
	if h.MeanEpsilon > 0 {
		mean = " mean_epsilon=" + strconv.FormatFloat(h.MeanEpsilon, 'g', -1, 64)
	}
	_, err = fmt.Fprintf(w, "%s\n# mechanism=%s epsilon=%s units=%s scale_min=%s scale_max=%s levels=%d users=%d items=%d sampler=%s reproducible=%t%s\n# declared before collection: the scale, the %d catalogue items every report covers (missing cells randomized too) and the %d clients; nothing here is computed from ratings\n# per-rating: %s\n# per-user: %s\n",
		HeaderMagic, h.Mechanism, strconv.FormatFloat(h.Epsilon, 'g', -1, 64), h.Units,
		strconv.FormatFloat(h.Scale.Min, 'g', -1, 64), strconv.FormatFloat(h.Scale.Max, 'g', -1, 64), h.Scale.Levels,
		h.Users, h.Items, h.Sampler, h.Reproducible, mean, h.Items, h.Users, per, user)
	return err
}

// ParseHeader reads the header from the first lines of a collected file.
// It returns an error when the file has no privrec-collect v2 header.
func ParseHeader(r io.Reader) (Header, error) {
	br := bufio.NewReader(r)
	var h Header
	first, err := br.ReadString('\n')
	if err != nil && first == "" {
		return h, fmt.Errorf("ldp: reading header: %w", err)
	}
	switch strings.TrimRight(first, "\r\n") {
	case HeaderMagic:
	case headerMagicV1:
		return h, fmt.Errorf("ldp: a privrec-collect v1 file, whose header took the population (and possibly the scale) from the raw ratings: collect again with `privrec collect --scale MIN:MAX --items FILE`")
	default:
		return h, fmt.Errorf("ldp: not a privrec collect file (first line %q, want %q)", strings.TrimSpace(first), HeaderMagic)
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
	if h.Users < 1 || h.Items < 1 {
		return h, fmt.Errorf("ldp: header declares %d clients and %d catalogue items; both must be positive", h.Users, h.Items)
	}
	h.Units = kv["units"]
	if h.Sampler = kv["sampler"]; h.Sampler == "" {
		return h, fmt.Errorf("ldp: header names no sampler")
	}
	h.Reproducible = kv["reproducible"] == "true"
	rnd, err := New(h.Mechanism, h.Epsilon, h.Scale)
	if err != nil {
		return h, fmt.Errorf("ldp: header: %w", err)
	}
	if v, ok := kv["mean_epsilon"]; ok {
		if h.MeanEpsilon, err = strconv.ParseFloat(v, 64); err != nil {
			return h, fmt.Errorf("ldp: header mean_epsilon=%q: %w", v, err)
		}
		if _, err := NewMeanReporter(h.MeanEpsilon, h.Scale); err != nil {
			return h, fmt.Errorf("ldp: header mean_epsilon=%q: %w", v, err)
		}
	}
	if h.Units != rnd.Units() {
		return h, fmt.Errorf("ldp: header units=%q, but %s reports are in %s units", h.Units, h.Mechanism, rnd.Units())
	}
	return h, nil
}

// CollectStats counts what a collection produced. Users, Items, Cells
// and Reported are facts of the reports (public); the rest compare the
// reports with the true ratings and are known only to whoever holds those
// (a simulation, or one user about herself).
type CollectStats struct {
	Users, Items, Cells int64
	// Reported is the number of data lines written (Kept + Invented).
	Reported int64
	// Input ratings of catalogue items, kept ratings (rated → present),
	// removed ratings (rated → missing) and invented ratings (missing →
	// present); Outside counts ratings of items outside the catalogue,
	// which no client can report.
	Ratings, Kept, Removed, Invented, Outside int64
}

// CollectOver randomizes the vector of every user of m over the catalogue
// (the declared item IDs, in order) exactly as her device would, and
// writes the header and one "user \t item \t value" line per present
// report to w, users in the byte order of their IDs: a report's position
// is a function of the set of clients (public), never of the ratings —
// the order of a ratings file (by time, by item) is, and models trained
// on the reports inherit the order of their rows. The users of m (its user IDs, including any
// with an empty row: see WithClients) are the clients: each sends one
// report covering every catalogue item, rated or missing; ratings of
// items outside the catalogue are not reported (counted in Outside). The
// scale is the randomizer's (declared). Each user gets her own stream
// split from src (fresh crypto/rand for noise.Secure()). With mean
// non-nil each client also sends her mean report (MeanReporter), written as
// a "#mean \t user \t value" line before her report lines and drawn from
// her stream after her cells. Users are
// processed in blocks by workers goroutines; only one dense row per user in
// flight is held, so memory stays O(workers · block · items) beyond m.
func CollectOver(ctx context.Context, w io.Writer, m *ratings.Matrix, r Randomizer, mean *MeanReporter, catalogue []string, src *noise.Source, workers int) (CollectStats, error) {
	var st CollectStats
	nu, ni := m.NumUsers(), len(catalogue)
	if nu == 0 {
		return st, fmt.Errorf("ldp: no clients (no users in the ratings)")
	}
	if ni == 0 {
		return st, fmt.Errorf("ldp: the catalogue lists no items")
	}
	st.Users, st.Items, st.Cells = int64(nu), int64(ni), int64(nu)*int64(ni)
	remap, err := catalogueRemap(m, catalogue)
	if err != nil {
		return st, err
	}
	h, err := writeCollectHeader(w, r, mean, nu, ni, src.Reproducible())
	if err != nil {
		return st, err
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	c := newCollector(m, r, mean, catalogue, remap, src, h.Units == "levels")
	c.start(ctx, workers)
	err = c.drain(w, &st)
	c.wg.Wait()
	if err != nil {
		return st, err
	}
	st.Reported = st.Kept + st.Invented
	return st, nil
}

// checkReportID refuses an identifier that cannot be written as a field
// of a TSV report line.
func checkReportID(n string) error {
	if n == "" || strings.ContainsAny(n, "\t\r\n") || strings.HasPrefix(n, "#") {
		return fmt.Errorf("ldp: identifier %q cannot be written as a TSV report", n)
	}
	return nil
}

// catalogueRemap checks the catalogue's and m's user IDs and maps each of
// m's items to its catalogue index (−1 outside it).
func catalogueRemap(m *ratings.Matrix, catalogue []string) ([]int32, error) {
	index := make(map[string]int32, len(catalogue))
	for j, n := range catalogue {
		if err := checkReportID(n); err != nil {
			return nil, err
		}
		if _, dup := index[n]; dup {
			return nil, fmt.Errorf("ldp: catalogue item %q listed twice", n)
		}
		index[n] = int32(j)
	}
	for _, n := range m.Users.Names() {
		if err := checkReportID(n); err != nil {
			return nil, err
		}
	}
	remap := make([]int32, m.NumItems())
	for i, n := range m.Items.Names() {
		j, ok := index[n]
		if !ok {
			j = -1
		}
		remap[i] = j
	}
	return remap, nil
}

// writeCollectHeader writes the header of a collection by r (and mean)
// from users clients over items catalogue items.
func writeCollectHeader(w io.Writer, r Randomizer, mean *MeanReporter, users, items int, reproducible bool) (Header, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	h := Header{Mechanism: r.Mechanism(), Epsilon: r.Epsilon(), Units: r.Units(), Scale: r.Scale(),
		Users: users, Items: items, Sampler: r.Sampler(), Reproducible: reproducible}
	if mean != nil {
		h.MeanEpsilon = mean.Epsilon()
	}
	if err := h.Write(bw, r); err != nil {
		return h, fmt.Errorf("ldp: writing header: %w", err)
	}
	// The blocks of reports are large (≈ 1 MB); they go straight to w
	// after the header, without a second copy through bufio.
	if err := bw.Flush(); err != nil {
		return h, fmt.Errorf("ldp: writing header: %w", err)
	}
	return h, nil
}

// collectBlockUsers is how many clients' reports a block holds.
const collectBlockUsers = 32

// collectBlock is one block's reports (its lines in buf) and counts.
type collectBlock struct {
	buf                                    *[]byte
	ratings, kept, removed, invented, outs int64
	err                                    error
}

// collector randomizes the clients' reports in blocks of
// collectBlockUsers, in parallel; each block's result goes to its own
// 1-slot channel and drain writes them in order, so the output order (and
// seeded output) is deterministic.
type collector struct {
	m         *ratings.Matrix
	r         Randomizer
	mean      *MeanReporter
	catalogue []string
	remap     []int32
	levels    bool
	// order[k] is the k-th user by ID: the output order, independent of
	// the ratings (and of the order the ratings were read in); srcs[k]
	// is her stream.
	order []int32
	srcs  []*noise.Source
	slots []chan collectBlock
	stop  chan struct{}
	// Output buffers are recycled: at most workers + (blocks in flight)
	// exist at a time, each grown once to a block's size.
	pool sync.Pool
	wg   sync.WaitGroup
}

func newCollector(m *ratings.Matrix, r Randomizer, mean *MeanReporter, catalogue []string, remap []int32, src *noise.Source, levels bool) *collector {
	nu := m.NumUsers()
	c := &collector{m: m, r: r, mean: mean, catalogue: catalogue, remap: remap, levels: levels,
		order: make([]int32, nu), srcs: make([]*noise.Source, nu), stop: make(chan struct{})}
	c.slots = make([]chan collectBlock, (nu+collectBlockUsers-1)/collectBlockUsers)
	for b := range c.slots {
		c.slots[b] = make(chan collectBlock, 1)
	}
	for u := range c.order {
		c.order[u] = int32(u)
	}
	slices.SortFunc(c.order, func(a, b int32) int { return strings.Compare(m.Users.Name(a), m.Users.Name(b)) })
	for k := range c.srcs {
		c.srcs[k] = src.Split()
	}
	return c
}

// start starts workers goroutines over the blocks.
func (c *collector) start(ctx context.Context, workers int) {
	next := make(chan int, len(c.slots))
	for b := range c.slots {
		next <- b
	}
	close(next)
	for range workers {
		c.wg.Add(1)
		go c.work(ctx, next)
	}
}

func (c *collector) work(ctx context.Context, next <-chan int) {
	defer c.wg.Done()
	ni := len(c.catalogue)
	in, out := make([]float64, ni), make([]float64, ni)
	for b := range next {
		select {
		case <-c.stop:
			return
		default:
		}
		if err := ctx.Err(); err != nil {
			c.slots[b] <- collectBlock{err: err}
			continue
		}
		c.slots[b] <- c.block(b, in, out)
	}
}

// block randomizes the reports of block b's clients (in and out are
// scratch rows of the catalogue's length).
func (c *collector) block(b int, in, out []float64) collectBlock {
	var res collectBlock
	bp, _ := c.pool.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	buf := (*bp)[:0]
	for k := b * collectBlockUsers; k < min(len(c.order), (b+1)*collectBlockUsers); k++ {
		if buf, res.err = c.client(k, buf, &res, in, out); res.err != nil {
			break
		}
	}
	*bp = buf
	res.buf = bp
	return res
}

// client randomizes the k-th client's vector over the catalogue from her
// own stream, and her mean report after it, and appends her lines to buf.
func (c *collector) client(k int, buf []byte, res *collectBlock, in, out []float64) ([]byte, error) {
	u := c.order[k]
	for j := range in {
		in[j] = Missing
	}
	its, vals := c.m.UserRow(u)
	for q, it := range its {
		if j := c.remap[it]; j >= 0 {
			in[j] = float64(vals[q])
			res.ratings++
		} else {
			res.outs++
		}
	}
	name := c.m.Users.Name(u)
	if err := c.r.Randomize(c.srcs[k], in, out); err != nil {
		return buf, fmt.Errorf("user %s: %w", name, err)
	}
	if c.mean != nil {
		// Drawn after the cells from her stream, so the cells are the
		// same with or without it.
		v, err := c.mean.Report(c.srcs[k], in)
		if err != nil {
			return buf, fmt.Errorf("user %s: %w", name, err)
		}
		buf = AppendMeanLine(buf, name, v)
	}
	c.srcs[k] = nil
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
		buf = AppendReportLine(buf, name, c.catalogue[j], v, c.levels)
	}
	return buf, nil
}

// drain writes the blocks to w in order and adds their counts to st; on
// the first error it stops the workers.
func (c *collector) drain(w io.Writer, st *CollectStats) error {
	for b := range c.slots {
		res := <-c.slots[b]
		if res.err != nil {
			close(c.stop)
			return res.err
		}
		st.Ratings += res.ratings
		st.Outside += res.outs
		st.Kept += res.kept
		st.Removed += res.removed
		st.Invented += res.invented
		if _, err := w.Write(*res.buf); err != nil {
			close(c.stop)
			return fmt.Errorf("ldp: writing: %w", err)
		}
		c.pool.Put(res.buf)
	}
	return nil
}

// Collect is CollectOver with the items m has ratings for as the
// catalogue.
//
// Deprecated: which items have ratings is a fact of the private ratings,
// and the header then records it as if declared (an item whose only
// rating is removed vanishes from it). It remains only for the experiment
// runner's Collect helper until that switches to Simulate; use
// CollectOver with a declared catalogue, or Simulate.
func Collect(ctx context.Context, w io.Writer, m *ratings.Matrix, r Randomizer, src *noise.Source, workers int) (CollectStats, error) {
	return CollectOver(ctx, w, m, r, nil, m.Items.Names(), src, workers)
}

// AppendReportLine appends the data line "user \t item \t value\n" of one
// present report: the value as a level when levels, else by AppendReport.
// Every writer of collect files (CollectOver, the service's export) uses it.
func AppendReportLine(b []byte, user, item string, v float64, levels bool) []byte {
	b = append(b, user...)
	b = append(b, '\t')
	b = append(b, item...)
	b = append(b, '\t')
	if levels {
		b = strconv.AppendInt(b, int64(v), 10)
	} else {
		b = AppendReport(b, v)
	}
	return append(b, '\n')
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
// the number of levels.
//
// It reads the private ratings, so it is for non-private use only (the
// non-private reference ldp-clean, data inspection): never for a
// collection or anything released under a guarantee — there the clients
// must be told the scale in advance (DeclaredScale).
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
