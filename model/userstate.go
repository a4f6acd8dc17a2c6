package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/gonum/mat"
)

// UserState is one user's own part of a joint-DP release: her factor row,
// her bias and the items she rated. It is given to her only (her device
// computes it, or `--user-state DIR` holds it as one line of a shard).
type UserState struct {
	User string    `json:"user"`
	Row  []float64 `json:"row,omitempty"`
	Bias float64   `json:"bias"`
	// Seen are the item IDs she rated (excluded from her recommendations).
	Seen []string `json:"seen,omitempty"`
}

// UserStates is every user's own state, kept apart from the public model.
type UserStates struct {
	Method string `json:"method"`
	Rank   int    `json:"rank"`
	// Model is the fingerprint (Fingerprint) of the public model file
	// these states were trained with; Fits refuses any other model. Empty
	// for states written before states were bound to their model, which
	// are checked by method and rank only.
	Model  string      `json:"model,omitempty"`
	States []UserState `json:"-"`

	index map[string]int
}

// Lookup finds a user's state.
func (s *UserStates) Lookup(user string) (*UserState, bool) {
	if s.index == nil {
		s.index = make(map[string]int, len(s.States))
		for k, st := range s.States {
			s.index[st.User] = k
		}
	}
	k, ok := s.index[user]
	if !ok {
		return nil, false
	}
	return &s.States[k], true
}

// userStateFile is the name of a user's file in a state directory of the
// format before shards (still read): her ID,
// escaped so that any ID is a single safe file name.
func userStateFile(dir, user string) string {
	return filepath.Join(dir, "user-"+url.PathEscape(user)+".json")
}

// stateFile is one user's file in a state directory: her state and the
// training it belongs to.
type stateFile struct {
	Method string `json:"method"`
	Rank   int    `json:"rank"`
	Model  string `json:"model,omitempty"`
	UserState
}

func readStateFile(path string) (*stateFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading user state: %w", err)
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &st, nil
}

// LoadUserState reads one user's state from a directory written by Save
// (or a per-user file of an earlier version):
// a UserStates holding her state only, with the method, rank and model
// fingerprint it was written with (check them with Fits).
func LoadUserState(dir, user string) (*UserStates, error) {
	if idx, err := readStateIndex(dir); err != nil || idx != nil {
		if err != nil {
			return nil, err
		}
		return loadShardedUser(dir, idx, user)
	}
	path := userStateFile(dir, user)
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return nil, fmt.Errorf("no state for user %q in %s", user, dir)
	}
	st, err := readStateFile(path)
	if err != nil {
		return nil, err
	}
	return &UserStates{Method: st.Method, Rank: st.Rank, Model: st.Model, States: []UserState{st.UserState}}, nil
}

// Fingerprint identifies a public model file by its bytes (SHA-256), so
// that user states can name the model they were trained with.
func Fingerprint(file []byte) string {
	h := sha256.Sum256(file)
	return "sha256:" + hex.EncodeToString(h[:])
}

// FileFingerprint is the Fingerprint of the file at path.
func FileFingerprint(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("fingerprinting the model: %w", err)
	}
	return Fingerprint(b), nil
}

// Fits checks that these states belong to model m, whose file has the
// given fingerprint: a state is a user's part of one training, and with
// any other model (another ε, another run, another method) it would give
// wrong recommendations without any error. States that name no model
// (written before states were bound to their model) must at least come
// from the same method with the same rank.
func (s *UserStates) Fits(m *Model, fingerprint string) error {
	const fix = "user states fit only the model they were trained with: use that model, or retrain with --user-state into a new directory"
	if s.Method != "" && s.Method != m.Method {
		return fmt.Errorf("these user states come from a %s training, the model from %s; %s", s.Method, m.Method, fix)
	}
	if s.Model != "" && fingerprint != "" && s.Model != fingerprint {
		return fmt.Errorf("these user states were written with another %s model (model %s…), not this %s model (%s…); %s",
			s.Method, short(s.Model), m.Method, short(fingerprint), fix)
	}
	if s.Rank != m.Rank {
		return fmt.Errorf("these user states have rank %d, the model rank %d; %s", s.Rank, m.Rank, fix)
	}
	return nil
}

