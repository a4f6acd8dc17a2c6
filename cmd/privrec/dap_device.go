package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"

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

// dapDeviceFlags are the flags of the device and admin commands (enrol,
// contribute, task, collect, recommend); each command reads its own.
type dapDeviceFlags struct {
	leader, helper, tokenFile, adminFile, taskID, taskFile string
	ratingsFile, ledgerFile, modelName                     string
	budget                                                 float64
	allowSplit, jsonOut                                    bool
	k                                                      int
}

// dapDeviceCommands are the device and admin commands by name.
var dapDeviceCommands = map[string]func(context.Context, *dap.Client, *dapDeviceFlags, io.Writer) error{
	"enrol":      dapEnrol,
	"contribute": dapContribute,
	"recommend":  dapRecommend,
	"task":       dapPostTask,
	"collect":    dapCollect,
}

func runDAPDevice(ctx context.Context, sub string, args []string, out io.Writer) error {
	f, err := parseDAPDevice(sub, args)
	if err != nil {
		return err
	}
	run, ok := dapDeviceCommands[sub]
	if !ok {
		return usagef("dap: unknown subcommand %q (privrec dap --help)", sub)
	}
	return run(ctx, &dap.Client{Leader: f.leader, Helper: f.helper}, f, out)
}

// parseDAPDevice parses the flags of the device and admin commands;
// every one needs --leader.
func parseDAPDevice(sub string, args []string) (*dapDeviceFlags, error) {
	var f dapDeviceFlags
	fs := newFlags("dap "+sub, dapSynopsis, "  privrec dap contribute --leader http://127.0.0.1:8090 --helper http://127.0.0.1:8091 \\\n      --token-file me.token --task pop-1 --ratings my-ratings.tsv --ledger me.ledger --budget-rho 2")
	fs.StringVar(&f.leader, "leader", "", "the leader's base URL")
	fs.StringVar(&f.helper, "helper", "", "the helper's base URL (its HPKE key seals the helper's share)")
	fs.StringVar(&f.tokenFile, "token-file", "", "the user's bearer token (enrol writes it, mode 0600)")
	fs.StringVar(&f.adminFile, "admin-token-file", "", "the leader's admin token (task, collect)")
	fs.StringVar(&f.taskID, "task", "", "task ID")
	fs.StringVar(&f.taskFile, "file", "", "task: the task's public parameters as JSON")
	fs.StringVar(&f.ratingsFile, "ratings", "", "contribute: the user's own ratings (item<TAB>rating per line)")
	fs.StringVar(&f.ledgerFile, "ledger", "", "contribute: the device's own ledger file (created with --budget-rho)")
	fs.Float64Var(&f.budget, "budget-rho", 0, "contribute: the budget ρ a new device ledger accepts")
	fs.BoolVar(&f.allowSplit, "allow-split-noise", false, "contribute: accept a task whose noise is split between the aggregators (honest-but-curious); you are charged the ρ one aggregator's noise alone gives (≈ 2× the stated ρ)")
	fs.StringVar(&f.modelName, "model", "", "recommend: the published model's name (GET /dap/v1/models lists them)")
	fs.IntVar(&f.k, "k", 10, "recommend: how many recommendations")
	fs.BoolVar(&f.jsonOut, "json", false, "print JSON")
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	if f.leader == "" {
		return nil, usagef("--leader is required")
	}
	return &f, nil
}

// dapEnrol enrols a user at the leader and writes her token (mode 0600).
func dapEnrol(ctx context.Context, c *dap.Client, f *dapDeviceFlags, out io.Writer) error {
	if f.tokenFile == "" {
		return usagef("--token-file is required")
	}
	var e server.Enrolment
	if err := c.Do(ctx, http.MethodPost, f.leader, "/dap/v1/users", "", nil, &e); err != nil {
		return err
	}
	if err := model.WriteFileAtomicBytes(f.tokenFile, []byte(e.Token+"\n"), 0o600); err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	return writeJSON(out, map[string]string{"user": e.User})
}

