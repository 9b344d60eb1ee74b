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

// The checks of the optional store.Sessions. Each one skips, saying so,
// when the store does not offer it: a store without sessions is complete,
// its lobbies then keep every heartbeat deadline in the record.

// sessions returns the store as a store.Sessions, or skips the check when
// it is not one.
func (h *harness) sessions() store.Sessions {
	h.t.Helper()
	ss, ok := h.s.(store.Sessions)
	if !ok {
		h.t.Skip("the store does not implement the optional store.Sessions; nothing to check")
	}
	return ss
}

func (h *harness) openSession(ss store.Sessions, id string, deadline time.Time) {
	h.t.Helper()
	if err := ss.OpenSession(h.ctx, id, deadline); err != nil {
		h.t.Fatalf("OpenSession(%q, %v) = %v, want nil", id, deadline, err)
	}
}

func (h *harness) renewSession(ss store.Sessions, id string, now, deadline time.Time, want error) {
	h.t.Helper()
	if err := ss.RenewSession(h.ctx, id, now, deadline); !errors.Is(err, want) || (want == nil) != (err == nil) {
		h.t.Fatalf("RenewSession(%q, now %v, deadline %v) = %v, want %v", id, now, deadline, err, want)
	}
}

func (h *harness) endSession(ss store.Sessions, id string, at time.Time) {
	h.t.Helper()
	if err := ss.EndSession(h.ctx, id, at); err != nil {
		h.t.Fatalf("EndSession(%q, %v) = %v, want nil", id, at, err)
	}
}

// expectDeadlines wants SessionDeadlines(ids) to be want.
func (h *harness) expectDeadlines(ss store.Sessions, ids []string, want ...time.Time) {
	h.t.Helper()
	got, err := ss.SessionDeadlines(h.ctx, ids)
	if err != nil {
		h.t.Fatalf("SessionDeadlines(%q) = %v, want nil", ids, err)
	}
	if d := diff(want, got); d != "" {
		h.t.Fatalf("SessionDeadlines(%q) mismatch (-want +got):\n%s", ids, d)
	}
}

func (h *harness) expired(ss store.Sessions, now time.Time, limit int) []store.SessionDeadline {
	h.t.Helper()
	got, err := ss.ExpiredSessions(h.ctx, now, limit)
	if err != nil {
		h.t.Fatalf("ExpiredSessions(%v, %d) = %v, want nil", now, limit, err)
	}
	return got
}

func (h *harness) expectExpired(ss store.Sessions, now time.Time, limit int, want ...store.SessionDeadline) {
	h.t.Helper()
	if d := diff(want, h.expired(ss, now, limit)); d != "" {
		h.t.Fatalf("ExpiredSessions(%v, %d) mismatch (-want +got):\n%s", now, limit, d)
	}
}

func (h *harness) sessionLobbies(ss store.Sessions, id, after string, limit int) []string {
	h.t.Helper()
	got, err := ss.SessionLobbies(h.ctx, id, after, limit)
	if err != nil {
		h.t.Fatalf("SessionLobbies(%q, %q, %d) = %v, want nil", id, after, limit, err)
	}
	return got
}

// expectLobbies wants the whole of SessionLobbies(id), read one page of
// two at a time, to be want.
func (h *harness) expectLobbies(ss store.Sessions, id string, want ...string) {
	h.t.Helper()
	var got []string
	after := ""
	for range len(want) + 2 {
		page := h.sessionLobbies(ss, id, after, 2)
		got = append(got, page...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1]
	}
	if d := diff(want, got); d != "" {
		h.t.Fatalf("SessionLobbies(%q) mismatch (-want +got):\n%s", id, d)
	}
}

