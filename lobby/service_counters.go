package lobby

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby/rules"
)

// Counters is an Observer that counts what operators want to see: how
// connections end, how often graces start and how they end, stale reports,
// host changes by reason, and how long lobbies spend without a host while
// they have members. Read it with Snapshot; export it to any metrics system.
// The zero Counters is ready to use and safe for concurrent use.
//
// A Counters only sees the commands of the Service it observes; with
// several processes, sum their counters.
type Counters struct {
	timedOut     atomic.Uint64
	superseded   atomic.Uint64
	graceStarted atomic.Uint64
	reconnected  atomic.Uint64
	leaseExpired atomic.Uint64
	stale        atomic.Uint64
	refused      atomic.Uint64
	conflicts    atomic.Uint64

	mu          sync.Mutex
	hostChanges map[Reason]uint64
	hostless    map[string]time.Time // lobby → since when it has members but no host
	hostlessDur time.Duration
}

// CounterSnapshot is a copy of a Counters' values.
type CounterSnapshot struct {
	// TimedOut counts connection generations ended by their heartbeat
	// deadline; Superseded, those ended by MaxConnectionsPerPlayer.
	TimedOut, Superseded uint64
	// GraceStarted counts reconnect deadlines started (disconnected or
	// timed_out); Reconnected, members back within their grace;
	// LeaseExpired, graces that ran out.
	GraceStarted, Reconnected, LeaseExpired uint64
	// Stale counts heartbeats and closes naming an ended generation.
	Stale uint64
	// Refused counts commands refused by a rule (full lobby, not host, ...).
	Refused uint64
	// Conflicts counts compare-and-set retries.
	Conflicts uint64
	// HostChanges counts changes of host by the reason of the change.
	HostChanges map[Reason]uint64
	// Hostless is the total time lobbies spent with members but no host,
	// up to the last change observed (an ongoing spell is not included).
	Hostless time.Duration
}

// Observe implements Observer.
func (c *Counters) Observe(_ context.Context, o Observation) {
	if o.Attempts > 1 {
		c.conflicts.Add(uint64(o.Attempts - 1))
	}
	if o.Err != nil {
		if IsRefusal(o.Err) {
			c.refused.Add(1)
		}
		return
	}
	r := o.Result
	if r.Outcome == OutcomeStale && (o.Command.Op == rules.OpHeartbeat || o.Command.Op == rules.OpDisconnect) {
		c.stale.Add(1)
	}
	for _, e := range r.Ended {
		switch e.Cause {
		case EndTimedOut:
			c.timedOut.Add(1)
		case EndSuperseded:
			c.superseded.Add(1)
		}
	}
	if len(r.Events) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range r.Events {
		switch e.Reason {
		case ReasonDisconnected, ReasonTimedOut:
			c.graceStarted.Add(1)
		case ReasonReconnected:
			c.reconnected.Add(1)
		case ReasonLeaseExpired:
			c.leaseExpired.Add(1)
		}
		if e.Host != e.PrevHost {
			if c.hostChanges == nil {
				c.hostChanges = map[Reason]uint64{}
			}
			c.hostChanges[e.Reason]++
		}
		c.trackHostless(e)
	}
}

func (c *Counters) trackHostless(e Event) {
	since, spell := c.hostless[e.Lobby]
	empty := e.Host == "" && len(e.Members) > 0
	switch {
	case empty && !spell:
		if c.hostless == nil {
			c.hostless = map[string]time.Time{}
		}
		c.hostless[e.Lobby] = e.At
	case !empty && spell:
		c.hostlessDur += e.At.Sub(since)
		delete(c.hostless, e.Lobby)
	}
}

// Snapshot returns the current values.
func (c *Counters) Snapshot() CounterSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := CounterSnapshot{
		TimedOut:     c.timedOut.Load(),
		Superseded:   c.superseded.Load(),
		GraceStarted: c.graceStarted.Load(),
		Reconnected:  c.reconnected.Load(),
		LeaseExpired: c.leaseExpired.Load(),
		Stale:        c.stale.Load(),
		Refused:      c.refused.Load(),
		Conflicts:    c.conflicts.Load(),
		HostChanges:  map[Reason]uint64{},
		Hostless:     c.hostlessDur,
	}
	for k, v := range c.hostChanges {
		s.HostChanges[k] = v
	}
	return s
}
