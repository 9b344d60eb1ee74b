package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// loadMissing loads id, which must have no record, and returns its floor,
// At and data.
func loadMissing(t *testing.T, s *memstore.Store, id string) store.Record {
	t.Helper()
	r, err := s.Load(context.Background(), id)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load(%q) = %+v, %v; want ErrNotFound", id, r, err)
	}
	return r
}

// trim calls TrimLog and checks how many removals it reports.
func trim(t *testing.T, s *memstore.Store, now time.Time, limit, want int) {
	t.Helper()
	n, err := s.TrimLog(context.Background(), now, limit)
	if err != nil || n != want {
		t.Fatalf("TrimLog(%v, %d) = %d, %v; want %d", now, limit, n, err, want)
	}
}

// A tombstone reports the deleted lobby's last transition time; a fold
// hands the latest such time to every ID without a record, and a later
// fold of an earlier time does not lower it.
func TestTombstoneAt(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.WithRetention(store.Retention{Age: time.Minute}))
	w := writer{t, s}
	if r := loadMissing(t, s, "fresh"); !r.At.IsZero() {
		t.Fatalf("Load(fresh) in a new store: At %v, want the zero time", r.At)
	}
	w.write("a", t0, []byte("e"))
	r, err := s.Load(ctx, "a")
	if err != nil || !r.At.IsZero() {
		t.Fatalf("Load(a) of a live record = %+v, %v; want a zero At", r, err)
	}
	late, early := t0.Add(30*time.Second), t0.Add(10*time.Second)
	zone := time.FixedZone("east", 5*3600)
	if err := s.Delete(ctx, store.Deletion{ID: "a", Expected: 1, Floor: 4, At: late.In(zone)}); err != nil {
		t.Fatal(err)
	}
	if r := loadMissing(t, s, "a"); r.Version != 4 || !r.At.Equal(late) || r.At.Location() != time.UTC {
		t.Fatalf("Load(a) while its tombstone lasts = %+v; want floor 4, At %v in UTC", r, late)
	}
	if r := loadMissing(t, s, "other"); r.Version != 0 || !r.At.IsZero() {
		t.Fatalf("Load(other) before any fold = %+v; want floor 0 and no At", r)
	}

	// b has no entries: with no Keep it folds at once.
	w.write("b", t0, nil)
	if err := s.Delete(ctx, store.Deletion{ID: "b", Expected: 1, At: early}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b", "other"} {
		if r := loadMissing(t, s, id); r.Version != 1 || !r.At.Equal(early) {
			t.Fatalf("Load(%s) after b folded = %+v; want floor 1, At %v", id, r, early)
		}
	}
	// a folds when TrimLog removes its entry: the later At wins.
	trim(t, s, t0.Add(2*time.Minute), 10, 1)
	for _, id := range []string{"a", "b", "other"} {
		if r := loadMissing(t, s, id); r.Version != 4 || !r.At.Equal(late) {
			t.Fatalf("Load(%s) after a folded = %+v; want floor 4, At %v", id, r, late)
		}
	}
	// An earlier At folded later leaves the store-wide one alone, as a
	// lower floor does.
	w.write("c", t0, nil)
	if err := s.Delete(ctx, store.Deletion{ID: "c", Expected: 5, At: early}); err != nil {
		t.Fatal(err)
	}
	if r := loadMissing(t, s, "other"); r.Version != 5 || !r.At.Equal(late) {
		t.Fatalf("Load(other) after folding an earlier At = %+v; want floor 5, At %v", r, late)
	}
	// Recreating the lobby forgets the tombstone's At.
	w.write("c", t0, nil)
	if r, err := s.Load(ctx, "c"); err != nil || !r.At.IsZero() {
		t.Fatalf("Load(c) recreated = %+v, %v; want a zero At", r, err)
	}
}

