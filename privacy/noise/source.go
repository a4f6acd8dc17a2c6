// Package noise provides privrec's randomness: a crypto/rand-backed source
// for real releases (the default everywhere), a seeded reproducible stream
// that must be asked for by name (experiments and tests), and the samplers
// every mechanism draws from.
package noise

import (
	crand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
)

// Source is a stream of random bits. It is not safe for concurrent use;
// give each goroutine its own stream with Split.
type Source struct {
	r            *rand.Rand
	reproducible bool
}

// Secure returns a source for anything that is released: a ChaCha8
// stream (math/rand/v2's cryptographically strong generator, the same
// construction Go's runtime uses for its own randomness) keyed with 32
// bytes from crypto/rand, and re-keyed from crypto/rand every 2^20 draws.
// This is as unpredictable as reading crypto/rand directly but costs a few
// nanoseconds per 64-bit draw instead of a system call per buffer, which
// keeps noise for whole matrices cheap.
func Secure() *Source {
	return &Source{r: rand.New(&secureSource{})}
}

// secureSource is ChaCha8 keyed and periodically re-keyed from crypto/rand.
type secureSource struct {
	c    *rand.ChaCha8
	left int
}

const rekeyEvery = 1 << 20

func (c *secureSource) Uint64() uint64 {
	if c.left == 0 {
		var key [32]byte
		// crypto/rand.Read never returns an error on supported platforms
		// (since Go 1.24 it crashes the program instead of returning one).
		_, _ = crand.Read(key[:])
		c.c = rand.NewChaCha8(key)
		c.left = rekeyEvery
	}
	c.left--
	return c.c.Uint64()
}

// Seeded returns a reproducible stream for experiments and tests. Output
// produced with it is marked as such (Guarantee.Reproducible); never use it
// for a real release.
func Seeded(seed uint64) *Source {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	binary.LittleEndian.PutUint64(key[8:], 0x70726976726563) // "privrec"
	return &Source{r: rand.New(rand.NewChaCha8(key)), reproducible: true}
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
	return Seeded(s.r.Uint64())
}

// Uint64 returns 64 uniform bits.
func (s *Source) Uint64() uint64 { return s.r.Uint64() }

// Float64 returns a uniform value in [0, 1).
func (s *Source) Float64() float64 { return s.r.Float64() }

// NormFloat64 returns a standard normal value (for non-privacy uses such as
// initialisation; privacy noise goes through the samplers).
func (s *Source) NormFloat64() float64 { return s.r.NormFloat64() }

// ExpFloat64 returns a standard exponential value.
func (s *Source) ExpFloat64() float64 { return s.r.ExpFloat64() }

// IntN returns a uniform integer in [0, n).
func (s *Source) IntN(n int) int { return s.r.IntN(n) }

// Perm returns a uniform random permutation of 0..n-1.
func (s *Source) Perm(n int) []int { return s.r.Perm(n) }

// Shuffle permutes n elements with swap.
func (s *Source) Shuffle(n int, swap func(i, j int)) { s.r.Shuffle(n, swap) }

// Rand exposes the stream as a *rand.Rand for libraries that want one.
func (s *Source) Rand() *rand.Rand { return s.r }
