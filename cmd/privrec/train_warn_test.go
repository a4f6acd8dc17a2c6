package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainWarnsDrownedRelease: `privrec train` of dp-ease over 6 users
// at ε = 1 says that the noise drowns the release (too few users, nothing
// above the noise edge, fewer covered items than a list), in text and in
// --json; the model is still written (the operator decides).
func TestTrainWarnsDrownedRelease(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "six.tsv", func(u, i int) bool { return u <= 6 })
	var items strings.Builder
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&items, "%d\n", i)
	}
	cat := filepath.Join(dir, "items.txt")
	if err := os.WriteFile(cat, []byte(items.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "m.model")
	args := []string{"train", "--data", data, "--format", "tsv", "--method", "dp-ease", "--epsilon", "1", "--items", cat, "--seed", "1", "--out", out}
	text, errs, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// (Whether an eigenpair clears the noise edge is up to the noise: no
	// "no eigenpair" warning is asked for.)
	for _, want := range []string{"WARNING: too few users for this ε", "with 6 users", "WARNING: only "} {
		if !strings.Contains(text, want) {
			t.Errorf("train's output does not say %q:\n%s", want, text)
		}
	}
	js, errs, code := runCLI(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Warnings []struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil || len(rep.Warnings) < 2 || rep.Warnings[0].Code != "too_few_users" || rep.Warnings[len(rep.Warnings)-1].Code != "few_covered" {
		t.Fatalf("train --json warnings %+v (%v):\n%s", rep.Warnings, err, js)
	}
}

// TestClientHelpPerMode: `privrec client --help` words submit and status
// for each mode, not "randomize" and "ε spent" alone.
func TestClientHelpPerMode(t *testing.T) {
	out, errs, _ := runCLI(t, "client", "--help")
	help := out + errs
	for _, want := range []string{"local mode: randomize her ratings on this device", "Central mode: send her ratings as she",
		"entered them to the operator", "central mode, what the releases", "predicted ratings, or a ranking"} {
		if !strings.Contains(help, want) {
			t.Errorf("client --help does not say %q:\n%s", want, help)
		}
	}
}
