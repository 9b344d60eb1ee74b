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

// hookedWrites runs before (if set) ahead of the next Write to lobby id,
// and fails that write after it committed (after) or instead of it
// (instead).
type hookedWrites struct {
	store.Store
	id             string
	before         func()
	after, instead bool
}

var errHooked = errors.New("test: write failed")

func (h *hookedWrites) Write(ctx context.Context, w store.Write) error {
	if w.ID != h.id {
		return h.Store.Write(ctx, w)
	}
	if f := h.before; f != nil {
		h.before = nil
		f()
	}
	if h.instead {
		return errHooked
	}
	if err := h.Store.Write(ctx, w); err != nil {
		return err
	}
	if h.after {
		h.after = false
		return errHooked
	}
	return nil
}

func sessionService(t *testing.T, st store.Store, clock clockwork.Clock, ttl time.Duration) *Service {
	t.Helper()
	p := DefaultPolicy()
	p.HeartbeatTTL, p.Grace = 5*time.Second, 8*time.Second
	svc, err := NewService(st, WithClock(clock), WithPolicy(p), WithSessionTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	svc.live.renewOnce(context.Background(), clock.Now())
	if svc.Session() == "" {
		t.Fatal("no session opened")
	}
	return svc
}

func loggedEvents(t *testing.T, mem *memstore.Store, id string) []Event {
	t.Helper()
	entries, err := mem.ReadLog(context.Background(), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []Event
	for _, e := range entries {
		fx, err := rules.DecodeEffects(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fx.Events...)
	}
	return out
}

// TestForgottenSessionEndsAtItsKnownDeadline: a join's write that reaches
// the store after its session's deadline, once an expiry pass has
// forgotten the session (it held no lobby then), leaves a connection held
// by a session the store no longer knows. The Service that knew the
// session's deadline ends that connection at it, not at the lobby's last
// transition time (the join's own).
func TestForgottenSessionEndsAtItsKnownDeadline(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	hw := &hookedWrites{Store: mem, id: "l"}
	svc := sessionService(t, store.ComposeWith(hw, store.Of(mem)), clock, 3*time.Second)
	deadline := t0.Add(3 * time.Second)
	hw.before = func() {
		// The write is slow: the session's deadline passes, and an
		// expiry pass forgets the session, which holds no lobby yet.
		clock.Advance(4 * time.Second)
		if _, err := mem.ExpiredSessions(ctx, clock.Now(), 10); err != nil {
			t.Error(err)
		}
	}
	if _, err := svc.Join(ctx, "l", "p-17", nil); err != nil {
		t.Fatal(err)
	}
	if ds, _ := mem.SessionDeadlines(ctx, []string{svc.live.id}); !ds[0].IsZero() {
		t.Fatalf("the store still knows the session (deadline %v): the test did not set up what it means to", ds[0])
	}
	if _, err := svc.Snapshot(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	var timedOut []Event
	for _, e := range loggedEvents(t, mem, "l") {
		if e.Reason == ReasonTimedOut {
			timedOut = append(timedOut, e)
		}
	}
	if len(timedOut) != 1 || !timedOut[0].At.Equal(deadline) {
		t.Fatalf("time-outs %+v, want p-17 at the session's deadline %v", timedOut, deadline)
	}
}

// TestDrainReachesLobbiesOnlyTheStoreKnows: a join whose write committed
// but reported a failure is unknown to the Service's memory; Drain finds
// its lobby in the store's index of the session and drains it too.
func TestDrainReachesLobbiesOnlyTheStoreKnows(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	hw := &hookedWrites{Store: mem, id: "l2", after: true}
	svc := sessionService(t, store.ComposeWith(hw, store.Of(mem)), clock, 15*time.Second)
	if _, err := svc.Join(ctx, "l1", "p-17", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Join(ctx, "l2", "p-23", nil); !errors.Is(err, errHooked) {
		t.Fatalf("join with a write that fails after committing: %v", err)
	}
	clock.Advance(time.Second)
	if err := svc.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"l1", "l2"} {
		evs := loggedEvents(t, mem, id)
		if e := evs[len(evs)-1]; e.Reason != ReasonDisconnected || !e.At.Equal(clock.Now()) {
			t.Errorf("lobby %s: last event %+v, want the drain's disconnect at %v", id, e, clock.Now())
		}
	}
}

// TestDrainThatMissesALobbyKeepsTheDeadline: when a lobby's drain fails,
// its connections stay held by the session; the session is ended at its
// current deadline (no renewal succeeds any more), not moved back to now,
// so that every process ends those connections at the same moment.
func TestDrainThatMissesALobbyKeepsTheDeadline(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	hw := &hookedWrites{Store: mem, id: "l"}
	svc := sessionService(t, store.ComposeWith(hw, store.Of(mem)), clock, 15*time.Second)
	id := svc.Session()
	if _, err := svc.Join(ctx, "l", "p-17", nil); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	hw.instead = true
	if err := svc.Drain(ctx); !errors.Is(err, errHooked) {
		t.Fatalf("Drain with a failing lobby: %v, want its error", err)
	}
	ds, err := mem.SessionDeadlines(ctx, []string{id})
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(15 * time.Second); !ds[0].Equal(want) {
		t.Errorf("session deadline after the failed drain %v, want it kept at %v", ds[0], want)
	}
	if err := mem.RenewSession(ctx, id, clock.Now(), clock.Now().Add(time.Minute)); !errors.Is(err, store.ErrSessionEnded) {
		t.Errorf("renewal after the drain: %v, want ErrSessionEnded", err)
	}
}

// TestUnconfirmedHeldJoinStillTimesOut: a join through the session whose
// write committed but reported a failure leaves a connection held by the
// session that the Service never learnt of. Once the Service sees it in
// the lobby (its next transaction there, such as the client's retry), it
// keeps it like its other connections: silent, it times out one heartbeat
// TTL later instead of living as long as the session.
func TestUnconfirmedHeldJoinStillTimesOut(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	hw := &hookedWrites{Store: mem, id: "l", after: true}
	svc := sessionService(t, store.ComposeWith(hw, store.Of(mem)), clock, time.Minute)
	if _, err := svc.Join(ctx, "l", "p-17", nil); !errors.Is(err, errHooked) {
		t.Fatalf("join with a write that fails after committing: %v", err)
	}
	// The client tries again: a second tab of the same player.
	retry, err := svc.Join(ctx, "l", "p-17", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Only the retry's tab heartbeats; the first one is a ghost.
	for range 4 {
		clock.Advance(2 * time.Second)
		if res, err := svc.Heartbeat(ctx, "l", "p-17", retry.Gen); err != nil || res.Outcome != OutcomeApplied {
			t.Fatalf("heartbeat of the retry's tab: %+v, %v", res, err)
		}
		svc.live.expireDue(ctx, svc.clock.Now(), 1)
	}
	st, err := mem.Load(ctx, "l")
	if err != nil {
		t.Fatal(err)
	}
	s, err := rules.DecodeState(st.Data)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Member("p-17").Conns; len(c) != 1 || c[0].Gen != retry.Gen {
		t.Fatalf("p-17's connections %+v 8s after the first join (heartbeat TTL 5s), want only the retry's", c)
	}
}
