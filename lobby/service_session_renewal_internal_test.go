package lobby

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// TestLateRenewalCannotSplitASession: a renewal is judged by the
// renewer's now, passed as a value. Were one judged just before the
// session's deadline, or slow to reach the store, accepted after another
// process found the session over, it would move the deadline past the one
// a lobby already ended the session at: the session would end in one
// lobby and live on in another. Two rules keep it whole: a renewal is
// judged as of now + the skew margin, so the owner gives a session up
// rather than renew it that close to its deadline; and a process that
// finds a session over ends it in the store before it commits the end, so
// that a renewal still on its way fails.
func TestLateRenewalCannotSplitASession(t *testing.T) {
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
	// A renewal judged well before the deadline, slow to arrive, lands
	// now: the store refuses it.
	if err := mem.RenewSession(ctx, a.Session(), t0.Add(time.Second), t0.Add(4*time.Second)); !errors.Is(err, store.ErrSessionEnded) {
		t.Fatalf("late renewal after the session was found over: %v, want store.ErrSessionEnded", err)
	}
	// The owner's own renewal, judged just before the deadline.
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
