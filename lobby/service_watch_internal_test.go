package lobby

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/store"
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

// notifyingStore stands for a store whose change notification can arrive
// before Write returns: beforeWrite and afterWrite run inside Write, around
// the inner store's commit. It counts log reads. It has no WriteBatch, so
// every write of a Service goes through Write.
type notifyingStore struct {
	store.Store
	beforeWrite, afterWrite func(w store.Write)
	// lostReply: a Write that committed reports an error anyway, as when
	// the connection drops before the reply arrives.
	lostReply bool
	reads     atomic.Int64
}

func (n *notifyingStore) Write(ctx context.Context, w store.Write) error {
	if n.beforeWrite != nil {
		n.beforeWrite(w)
	}
	err := n.Store.Write(ctx, w)
	if err == nil && n.afterWrite != nil {
		n.afterWrite(w)
	}
	if err == nil && n.lostReply {
		return errors.New("connection lost before the reply")
	}
	return err
}

func (n *notifyingStore) ReadLog(ctx context.Context, id string, after uint64, limit int) ([]store.Entry, error) {
	n.reads.Add(1)
	return n.Store.ReadLog(ctx, id, after, limit)
}

// TestWatchOwnNotificationNeedsNoRead: the notification of this Service's
// own commit, arriving while its write is still in flight, does not send
// the Watchers to the log: the commit reaches them from the Service itself
// once the write returns. (A reader woken by it would read the log once
// per commit: on PostgreSQL, most of a busy server's log reads.)
func TestWatchOwnNotificationNeedsNoRead(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	ns := &notifyingStore{Store: memstore.New()}
	a, err := NewService(ns, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.Watch(ctx, "l", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	notified := 0
	ns.afterWrite = func(wr store.Write) {
		a.hub.remote(wr.ID, wr.Expected+1)
		notified++
		if w.lw.stale() {
			t.Errorf("version %d: the notification of the Service's own write in flight sends its Watchers to the log", wr.Expected+1)
		}
	}
	for i := range 5 {
		if _, err := a.Join(ctx, "l", fmt.Sprintf("p%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for rev := uint64(1); rev <= 5; rev++ {
		c, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Snapshot != nil || len(c.Events) != 1 || c.Events[0].Revision != rev {
			t.Fatalf("change %+v, want the event of revision %d", c, rev)
		}
	}
	if notified != 5 {
		t.Fatalf("%d notifications, want 5", notified)
	}
	if n := ns.reads.Load(); n != 0 {
		t.Fatalf("%d log reads for the Service's own commits, want 0", n)
	}
}

// TestWatchNotificationOfLostRace: while this Service's write of a version
// is in flight, the notification of that version comes from another
// process, whose commit makes the write fail; the Service then writes
// nothing (its command is a no-op on the fresh lobby). The held-back
// notification must still send the Watcher to the log for that commit.
func TestWatchNotificationOfLostRace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	mem := memstore.New()
	ns := &notifyingStore{Store: mem}
	a, err := NewService(ns, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewService(mem, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Join(ctx, "l", "p1", nil); err != nil { // version 1, revision 1
		t.Fatal(err)
	}
	w, err := a.Watch(ctx, "l", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// b removes p1 (version 2); a, which does not run and so hears of it
	// only through the notification below, still has p1 cached.
	if _, err := b.Leave(ctx, "l", "p1"); err != nil {
		t.Fatal(err)
	}
	ns.beforeWrite = func(wr store.Write) {
		ns.beforeWrite = nil
		if wr.Expected+1 != 2 {
			t.Errorf("a writes version %d, want 2", wr.Expected+1)
		}
		a.hub.remote("l", 2) // b's commit, while a's write is in flight
	}
	if res, err := a.Leave(ctx, "l", "p1"); err != nil || res.Changed {
		t.Fatalf("a's Leave after b's: %+v, %v; want a no-op", res, err)
	}
	c, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("the Watcher never got b's commit: %v", err)
	}
	if c.Version != 2 || len(c.Events) != 1 || c.Events[0].Revision != 2 {
		t.Fatalf("change %+v, want b's commit at version 2, revision 2", c)
	}
}

// TestWatchNotificationOfLostReply: the Service's write commits, its
// notification arrives while the write is in flight, and then the write
// reports an error (the reply was lost), so the Service cannot hand the
// commit out itself. The held-back notification must send the Watcher to
// the log, where the commit is.
func TestWatchNotificationOfLostReply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	ns := &notifyingStore{Store: memstore.New()}
	a, err := NewService(ns, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.Watch(ctx, "l", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ns.lostReply = true
	ns.afterWrite = func(wr store.Write) { a.hub.remote(wr.ID, wr.Expected+1) }
	if _, err := a.Join(ctx, "l", "p1", nil); err == nil {
		t.Fatal("Join reported success; the store said the write failed")
	}
	c, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("the Watcher never got the commit whose reply was lost: %v", err)
	}
	if c.Version != 1 || len(c.Events) != 1 || c.Events[0].Revision != 1 {
		t.Fatalf("change %+v, want the join at version 1, revision 1", c)
	}
}
