package rules

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"time"
)

// CheckTransition reports the first invariant of the lobby rules that the
// transition from before to after (by cmd at now, with result res, as Apply
// returned them) breaks, or nil. It re-derives what it needs from before, so
// it is slow: it is for tests, property checks and simulations of drivers
// (a Service over a faulty store, say), not for production paths. The
// invariants: a member is online exactly while it holds a live generation
// and a reconnecting one is listed until its reconnect deadline; at most one
// host, always a member, the first eligible member in succession order
// unless a transfer chose it; the revision grows by one per visible change
// and by nothing else; the admission rules (blocks, the lock, the caps) and
// what each command promises. A session-held generation is live at t
// exactly while the deadline cmd gives its session, if any, is after t.
func (m *Machine) CheckTransition(before, after *State, cmd Command, res Result, now time.Time) error {
	if err := after.Validate(); err != nil {
		return fmt.Errorf("%v: %v", cmd.Op, err)
	}
	if now.Before(before.Updated) {
		now = before.Updated
	}
	ends := newSessionEnds(cmd.SessionDeadlines, before)
	tick := Tick().WithSessionDeadlines(cmd.SessionDeadlines)
	// The lobby the command was judged on: before, caught up to now.
	caught := before.Clone()
	if _, err := m.Apply(caught, tick, now); err != nil {
		return err
	}
	if err := m.admissionErr(caught, after, cmd, now); err != nil {
		return err
	}
	// 1. At rest, online exactly while holding a live generation; a
	// reconnecting member is listed until its deadline.
	for _, mem := range after.Members {
		for _, c := range mem.Conns {
			if d := ends.end(c); !d.IsZero() && !now.Before(d) {
				return fmt.Errorf("%v: %s holds generation %d (session %q) past its deadline %v at %v", cmd.Op, mem.Player, c.Gen, c.Session, d, now)
			}
		}
		if mem.Status() == StatusReconnecting && !now.Before(mem.ReconnectBy) {
			return fmt.Errorf("%v: %s listed past its reconnect deadline", cmd.Op, mem.Player)
		}
	}
	// 2. The host, if any, is a member (Validate) — and every event's host
	// is a member of that event's view.
	for _, e := range res.Events {
		if e.Host != "" && !slices.ContainsFunc(e.Members, func(v MemberView) bool { return v.Player == e.Host }) {
			return fmt.Errorf("event %d: host %q not in its member view", e.Revision, e.Host)
		}
	}
	// 3. An empty host seat means nobody is eligible.
	if after.Host == "" {
		for i := range after.Members {
			mem := &after.Members[i]
			if mem.liveAt(now, ends) && m.p.Succession.IsEligible(mem.candidate()) {
				return fmt.Errorf("%v: no host while %s is eligible", cmd.Op, mem.Player)
			}
		}
	}
	// 4. One revision per visible change: each event differs visibly from
	// the one before; no event means no visible change.
	prevHost, prevView, prevTerm := before.Host, before.View(), before.Term
	prevLocked, prevOverrides := before.Locked, before.Overrides
	for _, e := range res.Events {
		// The host term moves by one exactly when the host does.
		wantTerm := prevTerm
		if e.Host != e.PrevHost {
			wantTerm++
		}
		if e.Term != wantTerm {
			return fmt.Errorf("event %d (%s): host %q → %q, term %d after %d", e.Revision, e.Reason, e.PrevHost, e.Host, e.Term, prevTerm)
		}
		prevTerm = e.Term
		if e.Host == prevHost && e.Locked == prevLocked && e.Overrides == prevOverrides && sameView(e.Members, prevView) {
			return fmt.Errorf("event %d (%s) changes nothing visible", e.Revision, e.Reason)
		}
		if e.PrevHost != prevHost {
			return fmt.Errorf("event %d: previous host %q, want %q", e.Revision, e.PrevHost, prevHost)
		}
		prevHost, prevView, prevLocked, prevOverrides = e.Host, e.Members, e.Locked, e.Overrides
	}
	if after.Host != prevHost || after.Locked != prevLocked || after.Overrides != prevOverrides || !sameView(after.View(), prevView) {
		return fmt.Errorf("%v: a visible change without an event", cmd.Op)
	}
	if after.Term != prevTerm {
		return fmt.Errorf("%v: host term %d after the events' %d", cmd.Op, after.Term, prevTerm)
	}
	if after.Revision != before.Revision+uint64(len(res.Events)) {
		return fmt.Errorf("%v: revision %d → %d with %d events", cmd.Op, before.Revision, after.Revision, len(res.Events))
	}
	// A join's connection is held by the session it names, which then
	// stores no heartbeat deadline; a close or time-out that applied ends
	// its generation.
	switch cmd.Op {
	case OpJoin:
		mem := after.Member(cmd.Player)
		i := -1
		if mem != nil {
			i = mem.connIndex(res.Gen)
		}
		if i < 0 {
			return fmt.Errorf("join of %s: generation %d not held", cmd.Player, res.Gen)
		}
		if c := mem.Conns[i]; c.Session != cmd.Session || (c.Session != "" && !c.Deadline.IsZero()) {
			return fmt.Errorf("join of %s in session %q: connection %+v", cmd.Player, cmd.Session, c)
		}
	case OpDrain:
		for _, mem := range after.Members {
			for _, c := range mem.Conns {
				if c.Session == cmd.Session {
					return fmt.Errorf("drain of session %q: %s still holds generation %d", cmd.Session, mem.Player, c.Gen)
				}
			}
		}
	case OpDisconnect, OpTimeOut:
		if mem := after.Member(cmd.Player); res.Outcome == OutcomeApplied && mem != nil && mem.connIndex(cmd.Gen) >= 0 {
			return fmt.Errorf("%v of %s generation %d applied, but it is still held", cmd.Op, cmd.Player, cmd.Gen)
		}
	}
	// Joins allocate consecutively.
	if cmd.Op == OpJoin && (res.Gen != before.NextGen || after.NextGen != before.NextGen+1) {
		return fmt.Errorf("join: generation %d (next %d→%d)", res.Gen, before.NextGen, after.NextGen)
	}
	if cmd.Op != OpJoin && after.NextGen != before.NextGen {
		return fmt.Errorf("%v allocated a generation", cmd.Op)
	}
	// A stale report changes nothing beyond the catch-up.
	if res.Outcome == OutcomeStale {
		caught := before.Clone()
		if _, err := m.Apply(caught, tick, now); err != nil {
			return err
		}
		if !bytes.Equal(EncodeState(caught), EncodeState(after)) {
			return fmt.Errorf("stale %v changed more than the catch-up", cmd.Op)
		}
	}
	return nil
}

