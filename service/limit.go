package service

import (
	"sync"
	"time"
)

// limiter is a token bucket per key (a user ID, or a client address for
// enrolment): rate tokens per second, at most burst saved.
type limiter struct {
	rate  float64
	burst float64
	mu    sync.Mutex
	b     map[string]*bucket
	last  time.Time // last sweep
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), b: map[string]*bucket{}}
}

// allow takes one token for key; false when none is left.
func (l *limiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.last) > time.Minute {
		// Forget buckets that have refilled: they hold no state.
		for k, b := range l.b {
			if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
				delete(l.b, k)
			}
		}
		l.last = now
	}
	b, ok := l.b[key]
	if !ok {
		b = &bucket{tokens: l.burst, at: now}
		l.b[key] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Limiter is the token bucket per key the service admits enrolments and
// requests with, for other servers (the two aggregators' enrolment).
type Limiter struct{ l *limiter }

// NewLimiter allows rate events per second per key, at most burst saved.
func NewLimiter(rate float64, burst int) *Limiter { return &Limiter{newLimiter(rate, burst)} }

// Allow takes one token for key; false when none is left.
func (l *Limiter) Allow(key string, now time.Time) bool { return l.l.allow(key, now) }
