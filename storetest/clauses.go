package storetest

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// checkFloorHigh: floors are unsigned. A Delete whose floor is at or above
// 2^63 leaves a tombstone with at least that floor, a fold of such a floor
// raises the store-wide floor to it (also over a small one folded before),
// and lobbies created on those floors write their versions and log
// positions above them. A store that keeps floors in a signed column or a
// sorted set's score loses exactly these.
func checkFloorHigh(h *harness) {
	now := t0.Add(10 * time.Hour)
	old := now.Add(-2 * time.Hour)
	const high = uint64(1)<<63 + 5

	// A small floor folds first, so a signed comparison would keep it.
	h.write(store.Write{ID: "high-small", Data: []byte("s"), At: old})
	h.delete("high-small", 1, 3)

	g := h.missing("high-tomb").Version // the small floor, folded
	h.write(store.Write{ID: "high-tomb", Expected: g, Data: []byte("t"), At: old, Effects: []byte("t1")})
	h.delete("high-tomb", g+1, high)
	f := h.expectMissing("high-tomb", high, time.Time{}, []byte("t"), "after Delete with a floor of 2^63+5").Version
	h.write(store.Write{ID: "high-tomb", Expected: f, Data: []byte("t again"), At: now, Effects: []byte("t2")})
	h.expectRecord(store.Record{ID: "high-tomb", Version: f + 1, Data: []byte("t again")})
	h.expectLog("high-tomb", f, []store.Entry{entry("high-tomb", f+1, "t2")})
	if got := h.heads("high-tomb"); got[0] != f+1 {
		h.t.Fatalf("LogHeads(high-tomb) = %d, want %d", got[0], f+1)
	}

	// A lobby without entries folds its high floor at once.
	h.write(store.Write{ID: "high-fold", Expected: g, Data: []byte("f"), At: old})
	h.delete("high-fold", g+1, high+2)
	g = h.missing("high-unknown").Version
	if g < high+2 {
		h.t.Fatalf("Load(high-unknown) after a floor of 2^63+7 folded over one of 3: floor %d, want >= %d", g, high+2)
	}
	h.writeErr(store.Write{ID: "high-unknown", Expected: 3, Data: []byte("x")}, store.ErrConflict)

	// One near the top folds through TrimLog.
	h.write(store.Write{ID: "high-top", Expected: g, Data: []byte("top"), At: old, Effects: []byte("top")})
	h.delete("high-top", g+1, math.MaxUint64-2)
	h.trim(now, 100, 2, "with high-top's entry and high-tomb's first old")
	g = h.missing("high-unknown").Version
	if g < math.MaxUint64-2 {
		h.t.Fatalf("Load(high-unknown) after a floor of 2^64-3 folded: floor %d, want >= %d", g, uint64(math.MaxUint64-2))
	}
	if g < math.MaxUint64 {
		h.write(store.Write{ID: "high-unknown", Expected: g, Data: []byte("new"), At: now, Effects: []byte("new")})
		h.expectLog("high-unknown", g, []store.Entry{entry("high-unknown", g+1, "new")})
	}
}

