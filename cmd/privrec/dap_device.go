package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/devicemodel"
	"github.com/privrec/privrec/dap/server"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/release"
)

// The device and admin sides of the two-aggregator path:
//
//	privrec dap enrol      --leader URL --token-file FILE
//	privrec dap contribute --leader URL --helper URL --token-file FILE --task ID --ratings FILE --ledger FILE [--budget-rho B] [--allow-split-noise]
//	privrec dap task       --leader URL --admin-token-file FILE --file TASK.json
//	privrec dap collect    --leader URL --admin-token-file FILE --task ID
//	privrec dap recommend  --leader URL --model NAME --ratings FILE [--k 10]

// printRelease summarises a release (collect's default output).
func printRelease(out io.Writer, rel *server.Release) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range rel.Values {
		lo, hi = min(lo, v), max(hi, v)
	}
	fmt.Fprintf(out, "task %s released: %s, %d values (from %.4g to %.4g), noise SD %.4g per value\nguarantee: %s\n(the whole release: --json, or GET /dap/v1/tasks/%s/release)\n",
		rel.Task.ID, rel.Task.Statistic, len(rel.Values), lo, hi, rel.NoiseSD, rel.Guarantee, rel.Task.ID)
}

func runDAPDevice(ctx context.Context, sub string, args []string, out io.Writer) error {
	fs := newFlags("dap "+sub, dapSynopsis, "  privrec dap contribute --leader http://127.0.0.1:8090 --helper http://127.0.0.1:8091 \\\n      --token-file me.token --task pop-1 --ratings my-ratings.tsv --ledger me.ledger --budget-rho 2")
	leader := fs.String("leader", "", "the leader's base URL")
	helper := fs.String("helper", "", "the helper's base URL (its HPKE key seals the helper's share)")
	tokenFile := fs.String("token-file", "", "the user's bearer token (enrol writes it, mode 0600)")
	adminFile := fs.String("admin-token-file", "", "the leader's admin token (task, collect)")
	taskID := fs.String("task", "", "task ID")
	taskFile := fs.String("file", "", "task: the task's public parameters as JSON")
	ratingsFile := fs.String("ratings", "", "contribute: the user's own ratings (item<TAB>rating per line)")
	ledgerFile := fs.String("ledger", "", "contribute: the device's own ledger file (created with --budget-rho)")
	budget := fs.Float64("budget-rho", 0, "contribute: the budget ρ a new device ledger accepts")
	allowSplit := fs.Bool("allow-split-noise", false, "contribute: accept a task whose noise is split between the aggregators (honest-but-curious); you are charged the ρ one aggregator's noise alone gives (≈ 2× the stated ρ)")
	modelName := fs.String("model", "", "recommend: the published model's name (GET /dap/v1/models lists them)")
	k := fs.Int("k", 10, "recommend: how many recommendations")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *leader == "" {
		return usagef("--leader is required")
	}
	c := &dap.Client{Leader: *leader, Helper: *helper}
	var result any
	switch sub {
	case "enrol":
		if *tokenFile == "" {
			return usagef("--token-file is required")
		}
		var e server.Enrolment
		if err := c.Do(ctx, http.MethodPost, *leader, "/dap/v1/users", "", nil, &e); err != nil {
			return err
		}
		if err := model.WriteFileAtomicBytes(*tokenFile, []byte(e.Token+"\n"), 0o600); err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		result = map[string]string{"user": e.User}
	case "contribute":
		if *helper == "" || *tokenFile == "" || *taskID == "" || *ratingsFile == "" || *ledgerFile == "" {
			return usagef("--helper, --token-file, --task, --ratings and --ledger are required")
		}
		tok, err := readTokenFile(*tokenFile, "--token-file")
		if err != nil {
			return err
		}
		c.Token = tok
		r, err := client.LoadRatings(*ratingsFile)
		if err != nil {
			return usagef("--ratings: %v", err)
		}
		l, err := dap.LoadLedger(*ledgerFile)
		if err != nil {
			return err
		}
		if l == nil {
			if l, err = dap.NewLedger(*leader, *budget); err != nil {
				return usagef("--budget-rho: a new device ledger needs a positive budget (%v)", err)
			}
		}
		ids, vals := r.Items()
		var rc server.Receipt
		c.Consent.SplitNoise = *allowSplit
		rep, d, err := c.Contribute(ctx, *taskID, ids, vals, l, func() error { return l.Save(*ledgerFile) }, &rc)
		if err != nil {
			return err
		}
		result = map[string]any{"task": *taskID, "report_bytes": rep.Size(), "leader_share_bytes": len(rep.LeaderShare.Ciphertext),
			"helper_share_bytes": len(rep.HelperShare.Ciphertext), "charged_rho": d.ChargeRho, "guarantee": d.Guarantee(),
			"derived": d, "leader_charged_rho": rc.ChargedRho,
			"leader_spent_rho": rc.SpentRho, "device_spent_rho": l.SpentRho(), "device_budget_rho": l.BudgetRho}
	case "recommend":
		if *modelName == "" || *ratingsFile == "" {
			return usagef("--model and --ratings are required")
		}
		if *k < 1 {
			return usagef("--k %d: want at least 1", *k)
		}
		r, err := client.LoadRatings(*ratingsFile)
		if err != nil {
			return usagef("--ratings: %v", err)
		}
		rec, rels, err := devicemodel.Fetch(ctx, c, *modelName)
		if err != nil {
			return err
		}
		m, err := devicemodel.Build(ctx, rec, rels, nil)
		if err != nil {
			return err
		}
		recs, err := client.RecommendFrom(m, r, *k)
		if err != nil {
			return err
		}
		warnings := release.Warnings(nil, m, release.Facts{List: *k})
		if !*jsonOut {
			writeDAPRecommendations(out, rec.Name, rec.Method, len(rels), len(r), m.Output.Rated(), recs)
			return writeWarnings(out, warnings)
		}
		if warnings == nil {
			warnings = []release.Warning{}
		}
		result = map[string]any{"model": rec.Name, "method": rec.Method, "recommendations": recs,
			"ranking": !m.Output.Rated(), "warnings": warnings}
	case "task", "collect":
		admin, err := readTokenFile(*adminFile, "--admin-token-file")
		if err != nil {
			return err
		}
		if sub == "task" {
			b, err := os.ReadFile(*taskFile)
			if err != nil {
				return usagef("--file: %v", err)
			}
			var t dap.Task
			d := json.NewDecoder(strings.NewReader(string(b)))
			d.DisallowUnknownFields()
			if err := d.Decode(&t); err != nil {
				return usagef("--file %s: %v", *taskFile, err)
			}
			if err := c.Do(ctx, http.MethodPost, *leader, "/dap/v1/admin/tasks", admin, t, &t); err != nil {
				return err
			}
			result = t
			break
		}
		var rel server.Release
		if err := c.Do(ctx, http.MethodPost, *leader, "/dap/v1/admin/tasks/"+*taskID+"/collect", admin, nil, &rel); err != nil {
			return err
		}
		if !*jsonOut {
			printRelease(out, &rel)
			return nil
		}
		result = rel
	}
	if *jsonOut || sub != "contribute" {
		e := json.NewEncoder(out)
		e.SetIndent("", "  ")
		return e.Encode(result)
	}
	m := result.(map[string]any)
	fmt.Fprintf(out, "sent two encrypted shares for task %s (%d bytes: leader %d, helper %d); charged ρ %.4g (derived on this device from the task's plan); this device has spent ρ %.4g of %.4g\nguarantee: %s\n",
		*taskID, m["report_bytes"], m["leader_share_bytes"], m["helper_share_bytes"], m["charged_rho"], m["device_spent_rho"], m["device_budget_rho"], m["guarantee"])
	if lc, _ := m["leader_charged_rho"].(float64); lc != m["charged_rho"].(float64) {
		fmt.Fprintf(out, "the leader's ledger counts ρ %.4g for it\n", lc)
	}
	return nil
}

// writeDAPRecommendations prints a device's list from a model it built
// from the releases: predicted ratings for a rating model; for a top-N
// model a ranking, its scores left out (they order the items and are not
// ratings).
func writeDAPRecommendations(out io.Writer, name, method string, releases, ratings int, rated bool, recs []model.Recommendation) {
	what := "a ranking, best first (a top-N model ranks items; it predicts no ratings)"
	if rated {
		what = "with predicted ratings"
	}
	fmt.Fprintf(out, "model %s (%s, built here from %d release(s)); your list was computed on this device from your %d ratings — %s:\n", name, method, releases, ratings, what)
	writeList(out, rated, recs)
}
