package rules

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lobbyhost/lobbyhost/succession"
)

const (
	grace = 8 * time.Second
	ttl   = 15 * time.Second
)

// fourPlayers: p-17 (host), p-23, p-41, p-62 joined in that order, one
// second apart, each with one connection. Heartbeat deadlines are disabled
// so the scenarios below only see the deadlines they create.
func fourPlayers(t *testing.T) (*lobbyRun, map[string]uint64) {
	p := testPolicy()
	p.HeartbeatTTL = 0
	r := newRun(t, p)
	gens := map[string]uint64{}
	for i, id := range []string{"p-17", "p-23", "p-41", "p-62"} {
		r.at(time.Duration(i) * time.Second)
		gens[id] = r.join(id)
	}
	r.wantHost("p-17")
	r.wantRevision(4)
	return r, gens
}

func TestFirstJoinStartsAtOne(t *testing.T) {
	r := newRun(t, testPolicy())
	res := r.do(Join("p-1", nil))
	if res.Gen != 1 || res.JoinSeq != 1 || r.s.Revision != 1 {
		t.Fatalf("first join: gen %d, join seq %d, revision %d; want 1, 1, 1", res.Gen, res.JoinSeq, r.s.Revision)
	}
	want := Event{
		Lobby: "lobby-1", Revision: 1, Term: 1, Host: "p-1", PrevHost: "",
		Members: []MemberView{{Player: "p-1", JoinSeq: 1, Status: StatusOnline}},
		Reason:  ReasonJoined, Subject: "p-1", At: t0,
	}
	if diff := cmp.Diff(want, r.lastEvent()); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
}

func TestHostLeaseExpiryPromotesLowestJoinSequence(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	r.do(Disconnect("p-17", gens["p-17"]))
	r.wantHost("p-17") // the host keeps the role through its grace
	r.wantStatus("p-17", StatusReconnecting)
	r.wantRevision(5)

	r.advance(grace)
	res := r.do(ExpireLease("p-17", gens["p-17"], r.now))
	if res.Outcome != OutcomeDone {
		t.Fatalf("ExpireLease = %v, want done", res.Outcome)
	}
	r.wantHost("p-23")
	r.wantRevision(6)
	e := r.lastEvent()
	if e.Reason != ReasonLeaseExpired || e.Subject != "p-17" || e.PrevHost != "p-17" || e.Host != "p-23" {
		t.Errorf("event = %+v, want lease_expired of p-17 moving host p-17 → p-23", e)
	}
	if !e.At.Equal(t0.Add(10*time.Second + grace)) {
		t.Errorf("event time %v, want the deadline", e.At)
	}
}

func TestStaleCloseAfterReconnectChangesNothing(t *testing.T) {
	// The old socket died unnoticed; the player reconnects on a new socket
	// before the old socket's close is processed.
	t.Run("old generation still live", func(t *testing.T) {
		r, gens := fourPlayers(t)
		r.at(10 * time.Second)
		newGen := r.join("p-17")
		if newGen <= gens["p-17"] {
			t.Fatalf("new generation %d not above old %d", newGen, gens["p-17"])
		}
		res := r.do(Disconnect("p-17", gens["p-17"]))
		// The old generation ends, but nothing visible happens: no
		// revision, no grace, the host stays.
		if len(res.Events) != 0 {
			t.Fatalf("old close produced events %+v", res.Events)
		}
		r.wantRevision(4)
		r.wantStatus("p-17", StatusOnline)
		r.wantHost("p-17")
		if m := r.member("p-17"); !m.ReconnectBy.IsZero() || len(m.Conns) != 1 || m.Conns[0].Gen != newGen {
			t.Fatalf("member after the old close: %+v", m)
		}
	})
	t.Run("old generation superseded", func(t *testing.T) {
		p := testPolicy()
		p.HeartbeatTTL = 0
		p.MaxConnectionsPerPlayer = 1
		r := newRun(t, p)
		old := r.join("p-17")
		r.join("p-23")
		r.advance(time.Second)
		r.join("p-17")
		before := r.s.Clone()
		res := r.do(Disconnect("p-17", old))
		if res.Outcome != OutcomeStale || res.Changed || len(res.Events) != 0 {
			t.Fatalf("old close: %+v, want a stale no-op", res)
		}
		if diff := cmp.Diff(before, r.s, cmpState); diff != "" {
			t.Fatalf("old close changed the state (-want +got):\n%s", diff)
		}
	})
}

func TestExpiringNonHostKeepsHost(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	r.do(Disconnect("p-41", gens["p-41"]))
	r.advance(grace)
	r.do(ExpireLease("p-41", gens["p-41"], r.now))
	r.wantHost("p-17")
	if r.member("p-41") != nil {
		t.Fatal("p-41 still a member after its lease expired")
	}
	if e := r.lastEvent(); e.Host != "p-17" || e.PrevHost != "p-17" {
		t.Errorf("event moved the host: %+v", e)
	}
}

func TestExpiringEveryoneLeavesNoHost(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	for _, id := range []string{"p-17", "p-23", "p-41", "p-62"} {
		r.do(Disconnect(id, gens[id]))
	}
	r.advance(grace)
	r.do(Tick())
	r.wantHost("")
	if len(r.s.Members) != 0 {
		t.Fatalf("members left: %+v", r.s.Members)
	}
	if e := r.lastEvent(); e.Host != "" || len(e.Members) != 0 {
		t.Errorf("last event %+v, want no host and no members", e)
	}
	// Counters survive the lobby emptying.
	if r.s.NextJoinSeq != 5 || r.s.NextGen != 5 || r.s.Revision != 12 {
		t.Errorf("counters: next join seq %d, next gen %d, revision %d; want 5, 5, 12", r.s.NextJoinSeq, r.s.NextGen, r.s.Revision)
	}
}

func TestReplayedExpiryChangesNothing(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	r.do(Disconnect("p-17", gens["p-17"]))
	r.advance(grace)
	r.do(ExpireLease("p-17", gens["p-17"], r.now))
	after := r.s.Clone()
	res := r.do(ExpireLease("p-17", gens["p-17"], r.now))
	if res.Outcome != OutcomeStale || res.Changed || len(res.Events) != 0 {
		t.Fatalf("replayed expiry: %+v, want stale, unchanged", res)
	}
	if diff := cmp.Diff(after, r.s, cmpState); diff != "" {
		t.Fatalf("replay changed the state (-want +got):\n%s", diff)
	}
}