// admissionErr checks the rules of the commands that admit, remove and
// reconfigure, on a transition from caught (the lobby caught up to the
// command's time) to after.
func (m *Machine) admissionErr(caught, after *State, cmd Command, now time.Time) error {
	p := caught.Overrides.Apply(m.p)
	switch cmd.Op {
	case OpJoin:
		if caught.Member(cmd.Player) == nil {
			// A new player: never while blocked, never into a locked
			// lobby, never beyond the member cap in force.
			if end, ok := caught.Blocks.Until(cmd.Player); ok && now.Before(end) {
				return fmt.Errorf("join: blocked player %s admitted at %v, block ends %v", cmd.Player, now, end)
			}
			if caught.Locked {
				return fmt.Errorf("join: locked lobby admitted new player %s", cmd.Player)
			}
			if p.MaxMembers > 0 && len(caught.Members) >= p.MaxMembers {
				return fmt.Errorf("join: %s admitted to a lobby of %d members, cap %d", cmd.Player, len(caught.Members), p.MaxMembers)
			}
		}
		if n := p.MaxConnectionsPerPlayer; n > 0 {
			if mem := after.Member(cmd.Player); mem == nil || len(mem.Conns) > n {
				return fmt.Errorf("join: %s holds more than %d connections", cmd.Player, n)
			}
		}
		fallthrough
	case OpUpdate:
		// New attributes never move a current host.
		if caught.Host != "" && after.Host != caught.Host {
			return fmt.Errorf("%v of %s moved the host %q → %q", cmd.Op, cmd.Player, caught.Host, after.Host)
		}
		if mem := after.Member(cmd.Player); cmd.Op == OpUpdate && (mem == nil || !maps.Equal(mem.Attrs, cmd.Attrs) && len(mem.Attrs)+len(cmd.Attrs) > 0) {
			return fmt.Errorf("update of %s: attributes %v, want %v", cmd.Player, mem, cmd.Attrs)
		}
	case OpLock, OpConfigure:
		if after.Host != caught.Host || len(after.Members) != len(caught.Members) {
			return fmt.Errorf("%v changed the host or the members", cmd.Op)
		}
		if cmd.Op == OpLock && after.Locked != cmd.Locked {
			return fmt.Errorf("lock(%v) left the lobby locked=%v", cmd.Locked, after.Locked)
		}
		if cmd.Op == OpConfigure && after.Overrides != cmd.Overrides.normalized() {
			return fmt.Errorf("configure left overrides %+v", after.Overrides)
		}
	case OpKick:
		if after.Member(cmd.To) != nil {
			return fmt.Errorf("kick: %s is still a member", cmd.To)
		}
		if cmd.Player != "" && caught.Host != cmd.Player {
			return fmt.Errorf("kick by %s, who does not host", cmd.Player)
		}
		end, blocked := after.Blocks.Until(cmd.To)
		if want := cmd.Block > 0 && cmd.To != cmd.Player; blocked != want || (want && !end.Equal(now.Add(cmd.Block))) {
			return fmt.Errorf("kick of %s for %v: block %v (stored %v)", cmd.To, cmd.Block, end, blocked)
		}
	}
	// No member is blocked, and every stored block is still to end.
	for b := range after.Blocks.All() {
		if after.Member(b.Player) != nil || !b.Until.After(after.Updated) {
			return fmt.Errorf("%v: block of %s until %v (member %v, last transition %v)", cmd.Op, b.Player, b.Until, after.Member(b.Player) != nil, after.Updated)
		}
	}
	return nil
}

// sameView reports whether two member views show the same thing (nil and
// empty attributes alike).
func sameView(a, b []MemberView) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Player != y.Player || x.JoinSeq != y.JoinSeq || x.Status != y.Status ||
			!x.ReconnectDeadline.Equal(y.ReconnectDeadline) || !maps.Equal(x.Attrs, y.Attrs) {
			return false
		}
	}
	return true
}
