package ratingio

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/privrec/privrec/ratings"
)

// WriteTSV writes m as canonical TSV: one line "user \t item \t rating"
// (plus "\t time" when the matrix has timestamps) per rating, external IDs,
// user-major order, no header. Ratings are printed with the fewest digits
// that read back to the same float32, so ReadFile(…, Format "tsv")
// reproduces m exactly. IDs containing a tab, newline or carriage return
// cannot be written and are an error.
func WriteTSV(w io.Writer, m *ratings.Matrix) error {
	for _, ids := range []*ratings.IDs{m.Users, m.Items} {
		for _, n := range ids.Names() {
			if n == "" || strings.ContainsAny(n, "\t\r\n") {
				return fmt.Errorf("ratingio: identifier %q cannot be written as TSV", n)
			}
		}
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	buf := make([]byte, 0, 128)
	users, items := m.Users.Names(), m.Items.Names()
	for u := range int32(m.NumUsers()) {
		it, vals := m.UserRow(u)
		ts := m.UserTimes(u)
		for k, i := range it {
			buf = append(buf[:0], users[u]...)
			buf = append(buf, '\t')
			buf = append(buf, items[i]...)
			buf = append(buf, '\t')
			buf = strconv.AppendFloat(buf, float64(vals[k]), 'g', -1, 32)
			if ts != nil {
				buf = append(buf, '\t')
				buf = strconv.AppendInt(buf, ts[k], 10)
			}
			buf = append(buf, '\n')
			if _, err := bw.Write(buf); err != nil {
				return fmt.Errorf("ratingio: writing TSV: %w", err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("ratingio: writing TSV: %w", err)
	}
	return nil
}
