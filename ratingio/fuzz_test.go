package ratingio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// fuzzRead is the property every parser must have: no panic, and either a
// *ParseError (or an options error) or a non-empty matrix that survives a
// canonical-TSV round trip unchanged.
func fuzzRead(t *testing.T, name string, data []byte, opt Options) {
	m, err := ReadContext(context.Background(), bytes.NewReader(data), name, opt)
	// The one-pass fast path must agree exactly with the general parser.
	fastPath = false
	slow, slowErr := ReadContext(context.Background(), bytes.NewReader(data), name, opt)
	fastPath = true
	switch {
	case (err == nil) != (slowErr == nil):
		t.Fatalf("fast path error %v, general path error %v", err, slowErr)
	case err != nil && err.Error() != slowErr.Error():
		t.Fatalf("errors differ:\nfast:    %v\ngeneral: %v", err, slowErr)
	case err == nil && m.Fingerprint() != slow.Fingerprint():
		t.Fatalf("fast and general paths read different matrices")
	}
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) && opt.Cols == "" {
			t.Fatalf("error is not a *ParseError: %v", err)
		}
		return
	}
	if m.Len() == 0 {
		t.Fatal("no error but no ratings")
	}
	var buf bytes.Buffer
	if err := WriteTSV(&buf, m); err != nil {
		return // IDs with tabs (possible in csv) cannot be written as TSV
	}
	back, err := ReadContext(context.Background(), &buf, "round.tsv", Options{Format: "tsv"})
	if err != nil {
		t.Fatalf("re-reading canonical TSV: %v\n%q", err, buf.String())
	}
	if !sameRatings(m, back) {
		t.Fatalf("canonical TSV round trip changed the ratings")
	}
	var bin bytes.Buffer
	if err := WriteBinary(&bin, m); err != nil {
		t.Fatal(err)
	}
	back, err = ReadContext(context.Background(), &bin, "round.bin", Options{})
	if err != nil || back.Fingerprint() != m.Fingerprint() {
		t.Fatalf("binary round trip: %v", err)
	}
}

// damagedGzipSeeds are seeds for every reader: gzip input whose
// decompression fails (issue 17: a gzip header followed by a corrupt
// deflate stream surfaced the decompressor's error unwrapped).
var damagedGzipSeeds = []string{
	"\x1f\x8b\bA00000000000",
}

func addSeeds(f *testing.F, seeds ...string) {
	for _, s := range append(seeds, damagedGzipSeeds...) {
		f.Add([]byte(s))
	}
}

