package model

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/privacy"
)

// The container format (docs/MODEL_FORMAT.md):
//
//	"privrec-model\n"                 14-byte magic
//	uint32 little-endian              length of the JSON header
//	JSON header                       {"version", "kind", "meta", "arrays": [{"name","type","len"}]}
//	arrays, in header order           little-endian float64 ("f64"), int64 ("i64") or int32 ("i32")
//
// Version is bumped on any incompatible change; readers refuse versions
// they do not know.
const (
	Magic   = "privrec-model\n"
	Version = 2
	// KindLowRank is the kind of a matrix model (this package's Model).
	KindLowRank = "lowrank"
)

// Array is one named numeric array of a container; exactly one of F64,
// I64, I32 is set.
type Array struct {
	Name string
	F64  []float64
	I64  []int64
	I32  []int32
}

type arrayInfo struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Len  int    `json:"len"`
}

type containerHeader struct {
	Version int             `json:"version"`
	Kind    string          `json:"kind"`
	Meta    json.RawMessage `json:"meta"`
	Arrays  []arrayInfo     `json:"arrays"`
}

// WriteContainer writes a model of any kind: meta is JSON-encoded into the
// header, arrays follow in binary.
func WriteContainer(w io.Writer, kind string, meta any, arrays []Array) error {
	mb, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("model: encoding header: %w", err)
	}
	h := containerHeader{Version: Version, Kind: kind, Meta: mb}
	for _, a := range arrays {
		switch {
		case a.F64 != nil:
			h.Arrays = append(h.Arrays, arrayInfo{a.Name, "f64", len(a.F64)})
		case a.I64 != nil:
			h.Arrays = append(h.Arrays, arrayInfo{a.Name, "i64", len(a.I64)})
		case a.I32 != nil:
			h.Arrays = append(h.Arrays, arrayInfo{a.Name, "i32", len(a.I32)})
		}
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("model: encoding header: %w", err)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	bw.WriteString(Magic)
	binary.Write(bw, binary.LittleEndian, uint32(len(hb)))
	bw.Write(hb)
	var buf []byte
	for _, a := range arrays {
		switch {
		case a.F64 != nil:
			buf, err = writeArray(bw, buf, a.F64)
		case a.I64 != nil:
			buf, err = writeArray(bw, buf, a.I64)
		case a.I32 != nil:
			buf, err = writeArray(bw, buf, a.I32)
		}
		if err != nil {
			return fmt.Errorf("model: writing array %s: %w", a.Name, err)
		}
	}
	return bw.Flush()
}

// arrayPiece is how many values writeArray and readArray encode at a time:
// binary.Write and binary.Read of a whole slice allocate its full encoded
// size once more (at Netflix size, the seen items of an als model are
// 400 MB), a piece at a time costs 512 KiB.
const arrayPiece = 1 << 16

// writeArray writes xs little-endian a piece at a time through buf (grown
// as needed and returned for reuse).
func writeArray[T float64 | int64 | int32](w io.Writer, buf []byte, xs []T) ([]byte, error) {
	for len(xs) > 0 {
		n := min(len(xs), arrayPiece)
		var err error
		if buf, err = binary.Append(buf[:0], binary.LittleEndian, xs[:n]); err != nil {
			return buf, err
		}
		if _, err := w.Write(buf); err != nil {
			return buf, err
		}
		xs = xs[n:]
	}
	return buf, nil
}

// readArray fills xs from little-endian values a piece at a time.
func readArray[T float64 | int64 | int32](r io.Reader, xs []T) error {
	for len(xs) > 0 {
		n := min(len(xs), arrayPiece)
		if err := binary.Read(r, binary.LittleEndian, xs[:n]); err != nil {
			return err
		}
		xs = xs[n:]
	}
	return nil
}

// maxArrayLen bounds a declared array length so that a corrupt header
// cannot make the reader allocate without limit (2^34 values = 128 GiB of
// float64 is beyond this machine anyway).
const maxArrayLen = 1 << 34

// ReadContainer reads a model file written by WriteContainer.
func ReadContainer(r io.Reader) (kind string, meta json.RawMessage, arrays map[string]Array, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != Magic {
		return "", nil, nil, errors.New("not a privrec model file (bad magic)")
	}
	var n uint32
	if err := binary.Read(br, binary.LittleEndian, &n); err != nil {
		return "", nil, nil, fmt.Errorf("reading header length: %w", err)
	}
	if n > 1<<30 {
		return "", nil, nil, fmt.Errorf("header length %d is implausible", n)
	}
	hb := make([]byte, n)
	if _, err := io.ReadFull(br, hb); err != nil {
		return "", nil, nil, fmt.Errorf("reading header: %w", err)
	}
	var h containerHeader
	if err := json.Unmarshal(hb, &h); err != nil {
		return "", nil, nil, fmt.Errorf("decoding header: %w", err)
	}
	if h.Version == 1 {
		return "", nil, nil, errors.New("model format version 1 is refused: version-1 files could hold exact facts of the training data (a fingerprint, the mean and range) outside the guarantee; retrain with `privrec train` (add --scale MIN:MAX and, for joint-DP methods, --items FILE) to get a version-2 file")
	}
	if h.Version != Version {
		return "", nil, nil, fmt.Errorf("model format version %d is not supported (this privrec reads version %d)", h.Version, Version)
	}
	arrays = make(map[string]Array, len(h.Arrays))
	for _, ai := range h.Arrays {
		if ai.Len < 0 || ai.Len > maxArrayLen {
			return "", nil, nil, fmt.Errorf("array %s has implausible length %d", ai.Name, ai.Len)
		}
		a := Array{Name: ai.Name}
		switch ai.Type {
		case "f64":
			a.F64 = make([]float64, ai.Len)
			err = readArray(br, a.F64)
		case "i64":
			a.I64 = make([]int64, ai.Len)
			err = readArray(br, a.I64)
		case "i32":
			a.I32 = make([]int32, ai.Len)
			err = readArray(br, a.I32)
		default:
			return "", nil, nil, fmt.Errorf("array %s has unknown type %q", ai.Name, ai.Type)
		}
		if err != nil {
			return "", nil, nil, fmt.Errorf("reading array %s: %w", ai.Name, err)
		}
		arrays[ai.Name] = a
	}
	return h.Kind, h.Meta, arrays, nil
}

