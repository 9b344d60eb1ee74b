package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

func (h *harness) register(name string) {
	h.t.Helper()
	if err := h.s.RegisterConsumer(h.ctx, name); err != nil {
		h.t.Fatalf("RegisterConsumer(%q) = %v, want nil", name, err)
	}
}

func (h *harness) claimLog(name string, now time.Time, limit int, hold time.Duration) []store.Cursor {
	h.t.Helper()
	got, err := h.s.ClaimLog(h.ctx, name, now, limit, hold)
	if err != nil {
		h.t.Fatalf("ClaimLog(%q, %v, %d, %v) = %v, want nil", name, now, limit, hold, err)
	}
	return got
}

// expectClaim wants ClaimLog to return exactly want, in any order.
func (h *harness) expectClaim(name string, now time.Time, limit int, hold time.Duration, want []store.Cursor) {
	h.t.Helper()
	got := h.claimLog(name, now, limit, hold)
	sortCursors(got)
	want = slices.Clone(want)
	sortCursors(want)
	if d := diff(want, got); d != "" {
		h.t.Fatalf("ClaimLog(%q, %v, %d, %v) mismatch (-want +got):\n%s", name, now, limit, hold, d)
	}
}

func sortCursors(c []store.Cursor) {
	slices.SortFunc(c, func(a, b store.Cursor) int { return strings.Compare(a.Lobby, b.Lobby) })
}

func (h *harness) commitLog(name, id string, after uint64) {
	h.t.Helper()
	if err := h.s.CommitLog(h.ctx, name, id, after); err != nil {
		h.t.Fatalf("CommitLog(%q, %q, %d) = %v, want nil", name, id, after, err)
	}
}

// drain is a durable consumer at work: it claims, reads and commits until
// name has nothing left, and returns the positions it read per lobby.
func (h *harness) drain(name string) map[string][]uint64 {
	h.t.Helper()
	got := map[string][]uint64{}
	for range 1000 {
		cursors := h.claimLog(name, t0, 3, time.Hour)
		if len(cursors) == 0 {
			return got
		}
		for _, c := range cursors {
			entries := h.readLog(c.Lobby, c.After, 1000)
			last := c.After
			for _, e := range entries {
				got[c.Lobby] = append(got[c.Lobby], e.Version)
				last = e.Version
			}
			h.commitLog(name, c.Lobby, last)
		}
	}
	h.t.Fatalf("consumer %q still had work after 1000 rounds of ClaimLog and CommitLog", name)
	return nil
}

// checkConsumers: every consumer name sees every entry appended after it
// registered (by RegisterConsumer or its first ClaimLog), none before,
// each lobby's cursor starting just before the first entry due to it, and
// one name's progress never moves another's.
func checkConsumers(h *harness) {
	version := map[string]uint64{}
	write := func(id string, effects bool) {
		h.t.Helper()
		w := store.Write{ID: id, Expected: version[id], Data: []byte("x")}
		if effects {
			w.Effects = fmt.Appendf(nil, "%s%d", id, version[id]+1)
		}
		h.write(w)
		version[id]++
	}
	write("cons-a", true) // before any consumer
	write("cons-b", true)
	h.register("alpha")
	write("cons-a", true) // alpha's first of cons-a: position 2
	write("cons-c", true)
	write("cons-b", false)
	write("cons-b", true) // position 3
	// A claim that is over before drain's ClaimLog at t0.
	h.expectClaim("alpha", t0.Add(-time.Hour), 10, time.Minute, []store.Cursor{
		{Lobby: "cons-a", After: 1}, {Lobby: "cons-b", After: 2}, {Lobby: "cons-c", After: 0},
	})
	h.expectClaim("beta", t0, 10, time.Minute, nil) // registers beta, with nothing to do
	write("cons-a", true)
	write("cons-c", true)

	wantAlpha := map[string][]uint64{"cons-a": {2, 3}, "cons-b": {3}, "cons-c": {1, 2}}
	wantBeta := map[string][]uint64{"cons-a": {3}, "cons-c": {2}}
	if d := diff(wantAlpha, h.drain("alpha")); d != "" {
		h.t.Fatalf("consumer alpha, registered after the first two writes (-want +got positions):\n%s", d)
	}
	if d := diff(wantBeta, h.drain("beta")); d != "" {
		h.t.Fatalf("consumer beta, registered by ClaimLog later, drained after alpha (-want +got positions):\n%s", d)
	}
	h.expectClaim("alpha", t0, 10, time.Minute, nil)
	h.register("gamma")
	h.register("gamma") // registering again changes nothing
	write("cons-b", true)
	for _, name := range []string{"beta", "gamma", "alpha"} {
		if d := diff(map[string][]uint64{"cons-b": {4}}, h.drain(name)); d != "" {
			h.t.Fatalf("consumer %s after one more write (-want +got positions):\n%s", name, d)
		}
	}
	// A commit naming a lobby the consumer has no cursor for changes
	// nothing: what is written there later is still due from its start.
	h.commitLog("gamma", "cons-new", 5)
	write("cons-new", true)
	write("cons-new", true)
	if d := diff(map[string][]uint64{"cons-new": {1, 2}}, h.drain("gamma")); d != "" {
		h.t.Fatalf("consumer gamma after committing position 5 of a lobby it had no cursor for, then two writes there (-want +got positions):\n%s", d)
	}
}