func TestHostReconnectsJustInsideGrace(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	r.do(Disconnect("p-17", gens["p-17"]))
	r.advance(grace - time.Millisecond)
	g2 := r.join("p-17")
	r.wantHost("p-17")
	r.wantStatus("p-17", StatusOnline)
	if e := r.lastEvent(); e.Reason != ReasonReconnected {
		t.Fatalf("event %v, want reconnected", e.Reason)
	}
	if m := r.member("p-17"); m.JoinSeq != 1 {
		t.Fatalf("join sequence %d after reconnect, want 1 (kept)", m.JoinSeq)
	}
	// The old deadline is cancelled: nothing happens when it would have.
	r.advance(time.Millisecond)
	if res := r.do(Tick()); res.Changed {
		t.Fatalf("tick at the cancelled deadline changed the state: %+v", res)
	}
	// Dropping again starts a fresh grace; at its deadline the successor
	// takes over.
	r.advance(time.Second)
	r.do(Disconnect("p-17", g2))
	r.advance(grace - time.Nanosecond)
	r.do(Tick())
	r.wantHost("p-17")
	r.advance(time.Nanosecond)
	r.do(Tick())
	r.wantHost("p-23")
}

func TestClosingOneOfTwoTabsStartsNoLease(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	tab2 := r.join("p-23")
	r.wantRevision(4) // a second tab is invisible
	res := r.do(Disconnect("p-23", gens["p-23"]))
	if !res.Changed || len(res.Events) != 0 {
		t.Fatalf("closing one tab: %+v, want an invisible change", res)
	}
	r.wantStatus("p-23", StatusOnline)
	if m := r.member("p-23"); !m.ReconnectBy.IsZero() {
		t.Fatalf("reconnect deadline %v started with a tab still open", m.ReconnectBy)
	}
	r.do(Disconnect("p-23", tab2))
	r.wantStatus("p-23", StatusReconnecting)
	r.wantRevision(5)
}

func TestHeartbeatDeadlineEndsGenerationAtDeadline(t *testing.T) {
	r := newRun(t, testPolicy())
	g := r.join("p-1")
	r.join("p-2")
	r.advance(10 * time.Second)
	if res := r.do(Heartbeat("p-1", g)); res.Outcome != OutcomeApplied || !res.Changed || len(res.Events) != 0 {
		t.Fatalf("heartbeat: %+v, want applied, invisible", res)
	}
	rev := r.s.Revision
	// p-1's deadline is now t0+25s. A heartbeat exactly at the deadline is
	// stale: the generation ended at that instant.
	r.at(25 * time.Second)
	res := r.do(Heartbeat("p-1", g))
	if res.Outcome != OutcomeStale {
		t.Fatalf("heartbeat at the deadline: %v, want stale", res.Outcome)
	}
	r.wantStatus("p-1", StatusReconnecting)
	// p-2 timed out at 15s and its grace ran out at 23s; p-1 timed out at
	// 25s and stays host through its own grace.
	got := r.reasonsSince(len(r.events) - 3)
	if diff := cmp.Diff([]string{"timed_out:p-2", "lease_expired:p-2", "timed_out:p-1"}, got); diff != "" {
		t.Fatalf("catch-up events (-want +got):\n%s", diff)
	}
	r.wantRevision(rev + 3)
	r.wantHost("p-1")
	if e := r.lastEvent(); !e.At.Equal(t0.Add(25 * time.Second)) {
		t.Errorf("timed_out stamped %v, want its deadline", e.At)
	}
	if len(res.Ended) != 2 || res.Ended[0].Cause != EndTimedOut || res.Ended[1].Cause != EndTimedOut {
		t.Errorf("Ended = %+v, want both generations timed out", res.Ended)
	}
}

