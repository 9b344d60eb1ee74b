package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

func (h *harness) claim(c store.Claimer, now time.Time, limit int, hold time.Duration, want []store.Due) {
	h.t.Helper()
	got, err := c.Claim(h.ctx, now, limit, hold)
	if err != nil {
		h.t.Fatalf("Claim(%v, %d, %v) = %v, want nil", now, limit, hold, err)
	}
	if d := diff(want, got); d != "" {
		h.t.Fatalf("Claim(%v, %d, %v) mismatch (-want +got):\n%s", now, limit, hold, d)
	}
}

// checkClaim (store.Claimer only): Claim returns what Due would, minus the
// lobbies another Claim holds; a hold lasts until now+hold by the callers'
// clock, a Write releases it, Due ignores it, and concurrent Claims never
// hand out the same lobby twice.
func checkClaim(h *harness) {
	c, ok := h.s.(store.Claimer)
	if !ok {
		h.t.Skip("the store does not implement the optional store.Claimer")
	}
	now := t0
	a := store.Due{ID: "a", Deadline: now.Add(-2 * time.Second)}
	b := store.Due{ID: "b", Deadline: now.Add(-time.Second)}
	h.write(store.Write{ID: "a", Data: []byte("a"), Deadline: a.Deadline})
	h.write(store.Write{ID: "b", Data: []byte("b"), Deadline: b.Deadline})
	h.write(store.Write{ID: "c", Data: []byte("c"), Deadline: now.Add(time.Hour)})
	h.write(store.Write{ID: "d", Data: []byte("d")})

	h.claim(c, now, 10, time.Minute, []store.Due{a, b})
	h.claim(c, now, 10, time.Minute, nil)                                  // held
	h.expectDue(now, 10, []store.Due{a, b})                                // Due ignores claims
	h.claim(c, now.Add(time.Minute-time.Nanosecond), 10, time.Minute, nil) // still held
	h.claim(c, now.Add(time.Minute), 1, time.Minute, []store.Due{a})       // hold over; limit 1
	h.claim(c, now.Add(time.Minute), 10, time.Minute, []store.Due{b})

	// A Write releases the claim, whatever it does to the deadline.
	h.write(store.Write{ID: "b", Expected: 1, Data: []byte("b2"), Deadline: b.Deadline})
	h.claim(c, now.Add(time.Minute+time.Second), 10, time.Minute, []store.Due{b})

	// Concurrent claimers split the due lobbies without overlap.
	const lobbies, claimers = 30, 6
	var all []store.Due
	for i := range lobbies {
		d := store.Due{ID: "many-" + string(rune('A'+i)), Deadline: now.Add(time.Duration(i%7) * time.Millisecond)}
		h.write(store.Write{ID: d.ID, Data: []byte("x"), Deadline: d.Deadline})
		all = append(all, d)
	}
	at := now.Add(time.Hour) // everything above is due; a, b and c's claims are over
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed []store.Due
		errs    []error
	)
	for range claimers {
		wg.Go(func() {
			for {
				got, err := c.Claim(h.ctx, at, 3, time.Hour)
				mu.Lock()
				claimed = append(claimed, got...)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if err != nil || len(got) == 0 {
					return
				}
			}
		})
	}
	h.wait(&wg, "the concurrent claimers")
	for _, err := range errs {
		h.t.Fatalf("concurrent Claim = %v", err)
	}
	want := append(slices.Clone(all), a, b, store.Due{ID: "c", Deadline: now.Add(time.Hour)})
	sortDue(want)
	sortDue(claimed)
	if d := diff(want, claimed); d != "" {
		h.t.Fatalf("%d concurrent claimers: every due lobby claimed exactly once (-want +got):\n%s", claimers, d)
	}
}

// notifyWait bounds the wait for a notification. Shared stores deliver
// them through a server (LISTEN/NOTIFY, pub/sub), in milliseconds.
const notifyWait = 5 * time.Second

// subscriber takes changes from a Feed and checks each against the log.
type subscriber struct {
	h    *harness
	f    *store.Feed
	seen map[string]uint64 // highest position taken, per lobby
	lost int
}

// await takes from the feed until it has named lobby id at position v or
// later, or fails after notifyWait. Every Change it takes must name a
// position where the lobby's log holds an entry (the suite never trims
// here) and come once the entry can be read.
func (s *subscriber) await(id string, v uint64, after string) {
	s.h.t.Helper()
	timeout := time.After(notifyWait)
	for s.seen[id] < v {
		select {
		case <-s.f.Ready():
		case <-timeout:
			s.h.t.Fatalf("no Change naming %q at position %d or later within %v after %s (the feed was lost %d times meanwhile)",
				id, v, notifyWait, after, s.lost)
		}
		changes, lost := s.f.Take()
		if lost {
			s.lost++
		}
		for _, c := range changes {
			s.check(c)
			s.seen[c.Lobby] = max(s.seen[c.Lobby], c.Version)
		}
	}
}