// checkConsumerClaims: ClaimLog skips lobbies claimed under the same name
// until now+hold (the callers' now), never under another name; CommitLog
// moves the cursor (never back) and releases the claim; a write between
// ClaimLog and CommitLog is claimed again, never lost.
func checkConsumerClaims(h *harness) {
	const name, other = "claims", "claims-other"
	h.register(name)
	h.register(other)
	h.write(store.Write{ID: "cl-x", Data: []byte("x"), Effects: []byte("x1")})
	h.write(store.Write{ID: "cl-y", Data: []byte("y"), Effects: []byte("y1")})
	both := []store.Cursor{{Lobby: "cl-x"}, {Lobby: "cl-y"}}

	h.expectClaim(name, t0, 10, time.Minute, both)
	h.expectClaim(name, t0, 10, time.Minute, nil)                                  // held
	h.expectClaim(name, t0.Add(time.Minute-time.Nanosecond), 10, time.Minute, nil) // still held
	h.expectClaim(other, t0, 10, time.Minute, both)                                // names are independent
	first := h.claimLog(name, t0.Add(time.Minute), 1, time.Minute)                 // the hold is over; limit 1
	if len(first) != 1 {
		h.t.Fatalf("ClaimLog(%q, limit 1) once the holds ended = %v, want one lobby", name, first)
	}
	var rest []store.Cursor
	for _, c := range both {
		if c.Lobby != first[0].Lobby {
			rest = append(rest, c)
		}
	}
	h.expectClaim(name, t0.Add(time.Minute), 10, time.Minute, rest)

	// Commit releases: with nothing after the cursor, the lobby is done.
	at := t0.Add(time.Minute)
	h.commitLog(name, "cl-x", 1)
	h.expectClaim(name, at, 10, time.Minute, nil)

	// A write between ClaimLog and CommitLog is not lost.
	h.write(store.Write{ID: "cl-y", Expected: 1, Data: []byte("y"), Effects: []byte("y2")})
	h.commitLog(name, "cl-y", 1)
	h.expectClaim(name, at, 10, time.Minute, []store.Cursor{{Lobby: "cl-y", After: 1}})

	// CommitLog never moves a cursor back.
	h.commitLog(name, "cl-y", 2)
	h.commitLog(name, "cl-y", 0)
	h.expectClaim(name, at, 10, time.Minute, nil)
	h.write(store.Write{ID: "cl-y", Expected: 2, Data: []byte("y"), Effects: []byte("y3")})
	h.expectClaim(name, at, 10, time.Minute, []store.Cursor{{Lobby: "cl-y", After: 2}})

	// The other name still stands where it was.
	h.expectClaim(other, at, 10, time.Minute, []store.Cursor{{Lobby: "cl-x"}, {Lobby: "cl-y"}})
}

