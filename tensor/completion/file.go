package completion

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/tensor"
)

// File is a saved tensor model, the public artefact of the tensor methods
// (a release.Artefact): the fitted factors with everything needed to score
// new ratings — the external user and item IDs, the day axis, an optional
// per-day bi-scaling and the value range predictions are clamped to — plus
// the method, its parameters and the Guarantee. It is written with
// model.WriteContainer (model format version 2) under kind "cp" or
// "tucker" (docs/tensor.md). Under the tensor methods' neighbouring
// relation (one rating's value changes) the IDs and the day axis are
// public; the range is the declared scale (or, for methods without a
// guarantee, the data's); nothing else in the header is computed from the
// rating values. There is no data fingerprint: an exact hash of the
// private ratings would identify them.
type File struct {
	Method    string            `json:"method"`
	Params    map[string]any    `json:"params,omitempty"`
	Guarantee privacy.Guarantee `json:"guarantee"`
	Users     []string          `json:"users"`
	Items     []string          `json:"items"`
	Axis      tensor.DayAxis    `json:"axis"`
	// ItemDay: item IDs carry day tags ("17@3", see tensor.ItemDaySep).
	ItemDay bool `json:"item_day,omitempty"`
	// Lo and Hi clamp predictions (no clamp when Hi ≤ Lo).
	Lo      float64         `json:"lo"`
	Hi      float64         `json:"hi"`
	Model   *Model          `json:"-"`
	Scaling *tensor.Scaling `json:"-"`
}

type fileMeta struct {
	File
	Kind       tensor.Kind `json:"kind"`
	Rank       int         `json:"rank"`
	Dims       [3]int      `json:"dims"`
	HasScaling bool        `json:"bi_scaled"`
	// Offset is the model's constant term: the global mean μ of a model
	// with biases, the private mean of centred DP-SGD; omitted when 0.
	Offset float64 `json:"offset,omitempty"`
}

// Kind is the model kind the file is written under: "cp" or "tucker".
func (f *File) Kind() string {
	if f.Model == nil {
		return ""
	}
	return string(f.Model.Kind)
}

// Write writes f in the container format.
func (f *File) Write(w io.Writer) error {
	m := f.Model
	if m == nil {
		return fmt.Errorf("completion: file has no model")
	}
	if _, err := tensor.ParseKind(string(m.Kind)); err != nil {
		return fmt.Errorf("completion: %w", err)
	}
	meta := fileMeta{File: *f, Kind: m.Kind, Rank: m.Rank, Dims: m.Dims, HasScaling: f.Scaling != nil, Offset: m.Offset}
	arrays := []model.Array{{Name: "A", F64: m.A}, {Name: "B", F64: m.B}, {Name: "C", F64: m.C}}
	if m.G != nil {
		arrays = append(arrays, model.Array{Name: "G", F64: m.G})
	}
	if m.BA != nil {
		arrays = append(arrays, model.Array{Name: "bias_a", F64: m.BA}, model.Array{Name: "bias_b", F64: m.BB}, model.Array{Name: "bias_c", F64: m.BC})
	}
	if s := f.Scaling; s != nil {
		rk, rv, ck, cv := s.Flatten()
		arrays = append(arrays, model.Array{Name: "scale_mean", F64: s.Mean},
			model.Array{Name: "scale_row_keys", I64: rk}, model.Array{Name: "scale_row_vals", F64: rv},
			model.Array{Name: "scale_col_keys", I64: ck}, model.Array{Name: "scale_col_vals", F64: cv})
	}
	return model.WriteContainer(w, string(m.Kind), meta, arrays)
}

// Save writes f to path atomically.
func (f *File) Save(path string) error {
	return model.WriteFileAtomic(path, f.Write)
}

// ReadFile reads a tensor model. model.ReadContainer refuses files of
// another format version (version-1 tensor files carried a fingerprint of
// the training data).
func ReadFile(r io.Reader) (*File, error) {
	kind, raw, arrays, err := model.ReadContainer(r)
	if err != nil {
		return nil, err
	}
	if _, err := tensor.ParseKind(kind); err != nil {
		return nil, fmt.Errorf("not a tensor model (kind %q)", kind)
	}
	var meta fileMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("tensor model header: %w", err)
	}
	if string(meta.Kind) != kind {
		return nil, fmt.Errorf("tensor model: header kind %q in a %q container", meta.Kind, kind)
	}
	d := meta.Rank
	m := &Model{Kind: meta.Kind, Rank: d, Dims: meta.Dims, A: arrays["A"].F64, B: arrays["B"].F64, C: arrays["C"].F64, G: arrays["G"].F64, Offset: meta.Offset}
	if d <= 0 || len(m.A) != meta.Dims[0]*d || len(m.B) != meta.Dims[1]*d || len(m.C) != meta.Dims[2]*d ||
		(m.Kind == tensor.Tucker && len(m.G) != d*d*d) || len(meta.Users) != meta.Dims[0] || len(meta.Items) != meta.Dims[1] || meta.Axis.Days != meta.Dims[2] {
		return nil, fmt.Errorf("tensor model: arrays do not match the declared shape %v, rank %d", meta.Dims, d)
	}
	if ba, ok := arrays["bias_a"]; ok {
		m.BA, m.BB, m.BC = ba.F64, arrays["bias_b"].F64, arrays["bias_c"].F64
		if len(m.BA) != meta.Dims[0] || len(m.BB) != meta.Dims[1] || len(m.BC) != meta.Dims[2] {
			return nil, fmt.Errorf("tensor model: bias arrays do not match the declared shape %v", meta.Dims)
		}
	}
	f := meta.File
	f.Model = m
	if meta.HasScaling {
		s, err := tensor.Unflatten(meta.Dims[2], arrays["scale_mean"].F64, arrays["scale_row_keys"].I64, arrays["scale_row_vals"].F64,
			arrays["scale_col_keys"].I64, arrays["scale_col_vals"].F64)
		if err != nil {
			return nil, fmt.Errorf("tensor model: %w", err)
		}
		f.Scaling = s
	}
	return &f, nil
}

// Load reads a tensor model from path.
func Load(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading tensor model: %w", err)
	}
	defer fh.Close()
	f, err := ReadFile(fh)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	return f, nil
}

// Predict is the prediction at (i, j, k) on the raw scale: the model value,
// un-scaled if the training data were bi-scaled, clamped to [Lo, Hi].
func (f *File) Predict(i, j, k int) float64 {
	v := f.Model.Predict(i, j, k)
	if f.Scaling != nil {
		v = f.Scaling.Inverse(i, j, k, v)
	}
	if f.Hi > f.Lo {
		v = min(max(v, f.Lo), f.Hi)
	}
	return v
}