// dapContribute derives the task's guarantee on this device, charges the
// device ledger and sends her two encrypted shares.
func dapContribute(ctx context.Context, c *dap.Client, f *dapDeviceFlags, out io.Writer) error {
	if f.helper == "" || f.tokenFile == "" || f.taskID == "" || f.ratingsFile == "" || f.ledgerFile == "" {
		return usagef("--helper, --token-file, --task, --ratings and --ledger are required")
	}
	tok, err := readTokenFile(f.tokenFile, "--token-file")
	if err != nil {
		return err
	}
	c.Token = tok
	r, err := client.LoadRatings(f.ratingsFile)
	if err != nil {
		return usagef("--ratings: %v", err)
	}
	l, err := loadDeviceLedger(f)
	if err != nil {
		return err
	}
	ids, vals := r.Items()
	var rc server.Receipt
	c.Consent.SplitNoise = f.allowSplit
	rep, d, err := c.Contribute(ctx, f.taskID, ids, vals, l, func() error { return l.Save(f.ledgerFile) }, &rc)
	if err != nil {
		return err
	}
	if f.jsonOut {
		return writeJSON(out, map[string]any{"task": f.taskID, "report_bytes": rep.Size(), "leader_share_bytes": len(rep.LeaderShare.Ciphertext),
			"helper_share_bytes": len(rep.HelperShare.Ciphertext), "charged_rho": d.ChargeRho, "guarantee": d.Guarantee(),
			"derived": d, "leader_charged_rho": rc.ChargedRho,
			"leader_spent_rho": rc.SpentRho, "device_spent_rho": l.SpentRho(), "device_budget_rho": l.BudgetRho})
	}
	fmt.Fprintf(out, "sent two encrypted shares for task %s (%d bytes: leader %d, helper %d); charged ρ %.4g (derived on this device from the task's plan); this device has spent ρ %.4g of %.4g\nguarantee: %s\n",
		f.taskID, rep.Size(), len(rep.LeaderShare.Ciphertext), len(rep.HelperShare.Ciphertext), d.ChargeRho, l.SpentRho(), l.BudgetRho, d.Guarantee())
	if rc.ChargedRho != d.ChargeRho {
		fmt.Fprintf(out, "the leader's ledger counts ρ %.4g for it\n", rc.ChargedRho)
	}
	return nil
}

// loadDeviceLedger loads the device ledger, or makes a new one accepting
// --budget-rho.
func loadDeviceLedger(f *dapDeviceFlags) (*dap.Ledger, error) {
	l, err := dap.LoadLedger(f.ledgerFile)
	if err != nil || l != nil {
		return l, err
	}
	if l, err = dap.NewLedger(f.leader, f.budget); err != nil {
		return nil, usagef("--budget-rho: a new device ledger needs a positive budget (%v)", err)
	}
	return l, nil
}

// dapRecommend builds the published model from its releases on this
// device and prints her list, computed from her own ratings (nothing is
// sent).
func dapRecommend(ctx context.Context, c *dap.Client, f *dapDeviceFlags, out io.Writer) error {
	if f.modelName == "" || f.ratingsFile == "" {
		return usagef("--model and --ratings are required")
	}
	if f.k < 1 {
		return usagef("--k %d: want at least 1", f.k)
	}
	r, err := client.LoadRatings(f.ratingsFile)
	if err != nil {
		return usagef("--ratings: %v", err)
	}
	rec, rels, err := devicemodel.Fetch(ctx, c, f.modelName)
	if err != nil {
		return err
	}
	m, err := devicemodel.Build(ctx, rec, rels, nil)
	if err != nil {
		return err
	}
	recs, err := client.RecommendFrom(m, r, f.k)
	if err != nil {
		return err
	}
	warnings := release.Warnings(nil, m, release.Facts{List: f.k})
	if !f.jsonOut {
		writeDAPRecommendations(out, rec.Name, rec.Method, len(rels), len(r), m.Output.Rated(), recs)
		return writeWarnings(out, warnings)
	}
	if warnings == nil {
		warnings = []release.Warning{}
	}
	return writeJSON(out, map[string]any{"model": rec.Name, "method": rec.Method, "recommendations": recs,
		"ranking": !m.Output.Rated(), "warnings": warnings})
}

// dapPostTask (admin) creates the task of --file at the leader and prints
// it as the leader stored it.
func dapPostTask(ctx context.Context, c *dap.Client, f *dapDeviceFlags, out io.Writer) error {
	admin, err := readTokenFile(f.adminFile, "--admin-token-file")
	if err != nil {
		return err
	}
	b, err := os.ReadFile(f.taskFile)
	if err != nil {
		return usagef("--file: %v", err)
	}
	var t dap.Task
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&t); err != nil {
		return usagef("--file %s: %v", f.taskFile, err)
	}
	if err := c.Do(ctx, http.MethodPost, f.leader, "/dap/v1/admin/tasks", admin, t, &t); err != nil {
		return err
	}
	return writeJSON(out, t)
}

// dapCollect (admin) asks the leader to aggregate and release the task,
// and prints a summary (--json: the whole release).
func dapCollect(ctx context.Context, c *dap.Client, f *dapDeviceFlags, out io.Writer) error {
	admin, err := readTokenFile(f.adminFile, "--admin-token-file")
	if err != nil {
		return err
	}
	var rel server.Release
	if err := c.Do(ctx, http.MethodPost, f.leader, "/dap/v1/admin/tasks/"+f.taskID+"/collect", admin, nil, &rel); err != nil {
		return err
	}
	if !f.jsonOut {
		printRelease(out, &rel)
		return nil
	}
	return writeJSON(out, rel)
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