// checkSessionOpen: OpenSession records a session with its deadline to
// the nanosecond; an ID is never opened twice (ErrConflict, the first
// deadline kept); unknown IDs have the zero deadline; bad arguments are
// ErrInvalid.
func checkSessionOpen(h *harness) {
	ss := h.sessions()
	h.openSession(ss, "s1", t0)
	h.openSession(ss, "s2", t0.Add(time.Nanosecond))
	h.openSession(ss, "s1 ", t0.Add(time.Hour)) // not s1
	h.expectDeadlines(ss, []string{"s1", "never", "s2", "s1", "s1 "}, t0, time.Time{}, t0.Add(time.Nanosecond), t0, t0.Add(time.Hour))

	if err := ss.OpenSession(h.ctx, "s1", t0.Add(time.Hour)); !errors.Is(err, store.ErrConflict) {
		h.t.Fatalf("OpenSession of a known session ID = %v, want %v (a session ID is never reused)", err, store.ErrConflict)
	}
	h.endSession(ss, "s2", t0)
	if err := ss.OpenSession(h.ctx, "s2", t0.Add(time.Hour)); !errors.Is(err, store.ErrConflict) {
		h.t.Fatalf("OpenSession of an ended session's ID = %v, want %v", err, store.ErrConflict)
	}
	h.expectDeadlines(ss, []string{"s1", "s2"}, t0, t0)
	h.renewSession(ss, "s2", t0.Add(-time.Hour), t0.Add(2*time.Hour), store.ErrSessionEnded)

	for _, c := range []struct {
		name string
		call func() error
	}{
		{"OpenSession with an empty ID", func() error { return ss.OpenSession(h.ctx, "", t0) }},
		{"OpenSession with a zero deadline", func() error { return ss.OpenSession(h.ctx, "s3", time.Time{}) }},
		{"ExpiredSessions with limit 0", func() error { _, err := ss.ExpiredSessions(h.ctx, later, 0); return err }},
		{"ExpiredSessions with limit -1", func() error { _, err := ss.ExpiredSessions(h.ctx, later, -1); return err }},
		{"SessionLobbies with limit 0", func() error { _, err := ss.SessionLobbies(h.ctx, "s1", "", 0); return err }},
		{"Write with unsorted Sessions", func() error {
			return h.s.Write(h.ctx, store.Write{ID: "l", Data: []byte("x"), At: t0, Sessions: []string{"s2", "s1"}})
		}},
		{"Write with duplicate Sessions", func() error {
			return h.s.Write(h.ctx, store.Write{ID: "l", Data: []byte("x"), At: t0, Sessions: []string{"s1", "s1"}})
		}},
		{"Write with an empty session ID", func() error {
			return h.s.Write(h.ctx, store.Write{ID: "l", Data: []byte("x"), At: t0, Sessions: []string{""}})
		}},
	} {
		if err := c.call(); !errors.Is(err, store.ErrInvalid) {
			h.t.Fatalf("%s = %v, want %v", c.name, err, store.ErrInvalid)
		}
	}
	h.expectDeadlines(ss, []string{"s3"}, time.Time{})
	h.loadMissing("l", nil)
}

// checkSessionRenew: a renewal before the deadline moves it to the later
// of the two, never back; one at or after the deadline, or of a session
// never opened, is ErrSessionEnded and changes nothing, and that session
// stays over.
func checkSessionRenew(h *harness) {
	ss := h.sessions()
	d := t0
	h.openSession(ss, "s", d)
	h.renewSession(ss, "s", d.Add(-time.Second), d.Add(time.Minute), nil)
	d = d.Add(time.Minute)
	h.expectDeadlines(ss, []string{"s"}, d)
	h.renewSession(ss, "s", d.Add(-time.Second), d.Add(-time.Hour), nil) // alive, but the deadline stays
	h.expectDeadlines(ss, []string{"s"}, d)
	h.renewSession(ss, "s", d.Add(-time.Nanosecond), d.Add(time.Nanosecond), nil)
	d = d.Add(time.Nanosecond)
	h.expectDeadlines(ss, []string{"s"}, d)

	// At the deadline the session is over: now == deadline is too late.
	h.renewSession(ss, "s", d, d.Add(time.Hour), store.ErrSessionEnded)
	h.renewSession(ss, "s", d.Add(time.Hour), d.Add(2*time.Hour), store.ErrSessionEnded)
	h.expectDeadlines(ss, []string{"s"}, d)
	// A session never opened is over as well.
	h.renewSession(ss, "never", t0.Add(-time.Hour), t0.Add(time.Hour), store.ErrSessionEnded)
	h.expectDeadlines(ss, []string{"never"}, time.Time{})
	if err := ss.RenewSession(h.ctx, "", t0, t0.Add(time.Hour)); !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrSessionEnded) {
		h.t.Fatalf("RenewSession of the empty ID = %v, want %v or %v", err, store.ErrInvalid, store.ErrSessionEnded)
	}
}

