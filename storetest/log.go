package storetest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// sameAt reports whether a stored At is the written one as the contract
// lets a store keep it: the same instant, to the microsecond or better.
func sameAt(written, stored time.Time) bool {
	d := stored.Sub(written)
	return d > -time.Microsecond && d < time.Microsecond
}

// checkLogAppend: a Write with Effects appends one entry at the position
// of the version it creates (Expected+1, also when writes without Effects
// or a Delete's floor come between), with the writer's At to the
// microsecond and the Effects byte for byte; an empty, non-nil Effects
// appends an empty entry and a nil one appends nothing.
func checkLogAppend(h *harness) {
	const id = "lobby-log-append"
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	steps := []struct {
		effects []byte
		at      time.Time
	}{
		{all, t0},
		{nil, t0.Add(time.Second)}, // no entry: position 2 stays empty
		{[]byte("zone"), t0.In(time.FixedZone("UTC+5:30", 5*3600+1800)).Add(1500 * time.Microsecond)},
		{[]byte{}, t0.Add(time.Minute + 999*time.Microsecond)}, // an empty entry
		{[]byte("monotonic"), time.Now()},                      // carries a monotonic reading
		{[]byte("before the epoch"), time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC)},
		{nil, t0},
		{nil, t0},
		{[]byte{0}, time.Date(2199, 12, 31, 23, 59, 59, 123456000, time.UTC)},
		{[]byte("sub-ms"), t0.Add(time.Hour + 1234*time.Microsecond)},
	}
	var want []store.Entry
	for i, st := range steps {
		h.write(store.Write{ID: id, Expected: uint64(i), Data: fmt.Appendf(nil, "v%d", i+1), At: st.at, Effects: st.effects})
		if st.effects != nil {
			want = append(want, store.Entry{Lobby: id, Version: uint64(i + 1), At: st.at, Data: st.effects})
		}
	}
	got := h.readLog(id, 0, 100)
	if d := diff(withoutAt(want), withoutAt(got)); d != "" {
		h.t.Fatalf("ReadLog(%q, 0, 100): one entry per write with Effects, at the version it created (-want +got):\n%s", id, d)
	}
	for i := range want {
		if !sameAt(want[i].At, got[i].At) {
			h.t.Fatalf("entry %d of %q: At %v, written as %v: want the same instant to the microsecond",
				got[i].Version, id, got[i].At, want[i].At)
		}
	}
	// A Delete with a floor: the next life's first entry is at floor+1.
	h.delete(id, uint64(len(steps)), 40)
	f := h.loadMissing(id, fmt.Appendf(nil, "v%d", len(steps)))
	h.write(store.Write{ID: id, Expected: f, Data: []byte("again"), At: t0, Effects: []byte("again")})
	h.expectLog(id, want[len(want)-1].Version, []store.Entry{entry(id, f+1, "again")})
}

