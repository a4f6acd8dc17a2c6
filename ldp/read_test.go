package ldp_test

import (
	"bytes"
	"context"
	"math"
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
	const meanHead = "# privrec-collect v2\n# mechanism=rr epsilon=1 units=levels scale_min=1 scale_max=5 levels=5 users=2 items=2 sampler=fixed-time reproducible=false mean_epsilon=1\n"
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
		{"mean undeclared", head + "#mean\t1\t3.5\n1\t1\t3\n", "declares none"},
		{"mean NaN", meanHead + "#mean\t1\tNaN\n#mean\t2\t3\n", "not a finite number"},
		{"mean twice", meanHead + "#mean\t1\t3\n#mean\t1\t3\n", "second mean report"},
		{"mean fields", meanHead + "#mean\t1\n#mean\t2\t3\n", "want #mean"},
		{"mean missing", meanHead + "#mean\t1\t3\n1\t1\t3\n", "1 mean reports"},
		{"mean of another", meanHead + "#mean\t1\t3\n#mean\t3\t3\n2\t1\t3\n", "no mean report"},
		{"mean ε bad", strings.Replace(meanHead, "mean_epsilon=1", "mean_epsilon=-1", 1), "mean_epsilon"},
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
// agrees with ScanReports on the number of reports and the mean reports,
// which are finite.
func FuzzReadCollected(f *testing.F) {
	const head = "# privrec-collect v2\n# mechanism=laplace epsilon=1 units=normalised scale_min=1 scale_max=5 levels=0 users=3 items=3 sampler=fixed-time reproducible=false\n"
	f.Add(head + "1\t1\t0.5\n2\t3\t-1.25\n")
	f.Add(head + "# c\n1\t2\t7\r\n")
	f.Add("# privrec-collect v2\n# mechanism=rr epsilon=2 units=levels scale_min=1 scale_max=5 levels=5 users=1 items=1 sampler=fixed-time\n1\t1\t5\n")
	f.Add("# privrec-collect v2\n# mechanism=rr epsilon=2 units=levels scale_min=1 scale_max=5 levels=5 users=2 items=1 sampler=fixed-time mean_epsilon=0.5\n#mean\t1\t4.25\n1\t1\t5\n#mean\t2\t-3\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ldp.ReadCollection(strings.NewReader(s))
		if err != nil {
			return
		}
		_, n, means, err := ldp.ScanReports(strings.NewReader(s))
		if err != nil || n != int64(c.Reports.Len()) || len(means) != len(c.Means) {
			t.Fatalf("ReadCollection read %d reports and %d means, ScanReports %d and %d (%v)", c.Reports.Len(), len(c.Means), n, len(means), err)
		}
		for u, v := range c.Means {
			if means[u] != v || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("mean of %q: %v and %v", u, v, means[u])
			}
		}
	})
}

// TestMeanReports: with a MeanReporter every client's mean report is in
// the file (one "#mean" line each, read back by ReadCollection and
// ScanReports), the cell reports are the same bytes as without it for the
// same seed (the mean is drawn after the cells), and the header declares
// it and prints the composed guarantees.
func TestMeanReports(t *testing.T) {
	m := small(t)
	cat := smallCatalogue()
	sc := ldp.Scale{Min: 1, Max: 5, Levels: 5}
	r, err := ldp.New(ldp.RR, 1, sc)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := ldp.NewMeanReporter(0.5, sc)
	if err != nil {
		t.Fatal(err)
	}
	var with, without bytes.Buffer
	if _, err := ldp.CollectOver(context.Background(), &with, m, r, mr, cat, noise.Seeded(3), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := ldp.CollectOver(context.Background(), &without, m, r, nil, cat, noise.Seeded(3), 2); err != nil {
		t.Fatal(err)
	}
	c, err := ldp.ReadCollection(bytes.NewReader(with.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if c.Header.MeanEpsilon != 0.5 || len(c.Means) != m.NumUsers() {
		t.Fatalf("header mean ε %v, %d means; want 0.5 and %d", c.Header.MeanEpsilon, len(c.Means), m.NumUsers())
	}
	if !strings.Contains(with.String(), "per-user: (ε = ") || !strings.Contains(with.String(), "mean report at ε = 0.5") {
		t.Errorf("header does not state the composed guarantee:\n%s", with.String()[:400])
	}
	cells := func(b []byte) string {
		var out []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(l, "#") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	if cells(with.Bytes()) != cells(without.Bytes()) {
		t.Errorf("the cell reports change when the mean report is added")
	}
	_, n, means, err := ldp.ScanReports(bytes.NewReader(with.Bytes()))
	if err != nil || n != int64(c.Reports.Len()) || len(means) != len(c.Means) {
		t.Errorf("ScanReports: %d reports, %d means, %v", n, len(means), err)
	}
}

// TestMeanReporter checks the device's mean (the scale's midpoint without
// ratings, an error off the scale), the composed guarantees, and that the
// reports' noise has the stated variance and mean: over 20 000 draws the
// sample mean is within 4 standard errors of the true mean and the sample
// variance within 10 % of Variance() (its relative standard error at
// Laplace's kurtosis is ≈ 1.7 %, so a false failure needs ≈ 6 σ).
func TestMeanReporter(t *testing.T) {
	sc := ldp.Scale{Min: 1, Max: 5, Levels: 5}
	mr, err := ldp.NewMeanReporter(2, sc)
	if err != nil {
		t.Fatal(err)
	}
	nan := ldp.Missing
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{nan, nan}, 3}, {[]float64{5, nan, 4}, 4.5}, {[]float64{1}, 1}} {
		if got, err := mr.Mean(tc.in); err != nil || got != tc.want {
			t.Errorf("Mean(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := mr.Mean([]float64{6}); err == nil || !strings.Contains(err.Error(), "outside the scale") {
		t.Errorf("a rating of 6 on 1…5: %v", err)
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := ldp.NewMeanReporter(bad, sc); err == nil {
			t.Errorf("ε = %v accepted", bad)
		}
	}
	r, _ := ldp.New(ldp.RR, 0.5, sc)
	per, user, err := ldp.Guarantees(r, 10, 2)
	if err != nil || math.Abs(per.Epsilon-2.5) > 1e-9 || math.Abs(user.Epsilon-7) > 1e-9 {
		t.Errorf("composed guarantees %v, %v, %v; want 2.5 and 7", per.Epsilon, user.Epsilon, err)
	}
	src := noise.Seeded(5)
	const draws = 20000
	in := []float64{4, nan, 2}
	var s, s2 float64
	for range draws {
		v, err := mr.Report(src, in)
		if err != nil {
			t.Fatal(err)
		}
		s, s2 = s+v, s2+v*v
	}
	mean := s / draws
	v := (s2 - draws*mean*mean) / (draws - 1)
	if math.Abs(mean-3) > 4*math.Sqrt(mr.Variance()/draws) || math.Abs(v/mr.Variance()-1) > 0.1 {
		t.Errorf("reports: mean %.4f (want 3), variance %.3f (want %.3f)", mean, v, mr.Variance())
	}
}
