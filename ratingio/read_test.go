package ratingio

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// triples renders a matrix as sorted "user item value[@time]" strings.
func triples(m *ratings.Matrix) string {
	var b bytes.Buffer
	if err := WriteTSV(&b, m); err != nil {
		panic(err)
	}
	return b.String()
}

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// withBlockSize runs f with tiny blocks so that every line boundary case
// (a block ending mid-line, a header in the first block, a Netflix movie
// line in an earlier block) is exercised.
func withBlockSize(t *testing.T, size int, f func()) {
	t.Helper()
	old := blockSize
	blockSize = size
	defer func() { blockSize = old }()
	f()
}

func TestReadFormats(t *testing.T) {
	tests := []struct {
		name, file, content string
		opt                 Options
		want                string // canonical TSV (user-major, first-appearance order)
		users, items        int
	}{
		{"movielens-100k", "u.data", "196\t242\t3\t881250949\n186\t302\t3\t891717742\n196\t302\t1\t878887116\n", Options{Format: "movielens-100k"},
			"196\t242\t3\t881250949\n196\t302\t1\t878887116\n186\t302\t3\t891717742\n", 2, 2},
		{"movielens-100k detected", "u1.base", "1\t1\t5\t874965758\n1\t2\t3\t876893171\n", Options{},
			"1\t1\t5\t874965758\n1\t2\t3\t876893171\n", 1, 2},
		{"movielens ::", "ratings.dat", "1::1193::5::978300760\n1::661::3::978302109\n2::1193::4.5::978298413\n", Options{},
			"1\t1193\t5\t978300760\n1\t661\t3\t978302109\n2\t1193\t4.5\t978298413\n", 2, 2},
		{"movielens-csv", "ratings.csv", "userId,movieId,rating,timestamp\n1,2,3.5,1112486027\n1,29,3.5,1112484676\n", Options{},
			"1\t2\t3.5\t1112486027\n1\t29\t3.5\t1112484676\n", 1, 2},
		{"movielens-csv CRLF", "ratings.csv", "userId,movieId,rating,timestamp\r\n1,2,3.5,1112486027\r\n", Options{Format: "movielens-csv"},
			"1\t2\t3.5\t1112486027\n", 1, 1},
		{"netflix", "combined_data_1.txt", "1:\n1488844,3,2005-09-06\n822109,5,2005-05-13\n2:\n1488844,4,1970-01-02\n", Options{},
			"1488844\t1\t3\t1125964800\n1488844\t2\t4\t86400\n822109\t1\t5\t1115942400\n", 2, 2},
		{"jester-wide with BOM", "jester.csv", "\xef\xbb\xbf2;99;3.7;-1.5\n1;99;99;9.9\n", Options{Format: "jester-wide"},
			"1\t2\t3.7\n1\t3\t-1.5\n2\t3\t9.9\n", 2, 2},
		{"uci-rc rating", "rating_final.csv", "userID,placeID,rating,food_rating,service_rating\nU1077,135085,2,1,0\nU1078,135085,1,2,2\n", Options{},
			"U1077\t135085\t2\nU1078\t135085\t1\n", 2, 1},
		{"uci-rc food", "rating_final.csv", "userID,placeID,rating,food_rating,service_rating\nU1077,135085,2,1,0\n", Options{Column: "food"},
			"U1077\t135085\t1\n", 1, 1},
		{"uci-rc service", "rating_final.csv", "userID,placeID,rating,food_rating,service_rating\nU1077,135085,2,1,0\n", Options{Column: "service"},
			"U1077\t135085\t0\n", 1, 1},
		{"tsv 3 fields", "x.tsv", "a\tb\t1\na\tc\t2.25\n\n", Options{},
			"a\tb\t1\na\tc\t2.25\n", 1, 2},
		{"csv with header and named cols", "x.csv", "rating,item,user\n4,i1,u1\n2, i2 ,u1\n", Options{Cols: "user=user,item=item,rating=rating"},
			"u1\ti1\t4\nu1\ti2\t2\n", 1, 2},
		{"csv numeric cols", "x.csv", "9,4,i1,u1,77\n", Options{Format: "csv", Cols: "user=3,item=2,rating=1,time=4"},
			"u1\ti1\t4\t77\n", 1, 1},
		{"cols on a detected movielens-csv", "ratings.csv", "userId,movieId,rating,timestamp\n1,2,3.5,1112486027\n", Options{Cols: "user=movieId,item=userId,rating=rating"},
			"2\t1\t3.5\n", 1, 1},
		{"big integer IDs", "x.tsv", "3000000000\t1\t1\n2147483647\t1\t2\n2147483648\t1\t3\n123456789012345678901234\t1\t4\n3000000000\t2\t5\n", Options{},
			"3000000000\t1\t1\n3000000000\t2\t5\n2147483647\t1\t2\n2147483648\t1\t3\n123456789012345678901234\t1\t4\n", 4, 2},
		{"leading zeros stay distinct IDs", "x.tsv", "7\t1\t1\n007\t1\t2\n", Options{},
			"7\t1\t1\n007\t1\t2\n", 2, 1},
		{"duplicates last", "x.tsv", "1\t1\t1\n1\t2\t5\n1\t1\t3\n", Options{Duplicates: ratings.DupLast},
			"1\t1\t3\n1\t2\t5\n", 1, 2},
		{"duplicates mean", "x.tsv", "1\t1\t1\n1\t2\t5\n1\t1\t4\n", Options{Duplicates: ratings.DupMean},
			"1\t1\t2.5\n1\t2\t5\n", 1, 2},
		{"scale ok at bounds", "x.tsv", "1\t1\t1\n1\t2\t5\n", Options{HasScale: true, Min: 1, Max: 5},
			"1\t1\t1\n1\t2\t5\n", 1, 2},
	}
	for _, tc := range tests {
		for _, bs := range []int{1 << 20, 1, 7} {
			t.Run(tc.name, func(t *testing.T) {
				withBlockSize(t, bs, func() {
					m, err := ReadFile(writeFile(t, tc.file, tc.content), tc.opt)
					if err != nil {
						t.Fatalf("block %d: %v", bs, err)
					}
					if got := triples(m); got != tc.want {
						t.Errorf("block %d: got\n%s\nwant\n%s", bs, got, tc.want)
					}
					if m.NumUsers() != tc.users || m.NumItems() != tc.items {
						t.Errorf("block %d: shape %d×%d, want %d×%d", bs, m.NumUsers(), m.NumItems(), tc.users, tc.items)
					}
				})
			})
		}
	}
}