// short is the first 12 hex digits of a fingerprint, for messages.
func short(fp string) string {
	fp = strings.TrimPrefix(fp, "sha256:")
	if len(fp) > 12 {
		fp = fp[:12]
	}
	return fp
}

// CheckState checks that a user state fits the model.
func (m *Model) CheckState(st *UserState) error {
	if m.Dense != nil {
		return fmt.Errorf("model: a dense model has no user states")
	}
	if len(st.Row) != m.Rank {
		return fmt.Errorf("model: user %q has a row of length %d, the model has rank %d", st.User, len(st.Row), m.Rank)
	}
	for _, x := range st.Row {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("model: user %q has a non-finite row", st.User)
		}
	}
	return nil
}

// ScoreFor is the model's value for a user given by her own state.
func (m *Model) ScoreFor(st *UserState, i int32) float64 {
	s := m.Offset + st.Bias
	if m.ItemBias != nil {
		s += m.ItemBias[i]
	}
	vv := m.V[int(i)*m.Rank : int(i)*m.Rank+m.Rank]
	for k, x := range st.Row {
		s += x * vv[k]
	}
	return s
}

// PredictFor is Predict for a user given by her own state.
func (m *Model) PredictFor(st *UserState, i int32) float64 {
	s := m.ScoreFor(st, i)
	if !m.Output.Rated() {
		return s
	}
	if m.Transform.Scale != nil {
		s = m.Transform.Scale.Invert(s)
	}
	return m.clamp(s)
}

// RecommendFor returns the k best items for a user given by her own state,
// leaving out the items she rated.
func (m *Model) RecommendFor(st *UserState, k int) []Recommendation {
	return m.topK(func(i int32) float64 { return m.PredictFor(st, i) }, k, m.Indices(st.Seen))
}

// FoldInUser computes a user's own state from the public model and her own
// ratings (item IDs and values on the original scale), the computation her
// device does. Ratings of items the model does not know are ignored.
func (m *Model) FoldInUser(user string, items []string, values []float64) (*UserState, error) {
	if len(items) != len(values) {
		return nil, fmt.Errorf("model: %d items and %d values", len(items), len(values))
	}
	at := make([]int32, len(items))
	for k, id := range items {
		i, ok := m.ItemIndex(id)
		if !ok {
			i = -1
		}
		at[k] = i
	}
	return m.FoldInIndexed(user, items, at, values)
}

// FoldInIndexed is FoldInUser with her items already resolved to the
// model's item indices (at[k] for items[k]; −1: not in the model), for a
// caller that folds in many users over one catalogue and resolves each
// item ID once rather than once per rating.
func (m *Model) FoldInIndexed(user string, items []string, at []int32, values []float64) (*UserState, error) {
	if m.Dense != nil {
		return nil, fmt.Errorf("model: %s releases a dense matrix; it cannot fold in a new user", m.Method)
	}
	if len(items) != len(values) || len(at) != len(items) {
		return nil, fmt.Errorf("model: %d items, %d indices and %d values", len(items), len(at), len(values))
	}
	st := &UserState{User: user, Row: make([]float64, m.Rank), Seen: slices.Clone(items)}
	idx, res, err := m.foldResiduals(items, at, values)
	if err != nil {
		return nil, err
	}
	if len(idx) == 0 {
		return st, nil
	}
	if m.Transform.UserCentred {
		st.Bias = centre(res, m.UserDamping)
	}
	if m.Rank == 0 {
		return st, nil
	}
	if err := m.foldRow(idx, res, st.Row); err != nil {
		return nil, err
	}
	return st, nil
}

