package storetest

import (
	"fmt"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// retainEntries is the count retention of the RetentionCount check.
const retainEntries = 3

// checkRetentionCount (a store keeping retainEntries entries per lobby, no
// age bound): appending trims each lobby's oldest entries beyond the bound
// and no other lobby's; a read after a trimmed position is a
// *store.CompactedError naming the lobby, the position asked for and the
// highest trimmed position, after which reading works again; a consumer
// that never committed holds nothing back; TrimLog without an age bound
// removes nothing. A lobby keeps exactly its newest Entries entries.
// CompactedError.Trimmed is a bound: at least the highest position removed
// and below the oldest kept, which here is one position.
func checkRetentionCount(h *harness) {
	const id, other = "ret-count", "ret-other"
	h.register("slow") // a consumer that never reads holds nothing back
	var want []store.Entry
	write := func(v uint64) {
		h.t.Helper()
		h.write(store.Write{ID: id, Expected: v, Data: []byte("r"), Effects: fmt.Appendf(nil, "e%d", v+1)})
		want = append(want, entry(id, v+1, fmt.Sprintf("e%d", v+1)))
	}
	for v := range uint64(retainEntries) {
		write(v)
	}
	h.expectLog(id, 0, want) // at the bound nothing goes
	h.write(store.Write{ID: other, Data: []byte("o"), Effects: []byte("o1")})
	h.write(store.Write{ID: other, Expected: 1, Data: []byte("o"), Effects: []byte("o2")})
	for v := uint64(retainEntries); v < 20; v++ {
		write(v)
	}
	const head = 20
	const trimmed = head - retainEntries
	if got := h.compacted(id, 0); got != trimmed {
		h.t.Fatalf("after %d entries with a retention of %d: ReadLog(%q, 0) reports Trimmed %d, so %d kept; want Trimmed %d: exactly the newest %d kept",
			head, retainEntries, id, got, head-got, trimmed, retainEntries)
	}
	// Reading after Trimmed, or later, works and finds the rest.
	for after := uint64(trimmed); after <= head; after++ {
		h.expectLog(id, after, want[after:])
	}
	// Every position before it reports a trim with the same bound (here
	// exact: the highest removed is trimmed, the oldest kept trimmed+1).
	for after := range uint64(trimmed) {
		if got := h.compacted(id, after); got != trimmed {
			h.t.Fatalf("ReadLog(%q, %d): Trimmed %d, want %d: at least the highest position removed and below the oldest kept", id, after, got, trimmed)
		}
	}
	// The other lobby keeps its entries: retention counts per lobby.
	h.expectLog(other, 0, []store.Entry{entry(other, 1, "o1"), entry(other, 2, "o2")})
	if d := diff([]uint64{head, 2}, h.heads(id, other)); d != "" {
		h.t.Fatalf("LogHeads after count retention (-want +got):\n%s", d)
	}
	// The consumer's cursors stand where it registered; its reads are
	// compacted like anyone's.
	h.expectClaim("slow", t0, 10, time.Minute, []store.Cursor{{Lobby: id}, {Lobby: other}})
	before := h.state(id, other)
	if n, err := h.s.TrimLog(h.ctx, later, 100); err != nil || n != 0 {
		h.t.Fatalf("TrimLog(later, 100) with no age bound = %d, %s; want 0, nil", n, describe(err))
	}
	h.unchanged(before, "TrimLog with no age bound")
}

// checkTrimLog (a store keeping entries for an hour, no count bound):
// TrimLog removes entries older than the age as judged by its now (never
// by a clock of the store), oldest first across lobbies, at most limit of
// them, and returns how many it removed; newer entries stay; a lobby with
// a record keeps it when its log empties.
func checkTrimLog(h *harness) {
	now := t0.Add(10 * time.Hour)
	writes := []struct {
		id  string
		age time.Duration
	}{
		{"trim-a", 5 * time.Hour},
		{"trim-b", 4 * time.Hour},
		{"trim-a", 3 * time.Hour},
		{"trim-c", 2 * time.Hour},
		{"trim-a", 30 * time.Minute},
		{"trim-b", 10 * time.Minute},
		{"trim-d", 0},
	}
	version := map[string]uint64{}
	for _, w := range writes {
		h.write(store.Write{ID: w.id, Expected: version[w.id], Data: []byte("x"), At: now.Add(-w.age),
			Effects: fmt.Appendf(nil, "%s@%v", w.id, w.age)})
		version[w.id]++
	}
	e := func(id string, v uint64, age time.Duration) store.Entry {
		return entry(id, v, fmt.Sprintf("%s@%v", id, age))
	}
	trim := func(at time.Time, limit, want int, what string) {
		h.t.Helper()
		n, err := h.s.TrimLog(h.ctx, at, limit)
		if err != nil || n != want {
			h.t.Fatalf("TrimLog(%v, %d) %s = %d, %s; want %d, nil", at, limit, what, n, describe(err), want)
		}
	}

	trim(now, 2, 2, "with four entries older than an hour") // a@5h, b@4h
	h.compacted("trim-a", 0)
	h.expectLog("trim-a", 1, []store.Entry{e("trim-a", 2, 3*time.Hour), e("trim-a", 3, 30*time.Minute)})
	h.compacted("trim-b", 0)
	h.expectLog("trim-b", 1, []store.Entry{e("trim-b", 2, 10*time.Minute)})
	h.expectLog("trim-c", 0, []store.Entry{e("trim-c", 1, 2*time.Hour)})
	h.expectLog("trim-d", 0, []store.Entry{e("trim-d", 1, 0)})

	trim(now, 10, 2, "with two entries older than an hour left") // a@3h, c@2h
	h.compacted("trim-a", 1)
	h.expectLog("trim-a", 2, []store.Entry{e("trim-a", 3, 30*time.Minute)})
	h.compacted("trim-c", 0)
	h.expectLog("trim-c", 1, nil)
	h.expectRecord(store.Record{ID: "trim-c", Version: 1, Data: []byte("x")})
	trim(now, 10, 0, "with nothing older than an hour")
	if d := diff([]uint64{3, 2, 0, 1}, h.heads("trim-a", "trim-b", "trim-c", "trim-d")); d != "" {
		h.t.Fatalf("LogHeads after trimming (-want +got):\n%s", d)
	}

	// Two hours on, everything is old.
	trim(now.Add(2*time.Hour), 100, 3, "two hours later")
	if d := diff([]uint64{0, 0, 0, 0}, h.heads("trim-a", "trim-b", "trim-c", "trim-d")); d != "" {
		h.t.Fatalf("LogHeads after trimming everything (-want +got):\n%s", d)
	}
	// The log goes on.
	h.write(store.Write{ID: "trim-a", Expected: 3, Data: []byte("x"), At: now.Add(2 * time.Hour), Effects: []byte("after")})
	h.compacted("trim-a", 2)
	h.expectLog("trim-a", 3, []store.Entry{entry("trim-a", 4, "after")})
}

// checkTombstoneFold (a store keeping entries for an hour): a deleted
// lobby keeps its tombstone (floor and data) exactly as long as it has
// entries; once the last is trimmed, Load reports no data and the
// store-wide floor, which is at or above every floor folded into it (also
// after a lower one folds later) and is what every ID without a record or
// tombstone reports; reading such a lobby's log below that floor is
// compacted; a lobby created again on it never reuses a position; a
// lobby created again on its tombstone keeps its log and what was trimmed.
func checkTombstoneFold(h *harness) {
	now := t0.Add(10 * time.Hour)
	old, recent := now.Add(-2*time.Hour), now.Add(-30*time.Minute)
	// fold-low: deleted early with a low floor, its entry trimmed last.
	h.write(store.Write{ID: "fold-low", Data: []byte("low"), At: recent, Effects: []byte("low")})
	h.delete("fold-low", 1, 0)
	for v := range uint64(3) {
		h.write(store.Write{ID: "fold-a", Expected: v, Data: []byte("a"), At: old, Effects: []byte("a")})
	}
	h.delete("fold-a", 3, 20)
	h.write(store.Write{ID: "fold-b", Data: []byte("b"), At: old, Effects: []byte("b")})
	h.delete("fold-b", 1, 5)
	h.write(store.Write{ID: "fold-kept", Data: []byte("kept"), At: old, Effects: []byte("kept")})
	// fold-part: deleted with two old entries and a recent one.
	h.write(store.Write{ID: "fold-part", Data: []byte("p"), At: old, Effects: []byte("p1")})
	h.write(store.Write{ID: "fold-part", Expected: 1, Data: []byte("p"), At: old, Effects: []byte("p2")})
	h.write(store.Write{ID: "fold-part", Expected: 2, Data: []byte("p"), At: recent, Effects: []byte("p3")})
	h.delete("fold-part", 3, 0)
	// A lobby deleted without entries has no tombstone to keep.
	h.write(store.Write{ID: "fold-none", Data: []byte("none"), At: old})
	h.delete("fold-none", 1, 0)
	if f := h.loadMissing("fold-none", nil); f < 1 {
		h.t.Fatalf("Load(fold-none) after Delete(fold-none, 1, 0) of a lobby without entries: floor %d, want >= 1", f)
	}

	// While their entries last, tombstones keep floor and data.
	fa := h.loadMissing("fold-a", []byte("a"))
	fb := h.loadMissing("fold-b", []byte("b"))
	if fa < 20 || fb < 5 {
		h.t.Fatalf("floors after Delete(fold-a, 3, 20) and Delete(fold-b, 1, 5): %d and %d, want >= 20 and >= 5", fa, fb)
	}
	if n, err := h.s.TrimLog(h.ctx, now, 100); err != nil || n != 7 {
		h.t.Fatalf("TrimLog(%v, 100) with seven entries older than an hour = %d, %s; want 7, nil", now, n, describe(err))
	}

	// Folded: no data, one store-wide floor for every ID without a
	// record or tombstone, at or above every folded floor.
	g := h.loadMissing("fold-a", nil)
	if g < max(fa, fb) {
		h.t.Fatalf("Load(fold-a) after its tombstone folded: floor %d, below the folded floors %d and %d", g, fa, fb)
	}
	for _, id := range []string{"fold-b", "fold-never-written", "fold-none"} {
		if f := h.loadMissing(id, nil); f != g {
			h.t.Fatalf("Load(%q) after folding: floor %d, but Load(fold-a) reports %d: every ID without a record or tombstone reports the store-wide floor", id, f, g)
		}
	}
	h.loadMissing("fold-low", []byte("low")) // its entry is recent: still a tombstone
	// fold-part keeps its tombstone for its recent entry; created again,
	// its log still reports what was trimmed.
	fp := h.loadMissing("fold-part", []byte("p"))
	h.write(store.Write{ID: "fold-part", Expected: fp, Data: []byte("p again"), At: now.Add(30 * time.Minute), Effects: []byte("p again")})
	if tr := h.compacted("fold-part", 0); tr < 2 {
		h.t.Fatalf("ReadLog(fold-part, 0) after two entries were trimmed: Trimmed %d, want >= 2", tr)
	}
	h.expectLog("fold-part", 2, []store.Entry{entry("fold-part", 3, "p3"), entry("fold-part", fp+1, "p again")})
	h.expectRecord(store.Record{ID: "fold-kept", Version: 1, Data: []byte("kept")})
	h.compacted("fold-a", 0)
	h.compacted("fold-never-written", g-1)
	h.expectLog("fold-a", g, nil)
	// A never-written ID is at the store-wide floor, not at 0.
	h.writeErr(store.Write{ID: "fold-fresh", Data: []byte("zero")}, store.ErrConflict)
	// A lobby created on it reports positions up to the floor compacted:
	// they may have been another lobby's of that ID.
	h.write(store.Write{ID: "fold-fresh", Expected: g, Data: []byte("fresh"), At: now.Add(30 * time.Minute), Effects: []byte("fresh")})
	if tr := h.compacted("fold-fresh", 0); tr < g {
		h.t.Fatalf("ReadLog(fold-fresh, 0) of a lobby created on the store-wide floor %d: Trimmed %d, want >= %d", g, tr, g)
	}
	h.expectLog("fold-fresh", g, []store.Entry{entry("fold-fresh", g+1, "fresh")})
	if d := diff([]uint64{0, 0}, h.heads("fold-a", "fold-kept")); d != "" {
		h.t.Fatalf("LogHeads after trimming (-want +got):\n%s", d)
	}

	// A lower floor folding later does not lower the store-wide one.
	if n, err := h.s.TrimLog(h.ctx, now.Add(time.Hour), 100); err != nil || n != 2 {
		h.t.Fatalf("TrimLog(%v, 100) with the entries of fold-low and fold-part old = %d, %s; want 2, nil", now.Add(time.Hour), n, describe(err))
	}
	for _, id := range []string{"fold-low", "fold-a", "fold-never-written"} {
		if f := h.loadMissing(id, nil); f < g {
			h.t.Fatalf("Load(%q) after a lower floor folded: floor %d, below the store-wide floor %d reported before", id, f, g)
		}
	}

	// Created again on the floor, the lobby continues above it.
	g = h.loadMissing("fold-a", nil)
	h.write(store.Write{ID: "fold-a", Expected: g, Data: []byte("again"), At: now, Effects: []byte("again")})
	h.expectRecord(store.Record{ID: "fold-a", Version: g + 1, Data: []byte("again")})
	h.expectLog("fold-a", g, []store.Entry{entry("fold-a", g+1, "again")})
}
