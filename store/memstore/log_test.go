package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// writer keeps the versions of the lobbies a test writes, so each write
// expects the right one.
type writer struct {
	t *testing.T
	s *memstore.Store
}

// write appends effects (nil for none) to lobby id at time at, expecting
// the version Load reports, and returns the new version.
func (w writer) write(id string, at time.Time, effects []byte) uint64 {
	w.t.Helper()
	ctx := context.Background()
	r, err := w.s.Load(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		w.t.Fatalf("Load(%q) = %v", id, err)
	}
	if err := w.s.Write(ctx, store.Write{ID: id, Expected: r.Version, Data: []byte(id), At: at, Effects: effects}); err != nil {
		w.t.Fatalf("Write(%q, %d) = %v", id, r.Version, err)
	}
	return r.Version + 1
}

func (w writer) delete(id string, floor uint64) {
	w.t.Helper()
	ctx := context.Background()
	r, err := w.s.Load(ctx, id)
	if err != nil {
		w.t.Fatalf("Load(%q) = %v", id, err)
	}
	if err := w.s.Delete(ctx, store.Deletion{ID: id, Expected: r.Version, Floor: floor}); err != nil {
		w.t.Fatalf("Delete(%q, %d, %d) = %v", id, r.Version, floor, err)
	}
}

// positions reads the whole kept log of id after after.
func positions(t *testing.T, s *memstore.Store, id string, after uint64) []uint64 {
	t.Helper()
	got, err := s.ReadLog(context.Background(), id, after, 1<<20)
	if err != nil {
		t.Fatalf("ReadLog(%q, %d) = %v", id, after, err)
	}
	var p []uint64
	for _, e := range got {
		p = append(p, e.Version)
	}
	return p
}

// compacted asserts that ReadLog(id, after) reports compaction up to
// trimmed.
func compacted(t *testing.T, s *memstore.Store, id string, after, trimmed uint64) {
	t.Helper()
	got, err := s.ReadLog(context.Background(), id, after, 10)
	var ce *store.CompactedError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("ReadLog(%q, %d) = %v, %v; want a CompactedError", id, after, got, err)
	}
	want := store.CompactedError{Lobby: id, After: after, Trimmed: trimmed}
	if *ce != want {
		t.Fatalf("ReadLog(%q, %d): %+v, want %+v", id, after, *ce, want)
	}
}

