// Package lease holds the time arithmetic of presence: how long a connection
// stays alive without a heartbeat, how long a player who lost its last
// connection keeps its place, and when a deadline counts as passed.
//
// A lease is a deadline, not a timer. lobbyhost stores deadlines with the
// lobby and evaluates them against whatever time the caller supplies, so a
// process that stops running callbacks cannot keep a player present. This
// package never reads a clock.
package lease

import (
	"errors"
	"fmt"
	"time"
)

// Default durations. A client that heartbeats about every five seconds
// survives two lost heartbeats before its connection times out.
const (
	DefaultGrace        = 8 * time.Second
	DefaultHeartbeatTTL = 15 * time.Second

	// MaxDuration bounds both durations, so that every deadline stays
	// representable.
	MaxDuration = 366 * 24 * time.Hour
)

// ErrInvalidPolicy is returned (wrapped) by [Policy.Validate] for
// out-of-range durations.
var ErrInvalidPolicy = errors.New("lease: invalid policy")

// Policy sets the two lease durations.
//
// The zero Policy is not valid (Grace must be positive); start from
// [DefaultPolicy] and change what you need.
type Policy struct {
	// Grace is how long a member whose last connection ended stays listed,
	// reconnecting, before it is removed. A host keeps its role through the
	// grace. Must be positive and at most MaxDuration.
	Grace time.Duration

	// HeartbeatTTL is how long a connection lives after it attached or last
	// heartbeated. Zero disables heartbeat deadlines: a connection then lives
	// until its close is reported, which means a socket that vanished without
	// a close (a crashed process, a dead network path) keeps its player
	// online indefinitely. Use zero only where the transport reliably reports
	// every close. Must not be negative or above MaxDuration.
	HeartbeatTTL time.Duration
}

// DefaultPolicy returns the default durations: an 8 s grace and a 15 s
// heartbeat TTL.
func DefaultPolicy() Policy {
	return Policy{Grace: DefaultGrace, HeartbeatTTL: DefaultHeartbeatTTL}
}

// Validate reports whether p's durations are in range; the error wraps
// ErrInvalidPolicy.
func (p Policy) Validate() error {
	if p.Grace <= 0 || p.Grace > MaxDuration {
		return fmt.Errorf("%w: grace must be in (0, %v], got %v", ErrInvalidPolicy, MaxDuration, p.Grace)
	}
	if p.HeartbeatTTL < 0 || p.HeartbeatTTL > MaxDuration {
		return fmt.Errorf("%w: heartbeat TTL must be in [0, %v], got %v", ErrInvalidPolicy, MaxDuration, p.HeartbeatTTL)
	}
	return nil
}

// HeartbeatDeadline is the deadline of a connection that attached or
// heartbeated at now: now+HeartbeatTTL, or the zero time (no deadline) when
// heartbeat deadlines are disabled.
func (p Policy) HeartbeatDeadline(now time.Time) time.Time {
	if p.HeartbeatTTL == 0 {
		return time.Time{}
	}
	return now.Add(p.HeartbeatTTL)
}

// ReconnectDeadline is the deadline of a member whose last connection ended
// at ended: ended+Grace.
func (p Policy) ReconnectDeadline(ended time.Time) time.Time {
	return ended.Add(p.Grace)
}

// Valid reports whether deadline d still holds at time t: t is strictly
// before d. At d itself the deadline has passed. The zero time stands for
// "no deadline" and is always valid.
func Valid(d, t time.Time) bool {
	return d.IsZero() || t.Before(d)
}

// Passed reports whether deadline d has passed at time t (t is at or after
// d). The zero time, "no deadline", never passes.
func Passed(d, t time.Time) bool {
	return !Valid(d, t)
}