// checkDeletePattern: IDs are never patterns. Deleting an ID that contains
// glob or LIKE metacharacters (*, ?, [, ], %, _ and \) removes exactly that
// lobby and leaves the IDs it would match as a pattern alone: their records,
// deadlines and logs.
func checkDeletePattern(h *harness) {
	patterns := []string{`pat*`, `pat?`, `pat[ab]`, `pat%`, `pat_`, `pat\*`, `pat\`, `p%t`, `pa_`}
	plain := []string{`pat`, `pata`, `patb`, `patab`, `pat-long`, `pat\x`, `pat\\`, `pxt`, `pal`, `pat]`}
	all := append(append([]string{}, patterns...), plain...)
	live := map[string]bool{}
	for _, id := range all {
		h.write(store.Write{ID: id, Data: []byte(id), Deadline: t0, Effects: []byte(id)})
		live[id] = true
	}
	for _, p := range patterns {
		h.delete(p, 1, 0)
		delete(live, p)
		for _, id := range all {
			if !live[id] {
				continue
			}
			r, err := h.s.Load(h.ctx, id)
			if err != nil || r.Version != 1 || string(r.Data) != id {
				h.t.Fatalf("Load(%q) after Delete(%q) = %+v, %s; want its record untouched: an ID is not a pattern", id, p, r, describe(err))
			}
			h.expectLog(id, 0, []store.Entry{entry(id, 1, id)})
		}
		h.loadMissing(p, []byte(p))
	}
	var want []store.Due
	for _, id := range plain {
		want = append(want, store.Due{ID: id, Deadline: t0})
	}
	sortDue(want)
	h.expectDue(later, 100, want)
}

// checkAliasingTombstone: the Data Load returns for a deleted lobby is the
// caller's, as for a record: writing into it (up to its capacity) changes
// nothing in the store, and two Loads never share it.
func checkAliasingTombstone(h *harness) {
	const id = "alias-tomb"
	h.write(store.Write{ID: id, Data: []byte("tombstone data"), Effects: []byte("e")})
	h.delete(id, 1, 0)
	r1 := h.missing(id)
	r2 := h.missing(id)
	if string(r1.Data) != "tombstone data" || string(r2.Data) != "tombstone data" {
		h.t.Fatalf("Load(%q) of a tombstone = %q and %q, want the deleted data", id, r1.Data, r2.Data)
	}
	full := r1.Data[:cap(r1.Data)]
	for i := range full {
		full[i] = '#'
	}
	if string(r2.Data) != "tombstone data" {
		h.t.Fatalf("Load(%q): writing into one returned Data changed another's to %q: they share memory", id, r2.Data)
	}
	h.loadMissing(id, []byte("tombstone data"))
}

// checkBatchAtomic (store.BatchWriter only): each write of a batch is
// atomic with its own log entry, also while the rest of the batch is still
// being applied. An observer alternating Load-then-ReadLog and
// ReadLog-then-Load while batches run never sees a version without its
// entry, nor an entry without its version.
func checkBatchAtomic(h *harness) {
	b := h.batchWriter()
	lobbies := []string{"batom-a", "batom-b", "batom-c"}
	const rounds, chain = 40, 4
	var (
		mu       sync.Mutex
		failures []string
		stop     = make(chan struct{})
		observed = make(chan struct{})
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 5 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	go func() {
		defer close(observed)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := lobbies[i%len(lobbies)]
			if i%2 == 0 {
				r, err := h.s.Load(h.ctx, id)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					fail("observer: Load(%q) = %v", id, err)
					return
				}
				got, err := h.s.ReadLog(h.ctx, id, 0, 10000)
				if err != nil {
					fail("observer: ReadLog(%q) = %v", id, err)
					return
				}
				if uint64(len(got)) < r.Version {
					fail("Load(%q) showed version %d during a batch, but ReadLog afterwards ends at position %d", id, r.Version, len(got))
					return
				}
			} else {
				got, err := h.s.ReadLog(h.ctx, id, 0, 10000)
				if err != nil {
					fail("observer: ReadLog(%q) = %v", id, err)
					return
				}
				r, err := h.s.Load(h.ctx, id)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					fail("observer: Load(%q) = %v", id, err)
					return
				}
				if uint64(len(got)) > r.Version {
					fail("ReadLog(%q) showed the entry at position %d during a batch, but Load afterwards showed version %d", id, len(got), r.Version)
					return
				}
			}
		}
	}()
	defer closeOnce(stop)
	for r := range rounds {
		var ws []store.Write
		for _, id := range lobbies {
			for c := range chain {
				v := uint64(r*chain + c)
				ws = append(ws, store.Write{ID: id, Expected: v, Data: counter(int(v + 1)), At: t0, Effects: counter(int(v + 1))})
			}
		}
		for i, err := range b.WriteBatch(h.ctx, ws) {
			if err != nil {
				closeOnce(stop)
				h.t.Fatalf("round %d: WriteBatch write %d (%q, Expected %d) = %v, want nil", r, i, ws[i].ID, ws[i].Expected, err)
			}
		}
	}
	closeOnce(stop)
	h.recv(observed, "the observer")
	for _, f := range failures {
		h.t.Error(f)
	}
}

// checkBatchReleasesClaim (store.BatchWriter and store.Claimer only): a
// batched write releases the lobby's Claim, as a Write does.
func checkBatchReleasesClaim(h *harness) {
	b := h.batchWriter()
	c, ok := h.s.(store.Claimer)
	if !ok {
		h.t.Skip("the store does not implement the optional store.Claimer")
	}
	now := t0.Add(time.Second)
	h.write(store.Write{ID: "bclaim-a", Data: []byte("a"), Deadline: t0})
	h.write(store.Write{ID: "bclaim-b", Data: []byte("b"), Deadline: t0})
	claim := func(want []string, what string) {
		h.t.Helper()
		got, err := c.Claim(h.ctx, now, 10, time.Hour)
		if err != nil {
			h.t.Fatalf("Claim %s = %v", what, err)
		}
		var ids []string
		for _, d := range got {
			ids = append(ids, d.ID)
		}
		if d := diff(want, ids); d != "" {
			h.t.Fatalf("Claim %s (-want +got):\n%s", what, d)
		}
	}
	claim([]string{"bclaim-a", "bclaim-b"}, "of two due lobbies")
	claim(nil, "while both are held")
	for i, err := range b.WriteBatch(h.ctx, []store.Write{{ID: "bclaim-a", Expected: 1, Data: []byte("a2"), Deadline: t0, At: t0}}) {
		if err != nil {
			h.t.Fatalf("WriteBatch write %d = %v, want nil", i, err)
		}
	}
	claim([]string{"bclaim-a"}, "after a batched write to bclaim-a, still due")
}

// checkBatchRetention (store.BatchWriter only, a store keeping
// retainEntries entries per lobby): count retention applies to entries
// appended by a batch as to those of single Writes, lobby by lobby.
func checkBatchRetention(h *harness) {
	b := h.batchWriter()
	const id, other, n = "bret-a", "bret-b", 10
	var ws []store.Write
	var want []store.Entry
	for v := range uint64(n) {
		ws = append(ws, store.Write{ID: id, Expected: v, Data: []byte("r"), At: t0, Effects: fmt.Appendf(nil, "e%d", v+1)})
		want = append(want, entry(id, v+1, fmt.Sprintf("e%d", v+1)))
	}
	ws = append(ws, store.Write{ID: other, Data: []byte("o"), At: t0, Effects: []byte("o1")})
	for i, err := range b.WriteBatch(h.ctx, ws) {
		if err != nil {
			h.t.Fatalf("WriteBatch write %d (%q, Expected %d) = %v, want nil", i, ws[i].ID, ws[i].Expected, err)
		}
	}
	if tr := h.compacted(id, 0); tr != n-retainEntries {
		h.t.Fatalf("after a batch of %d entries with a retention of %d: ReadLog(%q, 0) reports Trimmed %d, want %d (exactly %d kept)",
			n, retainEntries, id, tr, n-retainEntries, retainEntries)
	}
	h.expectLog(id, n-retainEntries, want[n-retainEntries:])
	h.expectLog(other, 0, []store.Entry{entry(other, 1, "o1")})
}

// checkTrimLogClockBack (a store keeping entries for an hour): an entry is
// as old as the latest At of it and of every earlier entry of its lobby,
// so age retention removes a lobby's oldest entries first and never leaves
// a hole. An entry whose At went back stays until the later entry before
// it is old, and goes with it; an old entry takes no newer entry before it
// along.
func checkTrimLogClockBack(h *harness) {
	const id = "clockback"
	now := t0.Add(10 * time.Hour)
	ats := []time.Time{now.Add(-3 * time.Hour), now.Add(-10 * time.Minute), now.Add(-2 * time.Hour)}
	var want []store.Entry
	for v, at := range ats {
		h.write(store.Write{ID: id, Expected: uint64(v), Data: []byte("c"), At: at, Effects: fmt.Appendf(nil, "c%d", v+1)})
		want = append(want, entry(id, uint64(v+1), fmt.Sprintf("c%d", v+1)))
	}
	h.trim(now, 100, 1, "with entries 3h, 10m and 2h old (the third written after the second)")
	if tr := h.compacted(id, 0); tr != 1 {
		h.t.Fatalf("ReadLog(%q, 0) after the first entry went: Trimmed %d, want 1", id, tr)
	}
	h.expectLog(id, 1, want[1:])
	h.trim(now.Add(40*time.Minute), 100, 0, "with the second entry 50m old")
	h.expectLog(id, 1, want[1:])
	h.trim(now.Add(time.Hour), 100, 2, "with the second entry 70m old")
	h.compacted(id, 2)
	h.expectLog(id, 3, nil)
}

// checkConsumerCompacted (a store keeping entries for an hour): a lobby
// whose entries after a consumer's cursor were all trimmed, also one whose
// tombstone folded, is still returned by ClaimLog with that cursor; its
// ReadLog reports a CompactedError, and committing the Trimmed position
// ends the work.
func checkConsumerCompacted(h *harness) {
	const name = "compacted"
	now := t0.Add(10 * time.Hour)
	old := now.Add(-2 * time.Hour)
	h.register(name)
	for v := range uint64(3) {
		h.write(store.Write{ID: "ccmp-a", Expected: v, Data: []byte("a"), At: old, Effects: []byte("a")})
	}
	h.write(store.Write{ID: "ccmp-b", Data: []byte("b"), At: old, Effects: []byte("b")})
	h.delete("ccmp-b", 1, 0)
	h.trim(now, 100, 4, "with four old entries, one of a tombstone")
	h.loadMissing("ccmp-b", nil) // folded
	got := h.claimLog(name, now, 10, time.Minute)
	sortCursors(got)
	if d := diff([]store.Cursor{{Lobby: "ccmp-a"}, {Lobby: "ccmp-b"}}, got); d != "" {
		h.t.Fatalf("ClaimLog(%q) after retention trimmed every entry it had not read, one lobby's tombstone folded (-want +got):\n%s", name, d)
	}
	for _, c := range got {
		tr := h.compacted(c.Lobby, c.After)
		h.commitLog(name, c.Lobby, tr)
	}
	h.expectClaim(name, now, 10, time.Minute, nil)
	// The next entry is due again, from the position committed on.
	h.write(store.Write{ID: "ccmp-a", Expected: 3, Data: []byte("a"), At: now, Effects: []byte("a4")})
	h.expectClaim(name, now, 10, time.Minute, []store.Cursor{{Lobby: "ccmp-a", After: 3}})
}
