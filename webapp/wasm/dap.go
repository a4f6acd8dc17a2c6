//go:build js && wasm

package main

// The two-aggregator device code (package dap), for the page dap.html:
//
//	privrec.dapTask(taskJSON, delta)                → the task checked (dap.Derive: every privacy parameter derived from
//	                                                   its plan) and summarized, with what a device is charged for it
//	                                                   (charge_rho, and as ε at δ: charge_epsilon)
//	privrec.dapPrepare(taskJSON, leaderHPKE, helperHPKE, ratingsJSON, splitConsent)
//	                                                → {"report":"<the report as JSON, shown>","report_bin":"<base64 of the exact
//	                                                   body of PUT tasks/{id}/reports, dap.EncodeReport>","sizes":{…},"ms":t,"charge_rho":ρ}
//	privrec.dapLedgerNew(leader, budgetRho)         → {"ledger":…}
//	privrec.dapLedgerReserve(ledger, taskJSON, splitConsent)
//	                                                → {"ledger":…,"charge_rho":ρ} | {"error":…} (over budget, the task already
//	                                                   sent, or a split-noise task without her consent)
//	privrec.dapLedgerStatus(ledger, leaderLedgerJSON, beyondLeader)
//	                                                → {"spent","budget","remaining"[,"disagreement"]}
//	privrec.dapRecommend(releaseJSON, ratingsJSON, titlesJSON, k) → {"recommendations":[…]}
//	privrec.dapModelRecommend(recipeJSON, releasesJSON, ratingsJSON, titlesJSON, k)
//	                                                → {"recommendations":[…],"method","rank","ms"}
//
// dapPrepare is dap.Consent.Prepare, the reference client's code: the
// task's privacy parameters derived from its public plan, the
// contribution rebuilt from it, quantized, sharded with Prio3SumVec and
// each input share sealed to its aggregator's HPKE key (randomness from
// crypto/rand, i.e. crypto.getRandomValues).
//
// splitConsent is her opt-in to tasks in the honest-but-curious noise
// split (dap.Consent.SplitNoise, as `privrec dap contribute
// --allow-split-noise`): false (the default) refuses them; true accepts
// them at the ρ one aggregator's noise alone gives, which her ledger is
// charged.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"syscall/js"
	"time"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/devicemodel"
	"github.com/privrec/privrec/privacy/accountant"
)

func register(obj js.Value) {
	obj.Set("dapTask", js.FuncOf(dapTask))
	obj.Set("dapPrepare", js.FuncOf(dapPrepare))
	obj.Set("dapLedgerNew", js.FuncOf(dapLedgerNew))
	obj.Set("dapLedgerReserve", js.FuncOf(dapLedgerReserve))
	obj.Set("dapLedgerStatus", js.FuncOf(dapLedgerStatus))
	obj.Set("dapRecommend", js.FuncOf(dapRecommend))
	obj.Set("dapModelRecommend", js.FuncOf(dapModelRecommend))
}

// task decodes and validates a task as the leader publishes it.
func task(s string) (dap.Task, error) {
	var t dap.Task
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(&t); err != nil {
		return t, fmt.Errorf("decoding the task: %w", err)
	}
	return t, t.Validate()
}

// hpkeKey reads an aggregator's published HPKE config (GET hpke_config).
func hpkeKey(s, who string) ([]byte, error) {
	var c struct {
		Role      string `json:"role"`
		PublicKey []byte `json:"public_key"`
	}
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return nil, fmt.Errorf("decoding the %s's key: %w", who, err)
	}
	if c.Role != who {
		return nil, fmt.Errorf("the %s's key is published as the %q's", who, c.Role)
	}
	return c.PublicKey, nil
}

func dapTask(_ js.Value, a []js.Value) any {
	s, err := args(a, 1)
	if err != nil {
		return answer(nil, err)
	}
	t, err := task(s[0])
	if err != nil {
		return answer(nil, err)
	}
	d, err := dap.Derive(t)
	if err != nil {
		return answer(nil, err)
	}
	delta := number(a, 1, 1e-6)
	chargeEps, err := accountant.ZCDPToApprox(d.ChargeRho, delta)
	if err != nil {
		return answer(nil, fmt.Errorf("task %s: ρ %g at δ %g: %w", t.ID, d.ChargeRho, delta, err))
	}
	dev, err := dap.NewDevice(t)
	if err != nil {
		return answer(nil, err)
	}
	return answer(map[string]any{"id": t.ID, "statistic": t.Statistic, "kind": dev.Contribution.Kind(), "dimension": t.Dimension,
		"bits": t.Bits, "elements": t.Dimension * t.Bits, "rho": t.Rho, "noise": t.Noise, "split": t.Noise == dap.NoiseSplit,
		"rho_alone": d.RhoAlone, "charge_rho": d.ChargeRho, "charge_epsilon": chargeEps, "delta": delta, "relation": t.Relation,
		"release_sd": t.ReleaseSD(), "catalogue": dev.Row.Catalogue, "clamp": dev.Row.Clamp, "positive": dev.Row.Positive}, nil)
}

