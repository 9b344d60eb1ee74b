package rules

import (
	"maps"
	"slices"
	"time"

	"github.com/lobbyhost/lobbyhost/lease"
	"github.com/lobbyhost/lobbyhost/succession"
)

// Status is a member's presence.
type Status uint8

const (
	// StatusOnline: the member holds at least one live connection.
	StatusOnline Status = iota + 1
	// StatusReconnecting: the member holds no live connection and is listed
	// until its reconnect deadline.
	StatusReconnecting
)

func (s Status) String() string {
	switch s {
	case StatusOnline:
		return "online"
	case StatusReconnecting:
		return "reconnecting"
	}
	return "unknown"
}

// Conn is one live connection generation.
type Conn struct {
	// Gen is the generation the lobby allocated when the connection joined.
	Gen uint64
	// Deadline is the stored heartbeat deadline: the connection ends at
	// this moment unless a heartbeat pushes it later. Zero when heartbeat
	// deadlines are disabled, and always zero for a session-held
	// connection.
	Deadline time.Time
	// Session is the session that holds the connection: the liveness
	// record of the process that holds its socket ("" for none). A
	// session-held connection stores no heartbeat deadline: the process
	// keeps that deadline in its own memory and reports its passing with
	// [TimeOut]; in the lobby, the connection lives until it is closed,
	// timed out, superseded or removed, or until its session's deadline
	// (see [SessionDeadlines]).
	Session string
}

// Member is one player in a lobby.
type Member struct {
	// Player is the player's ID.
	Player string
	// JoinSeq is assigned when the player enters the lobby and kept across
	// reconnects while it stays a member. Lower joined earlier.
	JoinSeq uint64
	// Attrs are the attributes given at the last join that carried any, or
	// by the last Update.
	Attrs map[string]string
	// Conns are the live connections, oldest (lowest generation) first.
	Conns []Conn
	// LastGen is the most recently attached generation, live or not.
	LastGen uint64
	// ReconnectBy is the reconnect deadline while the member has no live
	// connection; zero while it is online.
	ReconnectBy time.Time
}

// Status reports whether m is online or reconnecting.
func (m *Member) Status() Status {
	if len(m.Conns) > 0 {
		return StatusOnline
	}
	return StatusReconnecting
}

// liveAt reports whether m holds a connection that is live at t: one whose
// own deadline (its heartbeat deadline, or its session's as e resolves it),
// if any, has not passed at t.
func (m *Member) liveAt(t time.Time, e sessionEnds) bool {
	for _, c := range m.Conns {
		if lease.Valid(e.end(c), t) {
			return true
		}
	}
	return false
}

// sessionEnds resolves, for one transition, the moment each connection ends
// on its own: its stored heartbeat deadline, or for a session-held one its
// session's deadline as the input gave it. A session deadline before floor
// (the lobby's last transition time) counts as floor: whoever committed at
// floor judged the session alive then, so it cannot have ended earlier in
// this lobby, and time never runs backward inside a lobby.
type sessionEnds struct {
	d     SessionDeadlines
	floor time.Time
}

func newSessionEnds(d SessionDeadlines, s *State) sessionEnds {
	return sessionEnds{d: d, floor: later(s.Updated, minTime)}
}

