//go:build lobbyknown

// Known issues, each a failing test kept out of the default build: run
// them with go test -tags lobbyknown -run Known ./lobby.

package lobby

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// TestKnownLateRenewalSplitsASession: a renewal is judged by the
// renewer's now, passed as a value. One judged before the session's
// deadline but that reaches the store after another process found the
// session over (a clock behind the other's, or a slow call) is accepted,
// and moves the deadline past the one a lobby already ended the session
// at. The same session then ends at one deadline in one lobby and lives on
// in another, so what a lobby commits depends on which process judged it
// and when, not on the renewals and their times alone.
//
// A fix: a process that finds a session over at D ends it in the store
// (EndSession at D) before it commits the end, once per session, so that
// no later renewal succeeds.
func TestKnownLateRenewalSplitsASession(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	clockA := clockwork.NewFakeClockAt(t0) // the session's owner
	a := sessionService(t, mem, clockA, 3*time.Second)
	deadline := t0.Add(3 * time.Second)
	for _, id := range []string{"x", "y"} {
		if _, err := a.Join(ctx, id, "p-17", nil); err != nil {
			t.Fatal(err)
		}
	}
	// Another process, its clock at the deadline, judges lobby x.
	clockB := clockwork.NewFakeClockAt(deadline)
	p := DefaultPolicy()
	p.HeartbeatTTL, p.Grace = 5*time.Second, 8*time.Second
	b, err := NewService(mem, WithClock(clockB), WithPolicy(p), WithSessionTTL(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Snapshot(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	// The owner's renewal, judged just before the deadline, lands now.
	clockA.Advance(2900 * time.Millisecond)
	a.live.renewOnce(ctx, clockA.Now())
	clockB.Advance(time.Second)
	if _, err := b.Snapshot(ctx, "y"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"x", "y"} {
		rec, err := mem.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		st, err := rules.DecodeState(rec.Data)
		if err != nil {
			t.Fatal(err)
		}
		if c := st.Member("p-17").Conns; len(c) != 0 {
			t.Errorf("lobby %s at %v: p-17 still connected through the session (%+v), which lobby x ended at %v", id, clockB.Now(), c, deadline)
		}
	}
}

// TestKnownForgottenSessionEndsAtTheJoin: a join's write judged while its
// session was alive can reach the store after the session's deadline,
// once an expiry pass has forgotten the session (it held no lobby then).
// A process that never knew the session's deadline finds no deadline and
// ends the connection at the lobby's last transition time: the join's
// own, earlier than the session ended, so the member's grace starts
// before it should have.
//
// A fix in the stores: keep an ended session's deadline for a while after
// it is forgotten (memory stays bounded), or refuse a write that starts
// indexing a session the store does not know.
func TestKnownForgottenSessionEndsAtTheJoin(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	hw := &hookedWrites{Store: mem, id: "l"}
	a := sessionService(t, store.ComposeWith(hw, store.Of(mem)), clock, 3*time.Second)
	deadline := t0.Add(3 * time.Second)
	hw.before = func() {
		clock.Advance(4 * time.Second)
		if _, err := mem.ExpiredSessions(ctx, clock.Now(), 10); err != nil {
			t.Error(err)
		}
	}
	if _, err := a.Join(ctx, "l", "p-17", nil); err != nil {
		t.Fatal(err)
	}
	p := DefaultPolicy()
	p.HeartbeatTTL, p.Grace = 5*time.Second, 8*time.Second
	b, err := NewService(mem, WithClock(clock), WithPolicy(p), WithSessionTTL(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Snapshot(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	var timedOut []Event
	for _, e := range loggedEvents(t, mem, "l") {
		if e.Reason == ReasonTimedOut {
			timedOut = append(timedOut, e)
		}
	}
	if len(timedOut) != 1 || !timedOut[0].At.Equal(deadline) {
		t.Errorf("time-outs %+v; p-17's session ended at %v", timedOut, deadline)
	}
}