// checkSessionEnd: EndSession sets the deadline to the earlier of the
// current one and at, and no renewal succeeds afterwards, whatever its
// now; an unknown session is left alone without an error.
func checkSessionEnd(h *harness) {
	ss := h.sessions()
	h.openSession(ss, "a", t0.Add(time.Hour))
	h.openSession(ss, "b", t0)
	h.endSession(ss, "a", t0.Add(time.Minute))
	h.endSession(ss, "b", t0.Add(time.Minute)) // later than b's deadline: b keeps it
	h.expectDeadlines(ss, []string{"a", "b"}, t0.Add(time.Minute), t0)
	h.endSession(ss, "a", t0.Add(2*time.Minute)) // ending again keeps the earlier
	h.expectDeadlines(ss, []string{"a", "b"}, t0.Add(time.Minute), t0)
	h.renewSession(ss, "a", t0, t0.Add(time.Hour), store.ErrSessionEnded) // before its deadline, but ended
	h.expectDeadlines(ss, []string{"a"}, t0.Add(time.Minute))
	h.endSession(ss, "unknown", t0)
	h.expectDeadlines(ss, []string{"unknown"}, time.Time{})
	if err := ss.OpenSession(h.ctx, "unknown", t0.Add(time.Hour)); err != nil {
		h.t.Fatalf("OpenSession after EndSession of an unknown ID = %v, want nil (EndSession changes nothing for it)", err)
	}
}

// checkSessionRenewAtomic: renewals are atomic. Racing renewals leave the
// highest deadline any of them asked for, and a renewal racing EndSession
// either lands before it (and EndSession still ends the session) or fails:
// no renewal revives an ended session.
func checkSessionRenewAtomic(h *harness) {
	ss := h.sessions()
	const renewers, rounds = 8, 20
	for r := range rounds {
		id := fmt.Sprintf("race-%d", r)
		d := t0.Add(time.Duration(r) * time.Hour)
		h.openSession(ss, id, d)
		var wg sync.WaitGroup
		errs := make([]error, renewers+1)
		start := make(chan struct{})
		for i := range renewers {
			wg.Go(func() {
				<-start
				errs[i] = ss.RenewSession(h.ctx, id, d.Add(-time.Nanosecond), d.Add(time.Duration(i+1)*time.Minute))
			})
		}
		// Before the renewers' now: once it lands, they all fail.
		end := d.Add(-30 * time.Second)
		if r%2 == 1 {
			wg.Go(func() {
				<-start
				errs[renewers] = ss.EndSession(h.ctx, id, end)
			})
		}
		close(start)
		h.wait(&wg, "the racing renewals")
		for i, err := range errs {
			if err != nil && !errors.Is(err, store.ErrSessionEnded) || i == renewers && err != nil {
				h.t.Fatalf("round %d: call %d = %v", r, i, err)
			}
		}
		want := d.Add(renewers * time.Minute)
		if r%2 == 1 {
			want = end
		} else {
			for i, err := range errs[:renewers] {
				if err != nil {
					h.t.Fatalf("round %d: renewal %d of a live session = %v, want nil", r, i, err)
				}
			}
		}
		got, err := ss.SessionDeadlines(h.ctx, []string{id})
		if err != nil {
			h.t.Fatalf("SessionDeadlines = %v", err)
		}
		if !got[0].Equal(want) {
			h.t.Fatalf("round %d: after %d racing renewals (deadlines %v to %v)%s the deadline is %v, want %v: a renewal is not one atomic step",
				r, renewers, d.Add(time.Minute), d.Add(renewers*time.Minute), map[bool]string{true: " and an EndSession", false: ""}[r%2 == 1], got[0], want)
		}
	}
}

