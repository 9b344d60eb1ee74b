package storetest_test

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// simpleStore is the plainest correct store: one mutex over maps and a
// slice. With a flaw set, it breaks exactly one rule of the contract, the
// way real adapters tend to; the suite must catch each flaw.
type simpleStore struct {
	flaw flaw

	wmu sync.Mutex // serialises writers for the flaws that split a write in two
	mu  sync.Mutex
	// guarded by mu
	records map[string]store.Record // lobbies with a record
	floors  map[string]uint64       // every ID's version or floor
	outbox  []store.Event
	claims  map[string]time.Time // claimed until
	cache   map[string]store.Record
	subs    []*simpleSub
}

type simpleSub struct {
	ch chan struct{}
}

// A flaw is one way to break the contract.
type flaw struct {
	name  string
	check string // the suite's check that must fail because of it
}

var (
	noFlaw = flaw{name: "none"}
	// Write checks the version, releases the lock, then writes: two
	// writers expecting the same version can both win.
	lostUpdate = flaw{"lost-update", "ConcurrentWriters"}
	// Write ignores Expected altogether.
	ignoresExpected = flaw{"ignores-expected", "WriteStaleVersion"}
	// Write appends its events before checking the version.
	eventsOnConflict = flaw{"events-on-conflict", "OutboxAtomic"}
	// Write publishes its events, then (after a window) its record.
	eventsBeforeRecord = flaw{"events-before-record", "OutboxAtomic"}
	// Write publishes its record, then (after a window) its events.
	recordBeforeEvents = flaw{"record-before-events", "OutboxAtomic"}
	// Write publishes the new version, then (after a window) the new data.
	tornWrite = flaw{"torn-write", "Linearizable"}
	// Write keeps the caller's Data slice instead of a copy.
	aliasesData = flaw{"aliases-data", "Aliasing"}
	// Due orders by ID alone.
	dueByID = flaw{"due-by-id", "DueOrder"}
	// Due orders by deadline alone, ties in write order.
	dueTiesUnsorted = flaw{"due-ties-unsorted", "DueOrder"}
	// Due takes deadline < now instead of deadline <= now.
	dueExclusive = flaw{"due-exclusive", "DueOrder"}
	// Due is not told when a deadline is cleared (a stale index entry).
	dueKeepsCleared = flaw{"due-keeps-cleared", "DueMoves"}
	// Delete forgets the ID's version: a re-created lobby starts at 1.
	forgetsFloor = flaw{"forgets-floor", "DeleteFloor"}
	// Delete also drops the lobby's pending events.
	deleteDropsOutbox = flaw{"delete-drops-outbox", "DeleteKeepsOutbox"}
	// Load is served from a cache that writes and deletes do not invalidate.
	staleCache = flaw{"stale-cache", "ReadAfterWrite"}
	// Pending removes what it returns (a queue, not an outbox).
	pendingDrains = flaw{"pending-drains", "OutboxRedelivery"}
	// Nothing looks at the context.
	ignoresContext = flaw{"ignores-context", "ContextCancelled"}
	// Deadlines are kept to the microsecond (a timestamp column).
	microsecondDeadlines = flaw{"microsecond-deadlines", "RoundTrip"}
	// IDs are compared without case (a case-insensitive collation).
	foldsCase = flaw{"folds-case", "OpaqueIDs"}
	// Claim hands out claimed lobbies again.
	claimsNotHeld = flaw{"claims-not-held", "Claim"}
	// Notify channels never receive anything.
	notifySilent = flaw{"notify-silent", "Notify"}
)

var flaws = []flaw{
	lostUpdate, ignoresExpected, eventsOnConflict, eventsBeforeRecord, recordBeforeEvents,
	tornWrite, aliasesData, dueByID, dueTiesUnsorted, dueExclusive, dueKeepsCleared,
	forgetsFloor, deleteDropsOutbox, staleCache, pendingDrains, ignoresContext,
	microsecondDeadlines, foldsCase, claimsNotHeld, notifySilent,
}

var (
	_ store.Store    = (*simpleStore)(nil)
	_ store.Claimer  = (*simpleStore)(nil)
	_ store.Notifier = (*simpleStore)(nil)
)

