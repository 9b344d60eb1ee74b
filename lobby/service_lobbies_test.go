package lobby

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby/rules"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/store/memstore"
)

func newTestService(t *testing.T, clock clockwork.Clock, st *memstore.Store, opts ...Option) *Service {
	t.Helper()
	s, err := NewService(st, append([]Option{WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCacheIsBounded: the cache keeps at most its bound of lobbies, and no
// lock outlives its last user.
func TestCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	s := newTestService(t, clock, memstore.New(), WithCache(64, time.Hour))
	for i := range 1000 {
		if _, err := s.Join(ctx, fmt.Sprintf("room%d", i), "a", nil); err != nil {
			t.Fatal(err)
		}
	}
	slots, cached := s.lobbies.size()
	if cached > 64 || slots != cached {
		t.Fatalf("after 1000 lobbies: %d slots, %d cached; want at most 64, and no slot without a cached lobby", slots, cached)
	}
	if cached == 0 {
		t.Fatal("nothing cached at all")
	}
}

// TestCacheDropsIdleLobbies: a lobby emptied by another process stays in
// this one's cache only until it has been idle for the bound; the sweeper
// pass trims it even if nothing touches that lobby again.
func TestCacheDropsIdleLobbies(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	a := newTestService(t, clock, mem, WithCache(1000, time.Minute))
	b := newTestService(t, clock, mem)
	if _, err := a.Join(ctx, "l", "p", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Leave(ctx, "l", "p"); err != nil {
		t.Fatal(err)
	}
	if _, cached := a.lobbies.size(); cached != 1 {
		t.Fatalf("cached %d, want 1 before the idle bound", cached)
	}
	clock.Advance(time.Minute + time.Second)
	if _, err := a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if slots, cached := a.lobbies.size(); slots != 0 || cached != 0 {
		t.Fatalf("after the idle bound: %d slots, %d cached, want none", slots, cached)
	}
}

// TestNoCacheNoSlots: without a cache, the table holds nothing between
// commands, and refusals and no-ops leave nothing behind either.
func TestNoCacheNoSlots(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	s := newTestService(t, clock, memstore.New(), WithoutCache())
	if _, err := s.Join(ctx, "l", "p", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransferHost(ctx, "l", "q", "p"); err == nil {
		t.Fatal("transfer by a non-host accepted")
	}
	if _, err := s.Heartbeat(ctx, "l", "p", 99); err != nil {
		t.Fatal(err)
	}
	if slots, cached := s.lobbies.size(); slots != 0 || cached != 0 {
		t.Fatalf("%d slots, %d cached, want none", slots, cached)
	}
}

// TestCatchUpOnlyWriteKeepsLastDeadlineTime: a write that only caught up
// stamps the lobby with the last deadline it applied, not the time of the
// command that caused it.
func TestCatchUpOnlyWriteKeepsLastDeadlineTime(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	s := newTestService(t, clock, mem)
	res, err := s.Join(ctx, "l", "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Join(ctx, "l", "q", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Disconnect(ctx, "l", "p", res.Gen); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	// A stale heartbeat: it changes nothing itself, but its catch-up
	// commits p's lease expiry and q's heartbeat timeout.
	if r, err := s.Heartbeat(ctx, "l", "p", res.Gen); err != nil || r.Outcome != OutcomeStale {
		t.Fatalf("stale heartbeat: %+v, %v", r, err)
	}
	rec, err := mem.Load(ctx, "l")
	if err != nil {
		t.Fatal(err)
	}
	st, err := rules.DecodeState(rec.Data)
	if err != nil {
		t.Fatal(err)
	}
	p := DefaultPolicy()
	last := t0.Add(p.HeartbeatTTL + p.Grace) // q's generation times out at TTL, its grace ends after it
	if !st.Updated.Equal(last) {
		t.Fatalf("last transition time %v, want the last deadline applied, %v", st.Updated, last)
	}
}

// TestHeartbeatUnderTTLZeroLeavesNoDeadline: with heartbeat deadlines off,
// a heartbeat sets none, and one on a generation attached under an earlier
// policy with a TTL removes its deadline (the policy in force now decides).
func TestHeartbeatUnderTTLZeroLeavesNoDeadline(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	old := newTestService(t, clock, mem)
	g, err := old.Join(ctx, "l", "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := DefaultPolicy()
	p.HeartbeatTTL = 0
	s := newTestService(t, clock, mem, WithPolicy(p))
	g2, err := s.Join(ctx, "l", "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Heartbeat(ctx, "l", "p", g2.Gen); err != nil || r.Changed {
		t.Fatalf("heartbeat under TTL 0 on a generation without deadline: %+v, %v; want applied, unchanged", r, err)
	}
	clock.Advance(time.Second)
	if r, err := s.Heartbeat(ctx, "l", "p", g.Gen); err != nil || !r.Changed || r.Outcome != OutcomeApplied {
		t.Fatalf("heartbeat under TTL 0 on a generation with a deadline: %+v, %v", r, err)
	}
	rec, err := mem.Load(ctx, "l")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Deadline.IsZero() {
		t.Fatalf("store deadline %v, want none", rec.Deadline)
	}
	st, err := rules.DecodeState(rec.Data)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Member("p").Conns {
		if !c.Deadline.IsZero() {
			t.Fatalf("generation %d keeps deadline %v under TTL 0", c.Gen, c.Deadline)
		}
	}
}
