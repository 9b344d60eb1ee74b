package storetest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// readerDeadline is the deadline the ConcurrentReaders check writes with
// version v: none for every fourth version, else t0 plus v milliseconds, so
// that a deadline in the due index names the version that wrote it.
func readerDeadline(v uint64) time.Time {
	if v%4 == 0 {
		return time.Time{}
	}
	return t0.Add(time.Duration(v) * time.Millisecond)
}

// readerVersion inverts readerDeadline.
func readerVersion(d time.Time) uint64 { return uint64(d.Sub(t0) / time.Millisecond) }

// checkConcurrentReaders: readers calling Load, Due and ReadLog while
// writers race on the same lobbies never see part of a write, and never go
// back in time:
//
//   - two Loads showing the same version around a Due see that version's
//     deadline in it (the due index is not updated in a step of its own);
//   - a deadline in Due names a version that a Load right after shows or
//     passes (the index never runs ahead of the record);
//   - Load shows the data of its version, and never a version below one this
//     reader saw before;
//   - ReadLog never shows an entry whose record a Load right after does not
//     show, always shows the entry of the version a Load before it showed,
//     and never loses an entry it showed (nothing is trimmed here).
//
// Once the writers stop, every lobby's record, due entry and log agree.
func checkConcurrentReaders(h *harness) {
	const writers, readers, perLobby = 4, 2, 150
	lobbies := []string{"rd-a", "rd-b", "rd-c"}
	var (
		mu       sync.Mutex
		failures []string
		wins     = make([]int, len(lobbies))
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 5 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(failures) > 0
	}

	for w := range writers {
		wg.Go(func() {
			li := w % len(lobbies)
			id := lobbies[li]
			for {
				mu.Lock()
				done := wins[li] >= perLobby || len(failures) > 0
				mu.Unlock()
				if done {
					return
				}
				r, err := h.s.Load(h.ctx, id)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					fail("writer: Load(%q) = %v", id, err)
					return
				}
				v := r.Version + 1
				err = h.s.Write(h.ctx, store.Write{
					ID: id, Expected: r.Version, Data: counter(int(v)), Deadline: readerDeadline(v),
					At: t0, Effects: counter(int(v)),
				})
				switch {
				case err == nil:
					mu.Lock()
					wins[li]++
					mu.Unlock()
				case errors.Is(err, store.ErrConflict):
				default:
					fail("writer: Write(%q, %d) = %v", id, r.Version, err)
					return
				}
			}
		})
	}

	var rg sync.WaitGroup
	for r := range readers {
		rg.Go(func() {
			rd := &reader{h: h, fail: fail, last: map[string]uint64{}, shown: map[string]uint64{}}
			for i := r; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if failed() {
					return
				}
				id := lobbies[(i/3)%len(lobbies)]
				var ok bool
				switch i % 3 {
				case 0:
					ok = rd.loadDueLoad(id)
				case 1:
					ok = rd.logThenLoad(id)
				default:
					ok = rd.loadThenLog(id)
				}
				if !ok {
					return
				}
			}
		})
	}
	// stop is closed however the wait ends, so the readers end too.
	defer closeOnce(stop)
	h.wait(&wg, "the writers")
	closeOnce(stop)
	h.wait(&rg, "the readers")
	for _, f := range failures {
		h.t.Error(f)
	}
	if h.t.Failed() {
		return
	}

	// At rest everything agrees.
	var wantDue []store.Due
	for li, id := range lobbies {
		r := h.load(id)
		if r.Version != uint64(wins[li]) || string(r.Data) != string(counter(int(r.Version))) {
			h.t.Errorf("lobby %q at rest: version %d with data %q after %d winning writes, want version %d with data %q",
				id, r.Version, r.Data, wins[li], wins[li], counter(wins[li]))
		}
		if d := readerDeadline(r.Version); !d.IsZero() {
			wantDue = append(wantDue, store.Due{ID: id, Deadline: d})
		}
		var want []store.Entry
		for v := uint64(1); v <= r.Version; v++ {
			want = append(want, store.Entry{Lobby: id, Version: v, Data: counter(int(v))})
		}
		h.expectLog(id, 0, want)
	}
	sortDue(wantDue)
	if d := diff(wantDue, h.due(later, 100)); d != "" {
		h.t.Errorf("due index at rest disagrees with the records (-want +got):\n%s", d)
	}
}

