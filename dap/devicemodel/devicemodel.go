// Package devicemodel builds a method's public model on a device from the
// two aggregators' releases: the method's own Train (package methods, the
// code the orchestrator ran) with an engine that answers each statistic
// the method asks for with the next published release, after checking
// that the release's task is exactly the task the engine would have made
// for that statistic (dap.Lattice.TaskFor: the same plan, lattice, ρ and
// noise). The model is post-processing of the releases; her own row is
// then computed from it and her own ratings by the model's fold-in
// (client.RecommendFrom), on her device, as the reference client does
// with a central release. The browser (webapp/wasm) and `privrec dap
// recommend` both call Build.
package devicemodel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/methods"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/statistic"
)

// Build trains rec's method on the releases rels (one per task of rec, in
// its order) and returns its public model. titles (optional) maps item
// IDs to titles for the model's catalogue.
func Build(ctx context.Context, rec dap.Recipe, rels []dap.Release, titles map[string]string) (*model.Model, error) {
	if err := rec.Validate(); err != nil {
		return nil, err
	}
	if len(rels) != len(rec.Tasks) {
		return nil, fmt.Errorf("%w: model %s lists %d tasks, %d releases given", dap.ErrInvalid, rec.Name, len(rec.Tasks), len(rels))
	}
	for i := range rels {
		if rels[i].Task.ID != rec.Tasks[i] {
			return nil, fmt.Errorf("%w: model %s: release %d is task %q's, want %q", dap.ErrInvalid, rec.Name, i+1, rels[i].Task.ID, rec.Tasks[i])
		}
		if err := rels[i].Task.Validate(); err != nil {
			return nil, fmt.Errorf("model %s: %w", rec.Name, err)
		}
	}
	d, err := dap.NewDevice(rels[0].Task)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", rec.Name, err)
	}
	ids := d.Row.Catalogue
	var names []string
	if len(titles) > 0 {
		names = make([]string, len(ids))
		for j, id := range ids {
			names[j] = titles[id]
		}
	}
	cat, err := model.NewCatalogue(ids, names)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", rec.Name, err)
	}
	rp := &replay{lat: rec.Lattice, devices: rec.Devices, rels: rels}
	out, err := train(ctx, rec, cat, rp)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", rec.Name, err)
	}
	if rp.used != len(rels) {
		return nil, fmt.Errorf("%w: model %s: the method used %d of its %d releases", dap.ErrInvalid, rec.Name, rp.used, len(rels))
	}
	m := out.Model()
	if m == nil {
		return nil, fmt.Errorf("model %s: %s releases no model a device can use", rec.Name, rec.Method)
	}
	return m, nil
}

// train runs rec's method over the catalogue cat with rp as its engine.
func train(ctx context.Context, rec dap.Recipe, cat *model.Catalogue, rp *replay) (*release.Release, error) {
	cfg, err := methods.Configure(rec.Method, rec.Params)
	if err != nil {
		return nil, err
	}
	env := methods.Env{Epsilon: rec.Epsilon, Delta: rec.Delta, Seed: rec.Seed, Rand: noise.Seeded(rec.Seed),
		// Every noised release comes from the aggregators (SumNoised); no
		// privacy noise is drawn here.
		Noise: noise.Secure(),
		Engine: func(plan statistic.RowPlan) (statistic.Engine, error) {
			rp.plan = plan
			return rp, nil
		}}
	sc := release.Scale{Min: rec.Scale[0], Max: rec.Scale[1]}
	return methods.Train(ctx, rec.Method, cfg, release.Input{Declared: release.Declared{Scale: &sc, Catalogue: cat}}, env)
}

// ErrPending stops Advance at a statistic whose release is not published
// yet.
var ErrPending = errors.New("the method needs a release that is not published yet")

// Advance runs rec's method (rec.Tasks is ignored) over the declared
// catalogue as far as the published releases go: it is how an
// orchestrator releases a method through the aggregators one round at a
// time (privrec dap task create). For the k-th statistic the method
// asks for, it makes the task the lattice makes for it, with the ID
// NAME-k-KIND, and asks get for its release; get returns nil when there
// is none yet (it may create the task then). Advance returns the tasks
// so far and, when a release is missing, that task as pending (the
// later rounds depend on it: dp-ease's Gram covers the items its counts
// release ranks first). With every release there, pending is nil and
// tasks are the model's, in order: the recipe to publish.
func Advance(ctx context.Context, rec dap.Recipe, cat *model.Catalogue, get func(context.Context, dap.Task) (*dap.Release, error)) (tasks []dap.Task, pending *dap.Task, err error) {
	rp := &replay{lat: rec.Lattice, devices: rec.Devices, next: func(ctx context.Context, c statistic.Contribution, mech *mechanism.Gaussian, plan statistic.RowPlan) (*dap.Release, error) {
		t, err := rec.Lattice.TaskFor(fmt.Sprintf("%s-%d-%s", rec.Name, len(tasks)+1, c.Kind()), plan, c, mech)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
		rel, err := get(ctx, t)
		if err != nil {
			return nil, err
		}
		if rel == nil {
			pending = &tasks[len(tasks)-1]
			return nil, ErrPending
		}
		return rel, nil
	}}
	if _, err := train(ctx, rec, cat, rp); err != nil && !errors.Is(err, ErrPending) {
		return tasks, nil, fmt.Errorf("model %s: %w", rec.Name, err)
	}
	return tasks, pending, nil
}

