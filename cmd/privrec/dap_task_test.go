package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/dap/fleet"
)

// TestDapTaskCreateRounds: dp-ease released from the command line in its
// two rounds — privrec dap task create makes the counts task; while it is
// open, running it again changes nothing; after the devices contribute and
// it is collected, the same command makes the Gram task over the covered
// items; after that is collected, it publishes the model recipe, and a
// device's privrec dap recommend builds it and gives her list.
func TestDapTaskCreateRounds(t *testing.T) {
	dir := t.TempDir()
	p, err := fleet.StartPair(context.Background(), dir, 100, 1, 2)
	must(t, err)
	defer p.Close()
	admin := filepath.Join(dir, "admin.token")
	must(t, os.WriteFile(admin, []byte(p.AdminToken), 0o600))
	items := filepath.Join(dir, "items.txt")
	ids := []string{"a", "b", "c", "d", "e", "f"}
	must(t, os.WriteFile(items, []byte(strings.Join(ids, "\n")+"\n"), 0o644))
	const users = 12
	create := []string{"dap", "task", "create", "--leader", p.LeaderURL, "--admin-token-file", admin, "--method", "dp-ease", "--name", "ease",
		"--items", items, "--scale", "1:5", "--epsilon", "50", "--devices", fmt.Sprint(users), "--json"}
	step := func() map[string]any {
		t.Helper()
		o, e, code := runCLI(t, create...)
		if code != 0 {
			t.Fatalf("task create: %s %s", o, e)
		}
		var v map[string]any
		must(t, json.Unmarshal([]byte(o), &v))
		return v
	}
	for u := range users {
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("u%d.tsv", u)), []byte(fmt.Sprintf("%s\t5\n%s\t4\n%s\t3\n", ids[u%3], ids[3+u%2], ids[(u+1)%3])), 0o644))
		if o, e, code := runCLI(t, "dap", "enrol", "--leader", p.LeaderURL, "--token-file", filepath.Join(dir, fmt.Sprintf("u%d.token", u))); code != 0 {
			t.Fatalf("enrol: %s %s", o, e)
		}
	}
	contributeAll := func(task string) {
		t.Helper()
		for u := range users {
			if o, e, code := runCLI(t, "dap", "contribute", "--leader", p.LeaderURL, "--helper", p.HelperURL, "--task", task,
				"--token-file", filepath.Join(dir, fmt.Sprintf("u%d.token", u)), "--ratings", filepath.Join(dir, fmt.Sprintf("u%d.tsv", u)),
				"--ledger", filepath.Join(dir, fmt.Sprintf("u%d.ledger", u)), "--budget-rho", "100"); code != 0 {
				t.Fatalf("contribute to %s: %s %s", task, o, e)
			}
		}
		if o, e, code := runCLI(t, "dap", "collect", "--leader", p.LeaderURL, "--admin-token-file", admin, "--task", task); code != 0 || !strings.Contains(o, "released") {
			t.Fatalf("collect %s: %s %s", task, o, e)
		}
	}
	v := step()
	if v["open_task"] != "ease-1-counts" || v["created"] != true {
		t.Fatalf("first round: %v", v)
	}
	if v = step(); v["open_task"] != "ease-1-counts" || v["created"] != false {
		t.Fatalf("again while the counts task is open: %v", v)
	}
	contributeAll("ease-1-counts")
	v = step()
	gram, _ := v["open_task"].(string)
	if !strings.HasPrefix(gram, "ease-2-") || v["created"] != true {
		t.Fatalf("second round: %v", v)
	}
	contributeAll(gram)
	if v = step(); v["published"] != true || len(v["tasks"].([]any)) != 2 {
		t.Fatalf("after both rounds: %v", v)
	}
	if v = step(); v["published"] != false {
		t.Fatalf("once more: %v", v)
	}
	o, e, code := runCLI(t, "dap", "recommend", "--leader", p.LeaderURL, "--model", "ease", "--ratings", filepath.Join(dir, "u0.tsv"), "--k", "2")
	if code != 0 || !strings.Contains(o, " 1. ") || !strings.Contains(o, " 2. ") {
		t.Fatalf("recommend: %s %s", o, e)
	}
	// ease ranks items: a ranking, never a predicted rating.
	if !strings.Contains(o, "a ranking") || strings.Contains(o, "predicted rating") {
		t.Fatalf("recommend of a top-N model must print a ranking: %s", o)
	}
}
