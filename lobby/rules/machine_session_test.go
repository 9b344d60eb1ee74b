package rules

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// heldJoin joins player through session and returns its generation.
func (r *lobbyRun) heldJoin(player, session string) uint64 {
	r.t.Helper()
	return r.do(Join(player, nil).WithSession(session)).Gen
}

func TestSessionHeldJoinStoresNoHeartbeatDeadline(t *testing.T) {
	r := newRun(t, testPolicy())
	g := r.heldJoin("p-17", "sess-a")
	c := r.member("p-17").Conns[0]
	if c.Gen != g || c.Session != "sess-a" || !c.Deadline.IsZero() {
		t.Fatalf("held connection %+v, want generation %d of sess-a with no deadline", c, g)
	}
	if d := r.s.NextDeadline(); !d.IsZero() {
		t.Fatalf("NextDeadline = %v with only a session-held connection, want none", d)
	}
	// A later join without a session gets a stored deadline, as ever.
	r.advance(time.Second)
	r.join("p-23")
	if c := r.member("p-23").Conns[0]; c.Session != "" || !c.Deadline.Equal(r.now.Add(testPolicy().HeartbeatTTL)) {
		t.Fatalf("unheld connection %+v", c)
	}
	if d := r.s.NextDeadline(); !d.Equal(r.now.Add(testPolicy().HeartbeatTTL)) {
		t.Fatalf("NextDeadline = %v, want the unheld connection's", d)
	}
}

func TestJoinRefusesAnInvalidSessionID(t *testing.T) {
	m, _ := NewMachine(testPolicy())
	for _, id := range []string{"\xff", string(make([]byte, MaxIDLen+1))} {
		s := NewState("lobby-1", 0)
		if _, err := m.Apply(s, Join("p-17", nil).WithSession(id), t0); !errors.Is(err, ErrInvalidID) {
			t.Errorf("join in session %q: %v, want ErrInvalidID", id, err)
		}
		if err := Join("p-17", nil).WithSession(id).Validate(); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Validate of a join in session %q: %v, want ErrInvalidID", id, err)
		}
	}
}

func TestStateSessionsListsHoldingSessionsSortedOnce(t *testing.T) {
	r := newRun(t, testPolicy())
	if got := r.s.Sessions(); got != nil {
		t.Fatalf("Sessions of an empty lobby = %v, want nil", got)
	}
	r.heldJoin("p-17", "sess-b")
	r.heldJoin("p-23", "sess-a")
	g := r.heldJoin("p-23", "sess-b")
	r.join("p-41")
	if got, want := r.s.Sessions(), []string{"sess-a", "sess-b"}; !slices.Equal(got, want) {
		t.Fatalf("Sessions = %v, want %v", got, want)
	}
	r.do(Disconnect("p-23", g))
	r.do(Leave("p-17"))
	if got, want := r.s.Sessions(), []string{"sess-a"}; !slices.Equal(got, want) {
		t.Fatalf("Sessions after sess-b's last connection ended = %v, want %v", got, want)
	}
}

func TestHeartbeatOnSessionHeldGenerationMovesNothing(t *testing.T) {
	r := newRun(t, testPolicy())
	g := r.heldJoin("p-17", "sess-a")
	r.advance(time.Second)
	before := r.s.Clone()
	res := r.do(Heartbeat("p-17", g))
	if res.Outcome != OutcomeApplied || res.Changed || res.Slack != 0 || len(res.Events) > 0 {
		t.Fatalf("heartbeat on a held generation: %+v, want applied and nothing to store", res)
	}
	if diff := cmp.Diff(before, r.s, cmpState); diff != "" {
		t.Fatalf("heartbeat changed the state:\n%s", diff)
	}
	// A heartbeat on an ended generation is stale, held or not.
	r.do(Disconnect("p-17", g))
	if res := r.do(Heartbeat("p-17", g)); res.Outcome != OutcomeStale {
		t.Fatalf("heartbeat on an ended held generation: %v, want stale", res.Outcome)
	}
}

