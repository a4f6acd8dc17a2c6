//go:build js && wasm

// Command wasm is the privrec browser client's device code, compiled to
// WebAssembly (GOOS=js GOARCH=wasm; `go generate ./webapp` builds it into
// webapp/static/privrec.wasm.gz). It exposes package client — the same
// randomization as `privrec collect` and the reference client (the
// randomized cells and, when the configuration has a mean_epsilon, the
// mean report: her mean rating with Laplace noise, ldp.MeanReporter), and
// the same fold-in recommendations — to the page's JavaScript as the global
// object privrec:
//
//	privrec.checkConfig(configJSON)            → {"ok":true} | {"error":…}
//	privrec.randomize(configJSON, ratingsJSON) → {"report":"<the exact body of POST /v1/reports>","outside":n} | {"error":…}
//	privrec.recommend(releaseJSON, ratingsJSON, k) → {"recommendations":[{item,title,score}…],"ranking":bool,"warnings":[…]} | {"error":…}
//	privrec.budget(configJSON, spent, budget)  → {"budget":{…},"text":…}: the ledger in the unit the budget is stated in
//	privrec.ledgerNew(server, configJSON)      → {"ledger":…}: the device ledger, pinning the collection joined
//	privrec.ledgerCheck(ledger, server, configJSON) → {"ledger":…} | {"error":…}: refuses a configuration that weakens it
//	privrec.ledgerReserve(ledger, server, reportJSON) → {"ledger":…} | {"error":…}
//	privrec.ledgerStatus(ledger, statusJSON)   → {"spent","budget","remaining"[,"disagreement"]}
//	privrec.randomSource                      → where the noise comes from
//	privrec.dap…                              → the two-aggregator device (dap.go)
//
// Every function takes and returns JSON strings. It makes no network call:
// the page sends the report string as it is, byte for byte. The noise is
// noise.Secure(), keyed from crypto/rand, which under js/wasm reads the
// browser's crypto.getRandomValues (crypto/rand → crypto/internal/fips140/drbg
// → crypto/internal/sysrand's rand_js.go → wasm_exec.js's
// runtime.getRandomData). When the object is ready, main
// calls globalThis.privrecReady() if the page defined it.
package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall/js"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/service/api"
)

// answer encodes v (or err) as the JSON string handed back to JavaScript.
func answer(v any, err error) any {
	if err != nil {
		v = map[string]string{"error": err.Error()}
	}
	b, merr := json.Marshal(v)
	if merr != nil {
		b, _ = json.Marshal(map[string]string{"error": "encoding the answer: " + merr.Error()})
	}
	return string(b)
}

// args checks that a call got n string arguments.
func args(a []js.Value, n int) ([]string, error) {
	if len(a) < n {
		return nil, fmt.Errorf("want %d arguments, got %d", n, len(a))
	}
	out := make([]string, n)
	for k := range n {
		if a[k].Type() != js.TypeString {
			return nil, fmt.Errorf("argument %d must be a JSON string", k+1)
		}
		out[k] = a[k].String()
	}
	return out, nil
}

func config(s string) (*api.Config, error) {
	var cfg api.Config
	if err := json.Unmarshal([]byte(s), &cfg); err != nil {
		return nil, fmt.Errorf("decoding the configuration: %w", err)
	}
	return &cfg, nil
}

func ratings(s string) (client.Ratings, error) {
	var r client.Ratings
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("decoding the ratings: %w", err)
	}
	return r, nil
}

func checkConfig(_ js.Value, a []js.Value) any {
	s, err := args(a, 1)
	if err != nil {
		return answer(nil, err)
	}
	cfg, err := config(s[0])
	if err != nil {
		return answer(nil, err)
	}
	if err := client.CheckConfig(cfg); err != nil {
		return answer(nil, err)
	}
	return answer(map[string]bool{"ok": true}, nil)
}

func randomize(_ js.Value, a []js.Value) any {
	s, err := args(a, 2)
	if err != nil {
		return answer(nil, err)
	}
	cfg, err := config(s[0])
	if err != nil {
		return answer(nil, err)
	}
	r, err := ratings(s[1])
	if err != nil {
		return answer(nil, err)
	}
	rep, outside, err := client.Randomize(cfg, r, noise.Secure(), client.NewReportID())
	if err != nil {
		return answer(nil, err)
	}
	body, err := json.Marshal(rep)
	if err != nil {
		return answer(nil, fmt.Errorf("encoding the report: %w", err))
	}
	return answer(map[string]any{"report": string(body), "outside": outside}, nil)
}

func recommend(_ js.Value, a []js.Value) any {
	s, err := args(a, 2)
	if err != nil {
		return answer(nil, err)
	}
	k := 10
	if len(a) > 2 && a[2].Type() == js.TypeNumber {
		k = a[2].Int()
	}
	var rel api.Release
	if err := json.Unmarshal([]byte(s[0]), &rel); err != nil {
		return answer(nil, fmt.Errorf("decoding the release: %w", err))
	}
	r, err := ratings(s[1])
	if err != nil {
		return answer(nil, err)
	}
	recs, err := client.Recommend(&rel, r, k)
	if err != nil {
		return answer(nil, err)
	}
	// Judged here from the release's own values, not taken from its
	// warnings field.
	ws, err := client.ReleaseWarnings(&rel, k)
	if err != nil {
		return answer(nil, err)
	}
	return answer(map[string]any{"recommendations": recs, "ranking": client.Ranks(&rel), "warnings": ws}, nil)
}