// check fails unless ReadLog shows an entry at c's position: a Change
// names an entry, and a write without Effects adds none.
func (s *subscriber) check(c store.Change) {
	s.h.t.Helper()
	if c.Version == 0 {
		s.h.t.Fatalf("Change{%q, 0}: no entry has position 0", c.Lobby)
	}
	got, err := s.h.s.ReadLog(s.h.ctx, c.Lobby, c.Version-1, 1)
	if err != nil {
		s.h.t.Fatalf("ReadLog(%q, %d, 1) after taking Change{%q, %d} = %v", c.Lobby, c.Version-1, c.Lobby, c.Version, err)
	}
	if len(got) != 1 || got[0].Version != c.Version {
		s.h.t.Fatalf("took Change{%q, %d}, but ReadLog(%q, %d, 1) right after shows %v: "+
			"the Change names no entry, or came before its write was visible", c.Lobby, c.Version, c.Lobby, c.Version-1, positions(got))
	}
}

func positions(entries []store.Entry) []uint64 {
	out := []uint64{}
	for _, e := range entries {
		out = append(out, e.Version)
	}
	return out
}

func (h *harness) subscribe(n store.Notifier, ctx context.Context) *subscriber {
	h.t.Helper()
	f, err := n.Subscribe(ctx)
	if err != nil {
		h.t.Fatalf("Subscribe = %v, want nil", err)
	}
	if f == nil {
		h.t.Fatal("Subscribe returned a nil Feed")
	}
	return &subscriber{h: h, f: f, seen: map[string]uint64{}}
}

// checkSubscribe (store.Notifier only): every Feed receives a Change for
// each Write with Effects, naming its lobby and its entry's position;
// several subscribers each receive them; writers never wait for a
// subscriber that does not take; a subscriber whose context ended leaves
// the others alone; a Write without Effects adds no Change.
func checkSubscribe(h *harness) {
	n, ok := h.s.(store.Notifier)
	if !ok {
		h.t.Skip("the store does not implement the optional store.Notifier")
	}
	ctx1, cancel1 := context.WithCancel(h.ctx)
	defer cancel1()
	s1 := h.subscribe(n, ctx1)
	s2 := h.subscribe(n, h.ctx)

	h.write(store.Write{ID: "sub-n", Data: []byte("1"), Deadline: t0, Effects: []byte("e1")})
	s1.await("sub-n", 1, "a Write with Effects")
	s2.await("sub-n", 1, "a Write with Effects")
	h.write(store.Write{ID: "sub-n", Expected: 1, Data: []byte("2")}) // no entry, so no Change
	// A Change for the write without Effects would be taken, and fail,
	// with the one for sub-m: a Feed keeps only one Change per lobby, so
	// it must come before sub-n's next entry.
	h.write(store.Write{ID: "sub-m", Data: []byte("1"), Effects: []byte("m1")})
	s1.await("sub-m", 1, "a Write with Effects to another lobby")
	h.write(store.Write{ID: "sub-n", Expected: 2, Data: []byte("3"), Effects: []byte("e3")})
	s1.await("sub-n", 3, "a Write with Effects at position 3")

	// Nobody takes from the feeds now: writes must not wait for them.
	within(h.t, "100 writes with feeds nobody takes from", func() {
		for v := uint64(3); v < 103; v++ {
			if h.s.Write(h.ctx, store.Write{ID: "sub-n", Expected: v, Data: []byte("x"), At: t0, Effects: counter(int(v + 1))}) != nil {
				return
			}
		}
	})
	h.expectRecord(store.Record{ID: "sub-n", Version: 103, Data: []byte("x")})
	s1.await("sub-n", 103, "100 writes with Effects")
	s2.await("sub-n", 103, "100 writes with Effects")

	// One subscriber leaves; the other still receives.
	cancel1()
	h.write(store.Write{ID: "sub-m", Expected: 1, Data: []byte("2"), Effects: []byte("m2")})
	s2.await("sub-m", 2, "a Write with Effects, after another subscriber left")
}

// checkSubscribeAfterCommit (store.Notifier only): a Change is added only
// once its write is visible, so a reader that reads the log when it takes a
// Change sees the entry. Each round, a Write with Effects starts and the
// reader reads the log for every Change it takes; a store that adds the
// Change before committing lets the reader look too early.
func checkSubscribeAfterCommit(h *harness) {
	n, ok := h.s.(store.Notifier)
	if !ok {
		h.t.Skip("the store does not implement the optional store.Notifier")
	}
	s := h.subscribe(n, h.ctx)
	const id, rounds = "sub-commit", 20
	for v := range uint64(rounds) {
		written := make(chan error, 1)
		go func() {
			written <- h.s.Write(h.ctx, store.Write{ID: id, Expected: v, Data: counter(int(v + 1)), At: t0, Effects: counter(int(v + 1))})
		}()
		s.await(id, v+1, fmt.Sprintf("Write %d", v+1))
		select {
		case err := <-written:
			if err != nil {
				h.t.Fatalf("Write(%q, %d) = %v, want nil", id, v, err)
			}
		case <-h.ctx.Done():
			h.t.Fatalf("Write(%q, %d), whose Change came, had not returned when the check's time ran out", id, v)
		}
	}
}