// checkSessionIndex: a Write's Sessions decide which sessions' indexes
// hold the lobby: each listed one gains it, each one the previous write
// listed and this one does not loses it, a write without Sessions drops
// it from all, and Delete drops it. Sessions never opened are indexed
// too. SessionLobbies pages in byte order.
func checkSessionIndex(h *harness) {
	ss := h.sessions()
	h.openSession(ss, "a", t0)
	h.openSession(ss, "b", t0)
	h.write(store.Write{ID: "l2", Data: []byte("x"), Sessions: []string{"a", "b"}})
	h.write(store.Write{ID: "l1", Data: []byte("x"), Sessions: []string{"a"}})
	h.write(store.Write{ID: "l3", Data: []byte("x"), Sessions: []string{"a", "never-opened"}})
	h.write(store.Write{ID: "l10", Data: []byte("x"), Sessions: []string{"a"}})
	h.expectLobbies(ss, "a", "l1", "l10", "l2", "l3")
	h.expectLobbies(ss, "b", "l2")
	h.expectLobbies(ss, "never-opened", "l3")
	h.expectLobbies(ss, "c")
	if got := h.sessionLobbies(ss, "a", "l10", 1); !slices.Equal(got, []string{"l2"}) {
		h.t.Fatalf("SessionLobbies(a, after l10, 1) = %q, want [l2]", got)
	}
	if got := h.sessionLobbies(ss, "a", "l", 10); !slices.Equal(got, []string{"l1", "l10", "l2", "l3"}) {
		h.t.Fatalf("SessionLobbies(a, after l, 10) = %q, want all four", got)
	}

	// l2's last generation of a ends: a loses it, b keeps it.
	h.write(store.Write{ID: "l2", Expected: 1, Data: []byte("y"), Sessions: []string{"b"}})
	h.expectLobbies(ss, "a", "l1", "l10", "l3")
	h.expectLobbies(ss, "b", "l2")
	// A session moves: c gains it, b loses it.
	h.write(store.Write{ID: "l2", Expected: 2, Data: []byte("z"), Sessions: []string{"c"}})
	h.expectLobbies(ss, "b")
	h.expectLobbies(ss, "c", "l2")
	// No session any more.
	h.write(store.Write{ID: "l1", Expected: 1, Data: []byte("y")})
	h.expectLobbies(ss, "a", "l10", "l3")
	// A failed write changes no index.
	h.writeErr(store.Write{ID: "l10", Expected: 7, Data: []byte("y"), Sessions: []string{"b"}}, store.ErrConflict)
	h.expectLobbies(ss, "a", "l10", "l3")
	h.expectLobbies(ss, "b")
	// Delete drops the lobby from every index.
	if err := h.s.Delete(h.ctx, store.Deletion{ID: "l3", Expected: 1, At: t0}); err != nil {
		h.t.Fatalf("Delete(l3) = %v", err)
	}
	h.expectLobbies(ss, "a", "l10")
	h.expectLobbies(ss, "never-opened")
	// Created again without sessions, it is in no index.
	missing, err := h.s.Load(h.ctx, "l3")
	if !errors.Is(err, store.ErrNotFound) {
		h.t.Fatalf("Load(l3) after Delete = %v, want %v", err, store.ErrNotFound)
	}
	h.write(store.Write{ID: "l3", Expected: missing.Version, Data: []byte("again")})
	h.expectLobbies(ss, "a", "l10")
}