// reader is one reader goroutine of checkConcurrentReaders.
type reader struct {
	h     *harness
	fail  func(format string, args ...any)
	last  map[string]uint64 // highest version Load showed, per lobby
	shown map[string]uint64 // highest position ReadLog showed, per lobby
}

// load loads id, checks it against what this reader saw before, and
// returns its version.
func (rd *reader) load(id string) (uint64, bool) {
	r, err := rd.h.s.Load(rd.h.ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		rd.fail("reader: Load(%q) = %v", id, err)
		return 0, false
	}
	if r.Version < rd.last[id] {
		rd.fail("Load(%q) showed version %d after this reader had seen version %d: a read went back in time", id, r.Version, rd.last[id])
		return 0, false
	}
	rd.last[id] = r.Version
	if err == nil && string(r.Data) != string(counter(int(r.Version))) {
		rd.fail("Load(%q) showed version %d with data %q, written with %q", id, r.Version, r.Data, counter(int(r.Version)))
		return 0, false
	}
	return r.Version, true
}

// loadDueLoad: a Due between two Loads that show the same version shows
// that version's deadline; a deadline Due shows is never ahead of the
// record.
func (rd *reader) loadDueLoad(id string) bool {
	v1, ok := rd.load(id)
	if !ok {
		return false
	}
	due, err := rd.h.s.Due(rd.h.ctx, later, 100)
	if err != nil {
		rd.fail("reader: Due = %v", err)
		return false
	}
	v2, ok := rd.load(id)
	if !ok {
		return false
	}
	got, in := time.Time{}, false
	for _, d := range due {
		if d.ID == id {
			got, in = d.Deadline, true
		}
	}
	if in && readerVersion(got) > v2 {
		rd.fail("Due showed %q with the deadline of version %d, but a Load after it showed version %d: the index ran ahead of the record",
			id, readerVersion(got), v2)
		return false
	}
	if v1 != v2 {
		return true // a write came in between: nothing to compare
	}
	want := readerDeadline(v1)
	if in != !want.IsZero() || (in && !got.Equal(want)) {
		rd.fail("two Loads of %q showed version %d around a Due that showed %s, want %s: the due index and the record disagree",
			id, v1, describeDue(got, in), describeDue(want, !want.IsZero()))
		return false
	}
	return true
}

func describeDue(d time.Time, in bool) string {
	if !in {
		return "no deadline"
	}
	return fmt.Sprintf("the deadline of version %d", readerVersion(d))
}

// readLog reads id's whole log, checks that it holds one entry per
// version from 1, with the version's data, and that it reaches at least as
// far as this reader saw before (nothing is trimmed during the check); it
// returns the newest position.
func (rd *reader) readLog(id string) (uint64, bool) {
	got, err := rd.h.s.ReadLog(rd.h.ctx, id, 0, 10000)
	if err != nil {
		rd.fail("reader: ReadLog(%q) = %v", id, err)
		return 0, false
	}
	for i, e := range got {
		if e.Version != uint64(i+1) || string(e.Data) != string(counter(i+1)) {
			rd.fail("ReadLog(%q): entry %d at position %d with %q, want position %d with %q", id, i, e.Version, e.Data, i+1, counter(i+1))
			return 0, false
		}
	}
	head := uint64(len(got))
	if head < rd.shown[id] {
		rd.fail("ReadLog(%q) ends at position %d, but an earlier ReadLog showed position %d (nothing was trimmed)", id, head, rd.shown[id])
		return 0, false
	}
	rd.shown[id] = head
	return head, true
}

// logThenLoad: every entry ReadLog shows has its record.
func (rd *reader) logThenLoad(id string) bool {
	head, ok := rd.readLog(id)
	if !ok {
		return false
	}
	v, ok := rd.load(id)
	if !ok {
		return false
	}
	if head > v {
		rd.fail("ReadLog showed the entry at position %d of %q, but a Load after it showed version %d", head, id, v)
		return false
	}
	return true
}

// loadThenLog: every version Load shows has its entry.
func (rd *reader) loadThenLog(id string) bool {
	v, ok := rd.load(id)
	if !ok {
		return false
	}
	head, ok := rd.readLog(id)
	if !ok {
		return false
	}
	if head < v {
		rd.fail("Load showed version %d of %q, but ReadLog after it ends at position %d", v, id, head)
		return false
	}
	return true
}
