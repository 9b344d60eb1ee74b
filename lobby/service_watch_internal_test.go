package lobby

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// TestWatchPendingIsBounded: a Watcher whose reader stops calling Next,
// while this Service's commits keep following another process's, holds no
// more than its buffer of waiting commits; when the reader comes back it
// gets the lobby as it is (here a snapshot, since it is further behind
// than its buffer) and then every revision after, in order.
func TestWatchPendingIsBounded(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	mem := memstore.New()
	a, err := NewService(mem, WithClock(clock), WithWatchBuffer(64))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewService(mem, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	a.hub.buffer = 4 // the pending list's bound, small enough to reach
	w, err := a.Watch(ctx, "l", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 10 {
		// b's commit is unknown to a (a does not run); a's next commit
		// then follows a gap and waits.
		if _, err := b.Join(ctx, "l", fmt.Sprintf("b%d", i), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Join(ctx, "l", fmt.Sprintf("a%d", i), nil); err != nil {
			t.Fatal(err)
		}
		w.lw.mu.Lock()
		n := len(w.lw.pending)
		w.lw.mu.Unlock()
		if n > 4 {
			t.Fatalf("after %d rounds %d commits wait, want at most 4", i+1, n)
		}
	}
	var rev uint64
	for rev < 20 {
		c, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Snapshot != nil {
			rev = c.Snapshot.Revision
			continue
		}
		for _, e := range c.Events {
			if e.Revision != rev+1 {
				t.Fatalf("revision %d after %d", e.Revision, rev)
			}
			rev = e.Revision
		}
	}
}

// TestWatchCatchesUpInOrder: the same schedule with room in the buffer:
// every revision arrives, in order, without a snapshot.
func TestWatchCatchesUpInOrder(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	mem := memstore.New()
	a, _ := NewService(mem, WithClock(clock))
	b, _ := NewService(mem, WithClock(clock))
	w, err := a.Watch(ctx, "l", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 10 {
		if _, err := b.Join(ctx, "l", fmt.Sprintf("b%d", i), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Join(ctx, "l", fmt.Sprintf("a%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	var rev uint64
	for rev < 20 {
		c, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Snapshot != nil {
			t.Fatalf("a snapshot at revision %d; the buffer had room", c.Snapshot.Revision)
		}
		for _, e := range c.Events {
			if e.Revision != rev+1 {
				t.Fatalf("revision %d after %d", e.Revision, rev)
			}
			rev = e.Revision
		}
	}
}