// checkSessionPatternIDs: session and lobby IDs are opaque bytes in the
// index too: prefixes and pattern characters never make two sessions (or
// two lobbies) share an index entry.
func checkSessionPatternIDs(h *harness) {
	ss := h.sessions()
	sessions := []string{"s", "s*", "s?", "s[a]", "sa", "s%", "s_", "s{1}", "s:1", "s 1", "S", "s\x00"}
	for i, id := range sessions {
		h.openSession(ss, id, t0.Add(time.Duration(i)*time.Second))
		lobby := "l" + id
		h.write(store.Write{ID: lobby, Data: []byte(id), Sessions: []string{id}})
	}
	for i, id := range sessions {
		h.expectLobbies(ss, id, "l"+id)
		h.expectDeadlines(ss, []string{id}, t0.Add(time.Duration(i)*time.Second))
	}
	var want []store.SessionDeadline
	for i, id := range sessions {
		want = append(want, store.SessionDeadline{ID: id, Deadline: t0.Add(time.Duration(i) * time.Second)})
	}
	h.expectExpired(ss, later, 100, want...)
	if err := h.s.Delete(h.ctx, store.Deletion{ID: "ls*", Expected: 1, At: t0}); err != nil {
		h.t.Fatalf("Delete(ls*) = %v", err)
	}
	h.renewSession(ss, "s*", t0.Add(-time.Hour), t0.Add(time.Hour), nil)
	for i, id := range sessions {
		if id == "s*" {
			h.expectLobbies(ss, id)
			h.expectDeadlines(ss, []string{id}, t0.Add(time.Hour))
			continue
		}
		h.expectLobbies(ss, id, "l"+id)
		h.expectDeadlines(ss, []string{id}, t0.Add(time.Duration(i)*time.Second))
	}
}

// checkSessionExpired: ExpiredSessions lists the sessions whose deadline
// is at or before now and that hold a lobby, by (deadline, ID), up to
// limit, with EndSession's deadline, and keeps listing them until their
// lobbies drop them.
func checkSessionExpired(h *harness) {
	ss := h.sessions()
	sd := func(id string, d time.Time) store.SessionDeadline { return store.SessionDeadline{ID: id, Deadline: d} }
	h.openSession(ss, "b", t0)
	h.openSession(ss, "a", t0)
	h.openSession(ss, "c", t0.Add(-time.Second))
	h.openSession(ss, "d", t0.Add(time.Hour))
	h.openSession(ss, "e", t0.Add(-time.Minute)) // holds nothing
	h.openSession(ss, "f", t0.Add(2*time.Hour))
	for _, id := range []string{"a", "b", "c", "d", "f"} {
		h.write(store.Write{ID: "l-" + id, Data: []byte(id), Sessions: []string{id}})
	}
	h.expectExpired(ss, t0.Add(-time.Second-time.Nanosecond), 10)
	h.expectExpired(ss, t0.Add(-time.Second), 10, sd("c", t0.Add(-time.Second)))
	h.expectExpired(ss, t0, 10, sd("c", t0.Add(-time.Second)), sd("a", t0), sd("b", t0))
	h.expectExpired(ss, t0, 2, sd("c", t0.Add(-time.Second)), sd("a", t0))
	h.expectExpired(ss, t0, 10, sd("c", t0.Add(-time.Second)), sd("a", t0), sd("b", t0)) // listing took nothing away
	// A renewal moves d later; EndSession moves f earlier.
	h.renewSession(ss, "d", t0, t0.Add(3*time.Hour), nil)
	h.endSession(ss, "f", t0.Add(-2*time.Second))
	h.expectExpired(ss, t0.Add(2*time.Hour), 10, sd("f", t0.Add(-2*time.Second)), sd("c", t0.Add(-time.Second)), sd("a", t0), sd("b", t0))
	// Once its lobby drops it, a session is no longer listed.
	h.write(store.Write{ID: "l-a", Expected: 1, Data: []byte("a2")})
	h.expectExpired(ss, later, 10, sd("f", t0.Add(-2*time.Second)), sd("c", t0.Add(-time.Second)), sd("b", t0), sd("d", t0.Add(3*time.Hour)))
	h.expectExpired(ss, later, 1, sd("f", t0.Add(-2*time.Second)))
}