func TestJoinAfterReconnectDeadlineIsFresh(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	r.do(Disconnect("p-23", gens["p-23"]))
	r.advance(grace) // exactly at the deadline: it has passed
	from := len(r.events)
	res := r.do(Join("p-23", nil))
	if res.JoinSeq != 5 {
		t.Fatalf("join seq %d, want a fresh 5", res.JoinSeq)
	}
	if diff := cmp.Diff([]string{"lease_expired:p-23", "joined:p-23"}, r.reasonsSince(from)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

func TestSameInstantDeadlineMakesMemberIneligible(t *testing.T) {
	// p-1 hosts; p-2 and p-3 are online. p-1's reconnect deadline and p-2's
	// heartbeat deadline fall on the same instant. p-2 is not eligible at
	// that instant, so p-3 succeeds even though p-2 joined earlier.
	p := testPolicy()
	p.HeartbeatTTL = 10 * time.Second
	p.Grace = 5 * time.Second
	r := newRun(t, p)
	g1 := r.join("p-1")
	r.join("p-2") // deadline t0+10s
	r.at(4 * time.Second)
	g3 := r.join("p-3") // deadline t0+14s
	r.at(5 * time.Second)
	r.do(Disconnect("p-1", g1)) // reconnect deadline t0+10s
	r.at(9 * time.Second)
	r.do(Heartbeat("p-3", g3))
	r.at(10 * time.Second)
	from := len(r.events)
	r.do(Tick())
	r.wantHost("p-3")
	// Order: same deadline, then join sequence: p-1's expiry (seq 1) before
	// p-2's timeout (seq 2).
	if diff := cmp.Diff([]string{"lease_expired:p-1", "timed_out:p-2"}, r.reasonsSince(from)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

func TestNoEligibleMemberMeansEmptyHostUntilOneReturns(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	r.do(Disconnect("p-23", gens["p-23"]))
	r.do(Disconnect("p-41", gens["p-41"]))
	r.do(Disconnect("p-62", gens["p-62"]))
	r.advance(time.Second)
	r.do(Disconnect("p-17", gens["p-17"]))
	r.advance(grace) // p-23, p-41, p-62 expire first, then p-17
	r.do(Tick())
	r.wantHost("")
	r.join("p-9")
	r.wantHost("p-9")
	if e := r.lastEvent(); e.Reason != ReasonJoined || e.PrevHost != "" || e.Host != "p-9" {
		t.Fatalf("event %+v, want p-9 joining into the empty seat", e)
	}
}

func TestReconnectFillsEmptySeat(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	for _, id := range []string{"p-23", "p-41", "p-62"} {
		r.do(Disconnect(id, gens[id]))
	}
	r.at(12 * time.Second)
	r.do(Disconnect("p-17", gens["p-17"])) // p-17 expires at 20s, the rest at 18s
	r.at(19 * time.Second)
	r.join("p-41") // too late: fresh member, seat still held by p-17
	r.wantHost("p-17")
	r.at(20 * time.Second)
	r.do(Tick())
	r.wantHost("p-41")
}

func TestTransferHostChecksInOrder(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	r.do(Disconnect("p-62", gens["p-62"]))
	tests := []struct {
		name        string
		actor, to   string
		wantErr     error
		wantOutcome Outcome
	}{
		{"non-host actor", "p-23", "p-41", ErrNotHost, 0},
		{"non-host actor naming a stranger", "p-23", "nobody", ErrNotHost, 0},
		{"stranger", "p-17", "nobody", ErrNotMember, 0},
		{"reconnecting target", "p-17", "p-62", ErrNotEligible, 0},
		{"self", "p-17", "p-17", nil, OutcomeNoop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.try(TransferHost(tt.actor, tt.to))
			if !errors.Is(err, tt.wantErr) || (err == nil && res.Outcome != tt.wantOutcome) {
				t.Fatalf("TransferHost(%s→%s) = %v, %v; want %v, %v", tt.actor, tt.to, res.Outcome, err, tt.wantOutcome, tt.wantErr)
			}
			r.wantHost("p-17")
		})
	}
	res := r.do(TransferHost("p-17", "p-41"))
	r.wantHost("p-41")
	if e := res.Events[0]; e.Reason != ReasonHostTransferred || e.Subject != "p-41" || e.PrevHost != "p-17" {
		t.Fatalf("event %+v, want host_transferred to p-41", e)
	}
	// A host in its grace may still transfer.
	r.do(Disconnect("p-41", gens["p-41"]))
	r.do(TransferHost("p-41", "p-23"))
	r.wantHost("p-23")
}

func TestTransferHostByHostRemovedInCatchUp(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	r.do(Disconnect("p-17", gens["p-17"]))
	before := r.s.Clone()
	r.advance(grace)
	if _, err := r.try(TransferHost("p-17", "p-41")); !errors.Is(err, ErrNotHost) {
		t.Fatalf("transfer by a host whose grace ran out: %v, want ErrNotHost", err)
	}
	// Refused: not even the catch-up is committed.
	if diff := cmp.Diff(before, r.s, cmpState); diff != "" {
		t.Fatalf("refused command changed the state (-want +got):\n%s", diff)
	}
}

func TestLobbyFullCountsReconnectingMembers(t *testing.T) {
	p := testPolicy()
	p.MaxMembers = 2
	r := newRun(t, p)
	r.join("a")
	gb := r.join("b")
	r.do(Disconnect("b", gb))
	if _, err := r.try(Join("c", nil)); !errors.Is(err, ErrLobbyFull) {
		t.Fatalf("join into a full lobby: %v, want ErrLobbyFull", err)
	}
	r.join("b") // members coming back are never refused
	r.join("a") // nor are further tabs
	r.advance(time.Second)
	r.do(Leave("b"))
	r.join("c")
}

func TestLobbyFullRefusalCommitsNoCatchUp(t *testing.T) {
	p := testPolicy()
	p.MaxMembers = 2
	r := newRun(t, p)
	r.join("a") // heartbeat deadline 15s
	gb := r.join("b")
	r.at(10 * time.Second)
	r.do(Disconnect("b", gb)) // reconnecting until 18s
	// At 16s a's heartbeat deadline is due; both members are reconnecting
	// and count toward the cap.
	r.at(16 * time.Second)
	before := r.s.Clone()
	if _, err := r.try(Join("c", nil)); !errors.Is(err, ErrLobbyFull) {
		t.Fatalf("got %v, want ErrLobbyFull", err)
	}
	if diff := cmp.Diff(before, r.s, cmpState); diff != "" {
		t.Fatalf("refused join committed its catch-up (-want +got):\n%s", diff)
	}
	// Once b's grace is over there is room.
	r.at(18 * time.Second)
	r.join("c")
}

func TestMaxConnectionsSupersedesOldest(t *testing.T) {
	p := testPolicy()
	p.MaxConnectionsPerPlayer = 2
	r := newRun(t, p)
	g1 := r.join("a")
	g2 := r.join("a")
	rev := r.s.Revision
	res := r.do(Join("a", nil))
	if diff := cmp.Diff([]Ended{{Player: "a", Gen: g1, Cause: EndSuperseded, At: r.now}}, res.Ended); diff != "" {
		t.Fatalf("Ended (-want +got):\n%s", diff)
	}
	r.wantRevision(rev)
	if res := r.do(Heartbeat("a", g1)); res.Outcome != OutcomeStale {
		t.Fatalf("heartbeat on superseded generation: %v, want stale", res.Outcome)
	}
	if res := r.do(Heartbeat("a", g2)); res.Outcome != OutcomeApplied {
		t.Fatalf("heartbeat on kept generation: %v, want applied", res.Outcome)
	}
	if got := len(r.member("a").Conns); got != 2 {
		t.Fatalf("%d live connections, want 2", got)
	}
}

func TestLeave(t *testing.T) {
	r, _ := fourPlayers(t)
	r.join("p-17") // a second tab goes with it
	res := r.do(Leave("p-17"))
	r.wantHost("p-23")
	if len(res.Ended) != 2 {
		t.Fatalf("Ended %+v, want both tabs", res.Ended)
	}
	if e := r.lastEvent(); e.Reason != ReasonLeft || e.PrevHost != "p-17" {
		t.Fatalf("event %+v, want left", e)
	}
	if res := r.do(Leave("p-17")); res.Outcome != OutcomeNoop || res.Changed {
		t.Fatalf("second leave: %+v, want a no-op", res)
	}
}

func TestExpireLeaseOutcomes(t *testing.T) {
	r := newRun(t, testPolicy())
	g := r.join("a")
	r.join("b")
	if got := r.do(ExpireLease("a", g, r.now)).Outcome; got != OutcomeNotDue {
		t.Errorf("live generation: %v, want not_due", got)
	}
	if got := r.do(ExpireLease("a", 99, r.now)).Outcome; got != OutcomeStale {
		t.Errorf("never-issued generation: %v, want stale", got)
	}
	if got := r.do(ExpireLease("nobody", g, r.now)).Outcome; got != OutcomeStale {
		t.Errorf("non-member: %v, want stale", got)
	}
	r.advance(ttl)
	res := r.do(ExpireLease("a", g, r.now.Add(time.Hour)))
	if res.Outcome != OutcomeDone {
		t.Errorf("due heartbeat deadline: %v, want done", res.Outcome)
	}
	if got := r.do(ExpireLease("a", g, r.now)).Outcome; got != OutcomeNotDue {
		t.Errorf("reconnect deadline named by the last generation: %v, want not_due", got)
	}
	r.advance(grace)
	if got := r.do(ExpireLease("a", g, r.now)).Outcome; got != OutcomeDone {
		t.Errorf("due reconnect deadline: %v, want done", got)
	}
	if got := r.do(ExpireLease("a", g, r.now)).Outcome; got != OutcomeStale {
		t.Errorf("replay: %v, want stale", got)
	}
}

// TestExpireLeaseJudgedAfterCatchUp: the trigger names a reconnect
// deadline that its own catch-up starts (the member's other tab times out
// on the way), so the deadline is pending: not_due, not stale.
func TestExpireLeaseJudgedAfterCatchUp(t *testing.T) {
	p := testPolicy()
	p.Grace, p.HeartbeatTTL = time.Second, 5*time.Second
	r := newRun(t, p)
	g1 := r.join("p")
	g2 := r.join("p")
	r.at(3700 * time.Millisecond)
	r.do(Disconnect("p", g2))
	r.at(5100 * time.Millisecond)
	res := r.do(ExpireLease("p", g2, r.now))
	if res.Outcome != OutcomeNotDue {
		t.Fatalf("outcome %v, want not_due: the reconnect deadline named by gen %d started during the catch-up", res.Outcome, g2)
	}
	if e := r.lastEvent(); e.Reason != ReasonTimedOut || !e.At.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("last event %+v, want gen %d timed out at 5 s", e, g1)
	}
	// The heartbeat deadline the catch-up applied is reported done to the
	// trigger that names it.
	r2 := newRun(t, p)
	g := r2.join("q")
	r2.at(5500 * time.Millisecond)
	if got := r2.do(ExpireLease("q", g, r2.now)).Outcome; got != OutcomeDone {
		t.Fatalf("trigger whose own catch-up applied its deadline: %v, want done", got)
	}
	if got := r2.do(ExpireLease("q", g, r2.now)).Outcome; got != OutcomeNotDue {
		t.Fatalf("the reconnect deadline named by the same generation: %v, want not_due", got)
	}
}

func TestSkewedClockNeverRunsBackward(t *testing.T) {
	r := newRun(t, testPolicy())
	r.at(10 * time.Second)
	g := r.join("a")
	r.at(5 * time.Second) // another process's clock is behind
	r.do(Disconnect("a", g))
	m := r.member("a")
	if want := t0.Add(10*time.Second + grace); !m.ReconnectBy.Equal(want) {
		t.Fatalf("reconnect deadline %v, want %v (the close applied at the last transition time)", m.ReconnectBy, want)
	}
	if e := r.lastEvent(); !e.At.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("event at %v, want the last transition time", e.At)
	}
}

func TestPolicyChangeDoesNotRewriteDeadlines(t *testing.T) {
	r := newRun(t, testPolicy())
	g := r.join("a")
	r.join("b")
	p := testPolicy()
	p.HeartbeatTTL = time.Minute
	m2, err := NewMachine(p)
	if err != nil {
		t.Fatal(err)
	}
	r.m = m2
	r.advance(time.Second)
	r.join("c")
	if d := r.member("a").Conns[0].Deadline; !d.Equal(t0.Add(ttl)) {
		t.Fatalf("a's stored deadline rewritten to %v", d)
	}
	if d := r.member("c").Conns[0].Deadline; !d.Equal(r.now.Add(time.Minute)) {
		t.Fatalf("c's new deadline %v, want the new TTL", d)
	}
	r.do(Heartbeat("a", g))
	if d := r.member("a").Conns[0].Deadline; !d.Equal(r.now.Add(time.Minute)) {
		t.Fatalf("a's deadline after a heartbeat %v, want the new TTL", d)
	}
}

func TestEligibilityRule(t *testing.T) {
	p := testPolicy()
	p.Succession.Eligible = func(c succession.Candidate) bool { return c.Attrs["role"] != "spectator" }
	r := newRun(t, p)
	spect := map[string]string{"role": "spectator"}
	g := r.do(Join("s", spect)).Gen
	r.wantHost("")
	r.join("x")
	r.wantHost("x")
	r.do(Leave("x"))
	r.wantHost("")
	// A second tab that changes the attributes is an update, and fills the
	// empty seat.
	r.do(Join("s", map[string]string{"role": "player"}))
	r.wantHost("s")
	if e := r.lastEvent(); e.Reason != ReasonUpdated || e.Host != "s" || e.Members[0].Attrs["role"] != "player" {
		t.Fatalf("event %+v, want the seat filled", e)
	}
	// Changing attributes never moves a current host.
	r.join("y")
	r.do(Join("s", spect))
	r.wantHost("s")
	r.do(Disconnect("s", g))
	if _, err := r.try(TransferHost("s", "s")); !errors.Is(err, ErrNotEligible) {
		t.Fatalf("transfer to an ineligible self: %v, want ErrNotEligible", err)
	}
}

func TestBadInput(t *testing.T) {
	r := newRun(t, testPolicy())
	long := string(make([]byte, MaxIDLen+1))
	tests := []struct {
		name string
		cmd  Command
		now  time.Time
		want error
	}{
		{"empty player", Join("", nil), t0, ErrInvalidID},
		{"oversized player", Join(long, nil), t0, ErrInvalidID},
		{"invalid UTF-8", Join("\xff\xfe", nil), t0, ErrInvalidID},
		{"empty new host", TransferHost("a", ""), t0, ErrInvalidID},
		{"too many attrs", Join("a", manyAttrs(MaxAttrs+1)), t0, ErrInvalidAttrs},
		{"empty attr key", Join("a", map[string]string{"": "x"}), t0, ErrInvalidAttrs},
		{"unknown op", Command{Op: 99, Player: "a"}, t0, ErrInvalidCommand},
		{"zero op", Command{Player: "a"}, t0, ErrInvalidCommand},
		{"update without player", Update("", nil), t0, ErrInvalidID},
		{"update with bad attrs", Update("a", manyAttrs(MaxAttrs+1)), t0, ErrInvalidAttrs},
		{"kick without target", Kick("a", "", 0), t0, ErrInvalidID},
		{"kick by a bad actor", Kick("\xff", "a", 0), t0, ErrInvalidID},
		{"negative block", Kick("", "a", -time.Second), t0, ErrInvalidCommand},
		{"block too long", Kick("", "a", MaxBlock+1), t0, ErrInvalidCommand},
		{"lock by a bad actor", Lock(long), t0, ErrInvalidID},
		{"zero grace", Configure(Overrides{}.WithGrace(0)), t0, ErrInvalidPolicy},
		{"negative TTL", Configure(Overrides{}.WithHeartbeatTTL(-1)), t0, ErrInvalidPolicy},
		{"negative member cap", Configure(Overrides{}.WithMaxMembers(-1)), t0, ErrInvalidPolicy},
		{"block bound too high", Configure(Overrides{}.WithMaxBlocks(MaxBlocksLimit + 1)), t0, ErrInvalidPolicy},
		{"negative tab cap", Configure(Overrides{}.WithMaxConnectionsPerPlayer(-2)), t0, ErrInvalidPolicy},
		{"unknown override", Configure(Overrides{Set: 1 << 6}), t0, ErrInvalidPolicy},
		{"zero time", Join("a", nil), time.Time{}, ErrInvalidTime},
		{"far future", Join("a", nil), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), ErrInvalidTime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := r.s.Clone()
			_, err := r.m.Apply(r.s, tt.cmd, tt.now)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Apply = %v, want %v", err, tt.want)
			}
			if diff := cmp.Diff(before, r.s, cmpState); diff != "" {
				t.Fatalf("bad input changed the state:\n%s", diff)
			}
		})
	}
	if _, err := NewMachine(Policy{}); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("NewMachine(zero policy) = %v, want ErrInvalidPolicy", err)
	}
	bad := DefaultPolicy()
	bad.MaxMembers = -1
	if _, err := NewMachine(bad); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("NewMachine(MaxMembers -1) = %v, want ErrInvalidPolicy", err)
	}
}