func TestReadLog(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	w := writer{t, s}
	at := time.Date(2031, 3, 14, 15, 9, 26, 535897932, time.FixedZone("X", 3600))
	w.write("a", at, []byte("one"))
	w.write("a", at, nil) // no entry at 2
	w.write("a", at.Add(time.Second), []byte{})
	w.write("b", at, []byte("other lobby"))
	w.write("a", at.Add(2*time.Second), []byte("four"))

	got, err := s.ReadLog(ctx, "a", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Entry{
		{Lobby: "a", Version: 1, At: at.UTC(), Data: []byte("one")},
		{Lobby: "a", Version: 3, At: at.Add(time.Second).UTC()},
		{Lobby: "a", Version: 4, At: at.Add(2 * time.Second).UTC(), Data: []byte("four")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ReadLog(a, 0) (-want +got):\n%s", diff)
	}
	for _, c := range []struct {
		after uint64
		limit int
		want  []uint64
	}{
		{0, 1, []uint64{1}},
		{1, 10, []uint64{3, 4}},
		{2, 1, []uint64{3}},
		{3, 10, []uint64{4}},
		{4, 10, nil},
		{100, 10, nil},
	} {
		got, err := s.ReadLog(ctx, "a", c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		var p []uint64
		for _, e := range got {
			p = append(p, e.Version)
		}
		if !slices.Equal(p, c.want) {
			t.Errorf("ReadLog(a, %d, %d) = %v, want %v", c.after, c.limit, p, c.want)
		}
	}
	if got := positions(t, s, "never", 0); got != nil {
		t.Errorf("ReadLog(never) = %v, want nothing", got)
	}
	heads, err := s.LogHeads(ctx, []string{"b", "never", "a", "b"})
	if err != nil || !slices.Equal(heads, []uint64{1, 0, 4, 1}) {
		t.Errorf("LogHeads = %v, %v; want [1 0 4 1]", heads, err)
	}
	for _, limit := range []int{0, -1} {
		if _, err := s.ReadLog(ctx, "a", 0, limit); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ReadLog(limit %d) = %v, want ErrInvalid", limit, err)
		}
	}
	if _, err := s.ReadLog(ctx, "", 0, 1); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ReadLog(\"\") = %v, want ErrInvalid", err)
	}
	if _, err := s.LogHeads(ctx, []string{"a", ""}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("LogHeads with an empty ID = %v, want ErrInvalid", err)
	}
}

// The store copies effects on the way in and out: changing what was
// written or what was read changes nothing stored, and entries read
// together share no memory.
func TestLogCopies(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	in := []byte("abc")
	if err := s.Write(ctx, store.Write{ID: "a", Effects: in}); err != nil {
		t.Fatal(err)
	}
	in[0] = 'X'
	if err := s.Write(ctx, store.Write{ID: "a", Expected: 1, Effects: []byte("def")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadLog(ctx, "a", 0, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("ReadLog = %v, %v", got, err)
	}
	if string(got[0].Data) != "abc" {
		t.Fatalf("entry 1 = %q after the caller changed its slice, want abc", got[0].Data)
	}
	_ = append(got[0].Data, "ZZZ"...) // must not run into entry 2
	got[0].Data[0] = 'Y'
	if string(got[1].Data) != "def" {
		t.Fatalf("entry 2 = %q after appending to entry 1, want def", got[1].Data)
	}
	again, _ := s.ReadLog(ctx, "a", 0, 10)
	if string(again[0].Data) != "abc" {
		t.Fatalf("entry 1 reads %q after the reader changed its copy, want abc", again[0].Data)
	}
}

// The count bound trims the oldest entry at the append that exceeds it; a
// read after a trimmed position reports compaction up to the highest
// trimmed position, a read after it does not.
func TestRetentionByCount(t *testing.T) {
	s := memstore.New(memstore.WithRetention(store.Retention{Entries: 3}))
	w := writer{t, s}
	for i := range 5 {
		w.write("a", t0, []byte{byte(i)})
	}
	if got := positions(t, s, "a", 2); !slices.Equal(got, []uint64{3, 4, 5}) {
		t.Fatalf("kept %v, want [3 4 5]", got)
	}
	compacted(t, s, "a", 0, 2)
	compacted(t, s, "a", 1, 2)
	if got := positions(t, s, "a", 4); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("ReadLog(a, 4) = %v, want [5]", got)
	}
	// Writes without an entry trim nothing.
	w.write("a", t0, nil)
	if got := positions(t, s, "a", 2); !slices.Equal(got, []uint64{3, 4, 5}) {
		t.Fatalf("kept %v after a write without effects, want [3 4 5]", got)
	}
	// A store without bounds keeps everything.
	s = memstore.New(memstore.WithRetention(store.Retention{}))
	w = writer{t, s}
	for range 3000 {
		w.write("a", time.Time{}, []byte("x"))
	}
	if got := positions(t, s, "a", 0); len(got) != 3000 {
		t.Fatalf("unbounded store kept %d entries, want 3000", len(got))
	}
	if n, err := s.TrimLog(context.Background(), t0.Add(1000*time.Hour), 10); n != 0 || err != nil {
		t.Fatalf("TrimLog without an age bound = %d, %v; want 0, nil", n, err)
	}
}

// The defaults: 1024 entries per lobby, ten minutes.
func TestDefaultRetention(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	w := writer{t, s}
	for i := range memstore.DefaultRetentionEntries + 1 {
		w.write("a", t0.Add(time.Duration(i)*time.Millisecond), []byte("x"))
	}
	compacted(t, s, "a", 0, 1)
	if got := positions(t, s, "a", 1); len(got) != memstore.DefaultRetentionEntries {
		t.Fatalf("kept %d entries, want %d", len(got), memstore.DefaultRetentionEntries)
	}
	// At t0+10m every entry is at most ten minutes old: none goes.
	if n, err := s.TrimLog(ctx, t0.Add(memstore.DefaultRetentionAge), 10000); n != 0 || err != nil {
		t.Fatalf("TrimLog at the age bound = %d, %v; want 0", n, err)
	}
	if n, err := s.TrimLog(ctx, t0.Add(memstore.DefaultRetentionAge+time.Hour), 10000); n != memstore.DefaultRetentionEntries || err != nil {
		t.Fatalf("TrimLog an hour later = %d, %v; want %d", n, err, memstore.DefaultRetentionEntries)
	}
}

// TrimLog removes entries older than the age, oldest first across
// lobbies, up to its limit; a lobby whose At went backward keeps its log a
// prefix-trimmed sequence.
func TestRetentionByAge(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.WithRetention(store.Retention{Age: time.Minute}))
	w := writer{t, s}
	// Interleave three lobbies; entry k of all lobbies is at t0+k seconds.
	for k := range 10 {
		for _, id := range []string{"a", "b", "c"} {
			w.write(id, t0.Add(time.Duration(k)*time.Second+time.Duration(len(id))), []byte(id))
		}
	}
	now := t0.Add(time.Minute + 3500*time.Millisecond) // entries 0..3 are too old
	n, err := s.TrimLog(ctx, now, 5)
	if err != nil || n != 5 {
		t.Fatalf("TrimLog(limit 5) = %d, %v; want 5", n, err)
	}
	// Oldest first: entry 0 of a, b, c, then entry 1 of two of them.
	heads := 0
	for _, id := range []string{"a", "b", "c"} {
		got, err := s.ReadLog(ctx, id, 0, 1)
		var ce *store.CompactedError
		if !errors.As(err, &ce) || (ce.Trimmed != 1 && ce.Trimmed != 2) {
			t.Fatalf("ReadLog(%s, 0) after the first trim = %v, %v; want compaction up to 1 or 2", id, got, err)
		}
		heads += int(ce.Trimmed)
	}
	if heads != 5 {
		t.Fatalf("trimmed positions add up to %d, want 5 (1+2+2)", heads)
	}
	n, err = s.TrimLog(ctx, now, 100)
	if err != nil || n != 7 {
		t.Fatalf("second TrimLog = %d, %v; want the other 7 old entries", n, err)
	}
	for _, id := range []string{"a", "b", "c"} {
		compacted(t, s, id, 0, 4)
		if got := positions(t, s, id, 4); !slices.Equal(got, []uint64{5, 6, 7, 8, 9, 10}) {
			t.Fatalf("%s keeps %v, want [5 .. 10]", id, got)
		}
	}
	if n, err := s.TrimLog(ctx, now, 100); n != 0 || err != nil {
		t.Fatalf("third TrimLog = %d, %v; want nothing left to trim", n, err)
	}

	// Time going backward within a lobby: the late entry with the early At
	// goes only with the entry before it.
	w.write("d", t0.Add(100*time.Second), []byte("1"))
	w.write("d", t0, []byte("2"))
	if n, _ := s.TrimLog(ctx, t0.Add(time.Minute+95*time.Second), 100); n != 6*3 {
		t.Fatalf("TrimLog removed %d entries, want the 18 left of a, b, c and none of d", n)
	}
	if got := positions(t, s, "d", 0); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("d keeps %v, want [1 2]", got)
	}
	if n, _ := s.TrimLog(ctx, t0.Add(time.Minute+101*time.Second), 100); n != 2 {
		t.Fatalf("TrimLog removed %d entries, want both of d", n)
	}
	for _, limit := range []int{0, -1} {
		if _, err := s.TrimLog(ctx, now, limit); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("TrimLog(limit %d) = %v, want ErrInvalid", limit, err)
		}
	}
}