// checkSessionForget: a session over and holding nothing may be
// forgotten, but is never renewed again, and a session over that still
// holds a lobby is not forgotten.
func checkSessionForget(h *harness) {
	ss := h.sessions()
	h.openSession(ss, "idle", t0)
	h.openSession(ss, "holding", t0)
	h.write(store.Write{ID: "l", Data: []byte("x"), Sessions: []string{"holding"}})
	h.expectExpired(ss, t0.Add(time.Hour), 10, store.SessionDeadline{ID: "holding", Deadline: t0})
	got, err := ss.SessionDeadlines(h.ctx, []string{"idle", "holding"})
	if err != nil {
		h.t.Fatalf("SessionDeadlines = %v", err)
	}
	if !got[0].IsZero() && !got[0].Equal(t0) {
		h.t.Fatalf("SessionDeadlines(idle) after ExpiredSessions = %v, want %v or the zero time (forgotten)", got[0], t0)
	}
	if !got[1].Equal(t0) {
		h.t.Fatalf("SessionDeadlines(holding) after ExpiredSessions = %v, want %v: a session that holds a lobby is not forgotten", got[1], t0)
	}
	for _, id := range []string{"idle", "holding", "unknown"} {
		h.renewSession(ss, id, t0.Add(time.Hour), t0.Add(2*time.Hour), store.ErrSessionEnded)
	}
	got2, err := ss.SessionDeadlines(h.ctx, []string{"idle", "holding", "unknown"})
	if err != nil {
		h.t.Fatalf("SessionDeadlines = %v", err)
	}
	if d := diff([]time.Time{got[0], t0, {}}, got2); d != "" {
		h.t.Fatalf("refused renewals changed deadlines (-want +got):\n%s", d)
	}
	// Released, the holding session goes too (or stays over); either way
	// it is no longer listed and cannot be renewed.
	h.write(store.Write{ID: "l", Expected: 1, Data: []byte("y")})
	h.expectExpired(ss, t0.Add(time.Hour), 10)
	h.renewSession(ss, "holding", t0.Add(time.Hour), t0.Add(2*time.Hour), store.ErrSessionEnded)
}

// checkSessionIndexAtomic: the index changes in the same atomic step as
// the record. A reader that loads a lobby, reads a session's index and
// loads the lobby again, and finds the same version both times, finds the
// index that version's write set.
func checkSessionIndexAtomic(h *harness) {
	ss := h.sessions()
	const id, sess, writes = "atomic", "held", 300
	h.openSession(ss, sess, later)
	h.write(store.Write{ID: id, Data: []byte("0")})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		defer closeOnce(stop)
		for v := uint64(1); v <= writes; v++ {
			w := store.Write{ID: id, Expected: v, Data: fmt.Appendf(nil, "%d", v%2), At: t0}
			if v%2 == 1 {
				w.Sessions = []string{sess}
			}
			if err := h.s.Write(h.ctx, w); err != nil {
				writeErr = fmt.Errorf("Write(version %d): %w", v, err)
				return
			}
		}
	})
	var readErr error
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			before, err := h.s.Load(h.ctx, id)
			if err != nil {
				readErr = err
				return
			}
			lobbies, err := ss.SessionLobbies(h.ctx, sess, "", 10)
			if err != nil {
				readErr = err
				return
			}
			after, err := h.s.Load(h.ctx, id)
			if err != nil {
				readErr = err
				return
			}
			if before.Version != after.Version {
				continue
			}
			held := string(after.Data) == "1"
			if held != (len(lobbies) == 1) {
				readErr = fmt.Errorf("at version %d the record says the session holds the lobby: %v, but SessionLobbies = %q: the index and the record are not one atomic step", after.Version, held, lobbies)
				return
			}
		}
	})
	h.wait(&wg, "the writer and the reader of the index")
	if writeErr != nil {
		h.t.Fatal(writeErr)
	}
	if readErr != nil {
		h.t.Fatal(readErr)
	}
}

