package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// sortDue sorts d the way Due must: by deadline, then by ID in byte order.
func sortDue(d []store.Due) {
	slices.SortStableFunc(d, func(a, b store.Due) int {
		if c := a.Deadline.Compare(b.Deadline); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// dueAt returns the entries of sorted that are due at now, at most limit.
func dueAt(sorted []store.Due, now time.Time, limit int) []store.Due {
	var out []store.Due
	for _, d := range sorted {
		if len(out) == limit {
			break
		}
		if !d.Deadline.After(now) {
			out = append(out, d)
		}
	}
	return out
}

// checkDueOrder: Due returns exactly the lobbies whose deadline is at or
// before now (never one without a deadline), by deadline and then by ID in
// byte order, as a prefix of that order when a limit cuts it.
func checkDueOrder(h *harness) {
	now := t0
	tie := now.Add(-time.Minute)
	lobbies := []store.Due{
		{ID: "b", Deadline: now.Add(-2 * time.Hour)}, // before "a", whatever the IDs say
		{ID: "a", Deadline: now.Add(-time.Hour)},
		// A tie, written out of byte order; one of them in another zone.
		{ID: "é", Deadline: tie},
		{ID: "a b", Deadline: tie},
		{ID: "Z", Deadline: tie},
		{ID: "B", Deadline: tie.In(time.FixedZone("UTC-3", -3*3600))},
		{ID: "a/b", Deadline: tie},
		{ID: "aa", Deadline: tie},
		{ID: "at-now", Deadline: now}, // due: a deadline at now has passed
		{ID: "after-now", Deadline: now.Add(time.Nanosecond)},
		{ID: "epoch", Deadline: time.Unix(0, 0)},
		{ID: "pre-epoch", Deadline: time.Unix(0, -1)},
		{ID: "tie-plus-1ns", Deadline: tie.Add(time.Nanosecond)},
	}
	for _, l := range lobbies {
		h.write(store.Write{ID: l.ID, Data: []byte(l.ID), Deadline: l.Deadline})
	}
	h.write(store.Write{ID: "no-deadline", Data: []byte("none")})

	sorted := slices.Clone(lobbies)
	sortDue(sorted)
	all := dueAt(sorted, now, len(sorted))
	if len(all) != len(lobbies)-1 {
		h.t.Fatalf("suite bug: %d of %d lobbies due", len(all), len(lobbies))
	}
	h.expectDue(now, 100, all)
	h.expectDue(now.In(time.FixedZone("UTC+9", 9*3600)), 100, all)
	for limit := 1; limit <= len(all); limit++ {
		h.expectDue(now, limit, all[:limit])
	}
	for _, at := range []time.Time{
		tie.Add(-time.Nanosecond), tie, tie.Add(time.Nanosecond), now.Add(-time.Nanosecond),
		time.Unix(0, -1), time.Unix(0, -2), time.Unix(0, 0),
	} {
		h.expectDue(at, 100, dueAt(sorted, at, 100))
	}
	// Any now is allowed: long before every deadline, and far in the future.
	h.expectDue(time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), 100, nil)
	h.expectDue(time.Time{}, 100, nil)
	h.expectDue(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), 100, sorted)
	h.expectDue(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), 1, sorted[:1])
}

// checkDueMoves: Due follows every change of a lobby's deadline: moved
// later it drops out, moved earlier it comes back in its place, cleared or
// deleted it is gone.
func checkDueMoves(h *harness) {
	now := t0
	version := map[string]uint64{}
	set := func(id string, d time.Time) {
		h.t.Helper()
		h.write(store.Write{ID: id, Expected: version[id], Data: []byte(id), Deadline: d})
		version[id]++
	}
	set("x", now.Add(-time.Second))
	set("y", now.Add(-2*time.Second))
	set("z", now.Add(time.Hour))
	h.expectDue(now, 10, []store.Due{{ID: "y", Deadline: now.Add(-2 * time.Second)}, {ID: "x", Deadline: now.Add(-time.Second)}})

	set("x", now.Add(time.Second)) // later: out
	h.expectDue(now, 10, []store.Due{{ID: "y", Deadline: now.Add(-2 * time.Second)}})

	set("x", now.Add(-5*time.Second)) // earlier than y: first
	h.expectDue(now, 10, []store.Due{{ID: "x", Deadline: now.Add(-5 * time.Second)}, {ID: "y", Deadline: now.Add(-2 * time.Second)}})

	set("y", time.Time{}) // cleared: out
	h.expectDue(now, 10, []store.Due{{ID: "x", Deadline: now.Add(-5 * time.Second)}})

	set("z", now) // moved earlier to exactly now: in
	h.expectDue(now, 10, []store.Due{{ID: "x", Deadline: now.Add(-5 * time.Second)}, {ID: "z", Deadline: now}})

	h.delete("x", version["x"], 0) // deleted: out
	h.expectDue(now, 10, []store.Due{{ID: "z", Deadline: now}})

	set("z", now)                                   // the same deadline again (a write that keeps it)
	set("z", now.In(time.FixedZone("UTC+1", 3600))) // the same instant in another zone
	h.expectDue(now, 10, []store.Due{{ID: "z", Deadline: now}})
	h.expectDue(later, 10, []store.Due{{ID: "z", Deadline: now}}) // y has none, x is gone

	set("z", now.Add(time.Nanosecond)) // one nanosecond later: not due at now
	h.expectDue(now, 10, nil)

	set("y", now.Add(-time.Hour)) // cleared, then set again: back in
	h.expectDue(now, 10, []store.Due{{ID: "y", Deadline: now.Add(-time.Hour)}})
}

// checkManyLobbies: 10,000 lobbies, two per deadline, written concurrently;
// Due over all of them is exact, with and without limits.
func checkManyLobbies(h *harness) {
	const n, writers = 10000, 4
	rng := rand.New(rand.NewPCG(3, 4))
	perm := rng.Perm(n)
	all := make([]store.Due, n)
	for i := range n {
		all[i] = store.Due{
			ID:       fmt.Sprintf("many-%05d", perm[i]),
			Deadline: t0.Add(time.Duration(i*7919%(n/2)) * time.Millisecond),
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := w; i < n; i += writers {
				if err := h.s.Write(h.ctx, store.Write{ID: all[i].ID, Data: []byte(all[i].ID), Deadline: all[i].Deadline}); err != nil {
					errs[w] = fmt.Errorf("Write(%q) = %w", all[i].ID, err)
					return
				}
			}
		})
	}
	h.wait(&wg, "the writers")
	for _, err := range errs {
		if err != nil {
			h.t.Fatal(err)
		}
	}

	sortDue(all)
	end := t0.Add(time.Duration(n/2) * time.Millisecond)
	h.expectDue(end, n+1, all)
	h.expectDue(end, n, all)
	h.expectDue(end, 100, all[:100])
	mid := t0.Add(time.Duration(n/4)*time.Millisecond - time.Nanosecond)
	h.expectDue(mid, n, dueAt(all, mid, n))
	h.expectDue(mid, 1, all[:1])
	for i := 0; i < n; i += 997 {
		h.expectRecord(store.Record{ID: all[i].ID, Version: 1, Data: []byte(all[i].ID), Deadline: all[i].Deadline})
	}
}