// Count trims leave stale age keys behind; TrimLog still trims in age
// order and only what is old.
func TestRetentionByCountAndAge(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.WithRetention(store.Retention{Entries: 2, Age: time.Minute}))
	w := writer{t, s}
	for k := range 5 {
		w.write("a", t0.Add(time.Duration(k)*time.Minute), []byte("a"))
	}
	w.write("b", t0.Add(30*time.Second), []byte("b"))
	// a keeps entries at 3m and 4m; b one at 30s. At 4m30s, b's and a's
	// 3m entry are old.
	n, err := s.TrimLog(ctx, t0.Add(4*time.Minute+30*time.Second), 100)
	if err != nil || n != 2 {
		t.Fatalf("TrimLog = %d, %v; want 2", n, err)
	}
	if got := positions(t, s, "a", 4); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("a keeps %v, want [5]", got)
	}
	if got := positions(t, s, "b", 1); got != nil {
		t.Fatalf("b keeps %v, want nothing", got)
	}
}

// A tombstone lasts while its lobby has log entries: Load reports the
// floor and the deleted data. When TrimLog removes the last entry the
// tombstone folds: Load reports the store-wide floor for it and for every
// unknown ID, reads below it are compacted, and recreating continues above
// every version the ID had.
func TestTombstoneFolds(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.WithRetention(store.Retention{Age: time.Minute}))
	w := writer{t, s}
	w.write("a", t0, []byte("created"))
	w.write("a", t0, nil)
	w.delete("a", 7)
	r, err := s.Load(ctx, "a")
	if !errors.Is(err, store.ErrNotFound) || r.Version != 7 || string(r.Data) != "a" {
		t.Fatalf("Load(a) while its log lasts = %+v, %v; want floor 7 and the deleted data", r, err)
	}
	if got := positions(t, s, "a", 0); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("deleted lobby's log = %v, want [1]", got)
	}
	if r, err := s.Load(ctx, "unknown"); !errors.Is(err, store.ErrNotFound) || r.Version != 0 {
		t.Fatalf("Load(unknown) = %+v, %v; want floor 0", r, err)
	}

	if n, err := s.TrimLog(ctx, t0.Add(2*time.Minute), 10); n != 1 || err != nil {
		t.Fatalf("TrimLog = %d, %v; want 1", n, err)
	}
	for _, id := range []string{"a", "unknown"} {
		r, err := s.Load(ctx, id)
		if !errors.Is(err, store.ErrNotFound) || r.Version != 7 || r.Data != nil {
			t.Fatalf("Load(%s) after the fold = %+v, %v; want floor 7 and no data", id, r, err)
		}
		compacted(t, s, id, 0, 7)
		compacted(t, s, id, 6, 7)
		if got := positions(t, s, id, 7); got != nil {
			t.Fatalf("ReadLog(%s, 7) = %v, want nothing", id, got)
		}
	}
	if v := w.write("a", t0, []byte("again")); v != 8 {
		t.Fatalf("recreated a at version %d, want 8", v)
	}
	if got := positions(t, s, "a", 7); !slices.Equal(got, []uint64{8}) {
		t.Fatalf("recreated lobby's log = %v, want [8]", got)
	}
	compacted(t, s, "a", 0, 7)

	// A tombstone with entries waits; a lobby without entries folds at
	// Delete, raising the floor for all.
	if v := w.write("e", t0.Add(time.Hour), []byte("e")); v != 8 {
		t.Fatalf("created e at version %d, want 8 (the store-wide floor plus one)", v)
	}
	w.delete("e", 0)
	w.write("b", t0, nil)
	w.delete("b", 20)
	for _, id := range []string{"b", "unknown", "c"} {
		if r, err := s.Load(ctx, id); !errors.Is(err, store.ErrNotFound) || r.Version != 20 {
			t.Fatalf("Load(%s) = %+v, %v; want floor 20", id, r, err)
		}
	}
	if r, err := s.Load(ctx, "e"); !errors.Is(err, store.ErrNotFound) || r.Version != 8 {
		t.Fatalf("Load(e) = %+v, %v; want its tombstone's floor 8", r, err)
	}
	// A stale floor is a conflict, not a repeated version.
	if err := s.Write(ctx, store.Write{ID: "c", Expected: 7}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Write(c, 7) below the store-wide floor = %v, want ErrConflict", err)
	}
	// e's lower floor folding later does not lower the store-wide one.
	if n, err := s.TrimLog(ctx, t0.Add(2*time.Hour), 10); n != 2 || err != nil {
		t.Fatalf("TrimLog = %d, %v; want a's and e's entries", n, err)
	}
	for _, id := range []string{"e", "unknown"} {
		if r, _ := s.Load(ctx, id); r.Version != 20 {
			t.Fatalf("Load(%s) after folding floor 8 = %d, want 20", id, r.Version)
		}
	}
}

