package pgxstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lobbyhost/lobbyhost/store"
)

// newRetentionStore is newTestStore with a retention of its own.
func newRetentionStore(t *testing.T, r store.Retention) *Store {
	t.Helper()
	s := newTestStore(t)
	o, err := New(s.pool, WithSchema(s.schema), WithRetention(r))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// write is Write that fails the test on an error.
func write(t *testing.T, s *Store, w store.Write) {
	t.Helper()
	if err := s.Write(ctxT(t), w); err != nil {
		t.Fatalf("Write(%q, expected %d) = %v", w.ID, w.Expected, err)
	}
}

func readLog(t *testing.T, s *Store, id string, after uint64) []store.Entry {
	t.Helper()
	got, err := s.ReadLog(ctxT(t), id, after, 1000)
	if err != nil {
		t.Fatalf("ReadLog(%q, %d) = %v", id, after, err)
	}
	return got
}

func wantCompacted(t *testing.T, s *Store, id string, after, trimmed uint64) {
	t.Helper()
	_, err := s.ReadLog(ctxT(t), id, after, 1000)
	var ce *store.CompactedError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("ReadLog(%q, %d) = %v, want a *store.CompactedError", id, after, err)
	}
	if want := (store.CompactedError{Lobby: id, After: after, Trimmed: trimmed}); *ce != want {
		t.Fatalf("ReadLog(%q, %d) = %+v, want %+v", id, after, *ce, want)
	}
}

// rowCount checks the lobby's stored entry count against the log.
func checkCounts(t *testing.T, s *Store) {
	t.Helper()
	var bad int
	err := s.pool.QueryRow(ctxT(t), s.sql(`SELECT count(*) FROM _S_.lobbies AS l
WHERE l.log_count <> (SELECT count(*) FROM _S_.log AS g WHERE g.lobby = l.id)`)).Scan(&bad)
	if err != nil || bad != 0 {
		t.Fatalf("%d lobbies whose log_count disagrees with the log (%v)", bad, err)
	}
	var orphans int
	err = s.pool.QueryRow(ctxT(t), s.sql(`SELECT count(*) FROM _S_.log AS g
WHERE NOT EXISTS (SELECT FROM _S_.lobbies AS l WHERE l.id = g.lobby)`)).Scan(&orphans)
	if err != nil || orphans != 0 {
		t.Fatalf("%d log entries without a lobby row (%v)", orphans, err)
	}
}