func TestReadErrors(t *testing.T) {
	tests := []struct {
		name, file, content string
		opt                 Options
		line                int64
		column              int
		reason              string // substring
	}{
		{"empty file", "x.tsv", "", Options{}, 0, 0, "empty file"},
		{"blank lines only", "x.tsv", "\n\r\n\n", Options{}, 0, 0, "empty file"},
		{"header only", "ratings.csv", "userId,movieId,rating,timestamp\n", Options{}, 0, 0, "no ratings after the header"},
		{"non-numeric", "x.tsv", "1\t1\t4\n1\t2\tfour\n", Options{}, 2, 3, "not a number"},
		{"NaN", "x.tsv", "1\t1\t4\n1\t2\tNaN\n", Options{}, 2, 3, "NaN or infinite"},
		{"Inf", "x.tsv", "1\t2\t+Inf\n", Options{}, 1, 3, "NaN or infinite"},
		{"float32 overflow", "x.tsv", "1\t2\t1e39\n", Options{}, 1, 3, "float32 range"},
		{"outside scale", "x.tsv", "1\t1\t4\n1\t2\t6\n", Options{HasScale: true, Min: 1, Max: 5}, 2, 3, "outside the declared scale"},
		{"wrong field count", "x.tsv", "1\t1\t4\n1\t2\n", Options{}, 2, 0, "wrong field count"},
		{"too many fields", "ratings.dat", "1::2::3::4\n1::3::3::4::5\n", Options{}, 2, 0, "wrong field count"},
		{"bad timestamp", "u.data", "1\t1\t4\t12x\n", Options{Format: "movielens-100k"}, 1, 4, "timestamp"},
		{"empty user", "x.csv", "1,1,4\n,2,3\n", Options{Format: "csv"}, 2, 1, "empty identifier"},
		{"duplicate", "x.tsv", "1\t1\t4\n2\t1\t3\n1\t1\t5\n", Options{}, 3, 0, "first at line 1, again at line 3"},
		{"jester count mismatch", "j.csv", "2;1;99;99\n", Options{Format: "jester-wide"}, 1, 1, "says it has 2 ratings but has 1"},
		{"jester wrong field count", "j.csv", "1;1;99;99\n0;99;99\n", Options{Format: "jester-wide"}, 2, 0, "wrong field count"},
		{"netflix rating before movie", "n.txt", "1488844,3,2005-09-06\n", Options{Format: "netflix"}, 1, 0, "before any \"MovieID:\""},
		{"netflix bad date", "n.txt", "1:\n1488844,3,2005-13-06\n", Options{}, 2, 3, "not a date"},
		{"movielens-csv without header", "x.csv", "1,2,3,4\n", Options{Format: "movielens-csv"}, 1, 0, "needs the header"},
		{"uci-rc bad column", "r.csv", "userID,placeID,rating\nU1,1,2\n", Options{Format: "uci-rc", Column: "ambience"}, 0, 0, "want rating, food or service"},
		{"undetectable", "x.txt", "hello world\n", Options{}, 1, 0, "give --format"},
		{"short ; lines are not guessed", "x.txt", "1;2;3\n", Options{}, 1, 0, "give --format"},
		{"quoted", "x.csv", "\"u1\",2,3\n", Options{Format: "csv"}, 1, 1, "quoted fields"},
		{"binary forced on text", "x.tsv", "1\t2\t3\n", Options{Format: "binary"}, 0, 0, "not a privrec binary"},
		{"cols with a fixed format", "ratings.dat", "1::2::3::4\n", Options{Format: "movielens", Cols: "user=0,item=1,rating=2"}, 0, 0, "--cols applies to the tsv and csv"},
		{"unknown format", "x.tsv", "1\t2\t3\n", Options{Format: "excel"}, 0, 0, "unknown format"},
		{"malformed line among good ones", "u.data", goodThenBad(), Options{}, 1234, 3, "not a number"},
		// Errors that teach: the likely fix is named.
		{"movielens on a tsv names tsv", "r.tsv", "1\t2\t3\t4\n", Options{Format: "movielens"}, 1, 0, "looks like --format tsv"},
		{"csv on a tsv names tsv", "r.tsv", "1\t2\t3\t4\n", Options{Format: "csv"}, 1, 0, "looks like --format tsv"},
		{"tsv on a :: file names movielens", "r.dat", "1::2::3::4\n", Options{Format: "tsv"}, 1, 0, "looks like --format movielens"},
		{"header in a :: file", "ratings.dat", "UserID::MovieID::Rating::Timestamp\n1::2::3::4\n", Options{}, 1, 3, "line 1 looks like a header"},
		{"header after comments", "ratings.dat", "# c\n\nUserID::MovieID::Rating::Timestamp\n1::2::3::4\n", Options{}, 3, 3, "line 3 looks like a header"},
	}
	for _, tc := range tests {
		for _, bs := range []int{1 << 20, 3} {
			t.Run(tc.name, func(t *testing.T) {
				withBlockSize(t, bs, func() {
					path := writeFile(t, tc.file, tc.content)
					m, err := ReadFile(path, tc.opt)
					if err == nil {
						t.Fatalf("no error; read %v", m)
					}
					if !strings.Contains(err.Error(), tc.reason) {
						t.Errorf("error %q does not contain %q", err, tc.reason)
					}
					var pe *ParseError
					if !errors.As(err, &pe) {
						if tc.line != 0 || tc.column != 0 {
							t.Fatalf("error %q (%T) is not a *ParseError", err, err)
						}
						return
					}
					if pe.File != path || pe.Line != tc.line || pe.Column != tc.column {
						t.Errorf("error at %s:%d column %d, want %s:%d column %d (%v)", pe.File, pe.Line, pe.Column, path, tc.line, tc.column, err)
					}
				})
			})
		}
	}
}

