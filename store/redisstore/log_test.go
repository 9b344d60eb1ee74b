package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
)

// These tests check the effects log, its retention, durable consumers and
// change feeds against a real server. logCases runs on the shared server
// with one shard and with several (TestLog) and on a Cluster
// (TestClusterLog in cluster_test.go).

// storeFactory returns a Store in a fresh namespace with the given options
// (shards are the factory's business).
type storeFactory func(t *testing.T, opts ...redisstore.Option) *redisstore.Store

var logCases = []struct {
	name string
	f    func(t *testing.T, newStore storeFactory)
}{
	{"Entries", testLogEntries},
	{"CountRetention", testCountRetention},
	{"AgeRetentionOldestFirst", testAgeRetention},
	{"TombstoneFolds", testTombstoneFolds},
	{"DeleteWithoutLogFolds", testDeleteWithoutLog},
	{"LargestPositions", testLargestPositions},
	{"LogHeads", testLogHeads},
	{"ConsumerStartsAtThePresent", testConsumerStart},
	{"ConsumerClaims", testConsumerClaims},
	{"ConsumerSharedName", testConsumerSharedName},
	{"ConsumerAfterFold", testConsumerAfterFold},
	{"Subscribe", testSubscribe},
}

func TestLog(t *testing.T) {
	for _, n := range shardCounts {
		t.Run(fmt.Sprintf("shards=%d", n), func(t *testing.T) {
			for _, c := range logCases {
				t.Run(c.name, func(t *testing.T) {
					c.f(t, func(t *testing.T, opts ...redisstore.Option) *redisstore.Store {
						return newStore(t, append([]redisstore.Option{redisstore.WithShards(n)}, opts...)...)
					})
				})
			}
		})
	}
}

func readLog(t *testing.T, s store.Store, id string, after uint64, limit int) []store.Entry {
	t.Helper()
	es, err := s.ReadLog(t.Context(), id, after, limit)
	if err != nil {
		t.Fatalf("ReadLog(%q, %d, %d) = %v", id, after, limit, err)
	}
	return es
}

// wantCompacted checks that ReadLog(id, after) reports compaction up to
// trimmed.
func wantCompacted(t *testing.T, s store.Store, id string, after, trimmed uint64) {
	t.Helper()
	es, err := s.ReadLog(t.Context(), id, after, 10)
	var ce *store.CompactedError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("ReadLog(%q, %d) = %v, %v; want a *CompactedError", id, after, es, err)
	}
	if want := (store.CompactedError{Lobby: id, After: after, Trimmed: trimmed}); *ce != want {
		t.Errorf("ReadLog(%q, %d) = %+v, want %+v", id, after, *ce, want)
	}
}

func entry(id string, v uint64, at time.Time, data string) store.Entry {
	return store.Entry{Lobby: id, Version: v, At: at, Data: []byte(data)}
}

// testLogEntries: entries are kept at the position of the version their
// write created, with their time exact to the nanosecond and their bytes
// whole; a nil Effects appends nothing, an empty one an empty entry.
func testLogEntries(t *testing.T, newStore storeFactory) {
	s := newStore(t)
	id := "lobby\x00{é}"
	at := t0.In(time.FixedZone("x", 3600)) // location dropped, instant kept
	mustWrite(t, s, store.Write{ID: id, At: at, Effects: []byte("one")})
	mustWrite(t, s, store.Write{ID: id, Expected: 1, At: at.Add(time.Nanosecond)}) // no entry
	mustWrite(t, s, store.Write{ID: id, Expected: 2, At: at.Add(2), Effects: []byte{}})
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i)
	}
	mustWrite(t, s, store.Write{ID: id, Expected: 3, At: at.Add(3), Effects: big, Data: []byte("d")})

	want := []store.Entry{entry(id, 1, t0, "one"), entry(id, 3, t0.Add(2), ""), entry(id, 4, t0.Add(3), string(big))}
	got := readLog(t, s, id, 0, 10)
	if d := cmp.Diff(want, got, cmpOpts); d != "" {
		t.Errorf("ReadLog(0) (-want +got):\n%s", d)
	}
	if len(got) == 3 && (got[1].Data == nil || got[0].At.Location() != time.UTC) {
		t.Errorf("ReadLog: empty entry's Data %#v (want non-nil), At location %v (want UTC)", got[1].Data, got[0].At.Location())
	}
	if d := cmp.Diff(want[1:2], readLog(t, s, id, 1, 1), cmpOpts); d != "" {
		t.Errorf("ReadLog(1, limit 1) (-want +got):\n%s", d)
	}
	if got := readLog(t, s, id, 4, 10); len(got) != 0 {
		t.Errorf("ReadLog(4) = %v, want nothing", got)
	}
	if got := readLog(t, s, "never", 0, 10); len(got) != 0 {
		t.Errorf("ReadLog of an unknown lobby = %v, want nothing", got)
	}
	if _, err := s.ReadLog(t.Context(), id, 0, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ReadLog(limit 0) = %v, want %v", err, store.ErrInvalid)
	}
	if _, err := s.ReadLog(t.Context(), "", 0, 1); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ReadLog(empty ID) = %v, want %v", err, store.ErrInvalid)
	}
	// The caller's buffers are its own.
	got[0].Data[0] = 'X'
	if again := readLog(t, s, id, 0, 1); string(again[0].Data) != "one" {
		t.Errorf("ReadLog after changing a returned entry = %q, want one", again[0].Data)
	}
}

