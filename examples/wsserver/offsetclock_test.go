package main

import (
	"io"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestOffsetClockShiftsNowOnly(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, off := range []time.Duration{700 * time.Millisecond, -time.Second} {
		base := clockwork.NewFakeClockAt(start)
		c := newOffsetClock(base, off)
		if got, want := c.Now(), start.Add(off); !got.Equal(want) {
			t.Errorf("offset %v: Now = %v, want %v", off, got, want)
		}
		if got := c.Since(start); got != off {
			t.Errorf("offset %v: Since(start) = %v, want %v", off, got, off)
		}
		if got := c.Until(start.Add(time.Minute)); got != time.Minute-off {
			t.Errorf("offset %v: Until(start+1m) = %v, want %v", off, got, time.Minute-off)
		}
		// A timer still lasts its own duration on the base clock.
		tm := c.NewTimer(2 * time.Second)
		base.Advance(2*time.Second - time.Nanosecond)
		select {
		case <-tm.Chan():
			t.Errorf("offset %v: a 2s timer fired early", off)
		default:
		}
		base.Advance(time.Nanosecond)
		select {
		case <-tm.Chan():
		case <-time.After(5 * time.Second): // hang guard
			t.Errorf("offset %v: a 2s timer did not fire after 2s", off)
		}
	}
	base := clockwork.NewFakeClockAt(start)
	if c := newOffsetClock(base, 0); c != clockwork.Clock(base) {
		t.Errorf("offset 0 should return the base clock, got %T", c)
	}
}

func TestClockOffsetFlag(t *testing.T) {
	o, err := parseFlags([]string{"-test-clock-offset", "-750ms"}, io.Discard, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if o.clockOffset != -750*time.Millisecond {
		t.Errorf("clockOffset = %v, want -750ms", o.clockOffset)
	}
	if _, err := parseFlags([]string{"-test-clock-offset", "soon"}, io.Discard, func(string) string { return "" }); err == nil {
		t.Error("a clock offset that is not a duration was accepted")
	}
}