// checkSessionBatch (store.BatchWriter too): WriteBatch keeps the index
// as Writes would, in order for writes of one lobby.
func checkSessionBatch(h *harness) {
	ss := h.sessions()
	b := h.batchWriter()
	h.openSession(ss, "a", t0)
	errs := h.writeBatch(b, h.ctx, []store.Write{
		{ID: "l1", Data: []byte("x"), At: t0, Sessions: []string{"a", "b"}},
		{ID: "l2", Data: []byte("x"), At: t0, Sessions: []string{"a"}},
		{ID: "l1", Expected: 1, Data: []byte("y"), At: t0, Sessions: []string{"b"}},
		{ID: "l3", Expected: 5, Data: []byte("x"), At: t0, Sessions: []string{"a"}}, // conflicts
	})
	for i, want := range []error{nil, nil, nil, store.ErrConflict} {
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			h.t.Fatalf("WriteBatch outcome %d = %v, want %v", i, errs[i], want)
		}
	}
	h.expectLobbies(ss, "a", "l2")
	h.expectLobbies(ss, "b", "l1")
	h.expectExpired(ss, t0, 10, store.SessionDeadline{ID: "a", Deadline: t0})
	errs = h.writeBatch(b, h.ctx, []store.Write{{ID: "l2", Expected: 1, Data: []byte("y"), At: t0}})
	if errs[0] != nil {
		h.t.Fatalf("WriteBatch = %v", errs[0])
	}
	h.expectLobbies(ss, "a")
	h.expectExpired(ss, t0, 10)
}

// checkSessionContext: with a done context every session method returns
// the context's error and changes nothing.
func checkSessionContext(h *harness) {
	ss := h.sessions()
	h.openSession(ss, "s", t0)
	h.write(store.Write{ID: "l", Data: []byte("x"), Sessions: []string{"s"}})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"OpenSession", func(ctx context.Context) error { return ss.OpenSession(ctx, "new", t0) }},
		{"RenewSession", func(ctx context.Context) error {
			return ss.RenewSession(ctx, "s", t0.Add(-time.Hour), t0.Add(time.Hour))
		}},
		{"EndSession", func(ctx context.Context) error { return ss.EndSession(ctx, "s", t0.Add(-time.Hour)) }},
		{"SessionDeadlines", func(ctx context.Context) error { _, err := ss.SessionDeadlines(ctx, []string{"s"}); return err }},
		{"ExpiredSessions", func(ctx context.Context) error { _, err := ss.ExpiredSessions(ctx, later, 10); return err }},
		{"SessionLobbies", func(ctx context.Context) error { _, err := ss.SessionLobbies(ctx, "s", "", 10); return err }},
		{"Write dropping the session", func(ctx context.Context) error {
			return h.s.Write(ctx, store.Write{ID: "l", Expected: 1, Data: []byte("y"), At: t0})
		}},
		{"Write adding a session", func(ctx context.Context) error {
			return h.s.Write(ctx, store.Write{ID: "l2", Data: []byte("y"), At: t0, Sessions: []string{"s"}})
		}},
	}
	for _, c := range calls {
		var err error
		within(h.t, c.name+" with a cancelled context", func() { err = c.call(cancelled) })
		if !errors.Is(err, context.Canceled) {
			h.t.Fatalf("%s with a cancelled context = %v, want %v", c.name, err, context.Canceled)
		}
	}
	h.expectDeadlines(ss, []string{"s", "new"}, t0, time.Time{})
	h.expectLobbies(ss, "s", "l")
	h.expectExpired(ss, t0, 10, store.SessionDeadline{ID: "s", Deadline: t0})
}