// TestLogAppendsWithTheRecord: entries sit at the versions their writes
// created, a nil Effects appends nothing, an empty one an empty entry, a
// failed write nothing, and At comes back in UTC to the microsecond.
func TestLogAppendsWithTheRecord(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	at := time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	write(t, s, store.Write{ID: "l", Data: []byte("1"), At: at, Effects: []byte("one")})
	write(t, s, store.Write{ID: "l", Expected: 1, Data: []byte("2"), At: at})
	write(t, s, store.Write{ID: "l", Expected: 2, Data: []byte("3"), At: at.Add(time.Second), Effects: []byte{}})
	if err := s.Write(ctx, store.Write{ID: "l", Expected: 2, Effects: []byte("lost")}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale Write = %v, want ErrConflict", err)
	}
	write(t, s, store.Write{ID: "l", Expected: 3, Data: []byte("4"), At: time.Time{}, Effects: []byte("zero time")})
	micro := at.Truncate(time.Microsecond).UTC()
	want := []store.Entry{
		{Lobby: "l", Version: 1, At: micro, Data: []byte("one")},
		{Lobby: "l", Version: 3, At: micro.Add(time.Second), Data: []byte{}},
		{Lobby: "l", Version: 4, At: time.Time{}, Data: []byte("zero time")},
	}
	if d := cmp.Diff(want, readLog(t, s, "l", 0)); d != "" {
		t.Fatalf("ReadLog (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want[1:], readLog(t, s, "l", 1)); d != "" {
		t.Fatalf("ReadLog after 1 (-want +got):\n%s", d)
	}
	if got, err := s.ReadLog(ctx, "l", 0, 2); err != nil || len(got) != 2 || got[1].Version != 3 {
		t.Fatalf("ReadLog limit 2 = %+v, %v", got, err)
	}
	if got := readLog(t, s, "l", 4); len(got) != 0 {
		t.Fatalf("ReadLog after the head = %+v, want none", got)
	}
	if got := readLog(t, s, "never", 0); len(got) != 0 {
		t.Fatalf("ReadLog of an unknown lobby = %+v, want none", got)
	}
	if _, err := s.ReadLog(ctx, "l", 0, 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("ReadLog limit 0 = %v, want ErrInvalid", err)
	}
	heads, err := s.LogHeads(ctx, []string{"never", "l", "l"})
	if err != nil || !cmp.Equal(heads, []uint64{0, 4, 4}) {
		t.Fatalf("LogHeads = %v, %v; want [0 4 4]", heads, err)
	}
	if heads, err := s.LogHeads(ctx, nil); err != nil || len(heads) != 0 {
		t.Fatalf("LogHeads(nil) = %v, %v", heads, err)
	}
	checkCounts(t, s)
}

// TestRetentionByCount: the write that makes a lobby hold more than
// Entries entries removes the oldest; readers below what was removed get
// CompactedError, at or above it the rest.
func TestRetentionByCount(t *testing.T) {
	s := newRetentionStore(t, store.Retention{Entries: 3})
	var v uint64
	for i := range 6 {
		w := store.Write{ID: "l", Expected: v, Effects: []byte{byte(i)}}
		if i == 2 {
			w.Effects = nil // a heartbeat: position 3 holds no entry
		}
		write(t, s, w)
		v++
	}
	// Entries at 1, 2, 4, 5, 6: the three newest are kept.
	wantCompacted(t, s, "l", 0, 2)
	wantCompacted(t, s, "l", 1, 2)
	got := readLog(t, s, "l", 2)
	if len(got) != 3 || got[0].Version != 4 || got[2].Version != 6 {
		t.Fatalf("ReadLog after the trim = %+v, want 4, 5, 6", got)
	}
	if h, _ := s.LogHeads(ctxT(t), []string{"l"}); h[0] != 6 {
		t.Fatalf("LogHeads = %v, want 6", h)
	}
	// Unbounded: nothing goes.
	u := newRetentionStore(t, store.Retention{})
	for i := range uint64(10) {
		write(t, u, store.Write{ID: "l", Expected: i, Effects: []byte("e")})
	}
	if got := readLog(t, u, "l", 0); len(got) != 10 {
		t.Fatalf("unbounded retention kept %d entries, want 10", len(got))
	}
	if n, err := u.TrimLog(ctxT(t), time.Now().Add(1000*time.Hour), 100); err != nil || n != 0 {
		t.Fatalf("TrimLog without an Age = %d, %v; want 0", n, err)
	}
	checkCounts(t, s)
	checkCounts(t, u)
}

// TestTrimLogByAge: TrimLog removes entries older than Age at now, oldest
// first, up to limit; a tombstone whose last entry goes folds its floor
// into the store-wide floor.
func TestTrimLogByAge(t *testing.T) {
	s := newRetentionStore(t, store.Retention{Age: time.Minute})
	ctx := ctxT(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// a: entries at t0 and t0+2m; b: at t0+1m, then deleted with floor 9.
	write(t, s, store.Write{ID: "a", At: t0, Effects: []byte("a1")})
	write(t, s, store.Write{ID: "b", At: t0.Add(time.Minute), Effects: []byte("b1")})
	write(t, s, store.Write{ID: "a", Expected: 1, At: t0.Add(2 * time.Minute), Effects: []byte("a2")})
	if err := s.Delete(ctx, store.Deletion{ID: "b", Expected: 1, Floor: 9}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Load(ctx, "b"); !errors.Is(err, store.ErrNotFound) || r.Version != 9 {
		t.Fatalf("Load of the tombstone = %+v, %v; want floor 9", r, err)
	}
	if _, err := s.TrimLog(ctx, t0, 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("TrimLog limit 0 = %v, want ErrInvalid", err)
	}
	// Exactly a minute old is not older than Age.
	if n, err := s.TrimLog(ctx, t0.Add(time.Minute), 10); err != nil || n != 0 {
		t.Fatalf("TrimLog at t0+1m = %d, %v; want 0", n, err)
	}
	// At t0+3m a1 and b1 are old enough; limit 1 takes the oldest (a1).
	now := t0.Add(3 * time.Minute)
	if n, err := s.TrimLog(ctx, now, 1); err != nil || n != 1 {
		t.Fatalf("TrimLog limit 1 = %d, %v; want 1", n, err)
	}
	wantCompacted(t, s, "a", 0, 1)
	if got := readLog(t, s, "a", 1); len(got) != 1 || got[0].Version != 2 {
		t.Fatalf("ReadLog(a, 1) = %+v, want the entry at 2", got)
	}
	if got := readLog(t, s, "b", 0); len(got) != 1 {
		t.Fatalf("b lost its entry early: %+v", got)
	}
	if n, err := s.TrimLog(ctx, now, 10); err != nil || n != 1 {
		t.Fatalf("TrimLog = %d, %v; want 1 (b1)", n, err)
	}
	// b's tombstone went with its last entry; every ID without a row now
	// starts at 9.
	for _, id := range []string{"b", "fresh"} {
		if r, err := s.Load(ctx, id); !errors.Is(err, store.ErrNotFound) || r.Version != 9 || r.Data != nil {
			t.Fatalf("Load(%q) = %+v, %v; want the store-wide floor 9", id, r, err)
		}
		wantCompacted(t, s, id, 0, 9)
		if got := readLog(t, s, id, 9); len(got) != 0 {
			t.Fatalf("ReadLog(%q, 9) = %+v", id, got)
		}
	}
	if h, _ := s.LogHeads(ctx, []string{"a", "b"}); !cmp.Equal(h, []uint64{2, 0}) {
		t.Fatalf("LogHeads = %v, want [2 0]", h)
	}
	if err := s.Write(ctx, store.Write{ID: "fresh", Expected: 0}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("creating below the floor = %v, want ErrConflict", err)
	}
	write(t, s, store.Write{ID: "b", Expected: 9, At: now, Effects: []byte("b10")})
	if got := readLog(t, s, "b", 9); len(got) != 1 || got[0].Version != 10 {
		t.Fatalf("ReadLog(b, 9) after recreating = %+v", got)
	}
	wantCompacted(t, s, "b", 3, 9)
	// a keeps its row: it has a record. Nothing else is old enough.
	if n, err := s.TrimLog(ctx, now, 10); err != nil || n != 0 {
		t.Fatalf("TrimLog again = %d, %v; want 0", n, err)
	}
	if r, err := s.Load(ctx, "a"); err != nil || r.Version != 2 {
		t.Fatalf("Load(a) = %+v, %v", r, err)
	}
	checkCounts(t, s)
}

// TestDeleteWithoutLogFolds: a Delete of a lobby without log entries keeps
// no tombstone; the store-wide floor takes the larger of the floors, and a
// smaller one never lowers it.
func TestDeleteWithoutLogFolds(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	write(t, s, store.Write{ID: "x", Data: []byte("x")})
	write(t, s, store.Write{ID: "y", Data: []byte("y")})
	if err := s.Delete(ctx, store.Deletion{ID: "x", Expected: 1, Floor: 50}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, store.Deletion{ID: "y", Expected: 1, Floor: 7}); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT count(*) FROM _S_.lobbies`)).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d lobby rows left (%v), want 0", rows, err)
	}
	for _, id := range []string{"x", "y", "z"} {
		if r, err := s.Load(ctx, id); !errors.Is(err, store.ErrNotFound) || r.Version != 50 || r.Data != nil {
			t.Fatalf("Load(%q) = %+v, %v; want floor 50 without data", id, r, err)
		}
	}
	if err := s.Delete(ctx, store.Deletion{ID: "x", Expected: 50}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Delete without a record = %v, want ErrNotFound", err)
	}
	// With a log entry the tombstone stays, with its data.
	write(t, s, store.Write{ID: "x", Expected: 50, Data: []byte("x2"), Effects: []byte("e")})
	if err := s.Delete(ctx, store.Deletion{ID: "x", Expected: 50}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Delete at the wrong version = %v, want ErrConflict", err)
	}
	if err := s.Delete(ctx, store.Deletion{ID: "x", Expected: 51}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Load(ctx, "x"); !errors.Is(err, store.ErrNotFound) || r.Version != 51 || string(r.Data) != "x2" {
		t.Fatalf("Load of the tombstone = %+v, %v; want floor 51 with its data", r, err)
	}
	if got := readLog(t, s, "x", 50); len(got) != 1 || got[0].Version != 51 {
		t.Fatalf("the deleted lobby's log = %+v, want its entry", got)
	}
	write(t, s, store.Write{ID: "x", Expected: 51, Effects: []byte("e2")})
	if got := readLog(t, s, "x", 50); len(got) != 2 || got[1].Version != 52 {
		t.Fatalf("log across Delete = %+v, want 51, 52", got)
	}
	checkCounts(t, s)
}

// TestPositionsAcrossTheSignBit: positions on both sides of 2^63 order by
// their unsigned value.
func TestPositionsAcrossTheSignBit(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	write(t, s, store.Write{ID: "x", Effects: []byte("1")})
	const half = uint64(1) << 63
	if err := s.Delete(ctx, store.Deletion{ID: "x", Expected: 1, Floor: half - 2}); err != nil {
		t.Fatal(err)
	}
	v := half - 2
	for range 3 {
		write(t, s, store.Write{ID: "x", Expected: v, Effects: []byte("e")})
		v++
	}
	var got []uint64
	for _, e := range readLog(t, s, "x", 0) {
		got = append(got, e.Version)
	}
	if want := []uint64{1, half - 1, half, half + 1}; !cmp.Equal(got, want) {
		t.Fatalf("positions = %v, want %v", got, want)
	}
	if e := readLog(t, s, "x", half-1); len(e) != 2 || e[0].Version != half {
		t.Fatalf("ReadLog after 2^63-1 = %+v", e)
	}
	if h, _ := s.LogHeads(ctx, []string{"x"}); h[0] != half+1 {
		t.Fatalf("LogHeads = %v", h)
	}
	// Count retention across the sign bit trims by position order.
	r, err := New(s.pool, WithSchema(s.schema), WithRetention(store.Retention{Entries: 2}))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, store.Write{ID: "x", Expected: v, Effects: []byte("e")})
	wantCompacted(t, r, "x", 0, half)
	if e := readLog(t, r, "x", half); len(e) != 2 || e[0].Version != half+1 {
		t.Fatalf("ReadLog after the trim = %+v", e)
	}
}

// TestConsumerLifecycle: a consumer sees the entries of writes after its
// registration, from a cursor just before the first; claims hold until
// now+hold; a write between ClaimLog and CommitLog keeps the lobby
// pending; CommitLog never moves back.
func TestConsumerLifecycle(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	claim := func(name string, now time.Time) []store.Cursor {
		t.Helper()
		c, err := s.ClaimLog(ctx, name, now, 10, time.Second)
		if err != nil {
			t.Fatalf("ClaimLog(%q) = %v", name, err)
		}
		return c
	}
	write(t, s, store.Write{ID: "a", At: now, Effects: []byte("before")})
	if err := s.CommitLog(ctx, "c", "a", 1); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("CommitLog of an unregistered name = %v, want ErrInvalid", err)
	}
	if err := s.RegisterConsumer(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterConsumer(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if c := claim("c", now); len(c) != 0 {
		t.Fatalf("ClaimLog before any write = %v, want none", c)
	}
	write(t, s, store.Write{ID: "a", Expected: 1, At: now.Add(time.Second), Effects: []byte("a2")})
	write(t, s, store.Write{ID: "b", At: now, Effects: []byte("b1")})
	write(t, s, store.Write{ID: "a", Expected: 2, At: now.Add(2 * time.Second)}) // no entry
	// Oldest pending work first: b's entry is older than a's.
	if c, want := claim("c", now), []store.Cursor{{Lobby: "b", After: 0}, {Lobby: "a", After: 1}}; !cmp.Equal(c, want) {
		t.Fatalf("ClaimLog = %v, want %v", c, want)
	}
	if c := claim("c", now.Add(999*time.Millisecond)); len(c) != 0 {
		t.Fatalf("ClaimLog during the hold = %v, want none", c)
	}
	// Another name is unaffected, and registers on its first ClaimLog.
	if c := claim("d", now); len(c) != 0 {
		t.Fatalf("first ClaimLog of d = %v, want none", c)
	}
	write(t, s, store.Write{ID: "b", Expected: 1, At: now.Add(3 * time.Second), Effects: []byte("b2")})
	if c := claim("d", now); !cmp.Equal(c, []store.Cursor{{Lobby: "b", After: 1}}) {
		t.Fatalf("ClaimLog(d) = %v, want b after 1", c)
	}
	// c commits b up to 1, but b2 came meanwhile: b stays pending.
	if err := s.CommitLog(ctx, "c", "b", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitLog(ctx, "c", "a", 2); err != nil {
		t.Fatal(err)
	}
	if c := claim("c", now.Add(500*time.Millisecond)); !cmp.Equal(c, []store.Cursor{{Lobby: "b", After: 1}}) {
		t.Fatalf("ClaimLog after the commits = %v, want b after 1", c)
	}
	// Never backward.
	if err := s.CommitLog(ctx, "c", "b", 2); err != nil {
		t.Fatal(err)
	}
	write(t, s, store.Write{ID: "b", Expected: 2, At: now, Effects: []byte("b3")})
	if err := s.CommitLog(ctx, "c", "b", 1); err != nil {
		t.Fatal(err)
	}
	if c := claim("c", now.Add(time.Hour)); !cmp.Equal(c, []store.Cursor{{Lobby: "b", After: 2}}) {
		t.Fatalf("ClaimLog after a lower commit = %v, want b after 2", c)
	}
	// After the hold ran out the lobby comes back.
	if c := claim("c", now.Add(2*time.Hour)); !cmp.Equal(c, []store.Cursor{{Lobby: "b", After: 2}}) {
		t.Fatalf("ClaimLog after the hold = %v, want b after 2", c)
	}
	if err := s.CommitLog(ctx, "c", "b", 3); err != nil {
		t.Fatal(err)
	}
	if c := claim("c", now.Add(3*time.Hour)); len(c) != 0 {
		t.Fatalf("ClaimLog with everything committed = %v, want none", c)
	}
	// A commit beyond what was written holds: b is at version 3, c
	// commits 5, so the entries at 4 and 5 are not due, the one at 6 is.
	if err := s.CommitLog(ctx, "c", "b", 5); err != nil {
		t.Fatal(err)
	}
	for v := uint64(3); v < 5; v++ {
		write(t, s, store.Write{ID: "b", Expected: v, At: now, Effects: []byte("skipped")})
		if c := claim("c", now.Add(4*time.Hour)); len(c) != 0 {
			t.Fatalf("ClaimLog after a write at %d below the commit = %v, want none", v+1, c)
		}
	}
	write(t, s, store.Write{ID: "b", Expected: 5, At: now, Effects: []byte("due")})
	if c := claim("c", now.Add(4*time.Hour)); !cmp.Equal(c, []store.Cursor{{Lobby: "b", After: 5}}) {
		t.Fatalf("ClaimLog after a write above the commit = %v, want b after 5", c)
	}
	// A commit for a lobby the consumer has no cursor for changes
	// nothing: what is written there later is due from its start.
	if err := s.CommitLog(ctx, "c", "z", 2); err != nil {
		t.Fatal(err)
	}
	write(t, s, store.Write{ID: "z", At: now, Effects: []byte("1")})
	write(t, s, store.Write{ID: "z", Expected: 1, At: now, Effects: []byte("2")})
	if c := claim("c", now.Add(5*time.Hour)); !cmp.Equal(c, []store.Cursor{{Lobby: "b", After: 5}, {Lobby: "z", After: 0}}) {
		t.Fatalf("ClaimLog after writes to z, whose commit came before it had a cursor = %v, want b after 5, z after 0", c)
	}
	write(t, s, store.Write{ID: "z", Expected: 2, At: now, Effects: []byte("3")})
	// A committed cursor is where the next write continues from, also
	// when there was nothing more to do in between.
	if err := s.CommitLog(ctx, "c", "z", 3); err != nil {
		t.Fatal(err)
	}
	write(t, s, store.Write{ID: "z", Expected: 3, At: now})
	write(t, s, store.Write{ID: "z", Expected: 4, At: now, Effects: []byte("5")})
	if c := claim("c", now.Add(7*time.Hour)); !cmp.Equal(c, []store.Cursor{{Lobby: "b", After: 5}, {Lobby: "z", After: 3}}) {
		t.Fatalf("ClaimLog = %v, want b after 5, z after 3", c)
	}
	for _, bad := range []func() error{
		func() error { _, err := s.ClaimLog(ctx, "", now, 1, time.Second); return err },
		func() error { _, err := s.ClaimLog(ctx, "c", now, 0, time.Second); return err },
		func() error { _, err := s.ClaimLog(ctx, "c", now, 1, 0); return err },
		func() error { return s.RegisterConsumer(ctx, "") },
		func() error { return s.CommitLog(ctx, "c", "", 1) },
	} {
		if err := bad(); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("invalid call = %v, want ErrInvalid", err)
		}
	}
}

// TestRegistrationStartsAtThePresent: with writers running flat out, a
// consumer registered among them is due every entry of each write that
// started after RegisterConsumer returned, and none of a write that
// returned before RegisterConsumer was called.
func TestRegistrationStartsAtThePresent(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	const writers = 6
	type op struct {
		version    uint64
		start, end int64 // ticks of the clock below
	}
	var (
		tick    sync.Mutex
		ticks   int64
		regFrom int64
		regTo   int64
	)
	now := func() int64 {
		tick.Lock()
		defer tick.Unlock()
		ticks++
		return ticks
	}
	stop := make(chan struct{})
	ops := make([][]op, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("w%d", w)
			var v uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := now()
				if err := s.Write(ctx, store.Write{ID: id, Expected: v, Effects: []byte("e")}); err != nil {
					t.Errorf("Write(%s, %d) = %v", id, v, err)
					return
				}
				v++
				end := now()
				tick.Lock()
				ops[w] = append(ops[w], op{v, start, end})
				tick.Unlock()
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	regFrom = now()
	if err := s.RegisterConsumer(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	regTo = now()
	// Go on until every writer has finished a few writes it started after
	// the registration returned.
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		tick.Lock()
		enough := true
		for w := range writers {
			n := 0
			for _, o := range ops[w] {
				if o.start > regTo {
					n++
				}
			}
			enough = enough && n >= 3
		}
		tick.Unlock()
		if enough {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("writers did not finish 3 writes each within 30s of the registration")
		}
	}
	close(stop)
	wg.Wait()
	cursors, err := s.ClaimLog(ctx, "late", time.Now(), 1000, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	after := map[string]uint64{}
	for _, c := range cursors {
		after[c.Lobby] = c.After
	}
	for w := range writers {
		id := fmt.Sprintf("w%d", w)
		a, ok := after[id]
		var firstAfter, lastBefore uint64
		for _, o := range ops[w] {
			if o.end < regFrom {
				lastBefore = o.version
			}
			if o.start > regTo && firstAfter == 0 {
				firstAfter = o.version
			}
		}
		if firstAfter == 0 {
			t.Fatalf("%s: no write started after the registration; the test needs some", id)
		}
		if !ok || a >= firstAfter || a < lastBefore {
			t.Errorf("%s: cursor %d (claimed %v), want in [%d, %d): every write since %d due, none up to %d",
				id, a, ok, lastBefore, firstAfter, firstAfter, lastBefore)
		}
	}
}

// TestConcurrentLogWork: writers, trimmers, claimers and committers on the
// same lobbies at once neither deadlock nor fail, claimers under one name
// never hold the same lobby at once, and every entry is committed by the
// consumer in the end.
func TestConcurrentLogWork(t *testing.T) {
	s := newRetentionStore(t, store.Retention{Entries: 5, Age: time.Millisecond})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	if err := s.RegisterConsumer(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	const lobbies, perLobby = 8, 30
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	final := make([]uint64, lobbies) // each lobby's version after its writer
	for l := range lobbies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("l%d", l)
			var v uint64 // the version the next write expects
			for n := 0; n < perLobby; {
				err := s.Write(ctx, store.Write{ID: id, Expected: v, At: time.Now(), Effects: []byte("e")})
				if errors.Is(err, store.ErrConflict) {
					// Only an absent lobby (not created yet, or deleted)
					// moves under its writer: the tombstones of other
					// lobbies fold into the store-wide floor once their
					// entries are trimmed, and raise its floor.
					rec, lerr := s.Load(ctx, id)
					if !errors.Is(lerr, store.ErrNotFound) || rec.Version <= v {
						errs <- fmt.Errorf("write %q expecting %d: %w; then Load = version %d, %v", id, v, err, rec.Version, lerr)
						return
					}
					v = rec.Version
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				v++
				n++
				if n == perLobby/2 && l%2 == 0 {
					// Delete and recreate half of them on the way.
					if err := s.Delete(ctx, store.Deletion{ID: id, Expected: v}); err != nil {
						errs <- err
						return
					}
				}
			}
			final[l] = v
		}()
	}
	var held sync.Map
	done := make(chan struct{})
	var bg sync.WaitGroup
	for range 2 {
		bg.Add(2)
		go func() {
			defer bg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := s.TrimLog(ctx, time.Now(), 7); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer bg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				cs, err := s.ClaimLog(ctx, "c", time.Now(), 3, time.Hour)
				if err != nil {
					errs <- err
					return
				}
				for _, c := range cs {
					if _, dup := held.LoadOrStore(c.Lobby, true); dup {
						errs <- fmt.Errorf("lobby %s claimed twice under one name", c.Lobby)
						return
					}
					// Read as a consumer does: on compaction, skip to
					// what is kept.
					upTo := c.After
					for {
						es, err := s.ReadLog(ctx, c.Lobby, upTo, 100)
						var ce *store.CompactedError
						if errors.As(err, &ce) {
							upTo = ce.Trimmed
							continue
						}
						if err != nil {
							errs <- err
							return
						}
						if len(es) == 0 {
							break
						}
						upTo = es[len(es)-1].Version
					}
					held.Delete(c.Lobby)
					if err := s.CommitLog(ctx, "c", c.Lobby, upTo); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	// Let the claimers finish what the writers left.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pending int
		if err := s.pool.QueryRow(ctx, s.sql(`SELECT count(*) FROM _S_.cursors WHERE head > after`)).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 || time.Now().After(deadline) {
			if pending != 0 {
				t.Errorf("%d lobbies still pending for the consumer", pending)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(done)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkCounts(t, s)
	for l := range lobbies {
		if r, err := s.Load(ctx, fmt.Sprintf("l%d", l)); err != nil || r.Version != final[l] || final[l] < perLobby {
			t.Errorf("Load(l%d) = %+v, %v; want version %d (at least %d)", l, r, err, final[l], perLobby)
		}
	}
}

// TestRegistrationWaitsForWritesInFlight builds the registration race on
// purpose: a write that read the consumers before a registration is held
// before its commit (on a cursor row another transaction locked) while the
// consumer registers. Either the registration waits for that write, or, if
// it returned first, the write must count for the new consumer.
func TestRegistrationWaitsForWritesInFlight(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	if err := s.RegisterConsumer(ctx, "early"); err != nil {
		t.Fatal(err)
	}
	write(t, s, store.Write{ID: "l", Effects: []byte("1")})
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, s.sql(`SELECT FROM _S_.cursors WHERE name = 'early' AND lobby = 'l' FOR UPDATE`)); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- s.Write(ctx, store.Write{ID: "l", Expected: 1, Effects: []byte("2")}) }()
	waitForLockWaiters(t, s, 1) // the write, at the cursor row
	registered := make(chan error, 1)
	go func() { registered <- s.RegisterConsumer(ctx, "late") }()
	// Wait until the registration has returned or waits for a lock.
	var regFirst bool
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-registered:
			if err != nil {
				t.Fatal(err)
			}
			regFirst = true
		default:
		}
		if regFirst {
			break
		}
		var waiting int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("registration neither returned nor waits for a lock after 10s")
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !regFirst {
		if err := <-registered; err != nil {
			t.Fatal(err)
		}
	}
	cs, err := s.ClaimLog(ctx, "late", time.Now(), 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if regFirst && !cmp.Equal(cs, []store.Cursor{{Lobby: "l", After: 1}}) {
		t.Fatalf("registration returned before the write committed, but the consumer is due %v, want l after 1", cs)
	}
	if !regFirst && len(cs) != 0 {
		t.Fatalf("the write committed before the registration, but the consumer is due %v", cs)
	}
	// A write after the registration is due either way.
	write(t, s, store.Write{ID: "l", Expected: 2, Effects: []byte("3")})
	cs, err = s.ClaimLog(ctx, "late", time.Now().Add(time.Hour), 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Cursor{{Lobby: "l", After: 2}}
	if regFirst {
		want[0].After = 1
	}
	if !cmp.Equal(cs, want) {
		t.Fatalf("after one more write the consumer is due %v, want %v", cs, want)
	}
}

// TestFoldDropsIdleCursors: when a tombstone folds, the cursors of its
// lobby with nothing left to do go; one with work (its entries trimmed)
// stays, so its consumer reads a CompactedError instead of missing them
// silently.
func TestFoldDropsIdleCursors(t *testing.T) {
	s := newRetentionStore(t, store.Retention{Age: time.Minute})
	ctx := ctxT(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, name := range []string{"done", "slow"} {
		if err := s.RegisterConsumer(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	write(t, s, store.Write{ID: "l", At: t0, Effects: []byte("1")})
	if err := s.CommitLog(ctx, "done", "l", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, store.Deletion{ID: "l", Expected: 1}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.TrimLog(ctx, t0.Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("TrimLog = %d, %v; want 1", n, err)
	}
	var names []string
	rows, err := s.pool.Query(ctx, s.sql(`SELECT convert_from(name, 'UTF8') FROM _S_.cursors ORDER BY name`))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if !cmp.Equal(names, []string{"slow"}) {
		t.Fatalf("cursors after the fold: %v, want only slow's", names)
	}
	cs, err := s.ClaimLog(ctx, "slow", t0, 10, time.Minute)
	if err != nil || !cmp.Equal(cs, []store.Cursor{{Lobby: "l", After: 0}}) {
		t.Fatalf("ClaimLog(slow) = %v, %v; want l after 0", cs, err)
	}
	wantCompacted(t, s, "l", 0, 1)
	// A fold by Delete (no entries left) drops idle cursors too.
	write(t, s, store.Write{ID: "m", Expected: 1, At: t0, Effects: []byte("2")}) // the store floor is 1 now
	if err := s.CommitLog(ctx, "done", "m", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitLog(ctx, "slow", "m", 2); err != nil {
		t.Fatal(err)
	}
	if n, err := s.TrimLog(ctx, t0.Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("TrimLog = %d, %v; want 1", n, err)
	}
	if err := s.Delete(ctx, store.Deletion{ID: "m", Expected: 2}); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT count(*) FROM _S_.cursors WHERE lobby = 'm'`)).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d cursors of m after Delete folded it (%v), want 0", left, err)
	}
}