func TestSessionWithoutAPassedDeadlineIsAlive(t *testing.T) {
	r := newRun(t, testPolicy())
	r.heldJoin("p-17", "sess-a")
	r.advance(time.Hour)
	// No deadlines given (Apply as before sessions), a deadline still
	// ahead, and a deadline of another session: nothing ends.
	for _, d := range []SessionDeadlines{nil, {"sess-a": r.now.Add(time.Nanosecond)}, {"sess-b": t0}} {
		if res := r.do(Tick().WithSessionDeadlines(d)); res.Changed || len(res.Ended) > 0 {
			t.Fatalf("tick with %v: %+v, want nothing", d, res)
		}
	}
	r.wantStatus("p-17", StatusOnline)
}

// TestSessionDeadlineEndsItsGenerationsAtTheDeadline: an ended session's
// generations end at its deadline, as a passed heartbeat deadline would:
// timed_out for a member's last, the grace counted from the deadline, the
// host seat passing to the successor live at that moment.
func TestSessionDeadlineEndsItsGenerationsAtTheDeadline(t *testing.T) {
	p := testPolicy()
	r := newRun(t, p)
	g17 := r.heldJoin("p-17", "sess-a")
	r.join("p-23")
	g41 := r.heldJoin("p-41", "sess-a")
	r.heldJoin("p-41", "sess-b") // a second tab, held elsewhere
	r.wantHost("p-17")
	end := t0.Add(4 * time.Second)
	from := len(r.events)
	r.at(6 * time.Second)
	res := r.do(Tick().WithSessionDeadlines(SessionDeadlines{"sess-a": end, "sess-b": t0.Add(time.Hour)}))
	wantEnded := []Ended{
		{Player: "p-17", Gen: g17, Cause: EndTimedOut, At: end},
		{Player: "p-41", Gen: g41, Cause: EndTimedOut, At: end},
	}
	if diff := cmp.Diff(wantEnded, res.Ended); diff != "" {
		t.Fatalf("ended (-want +got):\n%s", diff)
	}
	if got, want := r.reasonsSince(from), []string{"timed_out:p-17"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v (p-41 keeps a tab)", got, want)
	}
	if e := r.lastEvent(); !e.At.Equal(end) {
		t.Fatalf("event at %v, want the session's deadline %v", e.At, end)
	}
	if mem := r.member("p-17"); !mem.ReconnectBy.Equal(end.Add(p.Grace)) {
		t.Fatalf("reconnect deadline %v, want the session's deadline plus grace", mem.ReconnectBy)
	}
	if !r.s.Updated.Equal(end) {
		t.Fatalf("last transition %v, want the deadline applied %v", r.s.Updated, end)
	}
	r.wantHost("p-17") // the host keeps the seat in its grace
	if got, want := r.s.Sessions(), []string{"sess-b"}; !slices.Equal(got, want) {
		t.Fatalf("Sessions = %v, want %v", got, want)
	}
	// Its grace runs out: the seat goes to the first member live then.
	r.at(4*time.Second + p.Grace)
	r.do(Tick())
	r.wantHost("p-23")
}

