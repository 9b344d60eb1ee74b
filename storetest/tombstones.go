package storetest

import (
	"errors"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// missing loads an ID that must have no record and returns what Load
// reports for it.
func (h *harness) missing(id string) store.Record {
	h.t.Helper()
	r, err := h.s.Load(h.ctx, id)
	if !errors.Is(err, store.ErrNotFound) {
		h.t.Fatalf("Load(%q) = %+v, %s; want error %v", id, r, describe(err), store.ErrNotFound)
	}
	return r
}

// expectAt wants Load(id), which has no record, to report At want (the
// zero time exactly, or the same instant to the microsecond), floor at
// least floor, and the tombstone data data (nil for none).
func (h *harness) expectMissing(id string, floor uint64, at time.Time, data []byte, when string) store.Record {
	h.t.Helper()
	r := h.missing(id)
	switch {
	case r.Version < floor:
		h.t.Fatalf("Load(%q) %s: floor %d, want >= %d", id, when, r.Version, floor)
	case at.IsZero() && !r.At.IsZero():
		h.t.Fatalf("Load(%q) %s: At %v, want the zero time", id, when, r.At)
	case !at.IsZero() && !sameAt(at, r.At):
		h.t.Fatalf("Load(%q) %s: At %v, want %v (to the microsecond)", id, when, r.At, at)
	case data == nil && r.Data != nil:
		h.t.Fatalf("Load(%q) %s: Data %q, want none (no tombstone)", id, when, r.Data)
	case data != nil && string(r.Data) != string(data):
		h.t.Fatalf("Load(%q) %s: Data %q, want the tombstone's %q", id, when, r.Data, data)
	}
	return r
}

// deleteD performs d and fails unless it succeeds.
func (h *harness) deleteD(d store.Deletion) {
	h.t.Helper()
	if err := h.s.Delete(h.ctx, d); err != nil {
		h.t.Fatalf("Delete(%+v) = %v, want nil", d, err)
	}
}

// trim calls TrimLog and fails unless it returns want.
func (h *harness) trim(now time.Time, limit, want int, what string) {
	h.t.Helper()
	n, err := h.s.TrimLog(h.ctx, now, limit)
	if err != nil || n != want {
		h.t.Fatalf("TrimLog(%v, %d) %s = %d, %s; want %d, nil", now, limit, what, n, describe(err), want)
	}
}

// checkTombstoneAt: Load reports Deletion.At for a tombstone, in UTC and to
// the microsecond; once tombstones fold, every ID without a record or
// tombstone reports the latest At ever folded, which a later fold of an
// earlier At does not lower. A store that never folded reports the zero
// time, and so does a record that exists.
func checkTombstoneAt(h *harness) {
	now := t0.Add(10 * time.Hour)
	old := now.Add(-2 * time.Hour)
	late := now.Add(-40*time.Minute + 1234*time.Nanosecond).In(time.FixedZone("UTC-3", -3*3600))
	early := now.Add(-50 * time.Minute)
	earlier := now.Add(-55 * time.Minute)

	h.expectMissing("at-never", 0, time.Time{}, nil, "in a store that never folded")
	h.write(store.Write{ID: "at-a", Data: []byte("a"), At: old, Effects: []byte("a")})
	if r := h.load("at-a"); !r.At.IsZero() {
		h.t.Fatalf("Load(at-a) of a record that exists: At %v, want the zero time", r.At)
	}
	h.deleteD(store.Deletion{ID: "at-a", Expected: 1, Floor: 4, At: late})
	r := h.expectMissing("at-a", 4, late, []byte("a"), "while its tombstone lasts")
	if r.At.Location() != time.UTC {
		h.t.Fatalf("Load(at-a): At in %v, want UTC (the location is not kept)", r.At.Location())
	}
	h.expectMissing("at-never", 0, time.Time{}, nil, "before any tombstone folded")

	// at-b has no entries: without a Keep it folds at once.
	h.write(store.Write{ID: "at-b", Data: []byte("b"), At: old})
	h.deleteD(store.Deletion{ID: "at-b", Expected: 1, At: early})
	for _, id := range []string{"at-b", "at-never"} {
		h.expectMissing(id, 1, early, nil, "after at-b folded")
	}
	h.expectMissing("at-a", 4, late, []byte("a"), "while its tombstone lasts, after another folded")

	// at-a folds with its entry: the later At wins everywhere.
	h.trim(now, 100, 1, "with at-a's entry old")
	for _, id := range []string{"at-a", "at-b", "at-never"} {
		h.expectMissing(id, 4, late, nil, "after at-a folded")
	}
	// An earlier At folded later does not lower it.
	h.write(store.Write{ID: "at-c", Expected: h.missing("at-c").Version, Data: []byte("c"), At: old})
	h.deleteD(store.Deletion{ID: "at-c", Expected: h.load("at-c").Version, At: earlier})
	h.expectMissing("at-never", 4, late, nil, "after an earlier At folded")

	// A lobby created again reports no At while it exists.
	f := h.missing("at-a").Version
	h.write(store.Write{ID: "at-a", Expected: f, Data: []byte("again"), At: now})
	if r := h.load("at-a"); !r.At.IsZero() {
		h.t.Fatalf("Load(at-a) created again: At %v, want the zero time", r.At)
	}
}

// checkTombstoneKeep: a tombstone deleted with a Keep lasts, without any log
// entries, until a TrimLog whose now is at or after Keep, also in a store
// with no Age bound; then it folds (floor and At into the store-wide
// floor) and counts as one removal. TrimLog counts such folds toward its
// limit. A lobby written again after a Delete with a Keep is not touched
// when that Keep comes; deleted again, it follows its new Keep.
func checkTombstoneKeep(h *harness) {
	// A Keep on a whole microsecond is exact in every store; the check
	// below with a finer Keep only asks that it is not cut short.
	keep := t0.Add(time.Hour).Truncate(time.Microsecond)
	h.write(store.Write{ID: "keep-k", Data: []byte("k"), At: t0})
	h.write(store.Write{ID: "keep-k", Expected: 1, Data: []byte("k"), At: t0})
	h.deleteD(store.Deletion{ID: "keep-k", Expected: 2, Floor: 9, At: t0, Keep: keep})
	h.trim(keep.Add(-time.Nanosecond), 100, 0, "just before keep-k's Keep")
	h.expectMissing("keep-k", 9, t0, []byte("k"), "before its Keep, without log entries")
	if f := h.missing("keep-other").Version; f >= 9 {
		h.t.Fatalf("Load(keep-other) while keep-k's tombstone is kept: floor %d, want keep-k's floor 9 not folded yet", f)
	}
	h.trim(keep, 100, 1, "at keep-k's Keep")
	h.expectMissing("keep-k", 9, t0, nil, "after its Keep")
	h.expectMissing("keep-other", 9, t0, nil, "after keep-k folded")
	h.trim(keep.Add(time.Hour), 100, 0, "after everything folded")

	// A Keep between microseconds is not cut short.
	fine := keep.Add(time.Hour + 500*time.Nanosecond)
	h.write(store.Write{ID: "keep-fine", Expected: h.missing("keep-fine").Version, Data: []byte("fine"), At: t0})
	h.deleteD(store.Deletion{ID: "keep-fine", Expected: h.load("keep-fine").Version, At: t0, Keep: fine})
	h.trim(fine.Add(-time.Nanosecond), 100, 0, "just before keep-fine's Keep")
	h.expectMissing("keep-fine", 0, t0, []byte("fine"), "before its Keep")
	h.trim(fine.Add(time.Microsecond), 100, 1, "a microsecond after keep-fine's Keep")
	h.expectMissing("keep-fine", 0, t0, nil, "after its Keep")

	// Written again, the lobby is not folded when its old Keep comes;
	// deleted again it waits for its new Keep.
	base := keep.Add(3 * time.Hour)
	f := h.missing("keep-x").Version
	h.write(store.Write{ID: "keep-x", Expected: f, Data: []byte("x1"), At: t0})
	h.deleteD(store.Deletion{ID: "keep-x", Expected: f + 1, At: t0, Keep: base})
	h.write(store.Write{ID: "keep-x", Expected: h.missing("keep-x").Version, Data: []byte("x2"), At: t0})
	h.trim(base, 100, 0, "with keep-x written again after its Delete")
	v := h.load("keep-x").Version
	h.deleteD(store.Deletion{ID: "keep-x", Expected: v, At: t0, Keep: base.Add(time.Hour)})
	h.trim(base.Add(30*time.Minute), 100, 0, "before keep-x's second Keep")
	h.expectMissing("keep-x", v, t0, []byte("x2"), "before its second Keep")
	h.trim(base.Add(time.Hour), 100, 1, "at keep-x's second Keep")
	h.expectMissing("keep-x", v, t0, nil, "after its second Keep")

	// Folds count toward the limit: three due, limit 2.
	due := base.Add(2 * time.Hour)
	for _, id := range []string{"keep-l1", "keep-l2", "keep-l3"} {
		h.write(store.Write{ID: id, Expected: h.missing(id).Version, Data: []byte(id), At: t0})
		h.deleteD(store.Deletion{ID: id, Expected: h.load(id).Version, At: t0, Keep: due})
	}
	h.trim(due, 2, 2, "with three tombstones due, limit 2")
	h.trim(due, 2, 1, "with one tombstone left due")
	h.trim(due, 2, 0, "with none left")
	for _, id := range []string{"keep-l1", "keep-l2", "keep-l3"} {
		h.expectMissing(id, 0, t0, nil, "after its Keep")
	}
}

// checkTombstoneKeepEntries: with an Age bound, a tombstone whose entries
// all go before its Keep stays (floor, At and data; its log reads as
// compacted) until a TrimLog at or after Keep folds it, counted as one;
// one whose Keep came first goes with its last entry, counted with that
// entry and not again.
func checkTombstoneKeepEntries(h *harness) {
	now := t0.Add(10 * time.Hour)
	old := now.Add(-2 * time.Hour)
	keep := now.Add(time.Hour).Truncate(time.Microsecond)
	h.write(store.Write{ID: "kent-long", Data: []byte("long"), At: old, Effects: []byte("l1")})
	h.write(store.Write{ID: "kent-long", Expected: 1, Data: []byte("long"), At: old, Effects: []byte("l2")})
	h.write(store.Write{ID: "kent-short", Data: []byte("short"), At: old, Effects: []byte("s1")})
	h.deleteD(store.Deletion{ID: "kent-long", Expected: 2, Floor: 30, At: old, Keep: keep})
	h.deleteD(store.Deletion{ID: "kent-short", Expected: 1, Floor: 7, At: old, Keep: old})

	h.trim(now, 100, 3, "with three old entries, one tombstone's Keep passed")
	h.expectMissing("kent-long", 30, old, []byte("long"), "with its entries gone before its Keep")
	h.compacted("kent-long", 0)
	if d := h.missing("kent-short"); d.Data != nil || d.Version < 7 || d.Version >= 30 {
		h.t.Fatalf("Load(kent-short) after its entry went after its Keep = %+v; want folded (no data, the store-wide floor >= 7, not yet kent-long's 30)", d)
	}
	h.trim(keep.Add(-time.Nanosecond), 100, 0, "before kent-long's Keep")
	h.trim(keep, 100, 1, "at kent-long's Keep")
	h.expectMissing("kent-long", 30, old, nil, "after its Keep")
	h.expectMissing("kent-never", 30, old, nil, "after kent-long folded")
}

// checkTombstoneKeepNoAge: in a store without an Age bound, a tombstone
// whose Keep came still lasts while its log has entries (nothing trims
// them), and one without entries folds at its Keep.
func checkTombstoneKeepNoAge(h *harness) {
	keep := t0.Add(time.Hour).Truncate(time.Microsecond)
	h.write(store.Write{ID: "knoage-log", Data: []byte("log"), At: t0, Effects: []byte("e")})
	h.deleteD(store.Deletion{ID: "knoage-log", Expected: 1, Floor: 3, At: t0, Keep: keep})
	h.write(store.Write{ID: "knoage-bare", Data: []byte("bare"), At: t0})
	h.deleteD(store.Deletion{ID: "knoage-bare", Expected: 1, Floor: 2, At: t0, Keep: keep})
	h.trim(keep.Add(-time.Nanosecond), 100, 0, "before the Keep, with no Age bound")
	h.expectMissing("knoage-bare", 2, t0, []byte("bare"), "before its Keep")
	h.trim(keep.Add(24*time.Hour), 100, 1, "after the Keep, with no Age bound")
	h.expectMissing("knoage-bare", 2, t0, nil, "after its Keep")
	h.expectMissing("knoage-log", 3, t0, []byte("log"), "after its Keep, with its entry still kept")
	h.expectLog("knoage-log", 0, []store.Entry{entry("knoage-log", 1, "e")})
}
