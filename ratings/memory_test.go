package ratings

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// procStatusKB reads a "VmHWM:"/"VmRSS:" line of /proc/self/status in kB
// (0 where /proc is unavailable).
func procStatusKB(key string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return v
		}
	}
	return 0
}

// BenchmarkHold100M builds 100 M synthetic ratings (1 M users × 100
// ratings over 20 000 items, user-major arrays written directly, then
// FromCSR adds the item-major view) and reports the process's peak
// resident memory. Run it alone, once, so the peak is this matrix's:
//
//	go test -run '^$' -bench Hold100M -benchtime 1x ./ratings
func BenchmarkHold100M(b *testing.B) {
	const nU, per, nI = 1_000_000, 100, 20_000
	for b.Loop() {
		r := rand.New(rand.NewPCG(1, 2))
		rowPtr := make([]int64, nU+1)
		rowCol := make([]int32, nU*per)
		rowVal := make([]float32, nU*per)
		const stride = nI / per
		for u := range nU {
			off := r.IntN(stride)
			base := u * per
			for j := range per {
				rowCol[base+j] = int32(off + j*stride) // sorted and distinct
				rowVal[base+j] = float32(1 + r.IntN(5))
			}
			rowPtr[u+1] = int64(base + per)
		}
		m, err := FromCSR(nil, nil, nI, rowPtr, rowCol, rowVal, nil)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		b.ReportMetric(float64(m.Bytes())/1e9, "GB-arrays")
		b.ReportMetric(procStatusKB("VmRSS")*1024/1e9, "GB-RSS")
		b.ReportMetric(procStatusKB("VmHWM")*1024/1e9, "GB-peak-RSS")
		runtime.KeepAlive(m)
	}
}

// The item-major view is built on first use, once, even when many
// goroutines ask for it together, and reading rows never builds it.
func TestLazyColumns(t *testing.T) {
	b := NewBuilder(DupError)
	for u := range 300 {
		for i := range 40 {
			if (u*7+i*3)%5 == 0 {
				if err := b.Add(fmt.Sprint(u), fmt.Sprint(i), float64(u%5+1), int64(u*40+i)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rowsOnly := m.Bytes()
	for u := range int32(m.NumUsers()) {
		m.UserRow(u)
	}
	if m.Bytes() != rowsOnly || m.ItemCount(0) == 0 {
		t.Fatalf("reading rows built the columns (%d → %d bytes) or item counts are missing", rowsOnly, m.Bytes())
	}
	var wg sync.WaitGroup
	sums := make([]int, 8)
	for g := range sums {
		wg.Go(func() {
			for i := range int32(m.NumItems()) {
				users, _ := m.ItemCol(i)
				if len(users) != m.ItemCount(i) {
					t.Errorf("item %d: %d users, count %d", i, len(users), m.ItemCount(i))
				}
				sums[g] += len(users)
			}
		})
	}
	wg.Wait()
	for g, s := range sums {
		if s != m.Len() {
			t.Fatalf("goroutine %d saw %d ratings in the columns, want %d", g, s, m.Len())
		}
	}
	if want := rowsOnly + 8*int64(m.Len()); m.Bytes() != want {
		t.Errorf("%d bytes with both views, want %d", m.Bytes(), want)
	}
}