// TestSessionEndsOrderWithTheLobbysOtherDeadlines: deadlines are applied
// in (deadline, join sequence, player, generation) order whether stored or
// a session's, each judged at its own time, in one transition.
func TestSessionEndsOrderWithTheLobbysOtherDeadlines(t *testing.T) {
	p := testPolicy()
	p.HeartbeatTTL = 5 * time.Second
	r := newRun(t, p)
	r.join("p-17")          // stored deadline t0+5s
	r.heldJoin("p-23", "a") // session a ends at t0+5s too
	r.heldJoin("p-41", "b") // session b ends at t0+3s
	r.join("p-62")          // stored deadline t0+5s
	from := len(r.events)
	r.at(20 * time.Second)
	res := r.do(Tick().WithSessionDeadlines(SessionDeadlines{"a": t0.Add(5 * time.Second), "b": t0.Add(3 * time.Second)}))
	var got []string
	for _, e := range res.Ended {
		got = append(got, e.Player+"@"+e.At.Sub(t0).String())
	}
	want := []string{"p-41@3s", "p-17@5s", "p-23@5s", "p-62@5s"}
	if !slices.Equal(got, want) {
		t.Fatalf("ended %v, want %v", got, want)
	}
	// Each member's last connection: one timed_out revision each.
	if got := r.reasonsSince(from); len(got) < 4 {
		t.Fatalf("events %v, want one timed_out per member", got)
	}
	for _, e := range r.events[from : from+4] {
		if e.Reason != ReasonTimedOut {
			t.Fatalf("event %+v, want timed_out", e)
		}
	}
}

// TestSessionEndedMemberIsNotEligibleAtItsDeadline: at the instant of a
// session's deadline, the members it held are not live: a host seat
// emptied at that instant skips them.
func TestSessionEndedMemberIsNotEligibleAtItsDeadline(t *testing.T) {
	p := testPolicy()
	p.Grace = time.Second
	r := newRun(t, p)
	g := r.join("p-17")
	r.heldJoin("p-23", "a")
	r.join("p-41")
	r.do(Disconnect("p-17", g)) // p-17 (host) removed at t0+1s
	r.at(1500 * time.Millisecond)
	r.do(Tick().WithSessionDeadlines(SessionDeadlines{"a": t0.Add(time.Second)}))
	// At 1 s p-23's session ends (join sequence 2) and p-17's grace ends:
	// (1s, seq 1) p-17 removed first — p-23 is still listed but its session
	// ended at that very instant, so the seat goes to p-41.
	r.wantHost("p-41")
}

// TestSessionDeadlineBeforeLastTransitionCountsAsIt: a session deadline the
// lobby has already moved past (or the zero time, for a session its store no
// longer knows) ends the session's generations at the lobby's last
// transition time, never earlier: time does not run backward in a lobby.
func TestSessionDeadlineBeforeLastTransitionCountsAsIt(t *testing.T) {
	for name, d := range map[string]time.Time{"earlier": t0.Add(time.Second), "unknown": {}} {
		t.Run(name, func(t *testing.T) {
			r := newRun(t, testPolicy())
			r.heldJoin("p-17", "a")
			r.at(5 * time.Second)
			r.join("p-23")
			last := r.s.Updated
			r.at(7 * time.Second)
			res := r.do(Tick().WithSessionDeadlines(SessionDeadlines{"a": d}))
			if len(res.Ended) != 1 || !res.Ended[0].At.Equal(last) || !r.lastEvent().At.Equal(last) {
				t.Fatalf("ended %+v, event at %v; want at the last transition %v", res.Ended, r.lastEvent().At, last)
			}
		})
	}
}

// TestTimeOutEndsGenerationAtItsTime: a process whose in-memory heartbeat
// deadline of a held generation passed reports it; the generation ends at
// the command's time with cause EndTimedOut, and the member's last with
// reason timed_out.
func TestTimeOutEndsGenerationAtItsTime(t *testing.T) {
	p := testPolicy()
	r := newRun(t, p)
	g1 := r.heldJoin("p-17", "a")
	g2 := r.heldJoin("p-17", "a")
	r.join("p-23")
	r.at(10 * time.Second)
	res := r.do(TimeOut("p-17", g1))
	if res.Outcome != OutcomeApplied || len(res.Events) != 0 || !res.Changed ||
		!slices.Equal(res.Ended, []Ended{{Player: "p-17", Gen: g1, Cause: EndTimedOut, At: r.now}}) {
		t.Fatalf("time-out of one of two tabs: %+v", res)
	}
	r.at(12 * time.Second)
	res = r.do(TimeOut("p-17", g2))
	if len(res.Events) != 1 || res.Events[0].Reason != ReasonTimedOut || res.Ended[0].Cause != EndTimedOut {
		t.Fatalf("time-out of the last tab: %+v", res)
	}
	if mem := r.member("p-17"); !mem.ReconnectBy.Equal(r.now.Add(p.Grace)) {
		t.Fatalf("reconnect deadline %v, want %v", mem.ReconnectBy, r.now.Add(p.Grace))
	}
	if res := r.do(TimeOut("p-17", g2)); res.Outcome != OutcomeStale || res.Changed {
		t.Fatalf("time-out of an ended generation: %+v, want stale", res)
	}
	// Stamped before the lobby's last transition, it runs at that time.
	g3 := r.heldJoin("p-41", "a")
	r.at(11 * time.Second)
	r.do(TimeOut("p-41", g3))
	if e := r.lastEvent(); e.Reason != ReasonTimedOut || !e.At.Equal(t0.Add(12*time.Second)) {
		t.Fatalf("late time-out: %+v, want timed_out at the last transition", e)
	}
}

