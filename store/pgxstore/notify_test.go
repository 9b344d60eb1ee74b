package pgxstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lobbyhost/lobbyhost/store"
)

// pids records the backend PIDs of a Store's listening connections.
func pids(s *Store) <-chan uint32 {
	ch := make(chan uint32, 16)
	s.notify.listened = func(pid uint32) { ch <- pid }
	return ch
}

func nextPID(t *testing.T, ch <-chan uint32, what string) uint32 {
	t.Helper()
	select {
	case pid := <-ch:
		return pid
	case <-time.After(15 * time.Second):
		t.Fatalf("no listening connection within 15s: %s", what)
		return 0
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// otherProcess returns a Store on the same schema as s but on a pool of its
// own, as another server process would have.
func otherProcess(t *testing.T, s *Store) *Store {
	t.Helper()
	pool, err := pgxpool.New(ctxT(t), testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	o, err := New(pool, WithSchema(s.schema))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestNotifyHearsOtherProcesses: writes with events made through another
// pool (another process) wake this Store's subscribers.
func TestNotifyHearsOtherProcesses(t *testing.T) {
	s := newTestStore(t)
	other := otherProcess(t, s)
	ctx := ctxT(t)
	ch, err := s.Notify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for v := range uint64(3) {
		ev := []store.Event{{Lobby: "l", Seq: v + 1}}
		if err := other.Write(ctx, store.Write{ID: "l", Expected: v, Events: ev}); err != nil {
			t.Fatal(err)
		}
		receive(t, ch, "another process's Write with events")
		drain(ch)
	}
}

// TestOnlyEventWritesNotify: heartbeats (writes without events), failed
// writes and Deletes send no notification; a write with events sends one.
// Notifications arrive in commit order, so a marker sent last bounds what
// the listener must have seen.
func TestOnlyEventWritesNotify(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeQuietly(conn)
	if _, err := conn.Exec(ctx, "LISTEN "+quoteIdent(s.channel)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Unix(1_000, 0)
	writes := []struct {
		w       store.Write
		wantErr error
	}{
		{store.Write{ID: "hb", Deadline: deadline}, nil},                                              // create
		{store.Write{ID: "hb", Expected: 1, Deadline: deadline.Add(time.Second)}, nil},                // later
		{store.Write{ID: "hb", Expected: 2, Deadline: deadline.Add(-time.Second)}, nil},               // earlier
		{store.Write{ID: "hb", Expected: 3}, nil},                                                     // cleared
		{store.Write{ID: "hb", Expected: 9, Events: []store.Event{{Lobby: "hb"}}}, store.ErrConflict}, // failed
		{store.Write{ID: "ev", Events: []store.Event{{Lobby: "ev", Seq: 1}}}, nil},                    // the one
	}
	for i, x := range writes {
		if err := s.Write(ctx, x.w); !errors.Is(err, x.wantErr) {
			t.Fatalf("write %d = %v, want %v", i, err, x.wantErr)
		}
	}
	if err := s.Delete(ctx, "hb", 4, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "SELECT pg_notify($1, 'marker')", s.channel); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("waiting for notifications: %v (got %q so far)", err, got)
		}
		if n.Payload == "marker" {
			break
		}
		got = append(got, n.Payload)
	}
	if len(got) != 1 {
		t.Fatalf("%d notifications before the marker, want 1 (for the one write with events)", len(got))
	}
}

// TestNotifyReconnects: when the listening connection is killed, the
// listener reconnects, tells subscribers that they may have missed
// something, and hears later writes again.
func TestNotifyReconnects(t *testing.T) {
	s := newTestStore(t)
	listened := pids(s)
	ctx := ctxT(t)
	ch, err := s.Notify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := nextPID(t, listened, "first Notify")
	var killed bool
	if err := s.pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", int32(first)).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", first, killed, err)
	}
	second := nextPID(t, listened, "after its connection was killed")
	if second == first {
		t.Fatalf("listener still on killed backend %d", first)
	}
	receive(t, ch, "the listener reconnected")
	drain(ch)
	if err := s.Write(ctx, store.Write{ID: "l", Events: []store.Event{{Lobby: "l", Seq: 1}}}); err != nil {
		t.Fatal(err)
	}
	receive(t, ch, "a Write after the reconnect")
}

// TestNotifyKeepalive: quiet periods are bridged by pings that keep the
// same connection, which still delivers afterwards.
func TestNotifyKeepalive(t *testing.T) {
	s := newTestStore(t)
	s.notify.keepalive = 5 * time.Millisecond
	listened := pids(s)
	ctx := ctxT(t)
	ch, err := s.Notify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nextPID(t, listened, "Notify")
	for start := time.Now(); s.notify.pings.Load() < 3; time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d keepalive pings within 10s, want 3", s.notify.pings.Load())
		}
	}
	select {
	case pid := <-listened:
		t.Fatalf("keepalive reconnected (new backend %d), want the same connection kept", pid)
	default:
	}
	if err := s.Write(ctx, store.Write{ID: "l", Events: []store.Event{{Lobby: "l", Seq: 1}}}); err != nil {
		t.Fatal(err)
	}
	receive(t, ch, "a Write after keepalive pings")
}

// TestNotifyListensOnlyWhileSubscribed: the listening connection closes
// with the last subscription, and the next Notify opens a new one.
func TestNotifyListensOnlyWhileSubscribed(t *testing.T) {
	s := newTestStore(t)
	listened := pids(s)
	ctx := ctxT(t)
	ctx1, cancel1 := context.WithCancel(ctx)
	ctx2, cancel2 := context.WithCancel(ctx)
	ch1, err := s.Notify(ctx1)
	if err != nil {
		t.Fatal(err)
	}
	ch2, err := s.Notify(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	pid := nextPID(t, listened, "Notify")
	closed := func(ch <-chan struct{}) {
		t.Helper()
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Notify channel not closed within 10s of its context")
			}
		}
	}
	running := func() bool {
		s.notify.mu.Lock()
		defer s.notify.mu.Unlock()
		return s.notify.stop != nil
	}
	cancel1()
	closed(ch1)
	if !running() {
		t.Fatal("listener stopped while a subscription is open")
	}
	cancel2()
	closed(ch2)
	if running() {
		t.Fatal("listener still running after the last subscription ended")
	}
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("listening backend %d still connected 10s after the last subscription ended", pid)
		}
	}
	ch3, err := s.Notify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again := nextPID(t, listened, "Notify after the listener stopped"); again == pid {
		t.Fatalf("new subscription reuses closed backend %d", pid)
	}
	if err := s.Write(ctx, store.Write{ID: "l", Events: []store.Event{{Lobby: "l", Seq: 1}}}); err != nil {
		t.Fatal(err)
	}
	receive(t, ch3, "a Write to a new subscription")
}
