package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/devicemodel"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
)

const dapTaskCreateSynopsis = `
Release a private method through the two aggregators from the command
line, one round at a time. The tasks are built from the method's public
plan and the collection's declared facts — the catalogue (--items), the
rating scale, ε and δ, the number of devices the release is planned for
(--devices, public) and a device's budget — exactly as privrec dap
simulate builds them (dap.Lattice.TaskFor): no lattice is written by
hand.

Each run replays the method over the releases published so far and
creates the next task it needs at the leader (the leader provisions it
at the helper, which re-derives every privacy parameter from the plan):

  1. privrec dap task create --method M --name N …   creates task N-1-KIND
  2. devices: privrec dap contribute --task N-1-KIND …
  3. privrec dap collect --task N-1-KIND
  4. privrec dap task create … again (same flags): the next round's task
     (dp-ease: the Gram over the items its counts release ranks first),
     or, when every task is released, the model recipe N is published
     so devices build the model themselves: privrec dap recommend --model N

Running it again changes nothing while a task is open. Each task charges
every device that contributes to it its ρ; the method's whole release is
(ε, δ)-DP per user (replace-one), as the central release states.`

func runDAPTaskCreate(ctx context.Context, args []string, out io.Writer) error {
	a, err := parseTaskCreateArgs(args)
	if err != nil {
		return err
	}
	rec, cat, admin, err := taskCreateRecipe(a)
	if err != nil {
		return err
	}
	c := &dap.Client{Leader: a.leader}
	created := false
	get := func(ctx context.Context, want dap.Task) (*dap.Release, error) {
		rel, made, err := releaseOrCreate(ctx, c, admin, want)
		created = created || made
		return rel, err
	}
	tasks, pending, err := devicemodel.Advance(ctx, rec, cat, get)
	if err != nil {
		return err
	}
	res := map[string]any{"model": a.name, "method": a.method, "tasks": taskSummaries(tasks)}
	if pending != nil {
		return printOpenTask(out, res, pending, created, len(tasks), a)
	}
	rec.Tasks = make([]string, len(tasks))
	for i, t := range tasks {
		rec.Tasks[i] = t.ID
	}
	published, err := publishRecipe(ctx, c, admin, rec)
	if err != nil {
		return err
	}
	res["published"] = published
	if a.json {
		return writeJSON(out, res)
	}
	state := "published"
	if !published {
		state = "was published already"
	}
	fmt.Fprintf(out, "all %d task(s) of %s are released; model %s %s: devices build it from the releases themselves (privrec dap recommend --model %s)\n",
		len(tasks), a.method, a.name, state, a.name)
	return nil
}

// taskCreateArgs is dap task create's command line.
type taskCreateArgs struct {
	leader, adminFile, method, name, items, scale, params string
	eps, delta                                            float64
	devices                                               int
	seed                                                  uint64
	lattice                                               *latticeFlags
	json                                                  bool
}

func parseTaskCreateArgs(args []string) (*taskCreateArgs, error) {
	example := `  privrec dap task create --leader http://127.0.0.1:8090 --admin-token-file admin.token \
      --method dp-popularity --name pop --items items.txt --scale 1:5 --epsilon 1 --devices 1000`
	fs := newFlags("dap task create --leader URL --admin-token-file FILE --method M --name NAME --items FILE --scale MIN:MAX --devices N", dapTaskCreateSynopsis, example)
	a := &taskCreateArgs{}
	fs.StringVar(&a.leader, "leader", "", "the leader's base URL")
	fs.StringVar(&a.adminFile, "admin-token-file", "", "the leader's admin token")
	fs.StringVar(&a.method, "method", "", "a method that releases its statistics through an engine (dp-popularity, dp-bias, dp-ease, dpals, …)")
	fs.StringVar(&a.name, "name", "", "the model's name (1–64 of A–Z a–z 0–9 _ . -); its tasks are NAME-1-KIND, NAME-2-KIND, …")
	fs.StringVar(&a.items, "items", "", "the declared catalogue (one item ID per line, an optional title after a tab)")
	fs.StringVar(&a.scale, "scale", "", "the declared rating scale MIN:MAX")
	fs.Float64Var(&a.eps, "epsilon", 1, "ε of the method's whole release (per user, replace-one)")
	fs.Float64Var(&a.delta, "delta", 1e-6, "δ of the method's whole release")
	fs.IntVar(&a.devices, "devices", 0, "the number of devices the release is planned for (public; the methods' plans read it)")
	fs.Uint64Var(&a.seed, "seed", 1, "the seed of the method's public post-processing randomness (published in the recipe)")
	fs.StringVar(&a.params, "params", "", "method parameters, KEY=VALUE comma-separated (e.g. max_items=60)")
	a.lattice = addLatticeFlags(fs)
	fs.BoolVar(&a.json, "json", false, "print JSON")
	if err := parse(fs, args, false); err != nil {
		return nil, err
	}
	switch {
	case a.leader == "" || a.method == "" || a.name == "" || a.items == "" || a.scale == "":
		return nil, usagef("--leader, --method, --name, --items and --scale are required")
	case a.devices < 1:
		return nil, usagef("--devices %d: the number of devices the release is planned for must be at least 1", a.devices)
	}
	return a, nil
}