func manyAttrs(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[string(rune('a'+i))] = "v"
	}
	return m
}

func TestApplyDoesNotRetainCallerAttrs(t *testing.T) {
	r := newRun(t, testPolicy())
	attrs := map[string]string{"role": "player"}
	r.do(Join("a", attrs))
	attrs["role"] = "changed"
	if got := r.member("a").Attrs["role"]; got != "player" {
		t.Fatalf("stored attribute changed with the caller's map: %q", got)
	}
}

func TestReclaimFloorContinuesAbove(t *testing.T) {
	r := newRun(t, testPolicy())
	g := r.join("a")
	r.join("b")
	r.do(Leave("b"))
	r.do(Disconnect("a", g))
	floor := r.s.Floor()
	s := NewState("lobby-1", floor)
	m, _ := NewMachine(testPolicy())
	res, err := m.Apply(s, Join("a", nil), r.now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.Gen <= g+1 || res.JoinSeq <= 2 || s.Revision <= r.s.Revision {
		t.Fatalf("after reclaim: gen %d, join seq %d, revision %d; want all above gen %d, seq 2, revision %d",
			res.Gen, res.JoinSeq, s.Revision, g+1, r.s.Revision)
	}
}

// wantRefused applies cmd, expects the refusal want, and checks that
// nothing was committed, not even a catch-up.
func (r *lobbyRun) wantRefused(cmd Command, want error) {
	r.t.Helper()
	before := r.s.Clone()
	_, err := r.try(cmd)
	if !errors.Is(err, want) || !IsRefusal(err) {
		r.t.Fatalf("%v %q→%q: %v, want the refusal %v", cmd.Op, cmd.Player, cmd.To, err, want)
	}
	if diff := cmp.Diff(before, r.s, cmpState); diff != "" {
		r.t.Fatalf("refused %v changed the state (-before +after):\n%s", cmd.Op, diff)
	}
}

func TestUpdate(t *testing.T) {
	p := testPolicy()
	p.Succession.Eligible = func(c succession.Candidate) bool { return c.Attrs["role"] != "spectator" }
	r := newRun(t, p)
	spect := map[string]string{"role": "spectator"}
	r.do(Join("a", spect))
	gb := r.do(Join("b", spect)).Gen
	r.wantHost("")

	// Filling the empty seat: one updated event that shows the new host
	// and the attributes.
	r.advance(time.Second)
	res := r.do(Update("b", map[string]string{"role": "player", "team": "red"}))
	r.wantHost("b")
	if len(res.Events) != 1 {
		t.Fatalf("%d events, want 1", len(res.Events))
	}
	e := res.Events[0]
	if e.Reason != ReasonUpdated || e.Subject != "b" || e.PrevHost != "" || e.Host != "b" || e.Members[1].Attrs["team"] != "red" {
		t.Fatalf("event %+v", e)
	}
	// The same set again changes nothing.
	if res := r.do(Update("b", map[string]string{"team": "red", "role": "player"})); res.Changed || res.Outcome != OutcomeNoop {
		t.Fatalf("same attributes: %+v, want a no-op", res)
	}
	// Making a member eligible never moves the current host, and making
	// the host ineligible does not unseat it.
	r.do(Update("a", nil))
	r.wantHost("b")
	r.do(Update("b", spect))
	r.wantHost("b")

	// A reconnecting member's attributes change without touching its
	// presence or its reconnect deadline; nil clears them all.
	r.do(Disconnect("b", gb))
	deadline := r.member("b").ReconnectBy
	r.advance(time.Second)
	r.do(Update("b", nil))
	if m := r.member("b"); m.Attrs != nil || m.Status() != StatusReconnecting || !m.ReconnectBy.Equal(deadline) {
		t.Fatalf("after update: %+v", m)
	}
	if v := r.lastEvent().Members[1]; v.Status != StatusReconnecting || !v.ReconnectDeadline.Equal(deadline) || v.Attrs != nil {
		t.Fatalf("member view %+v, want reconnecting until %v without attributes", v, deadline)
	}
	// An empty set is no attributes too.
	if res := r.do(Update("b", map[string]string{})); res.Changed {
		t.Fatal("an empty set after none changed something")
	}
	r.wantRefused(Update("nobody", nil), ErrNotMember)
}

func TestJoinWithAttributes(t *testing.T) {
	r := newRun(t, testPolicy())
	r.do(Join("a", map[string]string{"role": "captain"}))
	// A further tab with the same attributes, or none: invisible.
	for _, attrs := range []map[string]string{{"role": "captain"}, nil} {
		if res := r.do(Join("a", attrs)); len(res.Events) != 0 {
			t.Fatalf("further tab with %v: %d events", attrs, len(res.Events))
		}
	}
	// With other attributes: one revision, reason updated.
	res := r.do(Join("a", map[string]string{"role": "player"}))
	if len(res.Events) != 1 || res.Events[0].Reason != ReasonUpdated || res.Events[0].Members[0].Attrs["role"] != "player" {
		t.Fatalf("further tab with other attributes: %+v", res.Events)
	}
	// Coming back with other attributes: one revision, reason reconnected,
	// the attributes applied.
	var open []uint64
	for _, c := range r.member("a").Conns {
		open = append(open, c.Gen)
	}
	for _, gen := range open {
		r.do(Disconnect("a", gen))
	}
	r.advance(time.Second)
	res = r.do(Join("a", map[string]string{"role": "coach"}))
	if len(res.Events) != 1 || res.Events[0].Reason != ReasonReconnected || res.Events[0].Members[0].Attrs["role"] != "coach" ||
		!res.Events[0].Members[0].ReconnectDeadline.IsZero() {
		t.Fatalf("reconnect with other attributes: %+v", res.Events)
	}
}

func TestKickChecksInOrder(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	r.do(Disconnect("p-62", gens["p-62"]))
	r.wantRefused(Kick("p-23", "p-41", 0), ErrNotHost)
	r.wantRefused(Kick("p-23", "nobody", 0), ErrNotHost)
	r.wantRefused(Kick("p-17", "nobody", 0), ErrNotMember)
	r.wantRefused(Kick("", "nobody", 0), ErrNotMember)

	// The host kicks a reconnecting member.
	res := r.do(Kick("p-17", "p-62", 0))
	if e := res.Events[0]; e.Reason != ReasonKicked || e.Subject != "p-62" || e.Host != "p-17" || len(e.Members) != 3 {
		t.Fatalf("event %+v", e)
	}
	if r.s.Blocks.Len() != 0 {
		t.Fatalf("a kick without a block stored %v", r.s.Blocks)
	}
	// Replayed, it is refused and changes nothing.
	r.wantRefused(Kick("p-17", "p-62", 0), ErrNotMember)
	// Every connection of the kicked member ends.
	r.join("p-41")
	res = r.do(Kick("", "p-41", 0))
	if len(res.Ended) != 2 || res.Ended[0].Cause != EndKicked || res.Ended[1].Cause != EndKicked {
		t.Fatalf("ended %+v, want both of p-41's connections ended as kicked", res.Ended)
	}
	// A host in its grace may kick.
	r.do(Disconnect("p-17", gens["p-17"]))
	r.do(Kick("p-17", "p-23", time.Second))
	r.wantHost("p-17")
}

func TestKickTheHost(t *testing.T) {
	r, _ := fourPlayers(t)
	r.at(10 * time.Second)
	// The server kicks the host: the successor takes over in the same
	// transition, and the host term moves once.
	term := r.s.Term
	res := r.do(Kick("", "p-17", time.Minute))
	r.wantHost("p-23")
	if e := res.Events[0]; e.Reason != ReasonKicked || e.PrevHost != "p-17" || e.Host != "p-23" || e.Term != term+1 {
		t.Fatalf("event %+v", e)
	}
	// The host kicking itself leaves: reason left, no block.
	res = r.do(Kick("p-23", "p-23", time.Minute))
	r.wantHost("p-41")
	if e := res.Events[0]; e.Reason != ReasonLeft || e.Subject != "p-23" {
		t.Fatalf("event %+v, want left", e)
	}
	if _, ok := r.s.Blocks.Until("p-23"); ok {
		t.Fatal("a host kicking itself was blocked")
	}
	r.join("p-23")
}

func TestKickBlock(t *testing.T) {
	r, _ := fourPlayers(t)
	r.at(10 * time.Second)
	r.do(Kick("p-17", "p-23", 5*time.Second))
	end := t0.Add(15 * time.Second)
	if got := r.s.BlockedUntil(); !got.Equal(end) {
		t.Fatalf("BlockedUntil = %v, want %v", got, end)
	}
	r.at(15*time.Second - time.Nanosecond)
	r.wantRefused(Join("p-23", nil), ErrBlocked)
	// A skewed join stamped before the lobby's last transition is judged
	// at that transition's time: still blocked.
	r.at(0)
	r.wantRefused(Join("p-23", nil), ErrBlocked)
	// The block's end is not a transition: nothing happens at it.
	r.at(15 * time.Second)
	if res := r.do(Tick()); res.Changed {
		t.Fatalf("the end of a block was a transition: %+v", res)
	}
	if _, ok := r.s.Blocks.Until("p-23"); !ok {
		t.Fatal("a block was dropped without a write")
	}
	// At its end it refuses nothing, and the write drops it.
	r.join("p-23")
	if r.s.Blocks.Len() != 0 || !r.s.BlockedUntil().IsZero() {
		t.Fatalf("blocks %v after the block ended and the lobby was written", r.s.Blocks)
	}
	// A later kick replaces the block.
	r.do(Kick("", "p-23", time.Hour))
	r.do(Kick("", "p-41", time.Minute))
	r.wantRefused(Join("p-23", nil), ErrBlocked)
	if got := r.s.BlockedUntil(); !got.Equal(r.now.Add(time.Hour)) {
		t.Fatalf("BlockedUntil = %v", got)
	}
	// Blocks outlive the lobby emptying.
	r.do(Leave("p-17"))
	r.do(Leave("p-62"))
	r.advance(time.Minute)
	r.do(Leave("p-1")) // a no-op on an empty lobby
	r.wantRefused(Join("p-23", nil), ErrBlocked)
}

// TestKickBlockBound: a lobby holds at most the policy's MaxBlocks blocks
// in force. A kick that would add one more is refused with
// ErrTooManyBlocks after the host and member checks, and commits nothing;
// a kick without a block is never refused for it, and blocks that ended
// (stored or already dropped) do not count.
func TestKickBlockBound(t *testing.T) {
	p := testPolicy()
	p.HeartbeatTTL = 0
	p.MaxBlocks = 2
	r := newRun(t, p)
	for _, id := range []string{"host", "a", "b", "c", "d"} {
		r.join(id)
	}
	r.do(Kick("host", "a", time.Second))
	r.do(Kick("host", "b", time.Hour))
	// a's block has ended but is still stored (nothing was written since):
	// it does not count.
	r.advance(time.Second)
	if r.s.Blocks.Len() != 2 {
		t.Fatalf("%d blocks stored, want a's ended one kept until a write", r.s.Blocks.Len())
	}
	r.do(Kick("host", "c", time.Hour))
	if r.s.Blocks.Len() != 2 {
		t.Fatalf("blocks %v, want b's and c's", r.s.Blocks)
	}
	// Two in force: the third is refused, in its place in the order.
	r.wantRefused(Kick("a", "d", time.Hour), ErrNotHost)
	r.wantRefused(Kick("host", "nobody", time.Hour), ErrNotMember)
	before := r.s.Clone()
	_, err := r.try(Kick("host", "d", time.Hour))
	var re *RefusalError
	if !errors.Is(err, ErrTooManyBlocks) || !IsRefusal(err) || !errors.As(err, &re) || re.Target != "d" || re.Player != "host" {
		t.Fatalf("a third block: %v, want a RefusalError wrapping ErrTooManyBlocks", err)
	}
	if diff := cmp.Diff(before, r.s, cmpState); diff != "" {
		t.Fatalf("the refused kick changed the state:\n%s", diff)
	}
	if r.s.Member("d") == nil {
		t.Fatal("the refused kick removed its target")
	}
	// Without a block the kick goes through; so does the server's.
	r.do(Kick("host", "d", 0))
	r.join("d")
	r.wantRefused(Kick("", "d", time.Minute), ErrTooManyBlocks)
	// Once one ends there is room again.
	r.advance(time.Hour)
	r.do(Kick("", "d", time.Minute))
	if end, ok := r.s.Blocks.Until("d"); !ok || !end.Equal(r.now.Add(time.Minute)) {
		t.Fatalf("d's block: %v %v", end, ok)
	}
	if r.s.Blocks.Len() != 1 {
		t.Fatalf("blocks %v, want d's alone (the ended ones dropped)", r.s.Blocks)
	}
	// The bound itself is validated; 0 is the default.
	for _, bad := range []int{-1, MaxBlocksLimit + 1} {
		p.MaxBlocks = bad
		if _, err := NewMachine(p); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("MaxBlocks %d: %v, want ErrInvalidPolicy", bad, err)
		}
	}
	p.MaxBlocks = 0
	if p.blockLimit() != DefaultMaxBlocks || DefaultPolicy().MaxBlocks != DefaultMaxBlocks {
		t.Errorf("default bound %d, DefaultPolicy's %d, want %d", p.blockLimit(), DefaultPolicy().MaxBlocks, DefaultMaxBlocks)
	}
	// A lobby's override wins over the policy's bound.
	r.do(Configure(Overrides{}.WithMaxBlocks(2)))
	r.join("e")
	r.do(Kick("", "e", time.Minute))
	r.join("f")
	r.wantRefused(Kick("", "f", time.Minute), ErrTooManyBlocks)
	r.do(Configure(Overrides{}.WithMaxBlocks(3)))
	r.do(Kick("", "f", time.Minute))
	if r.s.Blocks.Len() != 3 {
		t.Fatalf("blocks %v, want three under the lobby's bound", r.s.Blocks)
	}
}