// number is argument k as a number, or def when it is missing or not a
// number.
func number(a []js.Value, k int, def float64) float64 {
	if len(a) > k && a[k].Type() == js.TypeNumber {
		return a[k].Float()
	}
	return def
}

// consent is her opt-in, argument k (true only when it is the boolean
// true): dap.Consent.
func consent(a []js.Value, k int) dap.Consent {
	return dap.Consent{SplitNoise: len(a) > k && a[k].Type() == js.TypeBoolean && a[k].Bool()}
}

func dapPrepare(_ js.Value, a []js.Value) any {
	s, err := args(a, 4)
	if err != nil {
		return answer(nil, err)
	}
	start := time.Now()
	t, err := task(s[0])
	if err != nil {
		return answer(nil, err)
	}
	lk, err := hpkeKey(s[1], "leader")
	if err != nil {
		return answer(nil, err)
	}
	hk, err := hpkeKey(s[2], "helper")
	if err != nil {
		return answer(nil, err)
	}
	r, err := ratings(s[3])
	if err != nil {
		return answer(nil, err)
	}
	ids, vals := r.Items()
	rep, d, err := consent(a, 4).Prepare(t, lk, hk, ids, vals)
	if err != nil {
		return answer(nil, err)
	}
	body, err := json.Marshal(rep)
	if err != nil {
		return answer(nil, fmt.Errorf("encoding the report: %w", err))
	}
	// The upload is the binary encoding (dap.ReportMediaType), as the Go
	// devices send it; the JSON is what the page shows.
	bin, err := dap.EncodeReport(rep)
	if err != nil {
		return answer(nil, err)
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	return answer(map[string]any{"report": string(body), "report_bin": base64.StdEncoding.EncodeToString(bin), "ms": ms, "charge_rho": d.ChargeRho, "sizes": map[string]int{
		"id":           len(rep.ID),
		"public_share": len(rep.PublicShare),
		"leader_share": len(rep.LeaderShare.Enc) + len(rep.LeaderShare.Ciphertext),
		"helper_share": len(rep.HelperShare.Enc) + len(rep.HelperShare.Ciphertext),
		"payload":      rep.Size(),
		"json":         len(body),
		"body":         len(bin),
	}}, nil)
}

func dapLedger(s string) (*dap.Ledger, error) {
	return dap.ReadLedger(strings.NewReader(s), "in this browser")
}

func dapLedgerAnswer(l *dap.Ledger) any {
	b, err := json.Marshal(l)
	if err != nil {
		return answer(nil, fmt.Errorf("encoding the device ledger: %w", err))
	}
	return answer(map[string]string{"ledger": string(b)}, nil)
}

func dapLedgerNew(_ js.Value, a []js.Value) any {
	s, err := args(a, 1)
	if err != nil {
		return answer(nil, err)
	}
	if len(a) < 2 || a[1].Type() != js.TypeNumber {
		return answer(nil, fmt.Errorf("dapLedgerNew(leader, budgetRho): the budget must be a number"))
	}
	l, err := dap.NewLedger(s[0], a[1].Float())
	if err != nil {
		return answer(nil, err)
	}
	return dapLedgerAnswer(l)
}

// dapLedgerReserve records the task at what this device derives it costs
// (dap.Consent.Check, then Ledger.Charge), or refuses it.
func dapLedgerReserve(_ js.Value, a []js.Value) any {
	s, err := args(a, 2)
	if err != nil {
		return answer(nil, err)
	}
	l, err := dapLedger(s[0])
	if err != nil {
		return answer(nil, err)
	}
	t, err := task(s[1])
	if err != nil {
		return answer(nil, err)
	}
	d, err := consent(a, 2).Check(t)
	if err != nil {
		return answer(nil, err)
	}
	if err := l.Charge(d); err != nil {
		return answer(nil, err)
	}
	b, err := json.Marshal(l)
	if err != nil {
		return answer(nil, fmt.Errorf("encoding the device ledger: %w", err))
	}
	return answer(map[string]any{"ledger": string(b), "charge_rho": d.ChargeRho}, nil)
}

// dapLedgerStatus compares this browser's count with the leader's
// (GET /dap/v1/ledger): a leader that counts less than the browser sent,
// or allows more than she accepted, is named. beyondLeader (a number,
// default 0) is what this browser counts on purpose beyond the leader's
// charges: for split-noise tasks she opted in to, the one-aggregator ρ
// less the stated ρ the leader charges.
func dapLedgerStatus(_ js.Value, a []js.Value) any {
	s, err := args(a, 2)
	if err != nil {
		return answer(nil, err)
	}
	l, err := dapLedger(s[0])
	if err != nil {
		return answer(nil, err)
	}
	var st struct {
		SpentRho  float64 `json:"spent_rho"`
		BudgetRho float64 `json:"budget_rho"`
	}
	if err := json.Unmarshal([]byte(s[1]), &st); err != nil {
		return answer(nil, fmt.Errorf("decoding the leader's ledger: %w", err))
	}
	spent := l.SpentRho()
	beyond := math.Max(0, number(a, 2, 0))
	out := map[string]any{"spent": spent, "beyond_leader": beyond, "budget": l.BudgetRho, "remaining": math.Max(0, l.BudgetRho-spent), "tasks": len(l.Tasks)}
	var msgs []string
	if st.SpentRho+beyond+1e-9 < spent {
		msgs = append(msgs, fmt.Sprintf("the leader counts ρ = %g, less than the ρ = %g this browser has sent", st.SpentRho, spent))
	}
	if st.BudgetRho > l.BudgetRho+1e-9 {
		msgs = append(msgs, fmt.Sprintf("the leader now allows ρ = %g, more than the ρ = %g you accepted (this browser keeps to yours)", st.BudgetRho, l.BudgetRho))
	}
	if len(msgs) > 0 {
		out["disagreement"] = strings.Join(msgs, "; ")
	}
	return answer(out, nil)
}

// dapRecommend computes her recommendations from a counts task's release
// (dap.ReleasedModel) and her own ratings, as client.Recommend does from
// a central release: fold in, then the best items she has not rated.
func dapRecommend(_ js.Value, a []js.Value) any {
	s, err := args(a, 3)
	if err != nil {
		return answer(nil, err)
	}
	k := 10
	if len(a) > 3 && a[3].Type() == js.TypeNumber {
		k = a[3].Int()
	}
	var rel struct {
		Task   dap.Task  `json:"task"`
		Values []float64 `json:"values"`
	}
	if err := json.NewDecoder(bytes.NewReader([]byte(s[0]))).Decode(&rel); err != nil {
		return answer(nil, fmt.Errorf("decoding the release: %w", err))
	}
	if err := rel.Task.Validate(); err != nil {
		return answer(nil, err)
	}
	r, err := ratings(s[1])
	if err != nil {
		return answer(nil, err)
	}
	var titles map[string]string
	if s[2] != "" && s[2] != "null" {
		if err := json.Unmarshal([]byte(s[2]), &titles); err != nil {
			return answer(nil, fmt.Errorf("decoding the titles: %w", err))
		}
	}
	m, err := dap.ReleasedModel(rel.Task, rel.Values, titles)
	if err != nil {
		return answer(nil, err)
	}
	recs, err := client.RecommendFrom(m, r, k)
	if err != nil {
		return answer(nil, err)
	}
	return answer(map[string]any{"recommendations": recs}, nil)
}

// dapModelRecommend builds a published model (a dap.Recipe: dpals,
// dp-bias, dp-ease …) from its tasks' releases with the method's own code
// (devicemodel.Build, as privrec dap recommend does), then computes her
// own row from it and her ratings and her recommendations
// (client.RecommendFrom): nothing about her leaves the browser.
func dapModelRecommend(_ js.Value, a []js.Value) any {
	s, err := args(a, 4)
	if err != nil {
		return answer(nil, err)
	}
	k := 10
	if len(a) > 4 && a[4].Type() == js.TypeNumber {
		k = a[4].Int()
	}
	start := time.Now()
	var rec dap.Recipe
	if err := json.Unmarshal([]byte(s[0]), &rec); err != nil {
		return answer(nil, fmt.Errorf("decoding the model recipe: %w", err))
	}
	var rels []dap.Release
	if err := json.Unmarshal([]byte(s[1]), &rels); err != nil {
		return answer(nil, fmt.Errorf("decoding the releases: %w", err))
	}
	r, err := ratings(s[2])
	if err != nil {
		return answer(nil, err)
	}
	var titles map[string]string
	if s[3] != "" && s[3] != "null" {
		if err := json.Unmarshal([]byte(s[3]), &titles); err != nil {
			return answer(nil, fmt.Errorf("decoding the titles: %w", err))
		}
	}
	m, err := devicemodel.Build(context.Background(), rec, rels, titles)
	if err != nil {
		return answer(nil, err)
	}
	recs, err := client.RecommendFrom(m, r, k)
	if err != nil {
		return answer(nil, err)
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	return answer(map[string]any{"recommendations": recs, "method": rec.Method, "rank": m.Rank, "ms": ms}, nil)
}
