package pgxstore

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
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

// TestSubscribeHearsOtherProcesses: writes with a log entry made through
// another pool (another process) reach this Store's feeds, naming lobby and
// position, for IDs of any bytes.
func TestSubscribeHearsOtherProcesses(t *testing.T) {
	s := newTestStore(t)
	other := otherProcess(t, s)
	ctx := ctxT(t)
	feed, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"l", "a b", "\x00nul\x00", "é/+=", strings.Repeat("\xff", 200)} {
		for v := range uint64(3) {
			if err := other.Write(ctx, store.Write{ID: id, Expected: v, Effects: []byte("e")}); err != nil {
				t.Fatal(err)
			}
			receiveChange(t, feed, store.Change{Lobby: id, Version: v + 1}, "another process's Write with a log entry")
		}
	}
}

// TestPayloadRoundTrip: every ID and position survives the payload, and
// what is not a payload of this release is refused.
func TestPayloadRoundTrip(t *testing.T) {
	for _, c := range []store.Change{{Lobby: "x", Version: 0}, {Lobby: "\x00", Version: 1}, {Lobby: " a b ", Version: math.MaxUint64}} {
		got, ok := parsePayload(changePayload(c.Lobby, c.Version))
		if !ok || got != c {
			t.Errorf("parsePayload(changePayload(%+v)) = %+v, %v", c, got, ok)
		}
	}
	for _, p := range []string{"", "1", "x eA==", "1 ", "1 !!", "-1 eA=="} {
		if c, ok := parsePayload(p); ok {
			t.Errorf("parsePayload(%q) = %+v, true; want false", p, c)
		}
	}
}

// TestUnreadablePayloadLosesFeed: a notification this release cannot read
// (from a process of an earlier one, which sent empty payloads) marks the
// feed lost, so readers check heads instead of missing the write.
func TestUnreadablePayloadLosesFeed(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	feed, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "SELECT pg_notify($1, '')", s.channel); err != nil {
		t.Fatal(err)
	}
	receiveLost(t, feed, "an empty payload")
}

// TestOnlyLogWritesNotify: heartbeats (writes without a log entry), failed
// writes and Deletes send no notification; a write with an entry sends one.
// Notifications arrive in commit order, so a marker sent last bounds what
// the listener must have seen.
func TestOnlyLogWritesNotify(t *testing.T) {
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
		{store.Write{ID: "hb", Deadline: deadline}, nil},                                // create
		{store.Write{ID: "hb", Expected: 1, Deadline: deadline.Add(time.Second)}, nil},  // later
		{store.Write{ID: "hb", Expected: 2, Deadline: deadline.Add(-time.Second)}, nil}, // earlier
		{store.Write{ID: "hb", Expected: 3}, nil},                                       // cleared
		{store.Write{ID: "hb", Expected: 9, Effects: []byte("x")}, store.ErrConflict},   // failed
		{store.Write{ID: "ev", Effects: []byte("x")}, nil},                              // the one
	}
	for i, x := range writes {
		if err := s.Write(ctx, x.w); !errors.Is(err, x.wantErr) {
			t.Fatalf("write %d = %v, want %v", i, err, x.wantErr)
		}
	}
	if err := s.Delete(ctx, store.Deletion{ID: "hb", Expected: 4}); err != nil {
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
	if want := []string{changePayload("ev", 1)}; !slices.Equal(got, want) {
		t.Fatalf("notifications before the marker: %q, want %q (for the one write with an entry)", got, want)
	}
}

// TestNotifyReconnects: when the listening connection is killed, the
// listener reconnects, tells subscribers that they may have missed
// something, and hears later writes again.
func TestNotifyReconnects(t *testing.T) {
	s := newTestStore(t)
	listened := pids(s)
	ctx := ctxT(t)
	feed, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := nextPID(t, listened, "first Subscribe")
	var killed bool
	if err := s.pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", int32(first)).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", first, killed, err)
	}
	second := nextPID(t, listened, "after its connection was killed")
	if second == first {
		t.Fatalf("listener still on killed backend %d", first)
	}
	receiveLost(t, feed, "the listener reconnected")
	// The feed is marked lost once more after the new LISTEN; wait for that
	// so the change below is not taken together with it.
	for s.notify.lostAfterReconnect.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	feed.Take()
	if err := s.Write(ctx, store.Write{ID: "l", Effects: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	receiveChange(t, feed, store.Change{Lobby: "l", Version: 1}, "a Write after the reconnect")
}

// TestNotifyKeepalive: quiet periods are bridged by pings that keep the
// same connection, which still delivers afterwards.
func TestNotifyKeepalive(t *testing.T) {
	s := newTestStore(t)
	s.notify.keepalive = 5 * time.Millisecond
	listened := pids(s)
	ctx := ctxT(t)
	feed, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nextPID(t, listened, "Subscribe")
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
	if err := s.Write(ctx, store.Write{ID: "l", Effects: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	receiveChange(t, feed, store.Change{Lobby: "l", Version: 1}, "a Write after keepalive pings")
}

// TestNotifyListensOnlyWhileSubscribed: the listening connection closes
// with the last subscription, and the next Subscribe opens a new one.
func TestNotifyListensOnlyWhileSubscribed(t *testing.T) {
	s := newTestStore(t)
	listened := pids(s)
	ctx := ctxT(t)
	ctx1, cancel1 := context.WithCancel(ctx)
	ctx2, cancel2 := context.WithCancel(ctx)
	f1, err := s.Subscribe(ctx1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Subscribe(ctx2); err != nil {
		t.Fatal(err)
	}
	pid := nextPID(t, listened, "Subscribe")
	state := func() (subs int, running bool) {
		s.notify.mu.Lock()
		defer s.notify.mu.Unlock()
		return len(s.notify.subs), s.notify.stop != nil
	}
	waitSubs := func(want int) {
		t.Helper()
		for start := time.Now(); ; time.Sleep(time.Millisecond) {
			if n, _ := state(); n == want {
				return
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("subscriptions not down to %d within 10s of their contexts", want)
			}
		}
	}
	cancel1()
	waitSubs(1)
	if _, running := state(); !running {
		t.Fatal("listener stopped while a subscription is open")
	}
	if err := s.Write(ctx, store.Write{ID: "m", Effects: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	cancel2()
	waitSubs(0)
	if _, running := state(); running {
		t.Fatal("listener still running after the last subscription ended")
	}
	if changes, lost := f1.Take(); lost || len(changes) > 0 {
		t.Errorf("ended subscription received %v (lost %v) after its context was done", changes, lost)
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
	f3, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again := nextPID(t, listened, "Subscribe after the listener stopped"); again == pid {
		t.Fatalf("new subscription reuses closed backend %d", pid)
	}
	if err := s.Write(ctx, store.Write{ID: "l", Effects: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	receiveChange(t, f3, store.Change{Lobby: "l", Version: 1}, "a Write to a new subscription")
}