// foldResiduals returns the catalogue items among the user's ratings and
// their residuals after the model's transform, offset and item bias
// (items off the catalogue and, with a positive threshold,
// non-interactions are left out).
func (m *Model) foldResiduals(items []string, at []int32, values []float64) (idx []int32, res []float64, err error) {
	for k, i := range at {
		if i < 0 || int(i) >= len(m.Items) {
			continue
		}
		v := values[k]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil, fmt.Errorf("model: rating of item %q is not finite", items[k])
		}
		if p := m.Transform.Positive; p != nil && v < *p {
			continue // not an interaction; still left out of her list (Seen)
		}
		if m.Transform.Binarise {
			v = -1
			if values[k] > m.Transform.Threshold {
				v = 1
			}
		}
		if m.Transform.Scale != nil {
			v = m.Transform.Scale.Apply(v)
		}
		v -= m.Offset
		if m.ItemBias != nil {
			v -= m.ItemBias[i]
		}
		idx, res = append(idx, i), append(res, v)
	}
	return idx, res, nil
}

// centre subtracts the damped mean of res from each and returns it.
func centre(res []float64, damping float64) float64 {
	var mean float64
	for _, r := range res {
		mean += r
	}
	mean /= float64(len(res)) + damping
	for k := range res {
		res[k] -= mean
	}
	return mean
}

// foldRow computes the user's factor row from her residuals with the
// model's fold-in rule.
func (m *Model) foldRow(idx []int32, res, row []float64) error {
	switch m.FoldIn {
	case FoldProject:
		m.foldProject(idx, res, row)
		return nil
	case FoldRidge, "":
		return m.foldRidge(idx, res, row)
	}
	f, ok := foldRules[m.FoldIn]
	if !ok {
		return fmt.Errorf("model: unknown fold-in rule %q (the package defining it is not linked in)", m.FoldIn)
	}
	out, err := f(m, idx, res)
	if err != nil {
		return fmt.Errorf("model: fold-in: %w", err)
	}
	if len(out) != m.Rank {
		return fmt.Errorf("model: fold-in rule %q returned %d values for rank %d", m.FoldIn, len(out), m.Rank)
	}
	copy(row, out)
	return nil
}

// foldProject projects the residuals on the item factors, scaled by
// catalogue size over the number of ratings.
func (m *Model) foldProject(idx []int32, res, row []float64) {
	r := m.Rank
	s := float64(len(m.Items)) / float64(len(idx))
	for k, i := range idx {
		v := m.V[int(i)*r : int(i)*r+r]
		for c := range r {
			row[c] += s * res[k] * v[c]
		}
	}
}

// foldRidge solves the ridge regression of the residuals on the item
// factors (λ = FoldLambda, default 10⁻³) by Cholesky.
func (m *Model) foldRidge(idx []int32, res, row []float64) error {
	r := m.Rank
	lam := m.FoldLambda
	if !(lam > 0) {
		lam = 1e-3
	}
	a := mat.NewSymDense(r, nil)
	b := mat.NewVecDense(r, nil)
	// The upper triangle and the right-hand side through their raw
	// storage: At/SetSym per entry cost more than the arithmetic at
	// the ranks of dpals' public features (37).
	ad, bd := a.RawSymmetric(), b.RawVector().Data
	for k, i := range idx {
		v := m.V[int(i)*r : int(i)*r+r]
		for p, vp := range v {
			bd[p] += res[k] * vp
			arow := ad.Data[p*ad.Stride : p*ad.Stride+r]
			for q := p; q < r; q++ {
				arow[q] += vp * v[q]
			}
		}
	}
	for p := range r {
		ad.Data[p*ad.Stride+p] += lam
	}
	var ch mat.Cholesky
	if !ch.Factorize(a) {
		return fmt.Errorf("model: fold-in system is not positive definite")
	}
	if err := ch.SolveVecTo(mat.NewVecDense(r, row), b); err != nil {
		return fmt.Errorf("model: fold-in: %w", err)
	}
	return nil
}

// FoldRule computes a user's row from the public model and her own
// ratings: items are model item indices (in her order), res her values
// after the model's transformations, offset, item biases and her own bias.
// A solver package registers one for its own FoldIn name when the generic
// rules cannot replay its local step (jointdp: private Frank–Wolfe).
type FoldRule func(m *Model, items []int32, res []float64) ([]float64, error)