// testCountRetention: a log keeps its newest Entries entries, trimmed at
// the append, and reports what it trimmed exactly.
func testCountRetention(t *testing.T, newStore storeFactory) {
	s := newStore(t, redisstore.WithRetention(store.Retention{Entries: 3}))
	var v uint64
	for i := range 6 {
		mustWrite(t, s, store.Write{ID: "l", Expected: v, At: t0, Effects: []byte{byte('a' + i)}})
		v++
		if i == 3 { // a write without an entry: positions skip one
			mustWrite(t, s, store.Write{ID: "l", Expected: v})
			v++
		}
	}
	// Entries at positions 1 2 3 4 6 7: the last three are kept.
	wantCompacted(t, s, "l", 0, 3)
	wantCompacted(t, s, "l", 2, 3)
	want := []store.Entry{entry("l", 4, t0, "d"), entry("l", 6, t0, "e"), entry("l", 7, t0, "f")}
	if d := cmp.Diff(want, readLog(t, s, "l", 3, 10), cmpOpts); d != "" {
		t.Errorf("ReadLog(3) (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want[1:], readLog(t, s, "l", 5, 10), cmpOpts); d != "" {
		t.Errorf("ReadLog(5) (-want +got):\n%s", d)
	}
	// The age index holds only kept entries: trimming by age now removes
	// exactly two.
	aged := newStore(t, redisstore.WithRetention(store.Retention{Entries: 2, Age: time.Minute}))
	for i := range uint64(5) {
		mustWrite(t, aged, store.Write{ID: "l", Expected: i, At: t0, Effects: []byte("x")})
	}
	if n, err := aged.TrimLog(t.Context(), t0.Add(time.Hour), 100); err != nil || n != 2 {
		t.Errorf("TrimLog after count trimming = %d, %v; want 2", n, err)
	}
}

// testAgeRetention: TrimLog removes entries older than Age as judged at
// now, oldest first over every lobby and shard, up to limit; an entry goes
// with the earlier entries of its lobby.
func testAgeRetention(t *testing.T, newStore storeFactory) {
	s := newStore(t, redisstore.WithRetention(store.Retention{Age: time.Minute}))
	// Lobby i's entries are at t0+i and t0+10+i seconds.
	const lobbies = 8
	for i := range lobbies {
		id := fmt.Sprintf("lobby-%d", i)
		mustWrite(t, s, store.Write{ID: id, At: t0.Add(time.Duration(i) * time.Second), Effects: []byte("old")})
		mustWrite(t, s, store.Write{ID: id, Expected: 1, At: t0.Add(time.Duration(10+i) * time.Second), Effects: []byte("new")})
	}
	if _, err := s.TrimLog(t.Context(), t0, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("TrimLog(limit 0) = %v, want %v", err, store.ErrInvalid)
	}
	// At t0+1m+3s the entries at t0+0s, 1s, 2s are older than a minute;
	// the one at t0+3s is exactly a minute old, not older.
	now := t0.Add(time.Minute + 3*time.Second)
	n, err := s.TrimLog(t.Context(), now, 2)
	if err != nil || n != 2 {
		t.Fatalf("TrimLog(limit 2) = %d, %v; want 2", n, err)
	}
	wantCompacted(t, s, "lobby-0", 0, 1)
	wantCompacted(t, s, "lobby-1", 0, 1)
	if got := readLog(t, s, "lobby-2", 0, 10); len(got) != 2 {
		t.Errorf("lobby-2 after trimming the two oldest: %v, want both entries", got)
	}
	if n, err := s.TrimLog(t.Context(), now, 100); err != nil || n != 1 {
		t.Fatalf("TrimLog(limit 100) = %d, %v; want 1", n, err)
	}
	if got := readLog(t, s, "lobby-3", 0, 10); len(got) != 2 {
		t.Errorf("lobby-3 (exactly Age old): %v, want both entries", got)
	}
	// Far later, everything goes, oldest first: the first 8 removed are
	// the "old" entries.
	later := t0.Add(time.Hour)
	if n, err := s.TrimLog(t.Context(), later, lobbies-3); err != nil || n != lobbies-3 {
		t.Fatalf("TrimLog(later, %d) = %d, %v", lobbies-3, n, err)
	}
	for i := range lobbies {
		got := readLog(t, s, fmt.Sprintf("lobby-%d", i), 1, 10)
		if len(got) != 1 || string(got[0].Data) != "new" {
			t.Errorf("lobby-%d after trimming every old entry: %v, want its new one", i, got)
		}
	}
	if n, err := s.TrimLog(t.Context(), later, 100); err != nil || n != lobbies {
		t.Fatalf("TrimLog(later, 100) = %d, %v; want %d", n, err, lobbies)
	}
	if n, err := s.TrimLog(t.Context(), later, 100); err != nil || n != 0 {
		t.Fatalf("TrimLog with nothing left = %d, %v; want 0", n, err)
	}
	// The records stay, and so do their versions; reading after the
	// newest position is not compacted.
	for i := range lobbies {
		id := fmt.Sprintf("lobby-%d", i)
		if r, err := s.Load(t.Context(), id); err != nil || r.Version != 2 {
			t.Errorf("Load(%s) = %+v, %v; want version 2", id, r, err)
		}
		wantCompacted(t, s, id, 1, 2)
		if got := readLog(t, s, id, 2, 10); len(got) != 0 {
			t.Errorf("ReadLog(%s, 2) = %v, want nothing", id, got)
		}
	}

	// An entry whose At went back is as old as the later one before it:
	// it stays with it, and goes with it.
	mustWrite(t, s, store.Write{ID: "mixed", At: t0.Add(time.Hour), Effects: []byte("1")})
	mustWrite(t, s, store.Write{ID: "mixed", Expected: 1, At: t0, Effects: []byte("2")})
	mustWrite(t, s, store.Write{ID: "mixed", Expected: 2, At: t0.Add(2 * time.Hour), Effects: []byte("3")})
	if n, err := s.TrimLog(t.Context(), t0.Add(time.Hour), 100); err != nil || n != 0 {
		t.Fatalf("TrimLog of mixed at the time of its first entry = %d, %v; want 0", n, err)
	}
	if got := readLog(t, s, "mixed", 0, 10); len(got) != 3 {
		t.Errorf("mixed after trimming nothing = %v, want all three entries", got)
	}
	if n, err := s.TrimLog(t.Context(), t0.Add(time.Hour+2*time.Minute), 100); err != nil || n != 2 {
		t.Fatalf("TrimLog of mixed once its first entry is old = %d, %v; want 2", n, err)
	}
	wantCompacted(t, s, "mixed", 0, 2)
	if got := readLog(t, s, "mixed", 2, 10); len(got) != 1 || got[0].Version != 3 {
		t.Errorf("mixed after trimming = %v, want entry 3", got)
	}

	// Without an Age bound TrimLog removes nothing.
	forever := newStore(t, redisstore.WithRetention(store.Retention{}))
	mustWrite(t, forever, store.Write{ID: "x", At: t0, Effects: []byte("e")})
	if n, err := forever.TrimLog(t.Context(), t0.Add(1000*time.Hour), 10); err != nil || n != 0 {
		t.Errorf("TrimLog without an Age = %d, %v; want 0", n, err)
	}
}

// testTombstoneFolds: Delete keeps a tombstone (floor and data) while the
// log has entries; when the last goes, the tombstone goes too and its floor
// becomes the floor of every ID of its shard without a record.
func testTombstoneFolds(t *testing.T, newStore storeFactory) {
	s := newStore(t, redisstore.WithRetention(store.Retention{Age: time.Minute}))
	mustWrite(t, s, store.Write{ID: "gone", Data: []byte("d1"), At: t0, Effects: []byte("e1")})
	mustWrite(t, s, store.Write{ID: "gone", Expected: 1, Data: []byte("d2"), At: t0})
	if err := s.Delete(t.Context(), store.Deletion{ID: "gone", Expected: 2, Floor: 40}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Load(t.Context(), "gone")
	if !errors.Is(err, store.ErrNotFound) || r.Version != 40 || string(r.Data) != "d2" {
		t.Fatalf("Load of the tombstone = %+v, %v; want floor 40, data d2, %v", r, err, store.ErrNotFound)
	}
	if got := readLog(t, s, "gone", 0, 10); len(got) != 1 {
		t.Errorf("ReadLog of the tombstone = %v, want its entry", got)
	}
	if n, err := s.TrimLog(t.Context(), t0.Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("TrimLog = %d, %v; want 1", n, err)
	}
	r, err = s.Load(t.Context(), "gone")
	if !errors.Is(err, store.ErrNotFound) || r.Version != 40 || r.Data != nil {
		t.Fatalf("Load after the tombstone went = %+v, %v; want floor 40, no data", r, err)
	}
	wantCompacted(t, s, "gone", 0, 40)
	wantCompacted(t, s, "gone", 39, 40)
	if got := readLog(t, s, "gone", 40, 10); len(got) != 0 {
		t.Errorf("ReadLog(40) after the fold = %v, want nothing", got)
	}
	// Created again at the floor it continues above it, and a reader from
	// before still learns it missed something.
	mustWrite(t, s, store.Write{ID: "gone", Expected: 40, At: t0.Add(time.Hour), Effects: []byte("back")})
	wantCompacted(t, s, "gone", 3, 40)
	if got := readLog(t, s, "gone", 40, 10); len(got) != 1 || got[0].Version != 41 {
		t.Errorf("ReadLog(40) after recreating = %v, want entry 41", got)
	}
	if err := s.Write(t.Context(), store.Write{ID: "gone", Expected: 0}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Write expecting 0 after recreating = %v, want %v", err, store.ErrConflict)
	}
}

// testDeleteWithoutLog: a lobby with no entries left leaves no tombstone;
// its floor is folded at once, and raises (never lowers) the floor of every
// ID of its shard.
func testDeleteWithoutLog(t *testing.T, newStore storeFactory) {
	s := newStore(t, redisstore.WithShards(1))
	mustWrite(t, s, store.Write{ID: "a", Data: []byte("x")})
	if err := s.Delete(t.Context(), store.Deletion{ID: "a", Expected: 1, Floor: 7}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "never-written"} {
		r, err := s.Load(t.Context(), id)
		if !errors.Is(err, store.ErrNotFound) || r.Version != 7 || r.Data != nil {
			t.Errorf("Load(%q) = %+v, %v; want floor 7 and no data", id, r, err)
		}
	}
	wantCompacted(t, s, "never-written", 6, 7)
	mustWrite(t, s, store.Write{ID: "b", Expected: 7})
	if err := s.Delete(t.Context(), store.Deletion{ID: "b", Expected: 8}); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, store.Write{ID: "c", Expected: 8})
	if err := s.Delete(t.Context(), store.Deletion{ID: "c", Expected: 9, Floor: 3}); err != nil { // a lower floor argument
		t.Fatal(err)
	}
	if r, err := s.Load(t.Context(), "a"); !errors.Is(err, store.ErrNotFound) || r.Version != 9 {
		t.Errorf("Load(a) after more folds = %+v, %v; want floor 9", r, err)
	}
	if err := s.Delete(t.Context(), store.Deletion{ID: "a", Expected: 9}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Delete without a record = %v, want %v", err, store.ErrNotFound)
	}
}

// testLargestPositions: positions are exact up to the largest uint64,
// where Lua numbers and sorted-set scores would not be.
func testLargestPositions(t *testing.T, newStore storeFactory) {
	s := newStore(t, redisstore.WithRetention(store.Retention{Entries: 2}))
	const top = math.MaxUint64
	mustWrite(t, s, store.Write{ID: "x", At: t0, Effects: []byte("1")})
	if err := s.Delete(t.Context(), store.Deletion{ID: "x", Expected: 1, Floor: top - 3}); err != nil {
		t.Fatal(err)
	}
	for v := uint64(top - 3); v < top; v++ {
		mustWrite(t, s, store.Write{ID: "x", Expected: v, At: t0, Effects: []byte(fmt.Sprint(v + 1))})
	}
	wantCompacted(t, s, "x", 0, top-2)
	got := readLog(t, s, "x", top-2, 10)
	if len(got) != 2 || got[0].Version != top-1 || got[1].Version != top || string(got[1].Data) != fmt.Sprint(uint64(top)) {
		t.Errorf("ReadLog(top-2) = %v, want entries top-1 and top", got)
	}
	if got := readLog(t, s, "x", top, 10); len(got) != 0 {
		t.Errorf("ReadLog(top) = %v, want nothing", got)
	}
	heads, err := s.LogHeads(t.Context(), []string{"x"})
	if err != nil || len(heads) != 1 || heads[0] != top {
		t.Errorf("LogHeads = %v, %v; want [%d]", heads, err, uint64(top))
	}
	if err := s.Write(t.Context(), store.Write{ID: "x", Expected: top}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Write expecting the largest version = %v, want %v", err, store.ErrInvalid)
	}
}

// testLogHeads: the newest kept position of each lobby, in the caller's
// order, 0 for none.
func testLogHeads(t *testing.T, newStore storeFactory) {
	s := newStore(t)
	mustWrite(t, s, store.Write{ID: "a", At: t0, Effects: []byte("1")})
	mustWrite(t, s, store.Write{ID: "a", Expected: 1, At: t0, Effects: []byte("2")})
	mustWrite(t, s, store.Write{ID: "a", Expected: 2}) // no entry: the head stays
	mustWrite(t, s, store.Write{ID: "b", At: t0})
	mustWrite(t, s, store.Write{ID: "c\x00", At: t0, Effects: []byte("1")})
	ids := []string{"c\x00", "none", "a", "b", "a"}
	got, err := s.LogHeads(t.Context(), ids)
	if d := cmp.Diff([]uint64{1, 0, 2, 0, 2}, got); err != nil || d != "" {
		t.Errorf("LogHeads(%q) = %v, diff (-want +got):\n%s", ids, err, d)
	}
	if got, err := s.LogHeads(t.Context(), nil); err != nil || len(got) != 0 {
		t.Errorf("LogHeads(nil) = %v, %v; want nothing", got, err)
	}
	if _, err := s.LogHeads(t.Context(), []string{"a", ""}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("LogHeads with an empty ID = %v, want %v", err, store.ErrInvalid)
	}
}

func claimLog(t *testing.T, s store.Store, name string, now time.Time, limit int, hold time.Duration) []store.Cursor {
	t.Helper()
	cs, err := s.ClaimLog(t.Context(), name, now, limit, hold)
	if err != nil {
		t.Fatalf("ClaimLog(%q) = %v", name, err)
	}
	slices.SortFunc(cs, func(a, b store.Cursor) int {
		if a.Lobby < b.Lobby {
			return -1
		}
		if a.Lobby > b.Lobby {
			return 1
		}
		return 0
	})
	return cs
}

func commitLog(t *testing.T, s store.Store, name, id string, after uint64) {
	t.Helper()
	if err := s.CommitLog(t.Context(), name, id, after); err != nil {
		t.Fatalf("CommitLog(%q, %q, %d) = %v", name, id, after, err)
	}
}

// testConsumerStart: a consumer sees the entries of writes after its
// registration and none before; its cursor starts just before the first.
func testConsumerStart(t *testing.T, newStore storeFactory) {
	s := newStore(t)
	mustWrite(t, s, store.Write{ID: "early", At: t0, Effects: []byte("1")})
	mustWrite(t, s, store.Write{ID: "both", At: t0, Effects: []byte("1")})
	if err := s.RegisterConsumer(t.Context(), "relay"); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterConsumer(t.Context(), "relay"); err != nil {
		t.Fatalf("registering again = %v", err)
	}
	mustWrite(t, s, store.Write{ID: "both", Expected: 1}) // no entry
	mustWrite(t, s, store.Write{ID: "both", Expected: 2, At: t0, Effects: []byte("3")})
	mustWrite(t, s, store.Write{ID: "both", Expected: 3, At: t0, Effects: []byte("4")})
	mustWrite(t, s, store.Write{ID: "late", At: t0, Effects: []byte("1")})
	want := []store.Cursor{{Lobby: "both", After: 2}, {Lobby: "late", After: 0}}
	if d := cmp.Diff(want, claimLog(t, s, "relay", t0, 10, time.Minute)); d != "" {
		t.Errorf("ClaimLog (-want +got):\n%s", d)
	}
	// A name first seen by ClaimLog registers there, at the present.
	if got := claimLog(t, s, "audit", t0, 10, time.Minute); len(got) != 0 {
		t.Errorf("first ClaimLog of a new name = %v, want nothing", got)
	}
	mustWrite(t, s, store.Write{ID: "early", Expected: 1, At: t0, Effects: []byte("2")})
	want = []store.Cursor{{Lobby: "early", After: 1}}
	if d := cmp.Diff(want, claimLog(t, s, "audit", t0, 10, time.Minute)); d != "" {
		t.Errorf("ClaimLog of the new name after a write (-want +got):\n%s", d)
	}
	// Another Store on the same data (another process) sees the same
	// registration, and CommitLog refuses names never registered.
	if err := s.CommitLog(t.Context(), "stranger", "early", 2); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("CommitLog of an unregistered name = %v, want %v", err, store.ErrInvalid)
	}
	for _, call := range []func() error{
		func() error { _, err := s.ClaimLog(t.Context(), "", t0, 1, time.Second); return err },
		func() error { _, err := s.ClaimLog(t.Context(), "x", t0, 0, time.Second); return err },
		func() error { _, err := s.ClaimLog(t.Context(), "x", t0, 1, 0); return err },
		func() error { return s.RegisterConsumer(t.Context(), "") },
		func() error { return s.CommitLog(t.Context(), "", "a", 1) },
		func() error { return s.CommitLog(t.Context(), "relay", "", 1) },
	} {
		if err := call(); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("invalid consumer call = %v, want %v", err, store.ErrInvalid)
		}
	}
}