// end returns when c ends unless something ends it sooner; zero for never.
func (e sessionEnds) end(c Conn) time.Time {
	if c.Session == "" {
		return c.Deadline
	}
	d, ok := e.d[c.Session]
	if !ok {
		return time.Time{}
	}
	return later(d.Round(0).UTC(), e.floor)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

func (m *Member) connIndex(gen uint64) int {
	for i := range m.Conns {
		if m.Conns[i].Gen == gen {
			return i
		}
	}
	return -1
}

func (m *Member) candidate() succession.Candidate {
	return succession.Candidate{Player: m.Player, JoinSeq: m.JoinSeq, Attrs: m.Attrs}
}

// State is one lobby. The zero State is not meaningful; use [NewState] or
// [DecodeState].
type State struct {
	// ID is the lobby ID.
	ID string
	// Revision counts the changes clients can see.
	Revision uint64
	// NextJoinSeq and NextGen are the values the next new member and the
	// next connection will get.
	NextJoinSeq uint64
	NextGen     uint64
	// Host is the hosting member's player ID, or "" for no host.
	Host string
	// Term is the host term: it grows by one with every change of host
	// (to another member or to none) and never otherwise, and never goes
	// backward for a lobby ID. Another system that accepts host-only
	// actions keeps the highest (lobby, term) it has seen and refuses an
	// action stamped with an older term.
	Term uint64
	// Members are ordered by join sequence.
	Members []Member
	// Locked: the lobby refuses new players (see [Lock]).
	Locked bool
	// LockedBy is who set the lock: "" for the server, else the member
	// (the host) who locked. A member's lock lasts while the lobby has
	// members: the transition that removes the last one also unlocks it,
	// so the players who emptied a lobby never leave it shut to everyone.
	// The server's lock stays until the server (or a host) unlocks. ""
	// while unlocked.
	LockedBy string
	// Overrides are this lobby's own policy settings (see [Configure]).
	Overrides Overrides
	// Blocks holds, for each kicked player still blocked, the moment its
	// block ends: until then (a join whose effective time is before it) it
	// may not join. A block whose end has passed means nothing and is
	// dropped the next time the lobby is written. The set is shared between
	// clones and replaced, never changed (see [Blocks]).
	Blocks Blocks
	// Updated is the time of the last transition that changed the state;
	// zero for a lobby never written.
	Updated time.Time
}

// NewState returns an empty lobby whose counters start above floor: revision
// floor, first join sequence and generation floor+1. A lobby never seen
// before has floor 0; a lobby created again after it was reclaimed passes
// the floor its store kept, so no revision, join sequence or generation is
// ever repeated for an ID.
func NewState(id string, floor uint64) *State {
	return &State{ID: id, Revision: floor, Term: floor, NextJoinSeq: floor + 1, NextGen: floor + 1}
}

// Reborn returns the empty lobby created again under a deleted lobby's ID:
// its counters start above floor (as NewState's), and its last transition
// time is the later of at and, when tomb (the deleted lobby's last state)
// is given, tomb's own, so time never runs backward for an ID. It keeps
// every block of tomb that has not ended by then, since a block lasts to
// its end whatever happens to the lobby, and starts unlocked and without
// overrides. tomb is nil where the store no longer keeps the deleted
// record (it keeps it while any block is in force).
func Reborn(id string, floor uint64, at time.Time, tomb *State) *State {
	st := NewState(id, floor)
	st.Updated = at.Round(0).UTC()
	if tomb != nil {
		if tomb.Updated.After(st.Updated) {
			st.Updated = tomb.Updated
		}
		st.Blocks = tomb.Blocks.endedBy(st.Updated)
	}
	return st
}

// Floor is the value to keep when this lobby's record is deleted: it is at
// least every revision, host term, join sequence and generation it issued.
// (The lock and the overrides are not counters: a lobby created again
// starts without them. The blocks outlive the record: see BlockedUntil.)
func (s *State) Floor() uint64 {
	return max(s.Revision, s.Term, s.NextJoinSeq-1, s.NextGen-1)
}

// BlockedUntil returns the latest end of a block still stored, or the zero
// time if there is none. When the lobby's record is deleted, its blocks must
// be kept until this moment: a lobby created again under the ID starts with
// every block that has not ended by then.
func (s *State) BlockedUntil() time.Time {
	return s.Blocks.Last()
}

// policy returns the policy in force in s under the base policy p: p with
// the lobby's overrides applied.
func (s *State) policy(p Policy) Policy {
	if s.Overrides.Set == 0 {
		return p
	}
	return s.Overrides.Apply(p)
}

// Member returns the member with the given player ID, or nil.
func (s *State) Member(player string) *Member {
	for i := range s.Members {
		if s.Members[i].Player == player {
			return &s.Members[i]
		}
	}
	return nil
}

func (s *State) memberIndex(player string) int {
	for i := range s.Members {
		if s.Members[i].Player == player {
			return i
		}
	}
	return -1
}

// NextDeadline returns the earliest pending stored deadline (a connection's
// heartbeat deadline or a member's reconnect deadline), or the zero time if
// there is none. It is the moment the lobby next has work to do on its own.
//
// It leaves out the deadlines of the sessions that hold connections: those
// live in the sessions' own records, not in the lobby, so a sweeper learns
// of an ended session from the store's list of expired sessions and then
// applies it to each lobby the session holds.
func (s *State) NextDeadline() time.Time {
	return s.nextDue(sessionEnds{})
}

// nextDue is NextDeadline with the session deadlines e knows.
func (s *State) nextDue(e sessionEnds) time.Time {
	var next time.Time
	for i := range s.Members {
		m := &s.Members[i]
		if !m.ReconnectBy.IsZero() && (next.IsZero() || m.ReconnectBy.Before(next)) {
			next = m.ReconnectBy
		}
		for _, c := range m.Conns {
			if d := e.end(c); !d.IsZero() && (next.IsZero() || d.Before(next)) {
				next = d
			}
		}
	}
	return next
}

// Sessions returns the sessions that hold live connections in the lobby,
// sorted, without duplicates; nil if none does. It is what a store indexes
// so that a session's end can find the lobbies it holds.
func (s *State) Sessions() []string {
	var out []string
	for i := range s.Members {
		for _, c := range s.Members[i].Conns {
			if c.Session != "" {
				out = append(out, c.Session)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// View returns the member view clients see: every member in join-sequence
// order with its status, attributes and, while reconnecting, its reconnect
// deadline. The slice and the maps in it are new; the caller owns them.
func (s *State) View() []MemberView {
	if len(s.Members) == 0 {
		return nil
	}
	v := make([]MemberView, len(s.Members))
	for i := range s.Members {
		m := &s.Members[i]
		v[i] = MemberView{Player: m.Player, JoinSeq: m.JoinSeq, Status: m.Status(), ReconnectDeadline: m.ReconnectBy}
		if len(m.Attrs) > 0 {
			v[i].Attrs = maps.Clone(m.Attrs)
		}
	}
	return v
}

// Clone returns a deep copy of s that shares nothing with it that either
// could change (the blocks, which never change, are shared).
func (s *State) Clone() *State {
	c := *s
	if s.Members != nil {
		c.Members = make([]Member, len(s.Members))
		for i, m := range s.Members {
			m.Attrs = maps.Clone(m.Attrs)
			m.Conns = append([]Conn(nil), m.Conns...)
			c.Members[i] = m
		}
	}
	return &c
}