// budget words a ledger's spent and budget (in the configuration's
// ledger unit) in the unit the budget is stated in (client.BudgetOf).
func budget(_ js.Value, a []js.Value) any {
	s, err := args(a, 1)
	if err != nil {
		return answer(nil, err)
	}
	if len(a) < 3 || a[1].Type() != js.TypeNumber || a[2].Type() != js.TypeNumber {
		return answer(nil, fmt.Errorf("want the configuration, spent and budget"))
	}
	cfg, err := config(s[0])
	if err != nil {
		return answer(nil, err)
	}
	b, err := client.BudgetOf(cfg, a[1].Float(), a[2].Float())
	if err != nil {
		return answer(nil, err)
	}
	return answer(map[string]any{"budget": b, "text": b.String()}, nil)
}

// ledger decodes the device ledger the page keeps in localStorage.
func ledger(s string) (*client.Ledger, error) {
	return client.ReadLedger(strings.NewReader(s), "the device ledger")
}

// ledgerAnswer hands a ledger back as the JSON the page stores.
func ledgerAnswer(l *client.Ledger) any {
	b, err := json.Marshal(l)
	if err != nil {
		return answer(nil, fmt.Errorf("encoding the device ledger: %w", err))
	}
	return answer(map[string]string{"ledger": string(b)}, nil)
}

// ledgerNew(server, config) starts the device ledger with the budget the
// server publishes now (the one she accepts by joining).
func ledgerNew(_ js.Value, a []js.Value) any {
	s, err := args(a, 2)
	if err != nil {
		return answer(nil, err)
	}
	cfg, err := config(s[1])
	if err != nil {
		return answer(nil, err)
	}
	l, err := client.NewLedger(s[0], cfg)
	if err != nil {
		return answer(nil, err)
	}
	return ledgerAnswer(l)
}

// ledgerCheck(ledger, server, config) checks the server's configuration
// against the collection the ledger pins (client.Ledger.CheckConfig) and
// returns the ledger (pinned now if it was made before pins existed), or
// the device's refusal.
func ledgerCheck(_ js.Value, a []js.Value) any {
	s, err := args(a, 3)
	if err != nil {
		return answer(nil, err)
	}
	l, err := ledger(s[0])
	if err != nil {
		return answer(nil, err)
	}
	cfg, err := config(s[2])
	if err != nil {
		return answer(nil, err)
	}
	if err := l.CheckConfig(s[1], cfg); err != nil {
		return answer(nil, err)
	}
	return ledgerAnswer(l)
}

// ledgerReserve(ledger, server, report) records the report (its ID and ε)
// and returns the new ledger, or the device's refusal (client.Ledger.Reserve).
func ledgerReserve(_ js.Value, a []js.Value) any {
	s, err := args(a, 3)
	if err != nil {
		return answer(nil, err)
	}
	l, err := ledger(s[0])
	if err != nil {
		return answer(nil, err)
	}
	var rep api.Report
	if err := json.Unmarshal([]byte(s[2]), &rep); err != nil {
		return answer(nil, fmt.Errorf("decoding the report: %w", err))
	}
	if err := l.Reserve(s[1], rep.ID, rep.Epsilon); err != nil {
		return answer(nil, err)
	}
	return ledgerAnswer(l)
}

// ledgerStatus(ledger, status) is the device's account beside the
// server's (client.Ledger.Compare).
func ledgerStatus(_ js.Value, a []js.Value) any {
	s, err := args(a, 2)
	if err != nil {
		return answer(nil, err)
	}
	l, err := ledger(s[0])
	if err != nil {
		return answer(nil, err)
	}
	var st api.Status
	if err := json.Unmarshal([]byte(s[1]), &st); err != nil {
		return answer(nil, fmt.Errorf("decoding the status: %w", err))
	}
	out := map[string]any{"spent": l.Spent(), "budget": l.Budget, "remaining": l.Remaining()}
	if err := l.Compare(st); err != nil {
		out["disagreement"] = err.Error()
	}
	return answer(out, nil)
}

func main() {
	obj := js.Global().Get("Object").New()
	obj.Set("checkConfig", js.FuncOf(checkConfig))
	obj.Set("randomize", js.FuncOf(randomize))
	obj.Set("recommend", js.FuncOf(recommend))
	obj.Set("budget", js.FuncOf(budget))
	obj.Set("ledgerNew", js.FuncOf(ledgerNew))
	obj.Set("ledgerCheck", js.FuncOf(ledgerCheck))
	obj.Set("ledgerReserve", js.FuncOf(ledgerReserve))
	obj.Set("ledgerStatus", js.FuncOf(ledgerStatus))
	register(obj) // the two-aggregator functions (dap.go)
	obj.Set("randomSource", "Go crypto/rand → crypto.getRandomValues (js/wasm)")
	js.Global().Set("privrec", obj)
	if ready := js.Global().Get("privrecReady"); ready.Type() == js.TypeFunction {
		ready.Invoke()
	}
	select {} // serve calls until the page goes away
}
