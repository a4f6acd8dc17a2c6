// Package noise provides privrec's randomness: a crypto/rand-backed source
// for real releases (the default everywhere), a seeded reproducible stream
// that must be asked for by name (experiments and tests), and the samplers
// every mechanism draws from.
package noise

import (
	crand "crypto/rand"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// Source is a stream of random bits. It is not safe for concurrent use;
// give each goroutine its own stream with Split.
//
// Both kinds of source are ChaCha8 streams (math/rand/v2's
// cryptographically strong generator): a secure one is keyed from
// crypto/rand and re-keyed every 2^20 draws, a seeded one is keyed from the
// seed. The samplers call the stream directly (no interface call per draw)
// and take single coin flips from a 64-bit reservoir.
type Source struct {
	c            *rand.ChaCha8
	left         int // draws until the next re-key (secure sources)
	reproducible bool
	res          uint64 // reservoir of random bits for coin flips
	nres         uint
	rr           *rand.Rand // lazily built view for Rand() and the float helpers
}

// rekeyEvery is how many 64-bit draws a secure source makes per key.
const rekeyEvery = 1 << 20

// Secure returns a source for anything that is released: a ChaCha8 stream
// (the construction Go's runtime uses for its own randomness) keyed with 32
// bytes from crypto/rand, and re-keyed from crypto/rand every 2^20 draws.
// This is as unpredictable as reading crypto/rand directly but costs a few
// nanoseconds per 64-bit draw instead of a system call per buffer, which
// keeps noise for whole matrices cheap.
func Secure() *Source {
	s := &Source{}
	s.rekey()
	return s
}

func (s *Source) rekey() {
	var key [32]byte
	// crypto/rand.Read never returns an error on supported platforms
	// (since Go 1.24 it crashes the program instead of returning one).
	_, _ = crand.Read(key[:])
	s.c = rand.NewChaCha8(key)
	s.left = rekeyEvery
}

// Seeded returns a reproducible stream for experiments and tests. Output
// produced with it is marked as such (Guarantee.Reproducible); never use it
// for a real release.
func Seeded(seed uint64) *Source {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	binary.LittleEndian.PutUint64(key[8:], 0x70726976726563) // "privrec"
	return &Source{c: rand.NewChaCha8(key), reproducible: true}
}

// Reproducible reports whether the stream is seeded (not secure).
func (s *Source) Reproducible() bool { return s.reproducible }

// Split returns an independent stream for a worker goroutine: a secure
// source yields a new secure source; a seeded one yields a child stream
// derived deterministically from the parent.
func (s *Source) Split() *Source {
	if !s.reproducible {
		return Secure()
	}
	return Seeded(s.Uint64())
}

// Uint64 returns 64 uniform bits (Source implements rand.Source).
func (s *Source) Uint64() uint64 {
	if !s.reproducible {
		if s.left == 0 {
			s.rekey()
		}
		s.left--
	}
	return s.c.Uint64()
}

// coin returns one uniform bit from the reservoir.
func (s *Source) coin() bool {
	if s.nres == 0 {
		s.res, s.nres = s.Uint64(), 64
	}
	b := s.res&1 == 1
	s.res >>= 1
	s.nres--
	return b
}

// uniformBelow returns a uniform integer in [0, n), n ≥ 1: Lemire's
// nearly-divisionless method, as in math/rand/v2 (unbiased); n = 2 takes a
// single reservoir bit.
func (s *Source) uniformBelow(n uint64) uint64 {
	if n&(n-1) == 0 {
		if n == 2 {
			if s.coin() {
				return 1
			}
			return 0
		}
		return s.Uint64() & (n - 1)
	}
	hi, lo := bits.Mul64(s.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(s.Uint64(), n)
		}
	}
	return hi
}

func (s *Source) rnd() *rand.Rand {
	if s.rr == nil {
		s.rr = rand.New(s)
	}
	return s.rr
}

// Float64 returns a uniform value in [0, 1): a multiple of 2^-53.
func (s *Source) Float64() float64 { return float64(s.Uint64()<<11>>11) / (1 << 53) }

// NormFloat64 returns a standard normal value (for non-privacy uses such as
// initialisation; privacy noise goes through the samplers).
func (s *Source) NormFloat64() float64 { return s.rnd().NormFloat64() }

// ExpFloat64 returns a standard exponential value.
func (s *Source) ExpFloat64() float64 { return s.rnd().ExpFloat64() }

// IntN returns a uniform integer in [0, n).
func (s *Source) IntN(n int) int { return s.rnd().IntN(n) }

// Perm returns a uniform random permutation of 0..n-1.
func (s *Source) Perm(n int) []int { return s.rnd().Perm(n) }

// Shuffle permutes n elements with swap.
func (s *Source) Shuffle(n int, swap func(i, j int)) { s.rnd().Shuffle(n, swap) }

// Rand exposes the stream as a *rand.Rand for libraries that want one.
func (s *Source) Rand() *rand.Rand { return s.rnd() }
