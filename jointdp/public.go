package jointdp

import (
	"fmt"
	"slices"

	"github.com/privrec/privrec/model"
)

// FoldReplay is the fold-in rule of dpfw models: a user's row is her
// replay of the public broadcasts on her own (centred) ratings, LocalRow —
// exactly what her local component computes in Algorithm 1.
const FoldReplay model.FoldIn = "dpfw-replay"

func init() { model.RegisterFoldIn(FoldReplay, foldReplay) }

// foldReplay is model.FoldRule for FoldReplay.
func foldReplay(m *model.Model, items []int32, res []float64) ([]float64, error) {
	ps, err := PublicStateFromModel(m)
	if err != nil {
		return nil, err
	}
	ord := make([]int, len(items))
	for k := range ord {
		ord[k] = k
	}
	slices.SortFunc(ord, func(a, b int) int { return int(items[a]) - int(items[b]) })
	its := make([]int32, len(items))
	vals := make([]float32, len(items))
	for k, o := range ord {
		// float32 as in training, where the centred ratings are stored so.
		its[k], vals[k] = items[o], float32(res[o])
	}
	return LocalRow(ps, its, vals)
}

// PublicStateFromModel extracts the public part of a dpfw model (the
// broadcast directions in V and the biased λ̂ in Params, with k, L, T and
// the step rule) so that a user can recompute her row with LocalRow from
// her own ratings, e.g. on her device.
func PublicStateFromModel(m *model.Model) (*PublicState, error) {
	if m.Method != "dpfw" {
		return nil, fmt.Errorf("jointdp: model was trained with %q, not dpfw", m.Method)
	}
	num := func(key string) (float64, error) { return modelNumber(m, key) }
	k, err := num("nuclear")
	if err != nil {
		return nil, err
	}
	L, err := num("clip")
	if err != nil {
		return nil, err
	}
	T, err := num("iterations")
	if err != nil {
		return nil, err
	}
	step, _ := m.Params["step"].(string)
	var lams []float64
	switch v := m.Params["lambda_biased"].(type) {
	case []float64:
		lams = v
	case []any:
		for _, x := range v {
			f, ok := x.(float64)
			if !ok {
				return nil, fmt.Errorf("jointdp: model parameter lambda_biased holds a non-number")
			}
			lams = append(lams, f)
		}
	default:
		return nil, fmt.Errorf("jointdp: model parameter lambda_biased missing")
	}
	n, r := m.NumItems(), m.Rank
	if int(T) != r || len(lams) != r || len(m.V) != n*r {
		return nil, fmt.Errorf("jointdp: model has rank %d, %d λ̂ values and T = %g", r, len(lams), T)
	}
	ps := &PublicState{N: n, K: k, L: L, T: r, Step: step}
	for t := range r {
		v := make([]float64, n)
		for j := range n {
			v[j] = m.V[j*r+t]
		}
		ps.Broadcasts = append(ps.Broadcasts, Broadcast{V: v, Lambda: lams[t]})
	}
	return ps, nil
}

// modelNumber reads a numeric model parameter (a float64 after a file
// round trip, an int before).
func modelNumber(m *model.Model, key string) (float64, error) {
	switch v := m.Params[key].(type) {
	case float64:
		return v, nil
	case int:
		return float64(v), nil
	}
	return 0, fmt.Errorf("jointdp: model parameter %q missing or not a number", key)
}
