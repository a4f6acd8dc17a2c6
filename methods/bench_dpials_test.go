package methods

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/synth"
)

// The sizes of BenchmarkDPIALSScale. The defaults run in about a minute;
// the scale target of issue 22 is
//
//	go test -c -o methods.test ./methods
//	/usr/bin/time -v ./methods.test -test.run '^$' -test.bench DPIALSScale -test.benchtime 1x \
//	    -dpials.users 1000000 -dpials.items 20000 -dpials.interactions 50000000
var (
	benchUsers        = flag.Int("dpials.users", 100_000, "BenchmarkDPIALSScale: users")
	benchItems        = flag.Int("dpials.items", 20_000, "BenchmarkDPIALSScale: items")
	benchInteractions = flag.Int64("dpials.interactions", 5_000_000, "BenchmarkDPIALSScale: interactions")
	benchEpsilon      = flag.Float64("dpials.epsilon", 1, "BenchmarkDPIALSScale: ε (δ = 10⁻⁶)")
	benchParams       = flag.String("dpials.params", "", "BenchmarkDPIALSScale: the method's parameters as name=value,… (e.g. steps=2,rank=64)")
	benchMethod       = flag.String("dpials.method", "dp-ials", "BenchmarkDPIALSScale: the method trained (dp-ials, ials, ease, …)")
)

// BenchmarkDPIALSScale trains dp-ials (or -dpials.method) on a
// Netflix-like synthetic population (synth.Implicit: power-law
// popularity, log-normal activity, genre taste; generated in memory
// before the timer starts) and reports the wall time of one training (for
// dp-ials: the counts, the initial Gram and its eigenvectors, every
// user's exact solve, the per-item statistics and their release, the item
// solves), its CPU-seconds (user + system of the process during the
// training: what it costs on a shared machine, where the wall time
// depends on the neighbours) and the process's peak resident memory
// (VmHWM, the data included). Skipped with -short.
func BenchmarkDPIALSScale(b *testing.B) {
	if testing.Short() {
		b.Skip("millions of interactions")
	}
	cfg := synth.ImplicitDefaults()
	cfg.Users, cfg.Items, cfg.Interactions = *benchUsers, *benchItems, *benchInteractions
	t0 := time.Now()
	data, err := synth.ImplicitMatrix(context.Background(), cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	cat, err := model.NewCatalogue(data.Items.Names(), nil)
	if err != nil {
		b.Fatal(err)
	}
	gen := time.Since(t0)
	params := map[string]any{}
	if *benchParams != "" {
		for _, kv := range strings.Split(*benchParams, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				b.Fatalf("-dpials.params: %q is not name=value", kv)
			}
			params[k] = v
		}
	}
	in := release.Input{Ratings: data, Declared: release.Declared{Catalogue: cat}}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b.ResetTimer()
	for range b.N {
		c, err := Configure(*benchMethod, params)
		if err != nil {
			b.Fatal(err)
		}
		start, cpu0 := time.Now(), cpuSeconds()
		rel, err := Train(context.Background(), *benchMethod, c, in, Env{Epsilon: *benchEpsilon, Delta: 1e-6, Noise: noise.Secure(), Rand: noise.Seeded(1), Seed: 1, Log: log})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "wall-s/op")
		b.ReportMetric(cpuSeconds()-cpu0, "CPU-s/op")
		b.Logf("%d users × %d items, %d interactions (generated in %.1f s): %v", data.NumUsers(), data.NumItems(), data.Len(), gen.Seconds(), rel.Report)
	}
	b.ReportMetric(peakRSSGB(), "peak-RSS-GB")
}

// peakRSSGB is the process's peak resident set (VmHWM) in GB (0 if
// unknown).
func peakRSSGB() float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb / (1 << 20)
		}
	}
	return 0
}

// cpuSeconds is the process's user + system CPU time so far (0 if
// unknown).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