// taskCreateRecipe is the model's recipe (its tasks still to come) built
// from the method's public plan and the declared facts, the declared
// catalogue and the admin token; a method without an engine is refused.
func taskCreateRecipe(a *taskCreateArgs) (dap.Recipe, *model.Catalogue, string, error) {
	m, err := methods.Lookup(a.method)
	if err != nil {
		return dap.Recipe{}, nil, "", usagef("--method: %v", err)
	}
	if !m.Engine {
		return dap.Recipe{}, nil, "", usagef("--method %s does not release its statistics through an engine: it cannot run through the aggregators", a.method)
	}
	lat, err := a.lattice.lattice()
	if err != nil {
		return dap.Recipe{}, nil, "", err
	}
	sc, cat, err := loadDeclared(a.scale, a.items)
	if err != nil {
		return dap.Recipe{}, nil, "", err
	}
	mp, err := parseMethodParams(prefixParams(a.method, a.params))
	if err != nil {
		return dap.Recipe{}, nil, "", err
	}
	admin, err := readTokenFile(a.adminFile, "--admin-token-file")
	if err != nil {
		return dap.Recipe{}, nil, "", err
	}
	rec := dap.Recipe{Name: a.name, Method: a.method, Params: mp[a.method], Epsilon: a.eps, Delta: a.delta, Seed: a.seed, Devices: a.devices,
		Scale: [2]float64{sc.Min, sc.Max}, Lattice: lat,
		Tasks: []string{"placeholder"}}
	if err := rec.Validate(); err != nil {
		return dap.Recipe{}, nil, "", usagef("%v", err)
	}
	return rec, cat, admin, nil
}

// printOpenTask reports the task devices contribute to next (created now,
// or open already) and what to do then.
func printOpenTask(out io.Writer, res map[string]any, pending *dap.Task, created bool, round int, a *taskCreateArgs) error {
	res["open_task"] = pending.ID
	res["created"] = created
	if a.json {
		return writeJSON(out, res)
	}
	verb := "is open"
	if created {
		verb = "created"
	}
	fmt.Fprintf(out, "task %s %s: %s, %d coordinates × %d bits, ρ %.4g per contributing user, σ %d per aggregator (round %d of %s)\n",
		pending.ID, verb, pending.Statistic, pending.Dimension, pending.Bits, pending.Rho, pending.Sigma, round, a.method)
	fmt.Fprintf(out, "next: devices contribute (privrec dap contribute --task %s …), then privrec dap collect --task %s, then run this command again\n", pending.ID, pending.ID)
	return nil
}

// prefixParams turns KEY=VALUE,… into METHOD.KEY=VALUE,… (parseMethodParams'
// form).
func prefixParams(method, s string) string {
	if s == "" {
		return ""
	}
	kvs := strings.Split(s, ",")
	for i := range kvs {
		kvs[i] = method + "." + strings.TrimSpace(kvs[i])
	}
	return strings.Join(kvs, ",")
}

// releaseOrCreate is task want's release at the leader, or nil when it is
// not released; a task that does not exist yet is created (made reports
// it). A task under want's ID with other parameters is an error.
func releaseOrCreate(ctx context.Context, c *dap.Client, admin string, want dap.Task) (rel *dap.Release, made bool, err error) {
	id := url.PathEscape(want.ID)
	var r dap.Release
	err = c.Do(ctx, http.MethodGet, c.Leader, "/dap/v1/tasks/"+id+"/release", "", nil, &r)
	if err == nil {
		return &r, false, nil
	}
	if !isHTTP(err, http.StatusNotFound) {
		return nil, false, err
	}
	var have dap.Task
	err = c.Do(ctx, http.MethodGet, c.Leader, "/dap/v1/tasks/"+id, "", nil, &have)
	switch {
	case err == nil:
		return nil, false, nil // open: devices are contributing
	case !isHTTP(err, http.StatusNotFound):
		return nil, false, err
	}
	if err := c.Do(ctx, http.MethodPost, c.Leader, "/dap/v1/admin/tasks", admin, want, &have); err != nil {
		return nil, false, fmt.Errorf("creating task %s: %w", want.ID, err)
	}
	return nil, true, nil
}

// publishRecipe publishes rec at the leader; false when a recipe of that
// name was there already (it must be the same).
func publishRecipe(ctx context.Context, c *dap.Client, admin string, rec dap.Recipe) (bool, error) {
	var out dap.Recipe
	err := c.Do(ctx, http.MethodPut, c.Leader, "/dap/v1/admin/models/"+url.PathEscape(rec.Name), admin, rec, &out)
	if err == nil {
		return true, nil
	}
	if !isHTTP(err, http.StatusConflict) {
		return false, fmt.Errorf("publishing model %s: %w", rec.Name, err)
	}
	var have dap.Recipe
	if err := c.Do(ctx, http.MethodGet, c.Leader, "/dap/v1/models/"+url.PathEscape(rec.Name), "", nil, &have); err != nil {
		return false, err
	}
	if fmt.Sprint(have.Tasks) != fmt.Sprint(rec.Tasks) || have.Method != rec.Method {
		return false, fmt.Errorf("model %s is published already with other tasks (%v): choose another --name", rec.Name, have.Tasks)
	}
	return false, nil
}

func isHTTP(err error, status int) bool {
	var he *dap.HTTPError
	return errors.As(err, &he) && he.Status == status
}

func taskSummaries(ts []dap.Task) []map[string]any {
	out := make([]map[string]any, len(ts))
	for i, t := range ts {
		out[i] = map[string]any{"id": t.ID, "statistic": t.Statistic, "dimension": t.Dimension, "bits": t.Bits, "rho": t.Rho, "sigma": t.Sigma}
	}
	return out
}
