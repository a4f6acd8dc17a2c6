package ldp_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/privrec/privrec/ldp"
	"github.com/privrec/privrec/privacy/noise"
)

func TestReadCollectedRoundTrip(t *testing.T) {
	m := small(t)
	for _, mech := range []ldp.Mechanism{ldp.Laplace, ldp.RR} {
		r, err := ldp.New(mech, 1, ldp.Scale{Min: 1, Max: 5, Levels: 5})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		cat := smallCatalogue()
		st, err := ldp.CollectOver(context.Background(), &buf, m, r, nil, cat, noise.Seeded(3), 2)
		if err != nil {
			t.Fatal(err)
		}
		h, z, err := ldp.ReadCollected(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("%s: %v", mech, err)
		}
		if h.Mechanism != mech || h.Users != m.NumUsers() || h.Items != len(cat) || int64(z.Len()) != st.Reported {
			t.Errorf("%s: header %+v, %d reports; want %d × %d, %d reports", mech, h, z.Len(), m.NumUsers(), len(cat), st.Reported)
		}
		h2, n, err := ldp.CountReports(bytes.NewReader(buf.Bytes()))
		if err != nil || n != st.Reported || h2 != h {
			t.Errorf("%s: CountReports = %d, %v (header equal: %t); want %d", mech, n, err, h2 == h, st.Reported)
		}
	}
}

func TestReadCollectedErrors(t *testing.T) {
	const head = "# privrec-collect v2\n# mechanism=rr epsilon=1 units=levels scale_min=1 scale_max=5 levels=5 users=2 items=2 sampler=fixed-time reproducible=false\n"
	for _, tc := range []struct{ name, body, want string }{
		{"no header", "1\t1\t3\n", "not a privrec collect file"},
		{"version 1", "# privrec-collect v1\n# mechanism=rr epsilon=1 units=levels scale_min=1 scale_max=5 levels=5 users=2 items=2 reproducible=false\n", "collect again"},
		{"no clients", strings.Replace(head, "users=2", "users=0", 1), "positive"},
		{"no sampler", strings.Replace(head, " sampler=fixed-time", "", 1), "sampler"},
		{"wrong units", strings.Replace(head, "units=levels", "units=normalised", 1), "units"},
		{"too many items", head + "1\t1\t3\n1\t2\t3\n1\t3\t3\n", "population"},
		{"two fields", head + "1\t1\n", "want user"},
		{"not a number", head + "1\t1\tx\n", "value"},
		{"not a level", head + "1\t1\t2.5\n", "not a level"},
		{"level too high", head + "1\t1\t6\n", "not a level"},
		{"duplicate", head + "1\t1\t3\n1\t1\t4\n", "1"},
		{"too many users", head + "1\t1\t3\n2\t1\t3\n3\t1\t3\n", "population"},
	} {
		_, _, err := ldp.ReadCollected(strings.NewReader(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
	// Comments anywhere and CRLF line ends are accepted.
	h, z, err := ldp.ReadCollected(strings.NewReader(head + "# note\r\n1\t1\t3\r\n\n2\t2\t5\n"))
	if err != nil || z.Len() != 2 || h.Scale.Levels != 5 {
		t.Errorf("comments/CRLF: %v, %v", err, z)
	}
}

// FuzzReadCollected: the reader never panics, and whatever it accepts
// agrees with CountReports on the number of reports.
func FuzzReadCollected(f *testing.F) {
	const head = "# privrec-collect v2\n# mechanism=laplace epsilon=1 units=normalised scale_min=1 scale_max=5 levels=0 users=3 items=3 sampler=fixed-time reproducible=false\n"
	f.Add(head + "1\t1\t0.5\n2\t3\t-1.25\n")
	f.Add(head + "# c\n1\t2\t7\r\n")
	f.Add("# privrec-collect v2\n# mechanism=rr epsilon=2 units=levels scale_min=1 scale_max=5 levels=5 users=1 items=1 sampler=fixed-time\n1\t1\t5\n")
	f.Fuzz(func(t *testing.T, s string) {
		_, z, err := ldp.ReadCollected(strings.NewReader(s))
		if err != nil {
			return
		}
		_, n, err := ldp.CountReports(strings.NewReader(s))
		if err != nil || n != int64(z.Len()) {
			t.Fatalf("ReadCollected read %d reports, CountReports %d (%v)", z.Len(), n, err)
		}
	})
}