// TestJoinThroughAnEndedSessionIsRefused: a process whose session has
// ended attaches nothing, also when its clock lags the lobby and the
// session ended between its own time and the lobby's last transition.
func TestJoinThroughAnEndedSessionIsRefused(t *testing.T) {
	r := newRun(t, testPolicy())
	r.heldJoin("p-17", "a")
	r.at(5 * time.Second)
	r.join("p-23")
	before := r.s.Clone()
	for _, c := range []struct {
		at  time.Duration
		end time.Time
	}{
		{6 * time.Second, t0.Add(6 * time.Second)}, // ends at the join's time
		{3 * time.Second, t0.Add(4 * time.Second)}, // lagging clock: ended before the lobby's 5 s
		{6 * time.Second, time.Time{}},             // the store no longer knows it
	} {
		r.at(c.at)
		_, err := r.try(Join("p-41", nil).WithSession("a").WithSessionDeadlines(SessionDeadlines{"a": c.end}))
		if !errors.Is(err, ErrSessionEnded) || !IsRefusal(err) {
			t.Fatalf("join at %v through a session ended at %v: %v, want the ErrSessionEnded refusal", c.at, c.end, err)
		}
		if diff := cmp.Diff(before, r.s, cmpState); diff != "" {
			t.Fatalf("refused join changed the state:\n%s", diff)
		}
	}
	// Through a session still alive, or without one, it is admitted.
	r.at(6 * time.Second)
	r.do(Join("p-41", nil).WithSession("b").WithSessionDeadlines(SessionDeadlines{"a": t0.Add(6 * time.Second), "b": t0.Add(7 * time.Second)}))
}

// TestRefusedCommandCommitsNoSessionEnd: a refused command commits
// nothing, not even the end of a session due on the way.
func TestRefusedCommandCommitsNoSessionEnd(t *testing.T) {
	r := newRun(t, testPolicy())
	r.heldJoin("p-17", "a")
	r.do(Lock("p-17"))
	before := r.s.Clone()
	r.at(5 * time.Second)
	if _, err := r.try(Join("p-23", nil).WithSessionDeadlines(SessionDeadlines{"a": t0.Add(time.Second)})); !errors.Is(err, ErrLocked) {
		t.Fatalf("join into a locked lobby: %v, want ErrLocked", err)
	}
	if diff := cmp.Diff(before, r.s, cmpState); diff != "" {
		t.Fatalf("refused join committed the session's end:\n%s", diff)
	}
}

// TestExpireLeaseNamesNoSessionDeadline: a session-held generation stores
// no deadline an expiry trigger could name (stale), unless the catch-up on
// the trigger's way ended it through its session (done).
func TestExpireLeaseNamesNoSessionDeadline(t *testing.T) {
	r := newRun(t, testPolicy())
	g := r.heldJoin("p-17", "a")
	r.at(time.Second)
	if res := r.do(ExpireLease("p-17", g, r.now)); res.Outcome != OutcomeStale {
		t.Fatalf("trigger on a live held generation: %v, want stale", res.Outcome)
	}
	if res := r.do(ExpireLease("p-17", g, r.now).WithSessionDeadlines(SessionDeadlines{"a": r.now})); res.Outcome != OutcomeDone {
		t.Fatalf("trigger on a held generation whose session ended: %v, want done", res.Outcome)
	}
}