func TestJoinRefusalOrder(t *testing.T) {
	p := testPolicy()
	p.MaxMembers = 2
	r := newRun(t, p)
	r.join("a")
	r.join("b")
	r.do(Kick("", "b", time.Minute))
	r.join("c")
	r.do(Lock(""))
	// Blocked, locked and full: the block is named.
	r.wantRefused(Join("b", nil), ErrBlocked)
	// Locked and full: the lock.
	r.wantRefused(Join("d", nil), ErrLocked)
	r.do(Unlock("a"))
	r.wantRefused(Join("d", nil), ErrLobbyFull)
}

func TestLockRefusesNewPlayersOnly(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	r.wantRefused(Lock("p-23"), ErrNotHost)
	res := r.do(Lock("p-17"))
	if e := res.Events[0]; e.Reason != ReasonLocked || e.Subject != "p-17" || !e.Locked {
		t.Fatalf("event %+v", e)
	}
	if res := r.do(Lock("")); res.Changed || res.Outcome != OutcomeNoop {
		t.Fatalf("locking a locked lobby: %+v", res)
	}
	r.wantRefused(Join("new", nil), ErrLocked)
	r.join("p-23") // a further tab
	r.do(Disconnect("p-41", gens["p-41"]))
	r.advance(time.Second)
	r.join("p-41") // a reconnecting member
	// A member whose reconnect deadline passed is a new player.
	r.do(Disconnect("p-62", gens["p-62"]))
	r.advance(grace)
	r.wantRefused(Join("p-62", nil), ErrLocked)
	// A host in its grace may unlock; the server's changes name no subject.
	r.do(Disconnect("p-17", gens["p-17"]))
	r.do(Unlock("p-17"))
	r.do(Lock(""))
	if e := r.lastEvent(); e.Reason != ReasonLocked || e.Subject != "" {
		t.Fatalf("event %+v", e)
	}
	res = r.do(Unlock(""))
	if e := res.Events[len(res.Events)-1]; e.Reason != ReasonUnlocked || e.Locked {
		t.Fatalf("event %+v", e)
	}
	r.join("p-62")
}

