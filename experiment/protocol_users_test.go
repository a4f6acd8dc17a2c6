package experiment

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func usersConfig(evaluate string) string {
	ev := ""
	if evaluate != "" {
		ev = fmt.Sprintf(`"evaluate": %q,`, evaluate)
	}
	return `{"name": "users-test", "protocol": "users", ` + ev + `
	  "datasets": [{"name": "tiny", "source": "file", "path": "ratings.tsv", "format": "tsv", "scale": [1, 5],
	    "holdout_users": [10, 20], "positive": 4, "min_positives": 5, "items": "items.tsv"}],
	  "methods": [{"method": "als", "params": {"rank": 3}}, {"method": "dp-bias"}],
	  "epsilons": [2], "runs": 2, "metric": "recall_at_k", "k": 5}`
}

// TestProtocolUsers runs a sweep in the strong-generalisation protocol:
// recall_at_k and ndcg_at_k are Recall@5 and NDCG@5 of the held-out
// users, n the users scored (20 test or 10 validation users).
func TestProtocolUsers(t *testing.T) {
	dataDir := t.TempDir()
	writeTopNData(t, dataDir)
	for _, tc := range []struct {
		evaluate string
		users    int
	}{{"", 20}, {"validation", 10}} {
		t.Run("evaluate="+tc.evaluate, func(t *testing.T) {
			c, err := ParseConfig([]byte(usersConfig(tc.evaluate)))
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			if err := Run(context.Background(), c, Options{Out: out, DataDir: dataDir}); err != nil {
				t.Fatal(err)
			}
			rows, _, err := ReadResults(filepath.Join(out, "results.csv"))
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 4 {
				t.Fatalf("%d rows, want 4", len(rows))
			}
			for _, r := range rows {
				rec, ok1 := r.Metrics["recall_at_k"]
				nd, ok2 := r.Metrics["ndcg_at_k"]
				if !ok1 || !ok2 || rec < 0 || rec > 1 || nd < 0 || nd > 1 || r.N != tc.users {
					t.Fatalf("%s: recall %v ndcg %v n %d (want %d users)", r.Key, rec, nd, r.N, tc.users)
				}
				if _, rmse := r.Metrics["rmse"]; rmse {
					t.Fatalf("%s: an RMSE in the users protocol", r.Key)
				}
			}
		})
	}
}

func TestProtocolUsersConfigErrors(t *testing.T) {
	base := usersConfig("")
	for _, tc := range []struct {
		name, from, to, msg string
	}{
		{"unknown protocol", `"protocol": "users"`, `"protocol": "people"`, "protocol"},
		{"holdout_users without the protocol", `"protocol": "users"`, `"protocol": "ratings"`, "go together"},
		{"rmse", `"metric": "recall_at_k"`, `"metric": "rmse"`, "recall_at_k or ndcg_at_k"},
		{"no k", `"k": 5`, `"k": 0`, "k > 0"},
		{"bad evaluate", `"protocol": "users",`, `"protocol": "users", "evaluate": "train",`, "evaluate"},
		{"one count", `[10, 20]`, `[10]`, "holdout_users"},
		{"no test users", `[10, 20]`, `[10, 0]`, "holdout_users"},
		{"with holdout", `"holdout_users"`, `"holdout": 0.1, "holdout_users"`, "no test, holdout"},
		{"frac 1", `"min_positives": 5`, `"min_positives": 5, "target_frac": 1`, "target_frac"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := strings.Replace(base, tc.from, tc.to, 1)
			if cfg == base {
				t.Fatalf("the edit %q did not apply", tc.from)
			}
			_, err := ParseConfig([]byte(cfg))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want one naming %q", err, tc.msg)
			}
		})
	}
	// evaluate belongs to protocol users.
	if _, err := ParseConfig([]byte(`{"name": "x", "evaluate": "test", "datasets": [{"name": "d", "source": "file", "path": "p", "holdout": 0.1}], "methods": [{"method": "als"}], "metric": "rmse"}`)); err == nil {
		t.Fatal("evaluate accepted without protocol users")
	}
}
