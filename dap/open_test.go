package dap_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/privrec/privrec/dap"
)

// TestPrepareRefusesTamperedShares: the leader prepares its share at
// upload and refuses, before anyone is charged, every share tampered the
// ways a device could — a field element at or above the modulus in the
// measurement or the proof share, a share a byte or an element short or
// long, and any change to the measurement share or the blind that still
// decodes, which the joint randomness the public share commits to
// catches — with an error wrapping ErrInvalid. The honest share is
// prepared, and so is one whose proof share was changed within the field:
// its proof fails at aggregation, on both prep shares.
func TestPrepareRefusesTamperedShares(t *testing.T) {
	tk, err := dap.NewTask(dap.Task{ID: "check", Statistic: "test", Dimension: 7, Step: 0.25, Min: 0, Bits: 3, NormSq: 64, Rho: 0.5, MinReports: 1})
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, dap.VerifyKeySize)
	rand.Read(secret)
	lk, err := dap.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	hk, err := dap.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	leader, err := dap.NewPreparer(tk, dap.Leader, lk, secret)
	if err != nil {
		t.Fatal(err)
	}
	modulus := []byte{1, 0, 0, 0, 0, 0, 0, 0, 0xe4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff} // 2^128 − 28·2^64 + 1, little-endian
	below := append([]byte{0}, modulus[1:]...)                                                // the modulus − 1
	set := func(off int, v []byte) func([]byte) []byte {
		return func(pt []byte) []byte { copy(pt[off:], v); return pt }
	}
	proofAt := tk.Dimension * tk.Bits * 16
	for _, c := range []struct {
		name   string
		tamper func([]byte) []byte
		valid  bool
	}{
		{"honest", func(pt []byte) []byte { return pt }, true},
		{"measurement element = modulus − 1", set(16, below), false},
		{"measurement element = modulus", set(16, modulus), false},
		{"measurement element all ones", set(0, bytes.Repeat([]byte{0xff}, 16)), false},
		{"proof element = modulus", set(proofAt, modulus), false},
		{"last element's high word above", func(pt []byte) []byte { copy(pt[len(pt)-40:], bytes.Repeat([]byte{0xff}, 8)); return pt }, false},
		{"blind all ones", func(pt []byte) []byte { copy(pt[len(pt)-32:], bytes.Repeat([]byte{0xff}, 32)); return pt }, false},
		// Not in the joint randomness: prepared, refused at aggregation
		// (the proof fails on both prep shares).
		{"proof element = modulus − 1", set(proofAt, below), true},
		{"a byte short", func(pt []byte) []byte { return pt[:len(pt)-1] }, false},
		{"a byte long", func(pt []byte) []byte { return append(pt, 0) }, false},
		{"an element long", func(pt []byte) []byte { return append(pt, make([]byte, 16)...) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := tk.ShardTampered(lk.Public, hk.Public, func(r dap.Role, pt []byte) []byte {
				if r == dap.Leader {
					return c.tamper(pt)
				}
				return pt
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = leader.Prepare(rep.ID, rep.PublicShare, rep.LeaderShare)
			if (err == nil) != c.valid {
				t.Fatalf("Prepare: %v; want valid = %v", err, c.valid)
			}
			if err != nil && !errors.Is(err, dap.ErrInvalid) {
				t.Fatalf("Prepare: %v, want ErrInvalid", err)
			}
		})
	}
}