// checkSubscribeFollow (store.Notifier only): a reader that follows the
// logs of a few lobbies only through its Feed (reading a lobby's log when
// a Change names it, checking every head when the feed was lost) keeps up
// with concurrent writers. After a first phase of racing writers, the
// reader catches up (a sync point of the check, not part of following);
// then every writer writes once more to a lobby of its own, all at the
// same moment, and the reader must hear of each of these last entries
// from its Feed alone. A store that drops a Change under load without
// marking the feed lost leaves the reader behind for good.
func checkSubscribeFollow(h *harness) {
	n, ok := h.s.(store.Notifier)
	if !ok {
		h.t.Skip("the store does not implement the optional store.Notifier")
	}
	lobbies := []string{"follow-a", "follow-b", "follow-c", "follow-d"}
	const writers, perWriter = 4, 60
	f, err := n.Subscribe(h.ctx)
	if err != nil {
		h.t.Fatalf("Subscribe = %v, want nil", err)
	}
	pos := map[string]uint64{} // what the reader has read, per lobby
	follow := func(id string) {
		h.t.Helper()
		got, err := h.s.ReadLog(h.ctx, id, pos[id], 10000)
		if err != nil {
			h.t.Fatalf("follower: ReadLog(%q, %d) = %v", id, pos[id], err)
		}
		for _, e := range got {
			if e.Version != pos[id]+1 {
				h.t.Fatalf("follower: ReadLog(%q) after %d returned position %d next", id, pos[id], e.Version)
			}
			pos[id] = e.Version
		}
	}
	take := func() {
		h.t.Helper()
		changes, lost := f.Take()
		if lost {
			for _, id := range lobbies {
				follow(id)
			}
		}
		for _, c := range changes {
			if !slices.Contains(lobbies, c.Lobby) {
				h.t.Fatalf("follower: Change names lobby %q, which nobody wrote", c.Lobby)
			}
			if c.Version > pos[c.Lobby] {
				follow(c.Lobby)
			}
		}
	}
	// write writes id once, retrying conflicts.
	write := func(id string) error {
		for {
			r, err := h.s.Load(h.ctx, id)
			if err == nil || errors.Is(err, store.ErrNotFound) {
				err = h.s.Write(h.ctx, store.Write{ID: id, Expected: r.Version, Data: []byte("x"), At: t0, Effects: counter(int(r.Version + 1))})
			}
			if !errors.Is(err, store.ErrConflict) {
				return err
			}
		}
	}
	// run has each writer call w(i), and follows the feed until they
	// all returned.
	run := func(phase string, w func(i int) error) {
		h.t.Helper()
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() { errs[i] = w(i) })
		}
		done := make(chan struct{})
		go func() {
			wg.Wait()
			close(done)
		}()
		for writing := true; writing; {
			select {
			case <-f.Ready():
				take()
			case <-done:
				writing = false
			case <-h.ctx.Done():
				h.t.Fatalf("%s: still waiting for the writers when the check's time ran out", phase)
			}
		}
		for _, err := range errs {
			if err != nil {
				h.t.Fatalf("%s: %v", phase, err)
			}
		}
	}

	run("racing writers", func(w int) error {
		for i := range perWriter {
			if err := write(lobbies[(i+w)%len(lobbies)]); err != nil {
				return err
			}
		}
		return nil
	})
	// The sync point: take what is there and read every log to its head.
	take()
	for _, id := range lobbies {
		follow(id)
	}
	var loaded sync.WaitGroup
	loaded.Add(writers)
	together := make(chan struct{})
	go func() {
		loaded.Wait()
		close(together)
	}()
	run("the last writes", func(w int) error {
		id := lobbies[w]
		r, err := h.s.Load(h.ctx, id)
		loaded.Done()
		if err != nil {
			return err
		}
		select {
		case <-together:
		case <-h.ctx.Done():
			return context.Cause(h.ctx)
		}
		return h.s.Write(h.ctx, store.Write{ID: id, Expected: r.Version, Data: []byte("x"), At: t0, Effects: counter(int(r.Version + 1))})
	})
	heads := h.heads(lobbies...)
	timeout := time.After(notifyWait)
	for i, id := range lobbies {
		for pos[id] < heads[i] {
			select {
			case <-f.Ready():
				take()
			case <-timeout:
				h.t.Fatalf("%v after the last writes, the follower had read %q up to %d of %d: no Change told it of the rest, and the feed was not marked lost",
					notifyWait, id, pos[id], heads[i])
			}
		}
	}
}
