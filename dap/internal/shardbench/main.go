// Command shardbench times what a device does per task — quantized
// vector in, Prio3SumVec shares sealed to both aggregators out — at
// MovieLens-1M's sizes, outside the test harness so that it also runs as
// WebAssembly (the browser's engine) under Node:
//
//	go run ./dap/internal/shardbench
//	GOOS=js GOARCH=wasm go build -o shard.wasm ./dap/internal/shardbench
//	$(go env GOROOT)/lib/wasm/go_js_wasm_exec shard.wasm
//
// The sizes: dp-popularity's counts (3 706 coordinates × 9 bits) and
// dp-ease's Gram at privrec dap simulate's default device budget (228
// covered items: 26 106 coordinates × 10 bits). It prints the best of 3.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/privrec/privrec/dap"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "shardbench:", err)
		os.Exit(1)
	}
}

func run() error {
	for _, c := range []struct {
		name      string
		dim, bits int
		step      float64
		val       int64 // the non-zero entries of a typical user's part
		nz        int
	}{
		{"dp-popularity counts, 3706 × 9 bits", 3706, 9, 1.0 / 256, 36, 100},
		{"dp-ease Gram over 228 items, 26106 × 10 bits", 228 * 229 / 2, 10, 1.0 / 512, 12, 820},
	} {
		tk, err := dap.NewTask(dap.Task{ID: "bench", Statistic: "bench", Dimension: c.dim, Step: c.step, Bits: c.bits, NormSq: 1 << 40, Rho: 0.5, MinReports: 1})
		if err != nil {
			return err
		}
		lk, err := dap.NewKeyPair()
		if err != nil {
			return err
		}
		hk, err := dap.NewKeyPair()
		if err != nil {
			return err
		}
		q := make([]int64, c.dim)
		for j := range c.nz {
			q[j*31%c.dim] = c.val
		}
		var best time.Duration
		var size int
		for range 3 {
			t0 := time.Now()
			r, err := tk.Shard(q, lk.Public, hk.Public)
			if err != nil {
				return err
			}
			if d := time.Since(t0); best == 0 || d < best {
				best = d
			}
			size = r.Size()
		}
		fmt.Printf("%s: %.3f s, %d bytes per report (best of 3)\n", c.name, best.Seconds(), size)
	}
	return nil
}
