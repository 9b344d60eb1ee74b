package server

import (
	"net"

	"github.com/jonboulle/clockwork"
	"golang.org/x/time/rate"
)

// limiter is a token bucket (golang.org/x/time/rate) read on the server's
// clock, so that tests drive it with a fake one. Safe for concurrent use.
type limiter struct {
	clock clockwork.Clock
	l     *rate.Limiter
}

// newLimiter returns a bucket of burst tokens refilled at perSecond.
func newLimiter(clock clockwork.Clock, perSecond float64, burst int) limiter {
	return limiter{clock: clock, l: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// full reports whether the bucket holds its whole burst now: the sender
// has been within the rate long enough for the budget to refill.
func (l limiter) full() bool {
	return l.l.TokensAt(l.clock.Now()) >= float64(l.l.Burst())
}

// allow takes a token if there is one now.
func (l limiter) allow() bool { return l.l.AllowN(l.clock.Now(), 1) }

// wait takes a token, waiting on the clock until there is one, or until
// stop is closed (then it returns net.ErrClosed).
func (l limiter) wait(stop <-chan struct{}) error {
	now := l.clock.Now()
	r := l.l.ReserveN(now, 1)
	if !r.OK() { // a rate of zero: the bucket never refills
		<-stop
		return net.ErrClosed
	}
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	select {
	case <-l.clock.After(d):
		return nil
	case <-stop:
		return net.ErrClosed
	}
}