var foldRules = map[FoldIn]FoldRule{}

// RegisterFoldIn registers a fold-in rule (from an init function); it
// panics on a duplicate or on the name of a built-in rule.
func RegisterFoldIn(name FoldIn, f FoldRule) {
	if _, dup := foldRules[name]; dup || name == FoldRidge || name == FoldProject || name == "" {
		panic("model: fold-in rule " + string(name) + " registered twice")
	}
	foldRules[name] = f
}

// LoadUserStates reads every user state in a directory written by Save (or
// the per-user files, user-ID.json, earlier versions wrote).
func LoadUserStates(dir string) (*UserStates, error) {
	if idx, err := readStateIndex(dir); err != nil || idx != nil {
		if err != nil {
			return nil, err
		}
		return loadSharded(dir, idx)
	}
	files, err := filepath.Glob(filepath.Join(dir, "user-*.json"))
	if err != nil {
		return nil, fmt.Errorf("reading user states: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no user states (user-*.json)", dir)
	}
	s := &UserStates{}
	for k, f := range files {
		st, err := readStateFile(f)
		if err != nil {
			return nil, err
		}
		if k > 0 && (st.Method != s.Method || st.Rank != s.Rank || st.Model != s.Model) {
			return nil, fmt.Errorf("%s mixes the states of two trainings (%s and %s): a state directory holds one training's states; write each training to its own directory",
				dir, filepath.Base(files[0]), filepath.Base(f))
		}
		s.Method, s.Rank, s.Model = st.Method, st.Rank, st.Model
		s.States = append(s.States, st.UserState)
	}
	return s, nil
}

// Join returns a copy of the public model with the users of s filled in
// (rows, biases, seen items): the in-memory view an evaluation inside the
// trusted boundary uses. It is never saved as a public model.
func (m *Model) Join(s *UserStates) (*Model, error) {
	if m.Dense != nil {
		return nil, fmt.Errorf("model: a dense model has no user states")
	}
	j := *m
	j.userIndex, j.itemIndex = nil, nil
	n := len(s.States)
	j.Users = make([]string, n)
	j.U = make([]float64, n*m.Rank)
	j.UserBias = make([]float64, n)
	j.SeenPtr = make([]int64, n+1)
	j.SeenItems = nil
	for u, st := range s.States {
		if err := m.CheckState(&st); err != nil {
			return nil, err
		}
		j.Users[u] = st.User
		copy(j.U[u*m.Rank:], st.Row)
		j.UserBias[u] = st.Bias
		for _, id := range st.Seen {
			if i, ok := m.ItemIndex(id); ok {
				j.SeenItems = append(j.SeenItems, i)
			}
		}
		j.SeenPtr[u+1] = int64(len(j.SeenItems))
	}
	if j.SeenItems == nil {
		j.SeenItems = []int32{}
	}
	return &j, j.Validate()
}

// SplitUsers moves the users out of a model that holds them (rows, biases,
// seen items) into UserStates, leaving the public item side: how a method
// whose solver works on the whole matrix makes its joint-DP release.
func (m *Model) SplitUsers() *UserStates {
	s := &UserStates{Method: m.Method, Rank: m.Rank, States: make([]UserState, len(m.Users))}
	for u, id := range m.Users {
		st := UserState{User: id}
		if m.Rank > 0 && len(m.U) >= (u+1)*m.Rank {
			st.Row = slices.Clone(m.U[u*m.Rank : (u+1)*m.Rank])
		}
		if m.UserBias != nil {
			st.Bias = m.UserBias[u]
		}
		for _, i := range m.Seen(int32(u)) {
			st.Seen = append(st.Seen, m.Items[i])
		}
		s.States[u] = st
	}
	m.Users, m.U, m.UserBias, m.SeenPtr, m.SeenItems = nil, []float64{}, nil, nil, nil
	m.userIndex = nil
	return s
}