// TestHostLockEndsWithLastMember: a host locks its lobby, kicks everyone
// else with a day's block and leaves. The transition that removes the last
// member also unlocks the lobby (its event says so), so the lobby is not
// left shut to everyone: the former host and anyone else may join again,
// while the kicked player stays blocked until its block ends.
func TestHostLockEndsWithLastMember(t *testing.T) {
	r, gens := fourPlayers(t)
	r.at(10 * time.Second)
	r.do(Lock("p-17"))
	if r.s.LockedBy != "p-17" {
		t.Fatalf("locked by %q, want the host", r.s.LockedBy)
	}
	for _, p := range []string{"p-23", "p-41"} {
		r.do(Kick("p-17", p, 24*time.Hour))
	}
	// A host that leaves while others remain keeps the lobby locked.
	r.do(TransferHost("p-17", "p-62"))
	r.do(Leave("p-17"))
	if e := r.lastEvent(); !e.Locked || !r.s.Locked {
		t.Fatalf("the lock ended with members left: %+v", e)
	}
	r.wantRefused(Join("p-17", nil), ErrLocked)
	// The last member goes (its grace runs out): the lobby unlocks in that
	// same transition.
	r.do(Disconnect("p-62", gens["p-62"]))
	r.advance(grace)
	res := r.do(Tick())
	if len(res.Events) != 1 {
		t.Fatalf("events %+v, want the one removal", res.Events)
	}
	if e := res.Events[0]; e.Reason != ReasonLeaseExpired || e.Locked || len(e.Members) != 0 {
		t.Fatalf("the removal of the last member: %+v, want lease_expired showing the lobby unlocked", e)
	}
	if r.s.Locked || r.s.LockedBy != "" {
		t.Fatalf("empty lobby locked=%v by %q", r.s.Locked, r.s.LockedBy)
	}
	r.wantRefused(Join("p-23", nil), ErrBlocked)
	r.join("p-17")
	r.join("p-9")
	r.at(10*time.Second + 24*time.Hour - time.Nanosecond)
	r.wantRefused(Join("p-41", nil), ErrBlocked)
	r.advance(time.Nanosecond)
	r.join("p-41")

	// The shortest form: lock, kick the other member for a day, leave.
	r = newRun(t, testPolicy())
	r.join("host")
	r.join("guest")
	r.do(Lock("host"))
	r.do(Kick("host", "guest", 24*time.Hour))
	res = r.do(Leave("host"))
	if e := res.Events[0]; e.Reason != ReasonLeft || e.Locked {
		t.Fatalf("the host's leave: %+v, want left showing the lobby unlocked", e)
	}
	r.advance(time.Hour)
	r.join("host")
	r.wantRefused(Join("guest", nil), ErrBlocked)
	r.at(24 * time.Hour)
	r.join("guest")
}

