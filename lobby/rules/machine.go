package rules

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/lobbyhost/lobbyhost/lease"
)

// The range of transition times. Deadlines are stored as nanoseconds since
// 1970 in an int64, which reaches from 1677 to 2262; this range leaves room
// for a year of grace on either side.
var (
	minTime = time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Machine is the pure lobby state machine: every rule of membership,
// presence and succession in one function, [Machine.Apply], with time as an
// argument. It holds only its validated policy, so one Machine serves any
// number of lobbies and goroutines.
type Machine struct {
	p Policy
}

// NewMachine returns a Machine for policy p, or an error wrapping
// ErrInvalidPolicy.
func NewMachine(p Policy) (*Machine, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Machine{p: p}, nil
}

// Policy returns the machine's policy.
func (m *Machine) Policy() Policy { return m.p }

// Apply runs cmd against s at time now, updating s in place, and returns
// what happened.
//
// Steps, in order:
//
//  1. The command and now are validated; invalid input returns an error
//     (ErrInvalidID, ErrInvalidAttrs, ErrInvalidCommand, ErrInvalidPolicy
//     for Configure's overrides, ErrInvalidTime) before anything else.
//  2. now is raised to s.Updated if it is earlier, so time never runs
//     backward inside a lobby.
//  3. Every deadline at or before now is applied in (deadline, join
//     sequence, player, generation) order, each as of its own deadline:
//     heartbeat deadlines, and the deadlines in cmd.SessionDeadlines of
//     the sessions holding generations, end their generation (timed_out
//     when it was the member's last), reconnect deadlines remove their member
//     (lease_expired), and an emptied host seat goes to the successor
//     eligible at that moment.
//  4. The command is judged on the caught-up lobby.
//
// If the command is refused (ErrBlocked, ErrLocked, ErrLobbyFull,
// ErrNotHost, ErrNotMember, ErrNotEligible, ErrTooManyBlocks,
// ErrSessionEnded), s is left
// exactly as it was: a refused command commits nothing, not even the
// catch-up. Otherwise s is the new state, and Result.Changed reports whether
// it differs from the old one (and so must be stored). A lobby that was
// never written (NewState) has Changed set only by a Join, a Configure or a
// server's Lock that took effect: nothing else creates a lobby's record.
//
// The rules run under the machine's policy with the lobby's overrides
// (State.Overrides) applied.
//
// Apply never reads a clock and never retains cmd.Attrs or any slice of the
// result in s. It is deterministic: the same state, command and time always
// yield the same result. Without session deadlines in cmd, Apply judges
// every session-held generation alive.
func (m *Machine) Apply(s *State, cmd Command, now time.Time) (Result, error) {
	if s == nil {
		return Result{}, fmt.Errorf("%w: nil state", ErrInvalidCommand)
	}
	if err := checkCommand(cmd); err != nil {
		return Result{}, err
	}
	return m.ApplyValidated(s, cmd, now)
}

// ApplyValidated is Apply for a command whose Validate returned nil: it
// skips that check (a driver validates each command once, before it
// touches its store, and then applies it on every compare-and-set attempt).
// Given a command that fails Validate, its outcome is undefined.
func (m *Machine) ApplyValidated(s *State, cmd Command, now time.Time) (Result, error) {
	if err := checkTime(now); err != nil {
		return Result{}, err
	}
	now = now.Round(0).UTC()
	if now.Before(s.Updated) {
		now = s.Updated
	}
	if m.refusable(cmd) {
		if next := s.nextDue(newSessionEnds(cmd.SessionDeadlines, s)); !next.IsZero() && !next.After(now) {
			// Catching up changes s; work on a copy so that a refusal
			// leaves s untouched.
			work := s.Clone()
			r, err := m.apply(work, cmd, now)
			if err != nil {
				return Result{}, err
			}
			*s = *work
			return r, nil
		}
	}
	return m.apply(s, cmd, now)
}

func checkTime(now time.Time) error {
	if now.Before(minTime) || now.After(maxTime) {
		return fmt.Errorf("%w: %v", ErrInvalidTime, now)
	}
	return nil
}

// MaxBlock is the longest block a Kick may impose.
const MaxBlock = lease.MaxDuration

// Validate reports whether the command's own values are usable (its IDs,
// attributes, block, overrides), before any state is seen: the first of the
// checks Apply makes. The error wraps ErrInvalidID, ErrInvalidAttrs,
// ErrInvalidCommand or ErrInvalidPolicy.
func (cmd Command) Validate() error { return checkCommand(cmd) }

// checkCommand validates what a command carries, before any state is seen.
func checkCommand(cmd Command) error {
	switch cmd.Op {
	case OpTick:
		return nil
	case OpJoin:
		if err := validateAttrs(cmd.Attrs); err != nil {
			return err
		}
		if cmd.Session != "" {
			if err := CheckID("session ID", cmd.Session); err != nil {
				return err
			}
		}
	case OpUpdate:
		if err := validateAttrs(cmd.Attrs); err != nil {
			return err
		}
	case OpTransferHost:
		if err := CheckID("ID of the new host", cmd.To); err != nil {
			return err
		}
	case OpKick:
		if err := CheckID("ID of the kicked player", cmd.To); err != nil {
			return err
		}
		if cmd.Block < 0 || cmd.Block > MaxBlock {
			return fmt.Errorf("%w: block %v outside 0 to %v", ErrInvalidCommand, cmd.Block, MaxBlock)
		}
		return checkActor(cmd.Player)
	case OpLock:
		return checkActor(cmd.Player)
	case OpConfigure:
		return cmd.Overrides.Validate()
	case OpDrain:
		return CheckID("session ID", cmd.Session)
	case OpHeartbeat, OpDisconnect, OpTimeOut, OpExpireLease, OpLeave:
	default:
		return fmt.Errorf("%w: unknown operation %d", ErrInvalidCommand, cmd.Op)
	}
	if err := CheckID("player ID", cmd.Player); err != nil {
		return err
	}
	return nil
}

// checkActor validates the actor of a command the server may also give
// ("" for the server).
func checkActor(actor string) error {
	if actor == "" {
		return nil
	}
	return CheckID("actor ID", actor)
}

// refusable reports whether cmd can be refused after the catch-up.
func (m *Machine) refusable(cmd Command) bool {
	switch cmd.Op {
	case OpJoin, OpTransferHost, OpKick, OpLock, OpUpdate:
		return true
	}
	return false
}

// step is the bookkeeping of one Apply call.
type step struct {
	m *Machine
	s *State
	r *Result
	// ends resolves the connections' own deadlines, session deadlines
	// included, as of the start of the transition.
	ends sessionEnds
	// trigger is the ExpireLease being applied, if any; fired reports
	// that the catch-up applied the deadline it names.
	trigger *Command
	fired   bool
}

func (m *Machine) apply(s *State, cmd Command, now time.Time) (Result, error) {
	var r Result
	st := step{m: m, s: s, r: &r, ends: newSessionEnds(cmd.SessionDeadlines, s)}
	if cmd.Op == OpExpireLease {
		st.trigger = &cmd
	}
	last, caughtUp := st.catchUp(now)

	var changed bool
	var err error
	switch cmd.Op {
	case OpJoin:
		changed, err = st.join(cmd, now)
	case OpHeartbeat:
		changed = st.heartbeat(cmd, now)
	case OpDisconnect:
		changed = st.disconnect(cmd, now, EndClosed, ReasonDisconnected)
	case OpTimeOut:
		changed = st.disconnect(cmd, now, EndTimedOut, ReasonTimedOut)
	case OpDrain:
		changed = st.drain(cmd.Session, now)
	case OpLeave:
		changed = st.leave(cmd, now)
	case OpTransferHost:
		changed, err = st.transferHost(cmd, now)
	case OpUpdate:
		changed, err = st.update(cmd, now)
	case OpKick:
		changed, err = st.kick(cmd, now)
	case OpLock:
		changed, err = st.lock(cmd, now)
	case OpConfigure:
		changed = st.configure(cmd, now)
	case OpExpireLease:
		// The catch-up did all there was to do; the trigger is judged
		// on the caught-up lobby.
		r.Outcome = OutcomeDone
		if !st.fired {
			r.Outcome = pendingExpiry(s, cmd.Player, cmd.Gen)
		}
	case OpTick:
		r.Outcome = OutcomeNoop
		if caughtUp {
			r.Outcome = OutcomeApplied
		}
	}
	if err != nil {
		return Result{}, err
	}
	switch {
	case changed:
		s.Updated = now
	case caughtUp:
		s.Updated = last
	}
	if changed || caughtUp {
		// The record is written: blocks that ended by its time go (at no
		// cost while none has).
		s.Blocks = s.Blocks.endedBy(s.Updated)
	}
	r.Changed = changed || caughtUp
	r.Revision = s.Revision
	return r, nil
}

// pendingExpiry classifies an ExpireLease trigger whose deadline the
// catch-up did not apply: the deadline it names (the heartbeat deadline of
// gen, or the reconnect deadline of a member whose most recently attached
// generation is gen) is still pending, or it names nothing pending at all.
// A session-held generation stores no deadline to name: stale.
func pendingExpiry(s *State, player string, gen uint64) Outcome {
	mem := s.Member(player)
	if mem == nil {
		return OutcomeStale
	}
	var d time.Time
	if i := mem.connIndex(gen); i >= 0 {
		d = mem.Conns[i].Deadline
	} else if len(mem.Conns) == 0 && mem.LastGen == gen {
		d = mem.ReconnectBy
	}
	if d.IsZero() {
		return OutcomeStale
	}
	return OutcomeNotDue
}

// catchUp applies every deadline at or before now, in order. It returns the
// last deadline applied and whether it applied any.
func (st *step) catchUp(now time.Time) (last time.Time, any bool) {
	s := st.s
	for {
		mi, ci, d := st.earliest()
		if mi < 0 || d.After(now) {
			return last, any
		}
		last, any = d, true
		mem := &s.Members[mi]
		if t := st.trigger; t != nil && mem.Player == t.Player &&
			((ci >= 0 && mem.Conns[ci].Gen == t.Gen) || (ci < 0 && mem.LastGen == t.Gen)) {
			st.fired = true
		}
		if ci >= 0 {
			st.r.Ended = append(st.r.Ended, Ended{Player: mem.Player, Gen: mem.Conns[ci].Gen, Cause: EndTimedOut, At: d})
			mem.Conns = slices.Delete(mem.Conns, ci, ci+1)
			if len(mem.Conns) == 0 {
				mem.ReconnectBy = st.policy().lease().ReconnectDeadline(d)
				st.emit(ReasonTimedOut, mem.Player, d, s.Host)
			}
			continue
		}
		st.remove(mi, ReasonLeaseExpired, d)
	}
}

// earliest finds the first pending deadline in (deadline, join sequence,
// player, generation) order, a session's deadline counting as the own
// deadline of each connection it holds: members are kept in join-sequence order and
// connections in generation order, so the first minimum met while scanning
// is the one. ci is -1 for a reconnect deadline; mi is -1 if none is pending.
func (st *step) earliest() (mi, ci int, d time.Time) {
	mi, ci = -1, -1
	for i := range st.s.Members {
		mem := &st.s.Members[i]
		if !mem.ReconnectBy.IsZero() && (mi < 0 || mem.ReconnectBy.Before(d)) {
			mi, ci, d = i, -1, mem.ReconnectBy
		}
		for j, c := range mem.Conns {
			if e := st.ends.end(c); !e.IsZero() && (mi < 0 || e.Before(d)) {
				mi, ci, d = i, j, e
			}
		}
	}
	return mi, ci, d
}

// remove takes member i out of the lobby at time t, ends its connections,
// fills the host seat if it held it, and emits the change.
func (st *step) remove(i int, reason Reason, t time.Time) {
	s := st.s
	mem := &s.Members[i]
	player := mem.Player
	cause := EndLeft
	if reason == ReasonKicked {
		cause = EndKicked
	}
	for _, c := range mem.Conns {
		st.r.Ended = append(st.r.Ended, Ended{Player: player, Gen: c.Gen, Cause: cause, At: t})
	}
	s.Members = slices.Delete(s.Members, i, i+1)
	prev := s.Host
	if s.Host == player {
		s.Host = ""
		st.fillHost(t)
	}
	if len(s.Members) == 0 && s.LockedBy != "" {
		// A member's lock ends with the last member: the lobby is not
		// left shut to everyone, the players who locked it included.
		s.Locked, s.LockedBy = false, ""
	}
	st.emit(reason, player, t, prev)
}

// fillHost gives an empty host seat to the successor eligible at t, if any.
func (st *step) fillHost(t time.Time) {
	s, rule := st.s, st.m.p.Succession
	best := -1
	for i := range s.Members {
		mem := &s.Members[i]
		if !mem.liveAt(t, st.ends) || !rule.IsEligible(mem.candidate()) {
			continue
		}
		if best < 0 || rule.Less(mem.candidate(), s.Members[best].candidate()) {
			best = i
		}
	}
	if best >= 0 {
		s.Host = s.Members[best].Player
	}
}

// policy is the policy in force in the lobby now: the machine's, with the
// lobby's overrides applied.
func (st *step) policy() Policy { return st.s.policy(st.m.p) }

// eligible reports whether mem may host at t.
func (st *step) eligible(mem *Member, t time.Time) bool {
	return mem.liveAt(t, st.ends) && st.m.p.Succession.IsEligible(mem.candidate())
}

// emit records one visible change: the next revision and its event.
func (st *step) emit(reason Reason, subject string, at time.Time, prevHost string) {
	s := st.s
	s.Revision++
	if s.Host != prevHost {
		s.Term++
	}
	st.r.Events = append(st.r.Events, Event{
		Lobby:     s.ID,
		Revision:  s.Revision,
		Term:      s.Term,
		Host:      s.Host,
		PrevHost:  prevHost,
		Locked:    s.Locked,
		Overrides: s.Overrides,
		Members:   s.View(),
		Reason:    reason,
		Subject:   subject,
		At:        at,
	})
}

func (st *step) newGen() uint64 {
	g := st.s.NextGen
	st.s.NextGen++
	return g
}

// ownAttrs returns a copy of attrs for a member to keep; none is nil.
func ownAttrs(attrs map[string]string) map[string]string {
	if len(attrs) == 0 {
		return nil
	}
	return maps.Clone(attrs)
}

func (st *step) join(cmd Command, now time.Time) (bool, error) {
	s, p := st.s, st.policy()
	conn := Conn{Deadline: p.lease().HeartbeatDeadline(now)}
	if cmd.Session != "" {
		// A session that has ended attaches nothing: its process no
		// longer speaks for its sockets (its clock may have lagged the
		// lobby's last transition, past the session's deadline).
		if end := st.ends.end(Conn{Session: cmd.Session}); !end.IsZero() && !now.Before(end) {
			return false, &RefusalError{Err: ErrSessionEnded, Lobby: s.ID, Player: cmd.Player}
		}
		// Its process keeps the heartbeat deadline; the lobby keeps who
		// vouches for it.
		conn = Conn{Session: cmd.Session}
	}
	prev := s.Host
	i := s.memberIndex(cmd.Player)
	if i < 0 {
		// A new player: refused for a block, then the lock, then a full
		// lobby.
		if end, ok := s.Blocks.Until(cmd.Player); ok && now.Before(end) {
			return false, &RefusalError{Err: ErrBlocked, Lobby: s.ID, Player: cmd.Player, Detail: "blocked until " + end.Format(time.RFC3339Nano)}
		}
		if s.Locked {
			return false, &RefusalError{Err: ErrLocked, Lobby: s.ID, Player: cmd.Player}
		}
		if p.MaxMembers > 0 && len(s.Members) >= p.MaxMembers {
			return false, &RefusalError{Err: ErrLobbyFull, Lobby: s.ID, Player: cmd.Player, Detail: strconv.Itoa(len(s.Members)) + " members"}
		}
		conn.Gen = st.newGen()
		s.Members = append(s.Members, Member{
			Player:  cmd.Player,
			JoinSeq: s.NextJoinSeq,
			Attrs:   ownAttrs(cmd.Attrs),
			Conns:   []Conn{conn},
			LastGen: conn.Gen,
		})
		s.NextJoinSeq++
		i = len(s.Members) - 1
		if s.Host == "" {
			st.fillHost(now)
		}
		st.emit(ReasonJoined, cmd.Player, now, prev)
	} else {
		mem := &s.Members[i]
		conn.Gen = st.newGen()
		attrsChanged := cmd.Attrs != nil && !maps.Equal(cmd.Attrs, mem.Attrs)
		if attrsChanged {
			mem.Attrs = ownAttrs(cmd.Attrs)
		}
		reconnecting := len(mem.Conns) == 0
		if reconnecting {
			st.r.Away = max(0, now.Sub(mem.ReconnectBy.Add(-p.Grace)))
		}
		if n := p.MaxConnectionsPerPlayer; n > 0 && len(mem.Conns) >= n {
			drop := len(mem.Conns) - n + 1
			for _, c := range mem.Conns[:drop] {
				st.r.Ended = append(st.r.Ended, Ended{Player: mem.Player, Gen: c.Gen, Cause: EndSuperseded, At: now})
			}
			mem.Conns = slices.Delete(mem.Conns, 0, drop)
		}
		mem.Conns = append(mem.Conns, conn)
		mem.LastGen = conn.Gen
		mem.ReconnectBy = time.Time{}
		if s.Host == "" {
			st.fillHost(now)
		}
		switch {
		case reconnecting:
			st.emit(ReasonReconnected, cmd.Player, now, prev)
		case attrsChanged:
			// A further tab carrying other attributes: a visible update
			// (which may also have made its member the host of an empty
			// seat).
			st.emit(ReasonUpdated, cmd.Player, now, prev)
		}
	}
	st.r.Outcome = OutcomeApplied
	st.r.Gen = conn.Gen
	st.r.JoinSeq = s.Members[i].JoinSeq
	return true, nil
}

// liveConn finds generation gen of player among the live connections,
// or returns a nil member: the report is stale.
func (st *step) liveConn(player string, gen uint64) (*Member, int) {
	mem := st.s.Member(player)
	if mem == nil {
		return nil, -1
	}
	i := mem.connIndex(gen)
	if i < 0 {
		return nil, -1
	}
	return mem, i
}

func (st *step) heartbeat(cmd Command, now time.Time) bool {
	mem, i := st.liveConn(cmd.Player, cmd.Gen)
	if mem == nil {
		st.r.Outcome = OutcomeStale
		return false
	}
	st.r.Outcome = OutcomeApplied
	if mem.Conns[i].Session != "" {
		// Its heartbeat deadline lives in the memory of the process that
		// holds its socket: nothing stored moves.
		return false
	}
	if old := mem.Conns[i].Deadline; !old.IsZero() {
		st.r.Slack = old.Sub(now)
	}
	d := st.policy().lease().HeartbeatDeadline(now)
	if mem.Conns[i].Deadline.Equal(d) {
		return false
	}
	mem.Conns[i].Deadline = d
	return true
}

// disconnect ends a live generation now: its socket closed (Disconnect) or
// went silent (TimeOut). The member's last one turns it reconnecting.
func (st *step) disconnect(cmd Command, now time.Time, cause EndCause, reason Reason) bool {
	mem, i := st.liveConn(cmd.Player, cmd.Gen)
	if mem == nil {
		st.r.Outcome = OutcomeStale
		return false
	}
	st.r.Outcome = OutcomeApplied
	st.r.Ended = append(st.r.Ended, Ended{Player: mem.Player, Gen: cmd.Gen, Cause: cause, At: now})
	mem.Conns = slices.Delete(mem.Conns, i, i+1)
	if len(mem.Conns) == 0 {
		mem.ReconnectBy = st.policy().lease().ReconnectDeadline(now)
		st.emit(reason, mem.Player, now, st.s.Host)
	}
	return true
}

// drain ends every live generation held by session now, as closes.
func (st *step) drain(session string, now time.Time) bool {
	st.r.Outcome = OutcomeNoop
	for i := range st.s.Members {
		mem := &st.s.Members[i]
		kept := mem.Conns[:0]
		ended := false
		for _, c := range mem.Conns {
			if c.Session != session {
				kept = append(kept, c)
				continue
			}
			ended = true
			st.r.Ended = append(st.r.Ended, Ended{Player: mem.Player, Gen: c.Gen, Cause: EndClosed, At: now})
		}
		if !ended {
			continue
		}
		clear(mem.Conns[len(kept):])
		mem.Conns = kept
		st.r.Outcome = OutcomeApplied
		if len(mem.Conns) == 0 {
			mem.ReconnectBy = st.policy().lease().ReconnectDeadline(now)
			st.emit(ReasonDisconnected, mem.Player, now, st.s.Host)
		}
	}
	return st.r.Outcome == OutcomeApplied
}

func (st *step) leave(cmd Command, now time.Time) bool {
	i := st.s.memberIndex(cmd.Player)
	if i < 0 {
		st.r.Outcome = OutcomeNoop
		return false
	}
	st.r.Outcome = OutcomeApplied
	st.remove(i, ReasonLeft, now)
	return true
}

func (st *step) transferHost(cmd Command, now time.Time) (bool, error) {
	s := st.s
	if s.Host == "" || s.Host != cmd.Player {
		return false, &RefusalError{Err: ErrNotHost, Lobby: s.ID, Player: cmd.Player, Target: cmd.To}
	}
	to := s.Member(cmd.To)
	if to == nil {
		return false, &RefusalError{Err: ErrNotMember, Lobby: s.ID, Player: cmd.Player, Target: cmd.To}
	}
	if !st.eligible(to, now) {
		return false, &RefusalError{Err: ErrNotEligible, Lobby: s.ID, Player: cmd.Player, Target: cmd.To}
	}
	if cmd.To == cmd.Player {
		st.r.Outcome = OutcomeNoop
		return false, nil
	}
	prev := s.Host
	s.Host = cmd.To
	st.r.Outcome = OutcomeApplied
	st.emit(ReasonHostTransferred, cmd.To, now, prev)
	return true, nil
}

func (st *step) update(cmd Command, now time.Time) (bool, error) {
	s := st.s
	mem := s.Member(cmd.Player)
	if mem == nil {
		return false, &RefusalError{Err: ErrNotMember, Lobby: s.ID, Player: cmd.Player}
	}
	if maps.Equal(cmd.Attrs, mem.Attrs) {
		st.r.Outcome = OutcomeNoop
		return false, nil
	}
	mem.Attrs = ownAttrs(cmd.Attrs)
	prev := s.Host
	if s.Host == "" {
		// New attributes may make the member eligible; they never unseat
		// a host.
		st.fillHost(now)
	}
	st.r.Outcome = OutcomeApplied
	st.emit(ReasonUpdated, cmd.Player, now, prev)
	return true, nil
}

// hostOrServer checks that actor may give a host-only command: it is the
// current host (in its grace too), or "" for the server.
func (st *step) hostOrServer(actor, target string) error {
	if actor != "" && st.s.Host != actor {
		return &RefusalError{Err: ErrNotHost, Lobby: st.s.ID, Player: actor, Target: target}
	}
	return nil
}

func (st *step) kick(cmd Command, now time.Time) (bool, error) {
	s := st.s
	if err := st.hostOrServer(cmd.Player, cmd.To); err != nil {
		return false, err
	}
	i := s.memberIndex(cmd.To)
	if i < 0 {
		return false, &RefusalError{Err: ErrNotMember, Lobby: s.ID, Player: cmd.Player, Target: cmd.To}
	}
	st.r.Outcome = OutcomeApplied
	if cmd.To == cmd.Player {
		// The host kicking itself leaves: no block.
		st.remove(i, ReasonLeft, now)
		return true, nil
	}
	if cmd.Block > 0 {
		// Blocks in force are bounded: past the bound a kick that would
		// add one is refused (one replacing the target's own block in
		// force adds none). Ended blocks do not count.
		n := s.Blocks.inForce(now)
		if end, ok := s.Blocks.Until(cmd.To); ok && end.After(now) {
			n--
		}
		if limit := st.policy().blockLimit(); n >= limit {
			return false, &RefusalError{Err: ErrTooManyBlocks, Lobby: s.ID, Player: cmd.Player, Target: cmd.To, Detail: strconv.Itoa(n) + " blocks in force"}
		}
		s.Blocks = s.Blocks.with(cmd.To, now.Add(cmd.Block), now)
	}
	st.remove(i, ReasonKicked, now)
	return true, nil
}

func (st *step) lock(cmd Command, now time.Time) (bool, error) {
	s := st.s
	if err := st.hostOrServer(cmd.Player, ""); err != nil {
		return false, err
	}
	if s.Locked == cmd.Locked {
		// Locking a locked lobby changes nothing, also not who locked it.
		st.r.Outcome = OutcomeNoop
		return false, nil
	}
	s.Locked, s.LockedBy = cmd.Locked, ""
	if cmd.Locked {
		s.LockedBy = cmd.Player
	}
	reason := ReasonUnlocked
	if s.Locked {
		reason = ReasonLocked
	}
	st.r.Outcome = OutcomeApplied
	st.emit(reason, cmd.Player, now, s.Host)
	return true, nil
}

func (st *step) configure(cmd Command, now time.Time) bool {
	s := st.s
	o := cmd.Overrides.normalized()
	if o == s.Overrides {
		st.r.Outcome = OutcomeNoop
		return false
	}
	s.Overrides = o
	st.r.Outcome = OutcomeApplied
	st.emit(ReasonConfigured, "", now, s.Host)
	return true
}