// TestSupersededSessionHeldTabLeavesItsSession: the tab cap supersedes a
// held tab like any other, and its session stops holding the lobby.
func TestSupersededSessionHeldTabLeavesItsSession(t *testing.T) {
	p := testPolicy()
	p.MaxConnectionsPerPlayer = 1
	r := newRun(t, p)
	g := r.heldJoin("p-17", "a")
	res := r.do(Join("p-17", nil).WithSession("b"))
	if !slices.Equal(res.Ended, []Ended{{Player: "p-17", Gen: g, Cause: EndSuperseded, At: r.now}}) {
		t.Fatalf("ended %+v, want the held tab superseded", res.Ended)
	}
	if got := r.s.Sessions(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("Sessions = %v, want [b]", got)
	}
}

// TestCheckTransitionHoldsSessionHeldGenerationsToTheirSessionDeadline:
// the invariant checker refuses a state that keeps a generation whose
// session's deadline has passed.
func TestCheckTransitionHoldsSessionHeldGenerationsToTheirSessionDeadline(t *testing.T) {
	m, _ := NewMachine(testPolicy())
	s := NewState("lobby-1", 0)
	if _, err := m.Apply(s, Join("p-17", nil).WithSession("a"), t0); err != nil {
		t.Fatal(err)
	}
	before := s.Clone()
	now := t0.Add(time.Second)
	cmd := Tick().WithSessionDeadlines(SessionDeadlines{"a": now})
	// As if a driver applied the tick without the session deadlines.
	after := before.Clone()
	res, err := m.Apply(after, Tick(), now)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckTransition(before, after, cmd, res, now); err == nil {
		t.Fatal("CheckTransition accepted a generation held past its session's deadline")
	}
	after = before.Clone()
	if res, err = m.Apply(after, cmd, now); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckTransition(before, after, cmd, res, now); err != nil {
		t.Fatalf("CheckTransition refused the machine's own transition: %v", err)
	}
}