// testConsumerClaims: holds judged by the now arguments, a write between
// ClaimLog and CommitLog not lost, cursors never moving back, names
// independent.
func testConsumerClaims(t *testing.T, newStore storeFactory) {
	s := newStore(t)
	for _, name := range []string{"relay", "audit"} {
		if err := s.RegisterConsumer(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, s, store.Write{ID: "a", At: t0, Effects: []byte("1")})
	mustWrite(t, s, store.Write{ID: "b", At: t0, Effects: []byte("1")})
	all := []store.Cursor{{Lobby: "a", After: 0}, {Lobby: "b", After: 0}}
	if d := cmp.Diff(all, claimLog(t, s, "relay", t0, 10, time.Minute)); d != "" {
		t.Fatalf("ClaimLog (-want +got):\n%s", d)
	}
	if got := claimLog(t, s, "relay", t0.Add(time.Minute-time.Nanosecond), 10, time.Minute); len(got) != 0 {
		t.Errorf("ClaimLog while held = %v, want nothing", got)
	}
	if d := cmp.Diff(all, claimLog(t, s, "audit", t0, 10, time.Minute)); d != "" {
		t.Errorf("ClaimLog of another name (-want +got):\n%s", d)
	}
	// The hold ends at now+hold exactly.
	if d := cmp.Diff(all, claimLog(t, s, "relay", t0.Add(time.Minute), 10, time.Minute)); d != "" {
		t.Errorf("ClaimLog when the hold ends (-want +got):\n%s", d)
	}
	// Lobby a: a write lands between the claim and the commit.
	mustWrite(t, s, store.Write{ID: "a", Expected: 1, At: t0, Effects: []byte("2")})
	commitLog(t, s, "relay", "a", 1)
	commitLog(t, s, "relay", "b", 1)
	want := []store.Cursor{{Lobby: "a", After: 1}}
	if d := cmp.Diff(want, claimLog(t, s, "relay", t0.Add(time.Minute), 10, time.Minute)); d != "" {
		t.Errorf("ClaimLog after a write during the claim (-want +got):\n%s", d)
	}
	// Never backward: committing 0 changes nothing, but releases.
	commitLog(t, s, "relay", "a", 0)
	if d := cmp.Diff(want, claimLog(t, s, "relay", t0.Add(time.Minute), 10, time.Minute)); d != "" {
		t.Errorf("ClaimLog after committing backward (-want +got):\n%s", d)
	}
	commitLog(t, s, "relay", "a", 2)
	commitLog(t, s, "relay", "a", 1) // a late duplicate
	if got := claimLog(t, s, "relay", t0.Add(time.Hour), 10, time.Minute); len(got) != 0 {
		t.Errorf("ClaimLog with everything committed = %v, want nothing", got)
	}
	// The next entry queues the lobby again, with the cursor where the
	// last commit left it.
	mustWrite(t, s, store.Write{ID: "b", Expected: 1})
	mustWrite(t, s, store.Write{ID: "b", Expected: 2, At: t0, Effects: []byte("3")})
	want = []store.Cursor{{Lobby: "b", After: 1}}
	if d := cmp.Diff(want, claimLog(t, s, "relay", t0.Add(time.Hour), 10, time.Minute)); d != "" {
		t.Errorf("ClaimLog after a new entry (-want +got):\n%s", d)
	}
	// A commit past the head holds: an entry at or below it is no work.
	commitLog(t, s, "relay", "b", 5)
	mustWrite(t, s, store.Write{ID: "b", Expected: 3, At: t0, Effects: []byte("4")})
	if got := claimLog(t, s, "relay", t0.Add(2*time.Hour), 10, time.Minute); len(got) != 0 {
		t.Errorf("ClaimLog after an entry below a commit = %v, want nothing", got)
	}
	mustWrite(t, s, store.Write{ID: "b", Expected: 4})
	mustWrite(t, s, store.Write{ID: "b", Expected: 5, At: t0, Effects: []byte("6")})
	want = []store.Cursor{{Lobby: "b", After: 5}}
	if d := cmp.Diff(want, claimLog(t, s, "relay", t0.Add(2*time.Hour), 10, time.Minute)); d != "" {
		t.Errorf("ClaimLog after an entry above a commit (-want +got):\n%s", d)
	}
	// audit still holds a and b from t0 and has committed nothing.
	want = []store.Cursor{{Lobby: "a", After: 0}, {Lobby: "b", After: 0}}
	if d := cmp.Diff(want, claimLog(t, s, "audit", t0.Add(time.Hour), 10, time.Minute)); d != "" {
		t.Errorf("ClaimLog of the other name (-want +got):\n%s", d)
	}
}

// testConsumerSharedName: claimers sharing a name split the lobbies, each
// lobby to exactly one of them per hold, whatever the shard.
func testConsumerSharedName(t *testing.T, newStore storeFactory) {
	s := newStore(t)
	if err := s.RegisterConsumer(t.Context(), "relay"); err != nil {
		t.Fatal(err)
	}
	const lobbies, workers = 60, 4
	var want []string
	for i := range lobbies {
		id := fmt.Sprintf("lobby-%02d", i)
		want = append(want, id)
		mustWrite(t, s, store.Write{ID: id, At: t0, Effects: []byte("e")})
	}
	var (
		mu  sync.Mutex
		got []string
		wg  sync.WaitGroup
	)
	start := make(chan struct{})
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				cs, err := s.ClaimLog(context.Background(), "relay", t0, 7, time.Minute)
				if err != nil {
					t.Errorf("ClaimLog = %v", err)
					return
				}
				if len(cs) == 0 {
					return
				}
				mu.Lock()
				for _, c := range cs {
					got = append(got, c.Lobby)
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	slices.Sort(got)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("lobbies claimed over all workers (-want +got):\n%s", d)
	}
	// With a limit, the oldest work comes first: commit everything, then
	// write again to a few lobbies; they come back in the order written.
	for _, id := range want {
		commitLog(t, s, "relay", id, 1)
	}
	order := []string{"lobby-42", "lobby-07", "lobby-33", "lobby-01"}
	for _, id := range order {
		mustWrite(t, s, store.Write{ID: id, Expected: 1, At: t0, Effects: []byte("e")})
	}
	var firsts []string
	for range order {
		cs, err := s.ClaimLog(t.Context(), "relay", t0, 1, time.Minute)
		if err != nil || len(cs) != 1 {
			t.Fatalf("ClaimLog(limit 1) = %v, %v", cs, err)
		}
		firsts = append(firsts, cs[0].Lobby)
	}
	if d := cmp.Diff(order, firsts); d != "" {
		t.Errorf("order of claims (-want +got):\n%s", d)
	}
}

// testConsumerAfterFold: when a lobby's keys go (its tombstone's last entry
// was trimmed), so do the cursors of names that had caught up; one that had
// not keeps its cursor and learns of the compaction when it reads.
func testConsumerAfterFold(t *testing.T, newStore storeFactory) {
	s := newStore(t, redisstore.WithRetention(store.Retention{Age: time.Minute}))
	for _, name := range []string{"done", "behind"} {
		if err := s.RegisterConsumer(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, s, store.Write{ID: "f", At: t0, Effects: []byte("1")})
	commitLog(t, s, "done", "f", 1)
	if err := s.Delete(t.Context(), store.Deletion{ID: "f", Expected: 1, Floor: 10}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.TrimLog(t.Context(), t0.Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("TrimLog = %d, %v; want 1", n, err)
	}
	mustWrite(t, s, store.Write{ID: "f", Expected: 10, At: t0.Add(time.Hour), Effects: []byte("11")})
	want := []store.Cursor{{Lobby: "f", After: 10}}
	if d := cmp.Diff(want, claimLog(t, s, "done", t0, 10, time.Minute)); d != "" {
		t.Errorf("ClaimLog of the caught-up name (-want +got):\n%s", d)
	}
	want = []store.Cursor{{Lobby: "f", After: 0}}
	if d := cmp.Diff(want, claimLog(t, s, "behind", t0, 10, time.Minute)); d != "" {
		t.Errorf("ClaimLog of the name behind (-want +got):\n%s", d)
	}
	wantCompacted(t, s, "f", 0, 10)
}

// testSubscribe: a feed names the lobby and position of every write with an
// entry by another client, and nothing for writes without one.
func testSubscribe(t *testing.T, newStore storeFactory) {
	watcher := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	feed, err := watcher.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := "nul\x00:{x}"
	mustWrite(t, watcher, store.Write{ID: "quiet", At: t0})
	mustWrite(t, watcher, store.Write{ID: id, At: t0, Effects: []byte("1")})
	mustWrite(t, watcher, store.Write{ID: id, Expected: 1, At: t0, Effects: []byte("2")})
	mustWrite(t, watcher, store.Write{ID: "other", At: t0, Effects: []byte("1")})
	want := map[string]uint64{id: 2, "other": 1}
	got := map[string]uint64{}
	timeout := time.After(10 * time.Second)
	for !maps.Equal(want, got) {
		select {
		case <-feed.Ready():
			changes, lost := feed.Take()
			if lost {
				t.Fatal("feed lost with the server up")
			}
			for _, c := range changes {
				got[c.Lobby] = max(got[c.Lobby], c.Version)
			}
		case <-timeout:
			t.Fatalf("feed after 10s: %q, want %q", got, want)
		}
	}
	if _, ok := got["quiet"]; ok {
		t.Error("a write without an entry was notified")
	}
	cancel()
	if _, err := watcher.Subscribe(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Subscribe(done ctx) = %v, want %v", err, context.Canceled)
	}
}

// TestSubscribeAcrossClients checks that a write through another client
// (as from another process) reaches a feed, and that a write under another
// prefix does not.
func TestSubscribeAcrossClients(t *testing.T) {
	c := sharedClient(t)
	prefix := newPrefix()
	t.Cleanup(func() { purge(t, c, prefix) })
	watcher, err := redisstore.New(c, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	other, err := newClient(os.Getenv(addrEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	writer, err := redisstore.New(other, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	strangerPrefix := newPrefix()
	t.Cleanup(func() { purge(t, c, strangerPrefix) })
	stranger, err := redisstore.New(other, redisstore.WithPrefix(strangerPrefix))
	if err != nil {
		t.Fatal(err)
	}
	feed, err := watcher.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, stranger, store.Write{ID: "s", At: t0, Effects: []byte("e")})
	mustWrite(t, writer, store.Write{ID: "x", At: t0, Effects: []byte("e")})
	select {
	case <-feed.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("no change within 10s of a write")
	}
	// The stranger's write came first; had it reached the feed it would be
	// there now.
	changes, lost := feed.Take()
	if d := cmp.Diff([]store.Change{{Lobby: "x", Version: 1}}, changes); lost || d != "" {
		t.Errorf("Take = lost %v, diff (-want +got):\n%s", lost, d)
	}
	// A process of an earlier version publishes "w" for its writes: the
	// feed cannot tell which lobby moved, so it reports itself lost.
	if err := other.Do(t.Context(), other.B().Publish().Channel("{"+prefix+"}:notify").Message("w").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-feed.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("nothing on the feed within 10s of an old-style notification")
	}
	if changes, lost := feed.Take(); !lost || len(changes) != 0 {
		t.Errorf("Take after an old-style notification = %v, lost %v; want lost", changes, lost)
	}
}

// TestWriteWithEntryIsOneRoundTrip checks that a write with a log entry,
// with consumers registered and a feed subscribed, is one EVALSHA.
func TestWriteWithEntryIsOneRoundTrip(t *testing.T) {
	cc := &counting{Client: sharedClient(t)}
	prefix := newPrefix()
	s, err := redisstore.New(cc, redisstore.WithPrefix(prefix), redisstore.WithShards(3),
		redisstore.WithRetention(store.Retention{Entries: 2, Age: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { purge(t, cc.Client, prefix) })
	if err := s.RegisterConsumer(t.Context(), "relay"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, store.Write{ID: "l", At: t0, Effects: []byte("e")})
	if _, err := s.LogHeads(t.Context(), []string{"l"}); err != nil { // the server has both scripts now
		t.Fatal(err)
	}
	cc.take()
	for v := uint64(1); v <= 4; v++ { // from the third on, each trims one
		mustWrite(t, s, store.Write{ID: "l", Expected: v, Data: []byte("v"), Deadline: t0, At: t0, Effects: []byte("e")})
		if d := cmp.Diff([]string{"EVALSHA"}, cc.take()); d != "" {
			t.Fatalf("commands of write %d (-want +got):\n%s", v, d)
		}
	}
	if _, err := s.LogHeads(t.Context(), []string{"l", "m", "n", "o"}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"EVALSHA_RO", "EVALSHA_RO", "EVALSHA_RO", "EVALSHA_RO"}, cc.take()); d != "" {
		t.Errorf("commands of LogHeads (-want +got):\n%s", d)
	}
}