// checkLogRead: ReadLog returns the entries after the position asked for,
// oldest first, a limit cutting a prefix, at any starting position (also
// one between entries, past the end or of a lobby never written); reading
// consumes nothing; lobbies' logs never mix.
func checkLogRead(h *harness) {
	const a, b = "log-read-a", "log-read-b"
	var want []store.Entry
	vb := uint64(0)
	for v := range uint64(12) {
		var effects []byte
		if v%3 != 1 { // every third write has no entry: positions have gaps
			effects = fmt.Appendf(nil, "a%d", v+1)
			want = append(want, entry(a, v+1, string(effects)))
		}
		h.write(store.Write{ID: a, Expected: v, Data: []byte("a"), Effects: effects})
		if v%2 == 0 { // another lobby, interleaved
			h.write(store.Write{ID: b, Expected: vb, Data: []byte("b"), Effects: fmt.Appendf(nil, "b%d", vb+1)})
			vb++
		}
	}
	head := want[len(want)-1].Version
	for round := range 2 { // the second round finds what the first read
		for after := uint64(0); after <= head+1; after++ {
			var rest []store.Entry
			for _, e := range want {
				if e.Version > after {
					rest = append(rest, e)
				}
			}
			for limit := 1; limit <= len(rest)+1; limit++ {
				got := h.readLog(a, after, limit)
				wantPrefix := rest[:min(limit, len(rest))]
				if d := diff(withoutAt(wantPrefix), withoutAt(got)); d != "" {
					h.t.Fatalf("round %d: ReadLog(%q, %d, %d) is not the first %d entries after %d (-want +got):\n%s",
						round+1, a, after, limit, len(wantPrefix), after, d)
				}
			}
			if len(rest) == 0 {
				if got := h.readLog(a, after, 10); len(got) != 0 {
					h.t.Fatalf("ReadLog(%q, %d, 10) past the newest entry %d = %d entries, want none", a, after, head, len(got))
				}
			}
		}
	}
	var wantB []store.Entry
	for v := range vb {
		wantB = append(wantB, entry(b, v+1, fmt.Sprintf("b%d", v+1)))
	}
	h.expectLog(b, 0, wantB)
	h.expectLog(a, 1<<40, nil)
	h.expectLog("log-read-never-written", 0, nil)

	// A long log read with a large limit comes whole.
	const long = "log-read-long"
	var wantLong []store.Entry
	for v := range uint64(300) {
		h.write(store.Write{ID: long, Expected: v, Data: []byte("l"), Effects: counter(int(v + 1))})
		wantLong = append(wantLong, store.Entry{Lobby: long, Version: v + 1, Data: counter(int(v + 1))})
	}
	if d := diff(withoutAt(wantLong), withoutAt(h.readLog(long, 0, 1000))); d != "" {
		h.t.Fatalf("ReadLog(%q, 0, 1000) of 300 entries (-want +got):\n%s", long, d)
	}
	if d := diff(withoutAt(wantLong[100:250]), withoutAt(h.readLog(long, 100, 150))); d != "" {
		h.t.Fatalf("ReadLog(%q, 100, 150) (-want +got):\n%s", long, d)
	}
}

// checkLogHeads: LogHeads answers, in the order asked and once per ID
// asked (duplicates included), the position of each lobby's newest entry:
// not its version when later writes had no Effects, 0 for a lobby without
// entries or never written, the last entry of a deleted lobby.
func checkLogHeads(h *harness) {
	h.write(store.Write{ID: "heads-z", Data: []byte("z"), Effects: []byte("z1")})
	h.write(store.Write{ID: "heads-z", Expected: 1, Data: []byte("z")}) // no entry: head stays 1
	h.write(store.Write{ID: "heads-a", Data: []byte("a")})              // no entry at all
	for v := range uint64(4) {
		h.write(store.Write{ID: "heads-m", Expected: v, Data: []byte("m"), Effects: []byte("m")})
	}
	h.write(store.Write{ID: "heads-gone", Data: []byte("g"), Effects: []byte("g1")})
	h.write(store.Write{ID: "heads-gone", Expected: 1, Data: []byte("g"), Effects: []byte("g2")})
	h.delete("heads-gone", 2, 9)

	ids := []string{"heads-z", "heads-m", "heads-never", "heads-a", "heads-gone", "heads-m", "heads-"}
	if d := diff([]uint64{1, 4, 0, 0, 2, 4, 0}, h.heads(ids...)); d != "" {
		h.t.Fatalf("LogHeads(%q) (-want +got):\n%s", ids, d)
	}
	if got := h.heads(); len(got) != 0 {
		h.t.Fatalf("LogHeads() with no IDs = %v, want none", got)
	}
	h.write(store.Write{ID: "heads-a", Expected: 1, Data: []byte("a"), Effects: []byte("a2")})
	if d := diff([]uint64{2, 1}, h.heads("heads-a", "heads-z")); d != "" {
		h.t.Fatalf("LogHeads after a write with Effects (-want +got):\n%s", d)
	}
}