// checkConsumersConcurrent: several processes sharing one consumer name,
// while writers append, deliver every entry exactly once: holds are long
// and end only by CommitLog, so no two claims may overlap. Each claimer
// marks a lobby busy between ClaimLog's return and its CommitLog call; if
// ClaimLog hands out a lobby another claimer has marked, the two claims
// overlapped in real time (ClaimLog took effect within the other's hold),
// which no linearizable store does.
func checkConsumersConcurrent(h *harness) {
	const name = "shared"
	const claimers, writers, perWriter = 4, 2, 120
	lobbies := []string{"cc-a", "cc-b", "cc-c", "cc-d", "cc-e", "cc-f"}
	h.register(name)
	var (
		mu        sync.Mutex
		failures  []string
		busy      = map[string]int{}
		delivered = map[string]map[uint64]int{}
		written   atomic.Bool
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
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; i < perWriter && !failed(); {
				id := lobbies[(i*writers+w)%len(lobbies)]
				r, err := h.s.Load(h.ctx, id)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					fail("writer: Load(%q) = %v", id, err)
					return
				}
				err = h.s.Write(h.ctx, store.Write{ID: id, Expected: r.Version, Data: []byte("x"), At: t0, Effects: counter(int(r.Version + 1))})
				switch {
				case err == nil:
					i++
				case errors.Is(err, store.ErrConflict):
				default:
					fail("writer: Write(%q, %d) = %v", id, r.Version, err)
					return
				}
			}
		})
	}
	var cg sync.WaitGroup
	for c := range claimers {
		cg.Go(func() {
			for !failed() {
				done := written.Load()
				cursors, err := h.s.ClaimLog(h.ctx, name, t0, 2, time.Hour)
				if err != nil {
					fail("claimer %d: ClaimLog = %v", c, err)
					return
				}
				if len(cursors) == 0 {
					if done {
						return
					}
					runtime.Gosched()
					continue
				}
				for _, cur := range cursors {
					mu.Lock()
					if by, ok := busy[cur.Lobby]; ok {
						mu.Unlock()
						fail("ClaimLog gave claimer %d lobby %q while claimer %d held it (hold 1h, not yet committed)", c, cur.Lobby, by)
						return
					}
					busy[cur.Lobby] = c
					mu.Unlock()
					entries, err := h.s.ReadLog(h.ctx, cur.Lobby, cur.After, 1000)
					if err != nil {
						fail("claimer %d: ReadLog(%q, %d) = %v", c, cur.Lobby, cur.After, err)
						return
					}
					last := cur.After
					mu.Lock()
					for _, e := range entries {
						if delivered[e.Lobby] == nil {
							delivered[e.Lobby] = map[uint64]int{}
						}
						delivered[e.Lobby][e.Version]++
						last = e.Version
					}
					delete(busy, cur.Lobby)
					mu.Unlock()
					if err := h.s.CommitLog(h.ctx, name, cur.Lobby, last); err != nil {
						fail("claimer %d: CommitLog(%q, %d) = %v", c, cur.Lobby, last, err)
						return
					}
				}
			}
		})
	}
	h.wait(&wg, "the writers")
	written.Store(true)
	h.wait(&cg, "the claimers")
	for _, f := range failures {
		h.t.Error(f)
	}
	if h.t.Failed() {
		return
	}
	h.expectClaim(name, t0, 100, time.Hour, nil)
	total := 0
	for _, id := range lobbies {
		r := h.load(id)
		for v := uint64(1); v <= r.Version; v++ {
			if n := delivered[id][v]; n != 1 {
				h.t.Errorf("entry %d of %q delivered %d times to the claimers sharing %q, want exactly once", v, id, n, name)
			}
		}
		total += int(r.Version)
	}
	if total != writers*perWriter {
		h.t.Errorf("%d entries in the logs after %d winning writes", total, writers*perWriter)
	}
}

// checkConsumerRegistration: a consumer registered while writers run sees
// every entry of a write that began after RegisterConsumer returned, none
// of a write that returned before RegisterConsumer was called, and, per
// lobby, every entry from its first one on (its cursor starts just before
// the first entry due to it).
func checkConsumerRegistration(h *harness) {
	const name = "joined-late"
	lobbies := []string{"reg-a", "reg-b", "reg-c"}
	const before, after = 60, 150 // writes before registering, and after it returned
	type span struct{ call, ret int64 }
	start := time.Now()
	since := func() int64 { return time.Since(start).Nanoseconds() }
	var (
		spans      = map[string][]span{} // per lobby, by version-1
		registered = make(chan struct{})
		wrote      = make(chan struct{})
		werr       error
		wg         sync.WaitGroup
	)
	wg.Go(func() {
		// However the writer ends, the check stops waiting for its first
		// writes: a failed Write reports itself after wg.Wait.
		var once sync.Once
		defer once.Do(func() { close(wrote) })
		for i := 0; i < before+after; i++ {
			if i == before {
				once.Do(func() { close(wrote) })
				select {
				case <-registered:
				case <-h.ctx.Done():
					werr = fmt.Errorf("waiting for RegisterConsumer: %w", context.Cause(h.ctx))
					return
				}
			}
			id := lobbies[i%len(lobbies)]
			v := uint64(len(spans[id]))
			call := since()
			if err := h.s.Write(h.ctx, store.Write{ID: id, Expected: v, Data: []byte("x"), At: t0, Effects: counter(int(v + 1))}); err != nil {
				werr = fmt.Errorf("write %d of the writer: Write(%q, %d) = %w", i+1, id, v, err)
				return
			}
			spans[id] = append(spans[id], span{call, since()})
		}
	})
	h.recv(wrote, fmt.Sprintf("the writer's first %d writes", before))
	regCall := since()
	err := h.s.RegisterConsumer(h.ctx, name)
	regRet := since()
	close(registered)
	h.wait(&wg, "the writer")
	if werr != nil {
		h.t.Fatal(werr)
	}
	if err != nil {
		h.t.Fatalf("RegisterConsumer(%q) = %v, want nil", name, err)
	}
	got := h.drain(name)
	for _, id := range lobbies {
		seen := got[id]
		for i, v := range seen {
			if i > 0 && v != seen[i-1]+1 {
				h.t.Fatalf("consumer %q read positions %v of %q: not every entry from its first one on", name, seen, id)
			}
		}
		for i, sp := range spans[id] {
			v := uint64(i + 1)
			has := slices.Contains(seen, v)
			switch {
			case sp.call > regRet && !has:
				h.t.Fatalf("the write of position %d of %q began after RegisterConsumer(%q) returned, but the consumer never got its entry (it got %v)",
					v, id, name, seen)
			case sp.ret < regCall && has:
				h.t.Fatalf("the write of position %d of %q returned before RegisterConsumer(%q) was called, but the consumer got its entry",
					v, id, name)
			}
		}
	}
}
