package server

import "time"

// bucket is a token bucket: burst tokens at most, refilled at rate per
// second of the clock readings it is given. The zero bucket refuses
// everything; use newBucket. Not safe for concurrent use.
type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func newBucket(rate float64, burst int) bucket {
	return bucket{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// allow takes one token if there is one at now.
func (b *bucket) allow(now time.Time) bool {
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	if b.last.IsZero() || now.After(b.last) {
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