// TestServerLockOutlivesMembers: a lock the server set stays when the lobby
// empties, until it is unlocked; a host's Lock on a lobby the server locked
// changes nothing, so it does not shorten the server's lock either.
func TestServerLockOutlivesMembers(t *testing.T) {
	r, _ := fourPlayers(t)
	r.do(Lock(""))
	if res := r.do(Lock("p-17")); res.Changed || r.s.LockedBy != "" {
		t.Fatalf("a host locking the server's lock: %+v, locked by %q", res, r.s.LockedBy)
	}
	for _, p := range []string{"p-23", "p-41", "p-62"} {
		r.do(Kick("p-17", p, 0))
	}
	r.do(Leave("p-17"))
	if e := r.lastEvent(); !e.Locked || !r.s.Locked {
		t.Fatalf("the server's lock ended with the last member: %+v", e)
	}
	r.wantRefused(Join("p-17", nil), ErrLocked)
	r.do(Unlock(""))
	r.join("p-17")
	// The host locks, unlocks, and the server locks: the server's lock.
	r.do(Lock("p-17"))
	r.do(Unlock("p-17"))
	r.do(Lock(""))
	r.do(Leave("p-17"))
	r.wantRefused(Join("p-17", nil), ErrLocked)
}

func TestConfigure(t *testing.T) {
	p := testPolicy() // grace 8s, TTL 15s
	p.MaxConnectionsPerPlayer = 3
	r := newRun(t, p)
	a1 := r.join("a")
	r.join("b")
	o := Overrides{}.WithGrace(2 * time.Second).WithHeartbeatTTL(0).WithMaxMembers(2).WithMaxConnectionsPerPlayer(1)
	res := r.do(Configure(o))
	if e := res.Events[0]; e.Reason != ReasonConfigured || e.Subject != "" || e.Overrides != o {
		t.Fatalf("event %+v", e)
	}
	if res := r.do(Configure(o)); res.Changed || res.Outcome != OutcomeNoop {
		t.Fatalf("the same overrides again: %+v", res)
	}
	// Deadlines set before stay; those set after follow the overrides.
	if d := r.member("a").Conns[0].Deadline; !d.Equal(t0.Add(15 * time.Second)) {
		t.Fatalf("a's old heartbeat deadline moved to %v", d)
	}
	r.advance(time.Second)
	r.do(Heartbeat("a", a1))
	if d := r.member("a").Conns[0].Deadline; !d.IsZero() {
		t.Fatalf("heartbeat under TTL 0 set deadline %v", d)
	}
	r.do(Disconnect("a", a1))
	if d := r.member("a").ReconnectBy; !d.Equal(r.now.Add(2 * time.Second)) {
		t.Fatalf("reconnect deadline %v, want the overridden grace", d)
	}
	r.join("a")
	// The member cap in force is 2.
	r.wantRefused(Join("c", nil), ErrLobbyFull)
	// A lower tab cap supersedes nothing until the player's next join.
	r.do(Configure(Overrides{}.WithMaxConnectionsPerPlayer(3)))
	r.join("b")
	r.join("b")
	r.do(Configure(Overrides{}.WithMaxConnectionsPerPlayer(1).WithMaxMembers(1)))
	if n := len(r.member("b").Conns); n != 3 {
		t.Fatalf("b holds %d connections, want 3", n)
	}
	// A lower member cap evicts no one.
	if len(r.s.Members) != 2 {
		t.Fatalf("%d members", len(r.s.Members))
	}
	res = r.do(Join("b", nil))
	if len(r.member("b").Conns) != 1 || len(res.Ended) != 3 {
		t.Fatalf("after b's next join: %d connections, %d ended", len(r.member("b").Conns), len(res.Ended))
	}
	// No overrides: back to the policy, which allows 3 members.
	r.do(Configure(Overrides{}))
	r.join("c")
	// Values of settings not marked as set are ignored.
	r.do(Configure(Overrides{MaxMembers: 1}))
	if !r.s.Overrides.IsZero() {
		t.Fatalf("overrides %+v", r.s.Overrides)
	}
}