// Count trimming never removes a lobby's last entry, so a tombstone
// outlives it until TrimLog; and no version of an ID repeats however often
// it is deleted, folded and created again.
func TestVersionsNeverRepeat(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.WithRetention(store.Retention{Entries: 1, Age: time.Second}))
	w := writer{t, s}
	seen := map[string]map[uint64]bool{}
	now := t0
	for round := range 200 {
		for i := range 5 {
			id := fmt.Sprintf("l%d", (round+i)%7)
			if seen[id] == nil {
				seen[id] = map[uint64]bool{}
			}
			var effects []byte
			if i%2 == 0 {
				effects = []byte("e")
			}
			v := w.write(id, now, effects)
			if seen[id][v] {
				t.Fatalf("round %d: %s reached version %d twice", round, id, v)
			}
			seen[id][v] = true
			if got := positions(t, s, id, v-1); effects != nil && !slices.Equal(got, []uint64{v}) {
				t.Fatalf("round %d: %s's log after writing %d = %v", round, id, v, got)
			}
			if (round+i)%3 == 0 {
				w.delete(id, v+uint64(round%4))
			}
		}
		now = now.Add(300 * time.Millisecond)
		if _, err := s.TrimLog(ctx, now, 3); err != nil {
			t.Fatal(err)
		}
	}
}
