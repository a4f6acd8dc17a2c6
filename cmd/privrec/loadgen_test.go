package main

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// envAsPrivrec makes the test binary run privrec itself: serve bench
// starts the server as a child process of this executable.
const envAsPrivrec = "PRIVREC_TEST_RUN_AS_PRIVREC"

func TestMain(m *testing.M) {
	if os.Getenv(envAsPrivrec) == "1" {
		stopProfile, err := startProfile(os.Getenv("PRIVREC_CPUPROFILE"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		code := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
		stopProfile()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestServeBench: one short run with the server in a child process and
// the generator here; every acknowledged report is stored and the
// ledgers are exact.
func TestServeBench(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process and loads it for a second")
	}
	t.Setenv(envAsPrivrec, "1") // inherited by the child only: this process has started
	code, out := runCmd(t, "serve", "bench", "--runs", "1", "--clients", "4", "--duration", "1s", "--warmup", "200ms", "--items", "8", "--json")
	v := decodeJSON(t, out)
	runs, _ := v["runs"].([]any)
	if code != 0 || len(runs) != 1 || v["db"] != "sqlite" || v["all_ledgers_exact"] != true || v["nothing_acknowledged_lost"] != true ||
		!(v["median_reports_per_second"].(float64) > 0) {
		t.Fatalf("exit %d: %s", code, out)
	}
	r := runs[0].(map[string]any)
	if la, ok := r["load_average_1m"].([]any); ok && len(la) != 2 {
		t.Fatalf("load average %v, want start and end", la)
	}
	if r["errors"].(float64) != 0 || !(r["commits"].(float64) > 0) || !(r["stored_reports"].(float64) >= r["acknowledged"].(float64)) || !(r["server_cpu_us_per_report"].(float64) > 0) {
		t.Fatalf("run: %v", r)
	}
}