// sessionLobby is busyLobby with connections of both kinds.
func sessionLobby(t *testing.T) *State {
	s := busyLobby(t)
	m, _ := NewMachine(testPolicy())
	now := s.Updated.Add(time.Second)
	for _, cmd := range []Command{Join("p-23", nil).WithSession("sess-b"), Join("p-17", nil).WithSession("sess-a"), Join("p-62", nil).WithSession("sess-a")} {
		if _, err := m.Apply(s, cmd, now); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestFormat5CarriesSessions(t *testing.T) {
	s := sessionLobby(t)
	data := EncodeState(s)
	if data[3] != formatV5 {
		t.Fatalf("encoded in format %d, want 5", data[3])
	}
	got, err := DecodeState(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got, cmpState); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	if want := []string{"sess-a", "sess-b"}; !slices.Equal(got.Sessions(), want) {
		t.Fatalf("decoded Sessions = %v, want %v", got.Sessions(), want)
	}
}

// TestFormat4StillDecodes: records written before connections could be
// held by sessions (format 4, committed under testdata by that encoder)
// still decode, every connection with its stored deadline and no session.
func TestFormat4StillDecodes(t *testing.T) {
	data, err := os.ReadFile("testdata/format4-state.bin")
	if err != nil {
		t.Fatal(err)
	}
	if data[3] != formatV4 {
		t.Fatalf("fixture is format %d, want 4", data[3])
	}
	s, err := DecodeState(data)
	if err != nil {
		t.Fatalf("format 4 state: %v", err)
	}
	if s.ID != "lobby-1" || s.LockedBy != "p-17" || s.Overrides.MaxBlocks != 5 || len(s.Members) != 4 || s.Sessions() != nil {
		t.Fatalf("format 4 state decoded as %+v", s)
	}
	for _, mem := range s.Members {
		for _, c := range mem.Conns {
			if c.Deadline.IsZero() {
				t.Fatalf("%s: connection %+v lost its deadline", mem.Player, c)
			}
		}
	}
	if !bytes.Equal(appendState(nil, s, formatV4), data) {
		t.Fatal("the format 4 writer no longer writes the fixture")
	}
	again, err := DecodeState(EncodeState(s))
	if err != nil {
		t.Fatalf("re-encoded: %v", err)
	}
	if diff := cmp.Diff(s, again, cmpState); diff != "" {
		t.Fatalf("format 4 state does not survive re-encoding:\n%s", diff)
	}
}

func TestDecodeStateRefusesBadSessions(t *testing.T) {
	for name, f := range map[string]func(s *State){
		"a held connection with a stored deadline": func(s *State) {
			c := &s.Members[0].Conns[len(s.Members[0].Conns)-1]
			c.Deadline = s.Updated.Add(time.Second)
		},
		"an invalid session ID": func(s *State) {
			s.Members[0].Conns[len(s.Members[0].Conns)-1].Session = "\xff"
		},
	} {
		s := sessionLobby(t)
		if c := s.Members[0].Conns[len(s.Members[0].Conns)-1]; c.Session == "" {
			t.Fatalf("fixture: %+v is not held", c)
		}
		f(s)
		if _, err := DecodeState(EncodeState(s)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("state with %s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestDrainEndsTheSessionsConnectionsAsCloses: a draining process's
// connections end at once, in one transition: each as a close, every member
// whose last one it was turning reconnecting (the host keeps its seat
// through the grace), and connections of other sessions or none untouched.
func TestDrainEndsTheSessionsConnectionsAsCloses(t *testing.T) {
	p := testPolicy()
	r := newRun(t, p)
	g1 := r.heldJoin("p-17", "a")
	gb := r.heldJoin("p-17", "b")
	g2 := r.heldJoin("p-23", "a")
	r.join("p-41")
	g4 := r.heldJoin("p-41", "a")
	r.advance(3 * time.Second)
	before := r.s.Clone()
	res := r.do(Drain("a"))
	want := []Ended{
		{Player: "p-17", Gen: g1, Cause: EndClosed, At: r.now},
		{Player: "p-23", Gen: g2, Cause: EndClosed, At: r.now},
		{Player: "p-41", Gen: g4, Cause: EndClosed, At: r.now},
	}
	if res.Outcome != OutcomeApplied || !res.Changed || !slices.Equal(res.Ended, want) {
		t.Fatalf("drain: %+v, want %v", res, want)
	}
	// Only p-23 lost its last connection.
	if len(res.Events) != 1 || res.Events[0].Reason != ReasonDisconnected || res.Events[0].Subject != "p-23" ||
		res.Revision != before.Revision+1 {
		t.Fatalf("drain events %+v", res.Events)
	}
	if mem := r.member("p-23"); !mem.ReconnectBy.Equal(r.now.Add(p.Grace)) {
		t.Fatalf("reconnect deadline %v, want the grace from the drain", mem.ReconnectBy)
	}
	if r.s.Host != before.Host {
		t.Fatalf("host %q → %q across a drain", before.Host, r.s.Host)
	}
	if c := r.member("p-17").Conns; len(c) != 1 || c[0].Gen != gb {
		t.Fatalf("p-17 keeps %+v, want only its session-b tab", c)
	}
	if got := r.s.Sessions(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("sessions after the drain: %v", got)
	}
	if res := r.do(Drain("a")); res.Outcome != OutcomeNoop || res.Changed {
		t.Fatalf("second drain: %+v, want a no-op", res)
	}
	if err := Drain("").Validate(); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("drain of no session: %v, want ErrInvalidID", err)
	}
}
