package lobby

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// sweepCounter is a memstore that counts the calls a sweeper makes to find
// work: Due and Claim.
type sweepCounter struct {
	*memstore.Store
	due, claim atomic.Int64
}

func (c *sweepCounter) Due(ctx context.Context, now time.Time, limit int) ([]store.Due, error) {
	c.due.Add(1)
	return c.Store.Due(ctx, now, limit)
}

func (c *sweepCounter) Claim(ctx context.Context, now time.Time, limit int, hold time.Duration) ([]store.Due, error) {
	c.claim.Add(1)
	return c.Store.Claim(ctx, now, limit, hold)
}

func (c *sweepCounter) calls() int64 { return c.due.Load() + c.claim.Load() }

// TestSweepPassRoundTrips: a pass that finds nothing due makes one store
// call, which also tells it when to wake; a pass with work makes two, the
// look and the claim of the due lobbies.
func TestSweepPassRoundTrips(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	st := &sweepCounter{Store: memstore.New()}
	s, err := NewService(st, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Join(ctx, "l", "ana", nil); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := s.Join(ctx, "m", "bo", nil); err != nil {
		t.Fatal(err)
	}

	before := st.calls()
	p, err := s.sweepPass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.calls() - before; got != 1 || p.worked || !p.hasNext {
		t.Fatalf("idle pass: %d store calls, worked %v, next known %v; want 1 call, no work, the next deadline", got, p.worked, p.hasNext)
	}
	if want := t0.Add(s.Policy().HeartbeatTTL); !p.next.Equal(want) {
		t.Fatalf("idle pass: next deadline %v, want %v (ana's heartbeat deadline)", p.next, want)
	}

	clock.Advance(s.Policy().HeartbeatTTL - time.Second) // ana's deadline, not bo's
	before = st.calls()
	p, err = s.sweepPass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.calls() - before; got != 2 || !p.worked || p.changed != 1 {
		t.Fatalf("pass with work: %d store calls, worked %v, changed %d; want 2 calls and 1 lobby changed", got, p.worked, p.changed)
	}
	// The look also showed when the next lobby is due: no third call.
	if want := t0.Add(time.Second + s.Policy().HeartbeatTTL); !p.hasNext || !p.next.Equal(want) {
		t.Fatalf("pass with work: next deadline %v (known %v), want %v (bo's heartbeat deadline in m)", p.next, p.hasNext, want)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestSweepLostToAnotherProcessIsNoFailure: due lobbies that another
// process has claimed are its work; the sweeper neither reports a failure
// nor spins, and takes them over once the claim has lapsed.
func TestSweepLostToAnotherProcessIsNoFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := clockwork.NewFakeClockAt(t0)
	st := &sweepCounter{Store: memstore.New()}
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	hold := 2 * time.Second
	s, err := NewService(st, WithClock(clock), WithLogger(logger), WithClaimHold(hold))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Join(ctx, "l", "ana", nil); err != nil {
		t.Fatal(err)
	}
	ttl := s.Policy().HeartbeatTTL
	clock.Advance(ttl)
	// Another process claims the due lobby first and then stalls.
	if got, err := st.Store.Claim(ctx, clock.Now(), 10, hold); err != nil || len(got) != 1 {
		t.Fatalf("the other process's claim: %v, %v", got, err)
	}

	p, err := s.sweepPass(ctx)
	if err != nil || !p.shutOut || p.changed != 0 {
		t.Fatalf("pass against another process's claim: %+v, %v; want shut out, no error", p, err)
	}

	due := func() bool {
		d, err := st.Store.Due(ctx, clock.Now(), 1)
		if err != nil {
			t.Fatal(err)
		}
		return len(d) == 1
	}
	done := make(chan error, 1)
	calls := st.calls()
	go func() { done <- s.Run(ctx) }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// The first pass looks and is shut out (two calls), and leaves the
	// lobby to the process that claimed it.
	waitFor("the sweeper's first pass", func() bool { return st.calls() >= calls+2 })
	if !due() {
		t.Fatal("the sweeper advanced a lobby another process had claimed")
	}
	// Once the claim has lapsed, the sweeper takes the lobby over.
	waitFor("the lapsed claim taken over", func() bool {
		clock.Advance(100 * time.Millisecond)
		return !due()
	})
	if lapse := t0.Add(ttl + hold); clock.Now().Before(lapse) {
		t.Fatalf("the lobby was advanced at %v, before the claim lapsed at %v", clock.Now(), lapse)
	}
	if strings.Contains(logs.String(), "sweep failed") {
		t.Fatalf("a sweep lost to another process was logged as a failure:\n%s", logs.String())
	}
	cancel()
	<-done
}