// lowRankMeta is the JSON header of a low-rank model.
type lowRankMeta struct {
	Method      string            `json:"method"`
	Params      map[string]any    `json:"params,omitempty"`
	Guarantee   privacy.Guarantee `json:"guarantee"`
	Transform   Transform         `json:"transform"`
	Output      Output            `json:"output"`
	Users       []string          `json:"users,omitempty"`
	Items       []string          `json:"items"`
	Titles      []string          `json:"titles,omitempty"`
	Rank        int               `json:"rank"`
	Offset      float64           `json:"offset"`
	FoldIn      FoldIn            `json:"fold_in,omitempty"`
	FoldLambda  float64           `json:"fold_lambda,omitempty"`
	UserDamping float64           `json:"user_damping,omitempty"`
}

// Kind is the container kind of a low-rank model.
func (m *Model) Kind() string { return KindLowRank }

// Write encodes the model.
func (m *Model) Write(w io.Writer) error {
	if err := m.Validate(); err != nil {
		return err
	}
	meta := lowRankMeta{Method: m.Method, Params: m.Params, Guarantee: m.Guarantee, Transform: m.Transform, Output: m.Output,
		Users: m.Users, Items: m.Items, Titles: m.Titles, Rank: m.Rank, Offset: m.Offset, FoldIn: m.FoldIn, FoldLambda: m.FoldLambda, UserDamping: m.UserDamping}
	var arrays []Array
	add := func(name string, f []float64) {
		if f != nil {
			arrays = append(arrays, Array{Name: name, F64: f})
		}
	}
	add("U", m.U)
	add("V", m.V)
	add("dense", m.Dense)
	add("user_bias", m.UserBias)
	add("item_bias", m.ItemBias)
	if m.SeenPtr != nil {
		arrays = append(arrays, Array{Name: "seen_ptr", I64: m.SeenPtr}, Array{Name: "seen_items", I32: m.SeenItems})
	}
	return WriteContainer(w, KindLowRank, meta, arrays)
}

// Save writes the model to path atomically (a temporary file renamed into
// place), so a failure leaves no partial file.
func (m *Model) Save(path string) error {
	return WriteFileAtomic(path, m.Write)
}

// WriteFileAtomicBytes writes b to path atomically with the given mode.
func WriteFileAtomicBytes(path string, b []byte, mode os.FileMode) error {
	return writeAtomic(path, mode, func(w io.Writer) error { _, err := w.Write(b); return err })
}

// WriteFileAtomic writes through a temporary file in the same directory and
// renames it into place only when write succeeded (mode 0644).
func WriteFileAtomic(path string, write func(io.Writer) error) error {
	return writeAtomic(path, 0o644, write)
}

func writeAtomic(path string, mode os.FileMode, write func(io.Writer) error) error {
	return atomicfile.Write(path, mode, write)
}

// Read decodes a low-rank model.
func Read(r io.Reader) (*Model, error) {
	kind, metaRaw, arrays, err := ReadContainer(r)
	if err != nil {
		return nil, err
	}
	if kind != KindLowRank {
		return nil, fmt.Errorf("model kind %q is not a low-rank matrix model", kind)
	}
	var meta lowRankMeta
	if err := json.Unmarshal(metaRaw, &meta); err != nil {
		return nil, fmt.Errorf("decoding model header: %w", err)
	}
	m := &Model{Method: meta.Method, Params: meta.Params, Guarantee: meta.Guarantee,
		Transform: meta.Transform, Output: meta.Output, Users: meta.Users, Items: meta.Items, Titles: meta.Titles,
		Rank: meta.Rank, Offset: meta.Offset, FoldIn: meta.FoldIn, FoldLambda: meta.FoldLambda, UserDamping: meta.UserDamping,
		U: arrays["U"].F64, V: arrays["V"].F64, Dense: arrays["dense"].F64,
		UserBias: arrays["user_bias"].F64, ItemBias: arrays["item_bias"].F64,
		SeenPtr: arrays["seen_ptr"].I64, SeenItems: arrays["seen_items"].I32}
	if m.U == nil && m.Rank == 0 {
		m.U, m.V = []float64{}, []float64{}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Load reads a model file.
func Load(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// PeekKind returns the kind recorded in a model file's header without
// reading its arrays (so eval can dispatch to the right reader).
func PeekKind(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != Magic {
		return "", fmt.Errorf("%s: not a privrec model file (bad magic)", path)
	}
	var n uint32
	if err := binary.Read(br, binary.LittleEndian, &n); err != nil || n > 1<<30 {
		return "", fmt.Errorf("%s: corrupt model header", path)
	}
	hb := make([]byte, n)
	if _, err := io.ReadFull(br, hb); err != nil {
		return "", fmt.Errorf("%s: reading header: %w", path, err)
	}
	var h struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(hb, &h); err != nil {
		return "", fmt.Errorf("%s: decoding header: %w", path, err)
	}
	return h.Kind, nil
}