func TestOverridesWinOverAnyPolicy(t *testing.T) {
	r := newRun(t, testPolicy())
	r.do(Configure(Overrides{}.WithGrace(time.Second).WithMaxMembers(0)))
	// Another process with another policy runs the lobby: the overrides
	// still win.
	p := testPolicy()
	p.Grace, p.MaxMembers = time.Minute, 1
	r.m, _ = NewMachine(p)
	g := r.join("a")
	r.join("b") // no member cap here
	r.do(Disconnect("a", g))
	if d := r.member("a").ReconnectBy; !d.Equal(r.now.Add(time.Second)) {
		t.Fatalf("reconnect deadline %v, want the lobby's grace", d)
	}
}

// TestWhatCreatesALobby: on a lobby never written, only a Join, a Configure
// or a server's Lock that takes effect reports a change to store.
func TestWhatCreatesALobby(t *testing.T) {
	m, _ := NewMachine(testPolicy())
	tests := []struct {
		cmd     Command
		changed bool
		err     error
	}{
		{Join("a", nil), true, nil},
		{Configure(Overrides{}.WithGrace(time.Second)), true, nil},
		{Configure(Overrides{}), false, nil},
		{Lock(""), true, nil},
		{Unlock(""), false, nil},
		{Lock("a"), false, ErrNotHost},
		{Kick("", "a", time.Minute), false, ErrNotMember},
		{Kick("a", "a", 0), false, ErrNotHost},
		{Update("a", nil), false, ErrNotMember},
		{Leave("a"), false, nil},
		{TransferHost("a", "b"), false, ErrNotHost},
		{Tick(), false, nil},
	}
	for _, tt := range tests {
		s := NewState("new", 7)
		res, err := m.Apply(s, tt.cmd, t0)
		if !errors.Is(err, tt.err) || res.Changed != tt.changed {
			t.Errorf("%v on a new lobby: changed %v, %v; want %v, %v", tt.cmd.Op, res.Changed, err, tt.changed, tt.err)
		}
	}
}

func TestRefusalsCommitNoCatchUp(t *testing.T) {
	for _, tt := range []struct {
		cmd  Command
		want error
	}{
		{Kick("b", "a", 0), ErrNotHost},
		{Kick("", "nobody", 0), ErrNotMember},
		{Lock("b"), ErrNotHost},
		{Update("nobody", nil), ErrNotMember},
	} {
		r := newRun(t, testPolicy())
		r.join("a")
		r.join("b")
		r.at(16 * time.Second) // both heartbeat deadlines are due
		r.wantRefused(tt.cmd, tt.want)
	}
}
