package dap_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/privrec/privrec/dap"
)

// TestCheckAgreesWithDecoding: the leader's check at upload refuses
// exactly the shares Prio3's decoder refuses (it does not convert the
// elements, so it is checked against the decoder on shares tampered
// every way a device could: a field element at or above the modulus in
// the measurement or the proof share, a share a byte short or long, and
// an arbitrary joint-randomness blind, which decodes).
func TestCheckAgreesWithDecoding(t *testing.T) {
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
	if !leader.FastCheck() {
		t.Fatal("the leader's share layout was not recognised: Check decodes in full")
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
		{"measurement element = modulus − 1", set(16, below), true},
		{"measurement element = modulus", set(16, modulus), false},
		{"measurement element all ones", set(0, bytes.Repeat([]byte{0xff}, 16)), false},
		{"proof element = modulus", set(proofAt, modulus), false},
		{"last element's high word above", func(pt []byte) []byte { copy(pt[len(pt)-40:], bytes.Repeat([]byte{0xff}, 8)); return pt }, false},
		{"blind all ones", func(pt []byte) []byte { copy(pt[len(pt)-32:], bytes.Repeat([]byte{0xff}, 32)); return pt }, true},
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
			checkErr := leader.Check(rep.ID, rep.PublicShare, rep.LeaderShare)
			decErr := leader.Decodes(rep.ID, rep.PublicShare, rep.LeaderShare)
			if (checkErr == nil) != c.valid || (decErr == nil) != c.valid {
				t.Fatalf("Check: %v; full decoding: %v; want valid = %v", checkErr, decErr, c.valid)
			}
			if checkErr != nil && !errors.Is(checkErr, dap.ErrInvalid) {
				t.Fatalf("Check: %v, want ErrInvalid", checkErr)
			}
		})
	}
}