// goodThenBad is 2000 good lines with line 1234 broken.
func goodThenBad() string {
	var b strings.Builder
	for i := 1; i <= 2000; i++ {
		if i == 1234 {
			b.WriteString("5\t6\t4,5\t881250949\n")
			continue
		}
		b.WriteString(itoa(i%97+1) + "\t" + itoa(i) + "\t3\t881250949\n")
	}
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestDuplicateErrorUnwraps(t *testing.T) {
	_, err := ReadFile(writeFile(t, "x.tsv", "u\ti\t1\nu\ti\t2\n"), Options{})
	var de *ratings.DuplicateError
	if !errors.As(err, &de) || de.User != "u" || de.Item != "i" || de.First != 1 || de.Second != 2 {
		t.Fatalf("got %v (%#v)", err, de)
	}
}

func TestGzip(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte("1::10::4::100\n2::10::5::200\n"))
	zw.Close()
	path := writeFile(t, "ratings.dat.gz", b.String())
	m, err := ReadFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := triples(m), "1\t10\t4\t100\n2\t10\t5\t200\n"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	if f, err := Detect(path); err != nil || f != "movielens" {
		t.Fatalf("Detect = %q, %v", f, err)
	}
}

func TestDetect(t *testing.T) {
	tests := []struct{ file, content, want string }{
		{"u.data", "1\t2\t3\t4\n", "movielens-100k"},
		{"ua.test", "1\t2\t3\t4\n", "movielens-100k"},
		{"other.tsv", "1\t2\t3\t4\n", "tsv"},
		{"ratings.dat", "1::2::3::4\n", "movielens"},
		{"ratings.csv", "userId,movieId,rating,timestamp\n", "movielens-csv"},
		{"combined_data_1.txt", "1:\n", "netflix"},
		{"j.csv", "\xef\xbb\xbf1;99;2;99;99;99;99;99;99;99\n", "jester-wide"},
		{"rating_final.csv", "userID,placeID,rating,food_rating,service_rating\n", "uci-rc"},
		{"x.csv", "\n1,2,3\n", "csv"},
	}
	for _, tc := range tests {
		got, err := Detect(writeFile(t, tc.file, tc.content))
		if err != nil || got != tc.want {
			t.Errorf("Detect(%s, %q) = %q, %v; want %q", tc.file, tc.content, got, err, tc.want)
		}
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ReadFileContext(ctx, writeFile(t, "x.tsv", strings.Repeat("1\t2\t3\n", 1000)), Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestSameAsBuilder checks the parallel reader against ratings.Builder
// (the reference) on random data with string and integer IDs, timestamps
// and duplicates, over several block sizes.
func TestSameAsBuilder(t *testing.T) {
	// Short rows (comparison sort) and long rows (radix sort), both with
	// duplicates, string and integer IDs.
	// Three workers sort the rows of the 5000-user shape (sortRows splits
	// by ratings from 1024 users per worker).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	for _, shape := range []struct{ users, items, lines int }{{300, 200, 5000}, {20, 3000, 20000}, {5000, 300, 20000}} {
		var b strings.Builder
		ref := ratings.NewBuilder(ratings.DupMean)
		r := uint64(12345)
		next := func(n uint64) uint64 { r = r*6364136223846793005 + 1442695040888963407; return (r >> 33) % n }
		for line := int64(1); line <= int64(shape.lines); line++ {
			u := itoa(int(next(uint64(shape.users))))
			if next(5) == 0 {
				u = "u" + u
			}
			i := itoa(int(next(uint64(shape.items))))
			v := float64(next(10)) / 2
			ts := int64(next(1e9)) % 9999
			b.WriteString(u + "," + i + "," + strings.TrimSuffix(formatHalf(v), ".0") + "," + itoa(int(ts)) + "\n")
			if err := ref.AddTimed(u, i, v, ts, true, line); err != nil {
				t.Fatal(err)
			}
		}
		want, err := ref.Build()
		if err != nil {
			t.Fatal(err)
		}
		for _, bs := range []int{1 << 20, 100, 1} {
			withBlockSize(t, bs, func() {
				m, err := ReadFile(writeFile(t, "x.csv", b.String()), Options{Duplicates: ratings.DupMean})
				if err != nil {
					t.Fatal(err)
				}
				if m.Fingerprint() != want.Fingerprint() {
					t.Fatalf("%v block %d: reader and Builder disagree:\n%.300s\nvs\n%.300s", shape, bs, triples(m), triples(want))
				}
			})
		}
	}
}

// TestFirstDuplicateAcrossWorkers checks that, with rows sorted by several
// workers, the duplicate reported is the one of the lowest user index
// whichever worker finds it first.
func TestFirstDuplicateAcrossWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	var b strings.Builder
	for u := range 5000 {
		b.WriteString(itoa(u) + "\t1\t3\n")
	}
	b.WriteString("4500\t1\t4\n100\t1\t2\n") // lines 5001 and 5002
	_, err := ReadFile(writeFile(t, "d.tsv", b.String()), Options{})
	var de *ratings.DuplicateError
	if !errors.As(err, &de) {
		t.Fatalf("got %v, want a *ratings.DuplicateError", err)
	}
	if de.User != "100" || de.Item != "1" || de.First != 101 || de.Second != 5002 {
		t.Fatalf("got %+v, want user 100, item 1, lines 101 and 5002", de)
	}
}

func formatHalf(v float64) string {
	s := itoa(int(v))
	if v != float64(int(v)) {
		return s + ".5"
	}
	return s + ".0"
}