// replay is the engine of Build and Advance: methods.NoisingEngine and
// methods.BudgetedEngine over the published releases (rels, or those
// next fetches one by one).
type replay struct {
	lat     dap.Lattice
	plan    statistic.RowPlan
	devices int
	rels    []dap.Release
	used    int
	next    func(context.Context, statistic.Contribution, *mechanism.Gaussian, statistic.RowPlan) (*dap.Release, error)
}

// Users implements statistic.Engine: the devices the tasks were planned for.
func (r *replay) Users() int { return r.devices }

// Sum implements statistic.Engine: refused, only noised releases exist.
func (r *replay) Sum(_ context.Context, c statistic.Contribution) ([]float64, error) {
	return nil, fmt.Errorf("devicemodel: %s: only the aggregators' noised releases exist", c.Spec().Name)
}

// Affords implements methods.BudgetedEngine with the recipe's lattice, as
// the engine that ran the tasks did.
func (r *replay) Affords(c statistic.Contribution) bool { return r.lat.Affords(c) }

// SumNoised implements methods.NoisingEngine: the next release, if its
// task is the one the lattice makes for c and mech.
func (r *replay) SumNoised(ctx context.Context, c statistic.Contribution, mech *mechanism.Gaussian) ([]float64, float64, error) {
	if r.next != nil && r.used == len(r.rels) {
		rel, err := r.next(ctx, c, mech, r.plan)
		if err != nil {
			return nil, 0, err
		}
		r.rels = append(r.rels, *rel)
	}
	if r.used >= len(r.rels) {
		return nil, 0, fmt.Errorf("%w: the method asks for %s beyond the recipe's %d releases", dap.ErrInvalid, c.Spec().Name, len(r.rels))
	}
	rel := r.rels[r.used]
	want, err := r.lat.TaskFor(rel.Task.ID, r.plan, c, mech)
	if err != nil {
		return nil, 0, err
	}
	if !sameTask(want, rel.Task) {
		return nil, 0, fmt.Errorf("%w: task %s is not the task of %s the method asks for here (its plan, lattice, ρ or noise differ)", dap.ErrInvalid, rel.Task.ID, c.Spec().Name)
	}
	if len(rel.Values) != rel.Task.Dimension {
		return nil, 0, fmt.Errorf("%w: task %s: release of %d values, want %d", dap.ErrInvalid, rel.Task.ID, len(rel.Values), rel.Task.Dimension)
	}
	for j, v := range rel.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, 0, fmt.Errorf("%w: task %s: released value %d is not finite", dap.ErrInvalid, rel.Task.ID, j)
		}
	}
	r.used++
	// The noise the release carries, as the leader states it
	// (Task.ReleaseSD), recomputed from the checked task.
	return rel.Values, rel.Task.ReleaseSD(), nil
}

// sameTask compares two tasks field by field (the plan as bytes).
func sameTask(a, b dap.Task) bool {
	pa, pb := a.Plan, b.Plan
	a.Plan, b.Plan = nil, nil
	return string(pa) == string(pb) && fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b)
}

// Fetch reads the published recipe name and its tasks' releases from the
// leader (GET models/{name}, GET tasks/{id}/release).
func Fetch(ctx context.Context, c *dap.Client, name string) (dap.Recipe, []dap.Release, error) {
	var rec dap.Recipe
	if err := c.Do(ctx, http.MethodGet, c.Leader, "/dap/v1/models/"+url.PathEscape(name), "", nil, &rec); err != nil {
		return rec, nil, fmt.Errorf("model %s: %w", name, err)
	}
	rels := make([]dap.Release, len(rec.Tasks))
	for i, id := range rec.Tasks {
		if err := c.Do(ctx, http.MethodGet, c.Leader, "/dap/v1/tasks/"+url.PathEscape(id)+"/release", "", nil, &rels[i]); err != nil {
			return rec, nil, fmt.Errorf("model %s: %w", name, err)
		}
	}
	return rec, rels, nil
}
