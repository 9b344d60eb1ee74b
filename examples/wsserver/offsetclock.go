package main

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// offsetClock is a clock whose Now is the base clock's plus a fixed offset:
// a process whose wall clock runs ahead (positive) or behind (negative).
// Durations (timers, tickers, sleeps) are unchanged, as on a real machine
// whose clock is merely set wrong. It exists for fault testing only.
type offsetClock struct {
	clockwork.Clock
	offset time.Duration
}

// newOffsetClock returns base shifted by offset; with offset 0 it returns
// base itself.
func newOffsetClock(base clockwork.Clock, offset time.Duration) clockwork.Clock {
	if offset == 0 {
		return base
	}
	return offsetClock{Clock: base, offset: offset}
}

func (c offsetClock) Now() time.Time { return c.Clock.Now().Add(c.offset) }

func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c offsetClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
