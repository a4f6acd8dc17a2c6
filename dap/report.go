package dap

import (
	"crypto/rand"
	"fmt"
	"io"

	"github.com/cloudflare/circl/hpke"
	"github.com/cloudflare/circl/kem"
	"github.com/cloudflare/circl/vdaf/prio3/sumvec"
)

// Role is an aggregator's role; its value is the VDAF aggregator ID.
type Role uint8

const (
	Leader Role = 0
	Helper Role = 1
)

func (r Role) String() string {
	switch r {
	case Leader:
		return "leader"
	case Helper:
		return "helper"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole reads "leader" or "helper".
func ParseRole(s string) (Role, error) {
	switch s {
	case "leader":
		return Leader, nil
	case "helper":
		return Helper, nil
	}
	return 0, fmt.Errorf("%w: role %q: want leader or helper", ErrInvalid, s)
}

// suite is the HPKE suite of input shares: DHKEM(X25519, HKDF-SHA256),
// HKDF-SHA256, AES-128-GCM (RFC 9180; the suite DAP deployments use).
var suite = hpke.NewSuite(hpke.KEM_X25519_HKDF_SHA256, hpke.KDF_HKDF_SHA256, hpke.AEAD_AES128GCM)

// KeyPair is an aggregator's HPKE key pair.
type KeyPair struct {
	Public  kem.PublicKey
	Private kem.PrivateKey
}

// NewKeyPair makes a fresh X25519 key pair from crypto/rand.
func NewKeyPair() (KeyPair, error) {
	pk, sk, err := hpke.KEM_X25519_HKDF_SHA256.Scheme().GenerateKeyPair()
	if err != nil {
		return KeyPair{}, fmt.Errorf("dap: HPKE key pair: %w", err)
	}
	return KeyPair{pk, sk}, nil
}

// MarshalPrivate encodes the private key (for the aggregator's key file).
func (k KeyPair) MarshalPrivate() ([]byte, error) { return k.Private.MarshalBinary() }

// PublicBytes encodes the public key (the HPKE config an aggregator
// publishes).
func (k KeyPair) PublicBytes() ([]byte, error) { return k.Public.MarshalBinary() }

// UnmarshalKeyPair decodes a private key written by MarshalPrivate.
func UnmarshalKeyPair(b []byte) (KeyPair, error) {
	sk, err := hpke.KEM_X25519_HKDF_SHA256.Scheme().UnmarshalBinaryPrivateKey(b)
	if err != nil {
		return KeyPair{}, fmt.Errorf("%w: HPKE private key: %v", ErrInvalid, err)
	}
	return KeyPair{sk.Public(), sk}, nil
}

// UnmarshalPublicKey decodes a published HPKE public key.
func UnmarshalPublicKey(b []byte) (kem.PublicKey, error) {
	pk, err := hpke.KEM_X25519_HKDF_SHA256.Scheme().UnmarshalBinaryPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: HPKE public key: %v", ErrInvalid, err)
	}
	return pk, nil
}

// Sealed is one HPKE-encrypted input share.
type Sealed struct {
	Enc        []byte `json:"enc"`
	Ciphertext []byte `json:"ciphertext"`
}

// ReportIDSize is the length of a report ID, which is also its VDAF nonce.
const ReportIDSize = 16

// Report is what a device uploads (to the leader) for one task.
type Report struct {
	TaskID      string `json:"task_id"`
	ID          []byte `json:"id"`
	PublicShare []byte `json:"public_share"`
	LeaderShare Sealed `json:"leader_share"`
	HelperShare Sealed `json:"helper_share"`
}

// Size is the report's payload in bytes (shares, keys, ID; JSON framing
// and base64 add about a third on the wire).
func (r *Report) Size() int {
	return len(r.ID) + len(r.PublicShare) + len(r.LeaderShare.Enc) + len(r.LeaderShare.Ciphertext) +
		len(r.HelperShare.Enc) + len(r.HelperShare.Ciphertext)
}

// info and aad bind a ciphertext to its recipient, task, report and
// public share (as DAP's InputShareAad does), so a share cannot be
// replayed under another report or sent to the other aggregator.
func info(role Role) []byte { return []byte("privrec/dap input share/" + role.String()) }

func aad(taskID string, id, public []byte) []byte {
	b := make([]byte, 0, 2+len(taskID)+len(id)+len(public))
	b = append(b, byte(len(taskID)))
	b = append(b, taskID...)
	b = append(b, id...)
	return append(b, public...)
}

func seal(pk kem.PublicKey, role Role, ad, pt []byte) (Sealed, error) {
	snd, err := suite.NewSender(pk, info(role))
	if err != nil {
		return Sealed{}, fmt.Errorf("dap: HPKE sender for %s: %w", role, err)
	}
	enc, sealer, err := snd.Setup(rand.Reader)
	if err != nil {
		return Sealed{}, fmt.Errorf("dap: HPKE setup for %s: %w", role, err)
	}
	ct, err := sealer.Seal(pt, ad)
	if err != nil {
		return Sealed{}, fmt.Errorf("dap: sealing the %s share: %w", role, err)
	}
	return Sealed{Enc: enc, Ciphertext: ct}, nil
}

// Shard splits the quantized contribution q (checked with CheckQuantized)
// into a Prio3SumVec report whose input shares are encrypted to the two
// aggregators' keys. Randomness comes from crypto/rand.
func (t *Task) Shard(q []int64, leaderKey, helperKey kem.PublicKey) (*Report, error) {
	if err := t.CheckQuantized(q); err != nil {
		return nil, err
	}
	enc := make([]uint64, len(q))
	for j, v := range q {
		enc[j] = uint64(v - t.Min)
	}
	return t.shardEncoded(enc, leaderKey, helperKey, nil)
}

// shardEncoded shards an encoded measurement; tamper (tests only: a
// malicious device) may rewrite an input share before it is sealed.
func (t *Task) shardEncoded(enc []uint64, leaderKey, helperKey kem.PublicKey, tamper func(Role, []byte) []byte) (*Report, error) {
	v, err := t.vdaf()
	if err != nil {
		return nil, err
	}
	var nonce sumvec.Nonce
	p := v.Params()
	rnd := make([]byte, ReportIDSize+int(p.RandSize()))
	if _, err := io.ReadFull(rand.Reader, rnd); err != nil {
		return nil, fmt.Errorf("dap: randomness: %w", err)
	}
	copy(nonce[:], rnd[:ReportIDSize])
	public, shares, err := v.Shard(enc, &nonce, rnd[ReportIDSize:])
	if err != nil {
		return nil, fmt.Errorf("dap: task %s: sharding: %w", t.ID, err)
	}
	r := &Report{TaskID: t.ID, ID: nonce[:], PublicShare: public}
	ad := aad(t.ID, r.ID, public)
	for i, dst := range []*Sealed{&r.LeaderShare, &r.HelperShare} {
		pt, err := shares[i].MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("dap: encoding input share %d: %w", i, err)
		}
		if tamper != nil {
			pt = tamper(Role(i), pt)
		}
		key := []kem.PublicKey{leaderKey, helperKey}[i]
		if *dst, err = seal(key, Role(i), ad, pt); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// CheckReport validates a report's framing against its task (sizes only;
// the shares are checked by Prepare).
func (t *Task) CheckReport(r *Report) error {
	switch {
	case r.TaskID != t.ID:
		return fmt.Errorf("%w: report for task %q sent to task %q", ErrInvalid, r.TaskID, t.ID)
	case len(r.ID) != ReportIDSize:
		return fmt.Errorf("%w: report id has %d bytes, want %d", ErrInvalid, len(r.ID), ReportIDSize)
	case len(r.PublicShare) > 1024:
		return fmt.Errorf("%w: public share of %d bytes", ErrInvalid, len(r.PublicShare))
	}
	return nil
}