func newSimpleStore(f flaw) *simpleStore {
	return &simpleStore{
		flaw:    f,
		records: map[string]store.Record{},
		floors:  map[string]uint64{},
		claims:  map[string]time.Time{},
		cache:   map[string]store.Record{},
	}
}

// window is where a flawed write lets others in between its two halves,
// as the network round trip between two statements would.
func window() {
	runtime.Gosched()
	time.Sleep(20 * time.Microsecond)
}

func (s *simpleStore) ctxErr(ctx context.Context) error {
	if s.flaw == ignoresContext {
		return nil
	}
	return ctx.Err()
}

func (s *simpleStore) key(id string) string {
	if s.flaw == foldsCase {
		return strings.ToLower(id)
	}
	return id
}

func copyRecord(r store.Record) store.Record {
	r.Data = slices.Clone(r.Data)
	return r
}

func copyEvents(events []store.Event) []store.Event {
	out := make([]store.Event, len(events))
	for i, e := range events {
		out[i] = store.Event{Lobby: e.Lobby, Seq: e.Seq, Data: slices.Clone(e.Data)}
	}
	return out
}

func (s *simpleStore) Load(ctx context.Context, id string) (store.Record, error) {
	if err := s.ctxErr(ctx); err != nil {
		return store.Record{}, err
	}
	if id == "" {
		return store.Record{}, store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.key(id)
	if s.flaw == staleCache {
		if r, ok := s.cache[k]; ok {
			return copyRecord(r), nil
		}
	}
	r, ok := s.records[k]
	if !ok {
		return store.Record{ID: id, Version: s.floors[k]}, store.ErrNotFound
	}
	if s.flaw == staleCache {
		s.cache[k] = copyRecord(r)
	}
	r.ID = id
	return copyRecord(r), nil
}

func (s *simpleStore) Write(ctx context.Context, w store.Write) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	if w.ID == "" {
		return store.ErrInvalid
	}
	for _, e := range w.Events {
		if e.Lobby != w.ID {
			return store.ErrInvalid
		}
	}
	k := s.key(w.ID)
	rec := store.Record{ID: w.ID, Version: w.Expected + 1, Data: slices.Clone(w.Data), Deadline: w.Deadline.Round(0)}
	if s.flaw == aliasesData {
		rec.Data = w.Data
	}
	if s.flaw == microsecondDeadlines {
		rec.Deadline = rec.Deadline.Truncate(time.Microsecond)
	}
	events := copyEvents(w.Events)

	switch s.flaw {
	case lostUpdate:
		s.mu.Lock()
		ok := s.floors[k] == w.Expected
		s.mu.Unlock()
		if !ok {
			return store.ErrConflict
		}
		window()
		s.mu.Lock()
		s.commit(k, rec, events)
		s.mu.Unlock()
		return nil

	case eventsBeforeRecord, recordBeforeEvents, tornWrite:
		s.wmu.Lock()
		defer s.wmu.Unlock()
		s.mu.Lock()
		if s.floors[k] != w.Expected {
			s.mu.Unlock()
			return store.ErrConflict
		}
		switch s.flaw {
		case eventsBeforeRecord:
			s.outbox = append(s.outbox, events...)
			events = nil
		case recordBeforeEvents:
			s.commit(k, rec, nil)
		case tornWrite:
			old, ok := s.records[k]
			if !ok {
				old = store.Record{ID: w.ID}
			}
			old.Version = rec.Version
			s.records[k] = old
			s.floors[k] = rec.Version
		}
		s.mu.Unlock()
		window()
		s.mu.Lock()
		if s.flaw == recordBeforeEvents {
			s.outbox = append(s.outbox, events...)
		} else {
			s.commit(k, rec, events)
		}
		s.mu.Unlock()
		return nil
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flaw == eventsOnConflict {
		s.outbox = append(s.outbox, events...)
		events = nil
	}
	if s.flaw != ignoresExpected && s.floors[k] != w.Expected {
		return store.ErrConflict
	}
	if s.flaw == ignoresExpected {
		rec.Version = s.floors[k] + 1
	}
	s.commit(k, rec, events)
	return nil
}

// commit stores rec and appends events; the caller holds mu.
func (s *simpleStore) commit(k string, rec store.Record, events []store.Event) {
	if s.flaw == dueKeepsCleared && rec.Deadline.IsZero() {
		rec.Deadline = s.records[k].Deadline
	}
	s.records[k] = rec
	s.floors[k] = rec.Version
	s.outbox = append(s.outbox, events...)
	delete(s.claims, k)
	s.poke()
}

func (s *simpleStore) Delete(ctx context.Context, id string, expected, floor uint64) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	if id == "" {
		return store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.key(id)
	r, ok := s.records[k]
	if !ok {
		return store.ErrNotFound
	}
	if r.Version != expected {
		return store.ErrConflict
	}
	delete(s.records, k)
	delete(s.claims, k)
	s.floors[k] = max(expected, floor)
	if s.flaw == forgetsFloor {
		delete(s.floors, k)
	}
	if s.flaw == deleteDropsOutbox {
		s.outbox = slices.DeleteFunc(s.outbox, func(e store.Event) bool { return s.key(e.Lobby) == k })
	}
	s.poke()
	return nil
}

func (s *simpleStore) due(now time.Time, limit int, skipClaimed bool) []store.Due {
	var out []store.Due
	for k, r := range s.records {
		if r.Deadline.IsZero() || r.Deadline.After(now) {
			continue
		}
		if s.flaw == dueExclusive && r.Deadline.Equal(now) {
			continue
		}
		if until, ok := s.claims[k]; skipClaimed && ok && now.Before(until) {
			continue
		}
		out = append(out, store.Due{ID: r.ID, Deadline: r.Deadline})
	}
	slices.SortFunc(out, func(a, b store.Due) int {
		switch s.flaw {
		case dueByID:
			return strings.Compare(a.ID, b.ID)
		case dueTiesUnsorted:
			// Break ties by the length of the ID: deterministic, and
			// wrong whenever byte order says otherwise.
			return cmp.Or(a.Deadline.Compare(b.Deadline), cmp.Compare(len(a.ID), len(b.ID)))
		}
		return cmp.Or(a.Deadline.Compare(b.Deadline), strings.Compare(a.ID, b.ID))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

func (s *simpleStore) Due(ctx context.Context, now time.Time, limit int) ([]store.Due, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.due(now, limit, false), nil
}

func (s *simpleStore) Claim(ctx context.Context, now time.Time, limit int, hold time.Duration) ([]store.Due, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 || hold <= 0 {
		return nil, store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.due(now, limit, s.flaw != claimsNotHeld)
	for _, d := range out {
		s.claims[s.key(d.ID)] = now.Add(hold)
	}
	return out, nil
}

func (s *simpleStore) Pending(ctx context.Context, limit int) ([]store.Event, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(limit, len(s.outbox))
	out := copyEvents(s.outbox[:n])
	if s.flaw == pendingDrains {
		s.outbox = slices.Delete(s.outbox, 0, n)
	}
	return out, nil
}

func (s *simpleStore) Ack(ctx context.Context, events []store.Event) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	type key struct {
		lobby string
		seq   uint64
	}
	acked := map[key]bool{}
	for _, e := range events {
		acked[key{e.Lobby, e.Seq}] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outbox = slices.DeleteFunc(s.outbox, func(e store.Event) bool { return acked[key{e.Lobby, e.Seq}] })
	return nil
}

func (s *simpleStore) Notify(ctx context.Context) (<-chan struct{}, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	sub := &simpleSub{ch: make(chan struct{}, 1)}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.subs = slices.DeleteFunc(s.subs, func(o *simpleSub) bool { return o == sub })
		close(sub.ch)
	})
	return sub.ch, nil
}

// poke wakes the Notify channels; the caller holds mu.
func (s *simpleStore) poke() {
	if s.flaw == notifySilent {
		return
	}
	for _, sub := range s.subs {
		select {
		case sub.ch <- struct{}{}:
		default:
		}
	}
}

func (f flaw) String() string { return fmt.Sprintf("%s (caught by %s)", f.name, f.check) }
