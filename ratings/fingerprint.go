package ratings

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
)

// Fingerprint is a SHA-256 over the IDs, pattern and values (and
// timestamps) of the matrix: two matrices with the same ratings under the
// same IDs have the same fingerprint. Models record it so a reader can
// check which data a model was trained on.
func (m *Matrix) Fingerprint() string {
	h := sha256.New()
	var buf [8]byte
	put := func(x uint64) {
		binary.LittleEndian.PutUint64(buf[:], x)
		h.Write(buf[:])
	}
	for _, ids := range []*IDs{m.Users, m.Items} {
		put(uint64(ids.Len()))
		for _, n := range ids.names {
			put(uint64(len(n)))
			h.Write([]byte(n))
		}
	}
	for u := range int32(m.NumUsers()) {
		items, vals := m.UserRow(u)
		put(uint64(len(items)))
		for k, it := range items {
			put(uint64(it)<<32 | uint64(math.Float32bits(vals[k])))
		}
	}
	for _, t := range m.rowT {
		put(uint64(t))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