// Keep holds a tombstone past the trim of its last entry, and with no
// entries at all, until a TrimLog whose now reaches it; then it folds and
// counts as one removal. That holds without an Age bound too.
func TestTombstoneKeep(t *testing.T) {
	for _, age := range []time.Duration{0, time.Minute} {
		t.Run(age.String(), func(t *testing.T) {
			ctx := context.Background()
			s := memstore.New(memstore.WithRetention(store.Retention{Entries: 8, Age: age}))
			w := writer{t, s}
			keep := t0.Add(time.Hour)
			w.write("k", t0, nil)
			w.write("k", t0, nil)
			if err := s.Delete(ctx, store.Deletion{ID: "k", Expected: 2, Floor: 9, At: t0, Keep: keep}); err != nil {
				t.Fatal(err)
			}
			trim(t, s, keep.Add(-time.Nanosecond), 10, 0)
			if r := loadMissing(t, s, "k"); r.Version != 9 || string(r.Data) != "k" || !r.At.Equal(t0) {
				t.Fatalf("Load(k) before its Keep = %+v; want the tombstone (floor 9, data, At)", r)
			}
			if r := loadMissing(t, s, "other"); r.Version != 0 {
				t.Fatalf("Load(other) before k folds = %+v; want floor 0", r)
			}
			trim(t, s, keep, 10, 1)
			if r := loadMissing(t, s, "k"); r.Version != 9 || r.Data != nil || !r.At.Equal(t0) {
				t.Fatalf("Load(k) after its Keep = %+v; want the store-wide floor 9, At and no data", r)
			}
			if r := loadMissing(t, s, "other"); r.Version != 9 || !r.At.Equal(t0) {
				t.Fatalf("Load(other) after k folds = %+v; want floor 9", r)
			}
			trim(t, s, keep.Add(time.Hour), 10, 0)
		})
	}
}

// A tombstone whose entries are trimmed before its Keep stays until Keep;
// one whose Keep comes first goes with its last entry, counted once.
func TestTombstoneKeepWithEntries(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.WithRetention(store.Retention{Age: time.Minute}))
	w := writer{t, s}
	w.write("long", t0, []byte("e1"))
	w.write("long", t0, []byte("e2"))
	w.write("short", t0, []byte("e1"))
	if err := s.Delete(ctx, store.Deletion{ID: "long", Expected: 2, At: t0, Keep: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, store.Deletion{ID: "short", Expected: 1, At: t0, Keep: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	// Three entries go; short folds with its last one, long waits.
	trim(t, s, t0.Add(2*time.Minute), 10, 3)
	if r := loadMissing(t, s, "long"); r.Version != 2 || string(r.Data) != "long" {
		t.Fatalf("Load(long) before its Keep = %+v; want its tombstone", r)
	}
	if r := loadMissing(t, s, "short"); r.Version != 1 || r.Data != nil {
		t.Fatalf("Load(short) after its fold = %+v; want the store-wide floor 1 and no data", r)
	}
	compacted(t, s, "long", 0, 2)
	trim(t, s, t0.Add(time.Hour), 10, 1)
	if r := loadMissing(t, s, "long"); r.Data != nil {
		t.Fatalf("Load(long) after its Keep = %+v; want no data", r)
	}
}

// A lobby written after a Delete with Keep is not folded when that Keep
// comes, and deleted again it follows its latest Keep only.
func TestTombstoneKeepStale(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.WithRetention(store.Retention{}))
	w := writer{t, s}
	w.write("x", t0, nil)
	if err := s.Delete(ctx, store.Deletion{ID: "x", Expected: 1, Keep: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	w.write("x", t0, nil)
	trim(t, s, t0.Add(time.Minute), 10, 0)
	if r, err := s.Load(ctx, "x"); err != nil || r.Version != 2 {
		t.Fatalf("Load(x) recreated, after its old Keep = %+v, %v; want version 2", r, err)
	}
	if err := s.Delete(ctx, store.Deletion{ID: "x", Expected: 2, Keep: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	trim(t, s, t0.Add(90*time.Second), 10, 0)
	if r := loadMissing(t, s, "x"); string(r.Data) != "x" {
		t.Fatalf("Load(x) before its new Keep = %+v; want its tombstone", r)
	}
	trim(t, s, t0.Add(2*time.Minute), 10, 1)
	if r := loadMissing(t, s, "x"); r.Data != nil || r.Version != 2 {
		t.Fatalf("Load(x) after its new Keep = %+v; want the store-wide floor 2", r)
	}
}

// TrimLog counts dropped tombstones toward its limit, so a caller that
// stops at a short result has dropped every one that was due.
func TestTombstoneKeepLimit(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.WithRetention(store.Retention{}))
	w := writer{t, s}
	for _, id := range []string{"a", "b", "c"} {
		w.write(id, t0, nil)
		if err := s.Delete(ctx, store.Deletion{ID: id, Expected: 1, Keep: t0}); err != nil {
			t.Fatal(err)
		}
	}
	trim(t, s, t0, 2, 2)
	trim(t, s, t0, 2, 1)
	trim(t, s, t0, 2, 0)
	for _, id := range []string{"a", "b", "c"} {
		if r := loadMissing(t, s, id); r.Data != nil {
			t.Fatalf("Load(%s) = %+v; want it folded", id, r)
		}
	}
}

// Delete refuses an empty ID before it looks at anything.
func TestDeleteEmptyID(t *testing.T) {
	s := memstore.New()
	if err := s.Delete(context.Background(), store.Deletion{Keep: t0}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Delete of an empty ID = %v, want ErrInvalid", err)
	}
}
