package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// watchHeap, when path is not empty (PRIVREC_MEMPROFILE=heap.out
// privrec-beam …), samples the Go heap every 200 ms and writes an
// in-use heap profile to path each time the live heap reaches a new
// high (10 % above the last one written), so the file left at the end is
// the profile nearest the peak: `go tool pprof -sample_index=inuse_space
// heap.out` says which allocations (Prism's stored elements, the
// combiners' accumulators, the grouped values) the peak was made of. It
// logs each new high with the heap's size. The returned function stops it.
func watchHeap(ctx context.Context, path string, log *slog.Logger) func() {
	if path == "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last uint64
		var ms runtime.MemStats
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse < last+last/10 {
				continue
			}
			last = ms.HeapInuse
			if err := writeInuse(path); err != nil {
				log.Error("heap profile", "err", err)
				return
			}
			log.Info("heap high", "heap_inuse_mb", ms.HeapInuse>>20, "sys_mb", ms.Sys>>20)
		}
	}()
	return func() { cancel(); <-done }
}

// writeInuse writes the heap profile (in-use and allocated space) to path.
func writeInuse(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("PRIVREC_MEMPROFILE: %w", err)
	}
	werr := pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("PRIVREC_MEMPROFILE: %w", werr)
	}
	return nil
}