// checkLogAtomic: an entry is stored with its record or not at all.
// Refused writes append nothing; under concurrent writers, an observer
// never sees a record without its entry, nor an entry without its record.
func checkLogAtomic(h *harness) {
	const id = "lobby-atomic"
	h.write(store.Write{ID: id, Data: []byte("1"), Effects: []byte("1")})
	h.writeErr(store.Write{ID: id, Expected: 0, Data: []byte("conflict"), Effects: []byte("conflict")}, store.ErrConflict)
	h.writeErr(store.Write{ID: id, Expected: 7, Data: []byte("conflict"), Effects: []byte("conflict")}, store.ErrConflict)
	h.writeErr(store.Write{ID: id, Expected: 2, Data: []byte("conflict"), Effects: []byte("conflict")}, store.ErrConflict)
	h.expectLog(id, 0, []store.Entry{entry(id, 1, "1")})
	h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("1")})
	if d := diff([]uint64{1}, h.heads(id)); d != "" {
		h.t.Fatalf("LogHeads after refused writes (-want +got):\n%s", d)
	}

	// Concurrent: writers race on two lobbies; each winning write of
	// version v appends the entry v. An observer alternates
	// Load-then-ReadLog and ReadLog-then-Load and checks both directions.
	const writers, perLobby = 4, 200
	lobbies := []string{"atomic-x", "atomic-y"}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		stop     = make(chan struct{})
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 5 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	wins := make([]int, len(lobbies))
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
					fail("Load(%q) = %v", id, err)
					return
				}
				v := r.Version + 1
				err = h.s.Write(h.ctx, store.Write{ID: id, Expected: r.Version, Data: counter(int(v)), At: t0, Effects: counter(int(v))})
				switch {
				case err == nil:
					mu.Lock()
					wins[li]++
					mu.Unlock()
				case errors.Is(err, store.ErrConflict):
				default:
					fail("Write(%q, %d) = %v", id, r.Version, err)
					return
				}
			}
		})
	}
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		read := func(id string) ([]store.Entry, bool) {
			got, err := h.s.ReadLog(h.ctx, id, 0, 10000)
			if err != nil {
				fail("observer: ReadLog(%q) = %v", id, err)
				return nil, false
			}
			for i, e := range got {
				if e.Version != uint64(i+1) || string(e.Data) != string(counter(i+1)) {
					fail("observer: ReadLog(%q) entry %d is position %d with %q, want position %d with %q", id, i, e.Version, e.Data, i+1, counter(i+1))
					return nil, false
				}
			}
			return got, true
		}
		load := func(id string) (uint64, bool) {
			r, err := h.s.Load(h.ctx, id)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				fail("observer: Load(%q) = %v", id, err)
				return 0, false
			}
			return r.Version, true
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := lobbies[(i/2)%len(lobbies)]
			if i%2 == 0 {
				// Record first: every version it shows has its entry.
				v, ok := load(id)
				if !ok {
					return
				}
				got, ok := read(id)
				if !ok {
					return
				}
				if uint64(len(got)) < v {
					fail("Load(%q) showed version %d, but ReadLog afterwards ends at position %d", id, v, len(got))
					return
				}
			} else {
				// Entries first: every entry has its record.
				got, ok := read(id)
				if !ok {
					return
				}
				v, ok := load(id)
				if !ok {
					return
				}
				if uint64(len(got)) > v {
					fail("ReadLog(%q) showed the entry at position %d, but Load afterwards showed version %d", id, len(got), v)
					return
				}
			}
		}
	}()
	// stop is closed however the wait ends, so the observer ends too.
	defer closeOnce(stop)
	h.wait(&wg, "the writers")
	closeOnce(stop)
	h.recv(observed, "the observer")
	for _, f := range failures {
		h.t.Error(f)
	}
	if h.t.Failed() {
		return
	}
	for li, id := range lobbies {
		r := h.load(id)
		if int(r.Version) != wins[li] {
			h.t.Errorf("lobby %q: version %d after %d winning writes", id, r.Version, wins[li])
		}
		var want []store.Entry
		for v := 1; v <= wins[li]; v++ {
			want = append(want, store.Entry{Lobby: id, Version: uint64(v), Data: counter(v)})
		}
		h.expectLog(id, 0, want)
	}
}
