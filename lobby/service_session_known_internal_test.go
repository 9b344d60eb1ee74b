//go:build lobbyknown

// Known issues, each a failing test kept out of the default build: run
// them with go test -tags lobbyknown -run Known ./lobby.

package lobby

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

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
