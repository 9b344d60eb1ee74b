package storetest

import (
	"errors"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

func (h *harness) delete(id string, expected, floor uint64) {
	h.t.Helper()
	if err := h.s.Delete(h.ctx, store.Deletion{ID: id, Expected: expected, Floor: floor}); err != nil {
		h.t.Fatalf("Delete(%q, %d, %d) = %v, want nil", id, expected, floor, err)
	}
}

func (h *harness) deleteErr(id string, expected, floor uint64, want error) {
	h.t.Helper()
	if err := h.s.Delete(h.ctx, store.Deletion{ID: id, Expected: expected, Floor: floor}); !errors.Is(err, want) {
		h.t.Fatalf("Delete(%q, %d, %d) = %s, want %v", id, expected, floor, describe(err), want)
	}
}

// checkDeleteFloor: versions never go backward for an ID. After Delete, Load
// reports a floor of at least max(expected, floor), only a Write expecting
// exactly that floor creates the lobby again, and it continues above it.
func checkDeleteFloor(h *harness) {
	const id = "lobby-floor"
	// Each write appends an entry, so the tombstone (and its data) lasts.
	for v := range uint64(3) {
		h.write(store.Write{ID: id, Expected: v, Data: []byte("x"), Deadline: t0, Effects: []byte("e")})
	}

	// floor below expected: the record's own version is the floor.
	h.delete(id, 3, 1)
	f := h.loadMissing(id, []byte("x"))
	if f < 3 {
		h.t.Fatalf("Load after Delete(%q, 3, 1): floor %d, want >= 3", id, f)
	}
	h.expectDue(later, 10, nil)
	for _, wrong := range []uint64{0, 1, f - 1, f + 1} {
		h.writeErr(store.Write{ID: id, Expected: wrong, Data: []byte("wrong"), Deadline: t0}, store.ErrConflict)
	}
	if g := h.loadMissing(id, []byte("x")); g != f {
		h.t.Fatalf("floor moved from %d to %d after refused writes", f, g)
	}
	h.write(store.Write{ID: id, Expected: f, Data: []byte("again"), Deadline: t0, Effects: []byte("e")})
	h.expectRecord(store.Record{ID: id, Version: f + 1, Data: []byte("again"), Deadline: t0})

	// floor above expected: the floor wins.
	want := f + 100
	h.delete(id, f+1, want)
	g := h.loadMissing(id, []byte("again"))
	if g < want {
		h.t.Fatalf("Load after Delete(%q, %d, %d): floor %d, want >= %d", id, f+1, want, g, want)
	}
	for _, wrong := range []uint64{0, f + 1, g - 1, g + 1} {
		h.writeErr(store.Write{ID: id, Expected: wrong, Data: []byte("wrong")}, store.ErrConflict)
	}
	h.write(store.Write{ID: id, Expected: g, Data: []byte("third life")})
	h.expectRecord(store.Record{ID: id, Version: g + 1, Data: []byte("third life")})
	h.write(store.Write{ID: id, Expected: g + 1, Data: []byte("on")})
	h.expectRecord(store.Record{ID: id, Version: g + 2, Data: []byte("on")})
}

// checkDeleteStale: Delete with a version other than the stored one is
// ErrConflict and changes nothing.
func checkDeleteStale(h *harness) {
	const id = "lobby-delete-stale"
	h.write(store.Write{ID: id, Data: []byte("1"), Deadline: t0, Effects: []byte("e")})
	h.write(store.Write{ID: id, Expected: 1, Data: []byte("2"), Deadline: t0})
	before := h.state(id)
	for _, wrong := range []uint64{0, 1, 3, 1 << 40} {
		h.deleteErr(id, wrong, 1000, store.ErrConflict)
	}
	h.unchanged(before, "Delete with stale versions")
	h.delete(id, 2, 0)
	h.loadMissing(id, []byte("2"))
}

// checkDeleteMissing: Delete of an ID without a record is ErrNotFound and
// changes nothing, in particular not the floor of a deleted ID.
func checkDeleteMissing(h *harness) {
	const id, gone = "lobby-never", "lobby-gone"
	h.deleteErr(id, 0, 0, store.ErrNotFound)
	h.deleteErr(id, 1, 5, store.ErrNotFound)
	if f := h.loadMissing(id, nil); f != 0 {
		h.t.Fatalf("Load(%q) after refused Deletes: floor %d, want 0", id, f)
	}
	h.write(store.Write{ID: id, Data: []byte("created at 0")})
	h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("created at 0")})

	h.write(store.Write{ID: gone, Data: []byte("x"), Effects: []byte("e")})
	h.delete(gone, 1, 7)
	f := h.loadMissing(gone, []byte("x"))
	before := h.state(id, gone)
	h.deleteErr(gone, f, f+50, store.ErrNotFound)
	h.deleteErr(gone, 1, 0, store.ErrNotFound)
	h.unchanged(before, "Delete of a deleted lobby")
}

// checkDeleteKeepsLog: Delete leaves the log alone. The entries written
// before it stay readable, Load reports the deleted record's data while
// they last, LogHeads still names the last one, and a lobby created again
// continues the log above every position it had, also when the Delete's
// floor was 0.
func checkDeleteKeepsLog(h *harness) {
	const id = "lobby-log-delete"
	h.write(store.Write{ID: id, Data: []byte("x1"), Deadline: t0, Effects: []byte("joined")})
	h.write(store.Write{ID: id, Expected: 1, Data: []byte("x2"), Effects: []byte("left")})
	h.write(store.Write{ID: id, Expected: 2, Data: []byte("x3")}) // no entry
	h.delete(id, 3, 5)
	want := []store.Entry{entry(id, 1, "joined"), entry(id, 2, "left")}
	h.expectLog(id, 0, want)
	f := h.loadMissing(id, []byte("x3"))
	if f < 5 {
		h.t.Fatalf("Load(%q) after Delete(%q, 3, 5): floor %d, want >= 5", id, id, f)
	}
	if d := diff([]uint64{2}, h.heads(id)); d != "" {
		h.t.Fatalf("LogHeads of a deleted lobby whose entries remain (-want +got):\n%s", d)
	}

	h.write(store.Write{ID: id, Expected: f, Data: []byte("y"), Deadline: t0.Add(time.Second), Effects: []byte("joined again")})
	want = append(want, entry(id, f+1, "joined again"))
	h.expectLog(id, 0, want)
	h.expectLog(id, 2, want[2:])
	h.expectDue(later, 10, []store.Due{{ID: id, Deadline: t0.Add(time.Second)}})

	// Deleted again with a floor of 0: the next life still continues
	// above every position the log ever had.
	h.delete(id, f+1, 0)
	g := h.loadMissing(id, []byte("y"))
	if g < f+1 {
		h.t.Fatalf("Load(%q) after Delete(%q, %d, 0): floor %d, want >= %d", id, id, f+1, g, f+1)
	}
	h.write(store.Write{ID: id, Expected: g, Data: []byte("z"), Effects: []byte("third life")})
	want = append(want, entry(id, g+1, "third life"))
	h.expectLog(id, 0, want)
	if d := diff([]uint64{g + 1}, h.heads(id)); d != "" {
		h.t.Fatalf("LogHeads after a third life (-want +got):\n%s", d)
	}
}