func FuzzMovieLens100K(f *testing.F) {
	addSeeds(f, "196\t242\t3\t881250949\n186\t302\t3\t891717742\n", "1\t1\t5\t1\n1\t1\t4\t2\n", "1\t2\tx\t3\n", "\n\n1\t2\t3\t4", "1\t2\t3\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "u.data", data, Options{Format: "movielens-100k"}) })
}

func FuzzMovieLens(f *testing.F) {
	addSeeds(f, "1::1193::5::978300760\n1::661::3::978302109\n", "0::01::-0::-5\n2147483648::2147483647::1234567::123456789012345678\n", "1::2::.5::1\n1::3::5.::1\n1::4::0.0000001::1\n", "1:::2::3::4\n", "1::2::3.5::-4\r\n", "a::b::c::d\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "ratings.dat", data, Options{Format: "movielens"}) })
}

func FuzzMovieLensCSV(f *testing.F) {
	addSeeds(f, "userId,movieId,rating,timestamp\n1,2,3.5,1112486027\n", "userId,movieId,rating\n1,2,3\n", "movieId,userId,timestamp,rating\n1,2,3,4\n", "userId,movieId,rating,timestamp\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "ratings.csv", data, Options{Format: "movielens-csv"}) })
}

func FuzzNetflix(f *testing.F) {
	addSeeds(f, "1:\n1488844,3,2005-09-06\n822109,5,2005-05-13\n2:\n1,4,2000-02-29\n", "1488844,3,2005-09-06\n", "1:\n2:\n", "x:\n1,1,1999-12-31\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "combined_data_1.txt", data, Options{Format: "netflix"}) })
}

func FuzzJesterWide(f *testing.F) {
	addSeeds(f, "\xef\xbb\xbf2;99;3.7;-1.5\n1;99;99;9.9\n", "1;99\n", "0;99;99\n", "3;1;2;3\n2;1;2;99\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "jester.csv", data, Options{Format: "jester-wide"}) })
}

func FuzzUCIRC(f *testing.F) {
	addSeeds(f, "userID,placeID,rating,food_rating,service_rating\nU1077,135085,2,2,2\nU1077,135038,2,2,1\n", "userID,placeID,rating\nU1,1,0\n", "U1,1,2,2,2\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRead(t, "rating_final.csv", data, Options{Format: "uci-rc", Column: "food"})
	})
}

func FuzzTSV(f *testing.F) {
	addSeeds(f, "a\tb\t1\na\tc\t2.25\n", "1\t2\t3\t4\n", "user\titem\trating\nu\ti\t1e-3\n", "1\t2\tNaN\n", "1\t2\t3\t4\t5\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRead(t, "x.tsv", data, Options{Format: "tsv"})
		fuzzRead(t, "x.tsv", data, Options{Format: "tsv", HasScale: true, Min: 0.5, Max: 5, Duplicates: ratings.DupMean})
	})
}

func FuzzCSV(f *testing.F) {
	addSeeds(f, "rating,item,user\n4,i1,u1\n", "1,2,3\n", " u , i ,3\n", "\"q\",1,2\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRead(t, "x.csv", data, Options{Format: "csv"})
		fuzzRead(t, "x.csv", data, Options{Format: "csv", Cols: "user=2,item=1,rating=0"})
	})
}

func FuzzAuto(f *testing.F) {
	addSeeds(f, "1::2::3::4\n", "1:\n1,2,2005-01-01\n", "userId,movieId,rating,timestamp\n1,2,3,4\n", "1;99;2\n", "1,2,3\n", "1\t2\t3\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, "data", data, Options{}) })
}

func FuzzBinary(f *testing.F) {
	for k, seed := range []uint64{4, 5} {
		var buf bytes.Buffer
		if err := WriteBinary(&buf, randomMatrix(f, seed, 20+20*k, k == 0)); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes(), true)
	}
	f.Add([]byte(binaryMagic), false)
	for _, s := range damagedGzipSeeds {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, fixCRC bool) {
		// With fixCRC the checksum is recomputed after mutation, so the
		// structural checks behind it (offsets, ranges, order, counts of
		// both views) get explored, not just the checksum.
		if fixCRC {
			data = fixChecksums(bytes.Clone(data))
		}
		m, err := ReadContext(context.Background(), bytes.NewReader(data), "x.bin", Options{Format: "binary"})
		if err != nil {
			return
		}
		// Whatever was accepted must be safe to use.
		_ = m.Fingerprint()
		for i := range int32(m.NumItems()) {
			users, _ := m.ItemCol(i)
			for _, u := range users {
				if u < 0 || int(u) >= m.NumUsers() {
					t.Fatal("user index out of range")
				}
			}
		}
		_ = m.Stats()
	})
}

// fixChecksums recomputes the checksum trailer of a binary file whose
// length matches its header, so mutated files reach the structural checks.
func fixChecksums(data []byte) []byte {
	if len(data) < headerSize {
		return data
	}
	le := binary.LittleEndian
	flags := le.Uint32(data[12:])
	nU, nI, nnz := le.Uint64(data[16:]), le.Uint64(data[24:]), le.Uint64(data[32:])
	names := le.Uint64(data[40:]) + le.Uint64(data[48:])
	if nU > 1<<20 || nI > 1<<20 || nnz > 1<<20 || names > 1<<20 {
		return data
	}
	sizes := []uint64{8 * (nU + 1), 4 * nnz, 4 * nnz}
	if flags&flagTime != 0 {
		sizes = append(sizes, 8*nnz)
	}
	if flags&flagColumns != 0 {
		sizes = append(sizes, 8*(nI+1), 4*nnz, 4*nnz)
	}
	head := headerSize + names + uint64(pad8(int(names%8)))
	total := head + 4*uint64(1+len(sizes))
	for _, z := range sizes {
		total += z
	}
	if total != uint64(len(data)) {
		return data
	}
	tr := data[total-4*uint64(1+len(sizes)):]
	le.PutUint32(tr, crc32.Checksum(data[:head], castagnoli))
	off := head
	for k, z := range sizes {
		le.PutUint32(tr[4*(k+1):], crc32.Checksum(data[off:off+z], castagnoli))
		off += z
	}
	return data
}
