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
	tombs   map[string][]byte       // a deleted record's data, by key
	index   map[string]store.Due    // the due index: lobbies with a deadline
	outbox  []store.Event
	claims  map[string]time.Time // claimed until
	cache   map[string]store.Record
	replica map[string]store.Record // what staleReplica's every second Load reads
	loads   int
	lazyAck [][]store.Event // what ackAppliedLazily has yet to apply
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

	// Versions and compare-and-set.

	// Write checks the version, releases the lock, then writes: two
	// writers expecting the same version can both win.
	lostUpdate = flaw{"lost-update", "ConcurrentWriters"}
	// Write ignores Expected altogether.
	ignoresExpected = flaw{"ignores-expected", "WriteStaleVersion"}
	// A Write expecting 0 replaces an existing record (create-or-replace).
	createOverwrites = flaw{"create-overwrites", "CreateExisting"}
	// Write accepts Expected = MaxUint64, whose successor wraps to 0.
	expectedOverflows = flaw{"expected-overflows", "Invalid"}
	// Write stores the record, then finds a foreign event and reports
	// ErrInvalid.
	validatesLate = flaw{"validates-after-writing", "Invalid"}
	// Write publishes the new version, then (after a window) the new data.
	tornWrite = flaw{"torn-write", "Linearizable"}
	// Load is served from a cache that writes and deletes do not invalidate.
	staleCache = flaw{"stale-cache", "ReadAfterWrite"}
	// Every second Load reads a replica that writes reach after a window:
	// a reader can see a version, then an older one.
	staleReplica = flaw{"stale-replica", "ConcurrentReaders"}

	// Records and IDs.

	// Deadlines are kept to the microsecond (a timestamp column).
	microsecondDeadlines = flaw{"microsecond-deadlines", "RoundTrip"}
	// The Unix epoch is taken for "no deadline".
	epochIsNone = flaw{"epoch-is-no-deadline", "RoundTrip"}
	// Load of a missing lobby returns a Record without its ID.
	missingWithoutID = flaw{"missing-load-without-id", "LoadMissing"}
	// A shorter record is copied over the old buffer, whose tail stays.
	keepsStaleTail = flaw{"keeps-stale-tail", "LargeRecord"}
	// Data (of records and events) is kept up to 4 MiB and silently cut.
	truncatesData = flaw{"truncates-data", "MaxWrite"}
	// Only the first 256 events of a Write are stored.
	truncatesEvents = flaw{"truncates-events", "ManyEvents"}
	// IDs are compared without case (a case-insensitive collation).
	foldsCase = flaw{"folds-case", "OpaqueIDs"}
	// IDs are cut to MaxIDLen bytes (a fixed-width key column).
	truncatesIDs = flaw{"truncates-long-ids", "IDLimits"}
	// The outbox names an event by its lobby ID and Seq concatenated, so
	// ("room1", 23) and ("room12", 3) are one key to Ack.
	concatenatedKeys = flaw{"concatenated-event-keys", "DigitIDs"}

	// Ownership of slices.

	// Write keeps the caller's Data slice instead of a copy.
	aliasesData = flaw{"aliases-data", "Aliasing"}
	// Write NUL-terminates its copy with append, writing into the caller's
	// spare capacity.
	appendsIntoCallerData = flaw{"appends-into-caller-data", "Aliasing"}
	// Write sorts the caller's events by Seq in place.
	sortsCallerEvents = flaw{"sorts-caller-events", "Aliasing"}
	// Ack sorts the caller's slice in place.
	ackSortsEvents = flaw{"ack-sorts-events", "Aliasing"}
	// Ack keeps the caller's slice and applies it at the next Pending.
	ackAppliedLazily = flaw{"ack-applied-lazily", "Aliasing"}
	// Pending returns the events' Data as pieces of one buffer.
	pendingSharesBuffer = flaw{"pending-shares-buffer", "Aliasing"}

	// The due index.

	// Due orders by ID alone.
	dueByID = flaw{"due-by-id", "DueOrder"}
	// Due orders by deadline alone, ties by the length of the ID.
	dueTiesUnsorted = flaw{"due-ties-unsorted", "DueOrder"}
	// Due takes deadline < now instead of deadline <= now.
	dueExclusive = flaw{"due-exclusive", "DueOrder"}
	// Due removes what it returns (a queue, not an index).
	duePops = flaw{"due-pops", "DueOrder"}
	// Due returns at most 4096 lobbies, whatever the limit.
	dueCapped = flaw{"due-capped", "ManyLobbies"}
	// Due is not told when a deadline is cleared (a stale index entry).
	dueKeepsCleared = flaw{"due-keeps-cleared", "DueMoves"}
	// Delete removes the record but leaves its deadline in the index.
	deleteKeepsDeadline = flaw{"delete-keeps-deadline", "DueMoves"}
	// Write commits record and events, then (after a window) the index.
	dueSeparateStep = flaw{"due-separate-step", "ConcurrentReaders"}

	// Delete and floors.

	// Delete forgets the ID's version: a re-created lobby starts at 1.
	forgetsFloor = flaw{"forgets-floor", "DeleteFloor"}
	// Delete keeps the floor argument, even below the deleted version.
	floorIgnoresExpected = flaw{"floor-ignores-expected", "DeleteFloor"}
	// Delete ignores the expected version.
	deleteIgnoresVersion = flaw{"delete-ignores-version", "DeleteStale"}
	// Delete of a missing lobby raises its floor anyway.
	deleteMissingSetsFloor = flaw{"delete-missing-sets-floor", "DeleteMissing"}
	// Delete keeps the floor but not the deleted record's data.
	tombstoneDropsData = flaw{"tombstone-drops-data", "DeleteFloor"}
	// Delete also drops the lobby's pending events.
	deleteDropsOutbox = flaw{"delete-drops-outbox", "DeleteKeepsOutbox"}

	// The outbox.

	// Write appends its events before checking the version.
	eventsOnConflict = flaw{"events-on-conflict", "OutboxAtomic"}
	// Write publishes its events, then (after a window) its record.
	eventsBeforeRecord = flaw{"events-before-record", "OutboxAtomic"}
	// Write publishes its record, then (after a window) its events.
	recordBeforeEvents = flaw{"record-before-events", "OutboxAtomic"}
	// Pending returns the events grouped by lobby.
	pendingByLobby = flaw{"pending-grouped-by-lobby", "OutboxOrder"}
	// Pending takes a limit of 0 as "no limit".
	pendingZeroLimit = flaw{"pending-accepts-zero-limit", "Invalid"}
	// Pending removes what it returns (a queue, not an outbox).
	pendingDrains = flaw{"pending-drains", "OutboxRedelivery"}
	// Ack stops at the first event it does not know.
	ackStopsAtUnknown = flaw{"ack-stops-at-unknown", "OutboxRedelivery"}

	// Context.

	// Nothing looks at the context.
	ignoresContext = flaw{"ignores-context", "ContextCancelled"}
	// Write looks at the context only after committing.
	contextAfterWrite = flaw{"context-checked-after-write", "ContextCancelled"}

	// Optional capabilities.

	// Claim hands out claimed lobbies again.
	claimsNotHeld = flaw{"claims-not-held", "Claim"}
	// Claim judges holds by the machine's clock, not by its now argument.
	claimsByWallClock = flaw{"claims-by-wall-clock", "Claim"}
	// Claim returns its lobbies in reverse order.
	claimReversed = flaw{"claim-reversed", "Claim"}
	// A Write leaves the lobby's claim in place.
	writeKeepsClaim = flaw{"write-keeps-claim", "Claim"}
	// Claim takes a hold of 0 (a claim that holds nothing).
	claimZeroHold = flaw{"claim-zero-hold", "Invalid"}
	// Notify channels never receive anything.
	notifySilent = flaw{"notify-silent", "Notify"}
	// Notify channels are never closed.
	notifyNeverCloses = flaw{"notify-never-closes", "Notify"}
	// Write notifies, then (after a window) commits.
	notifyBeforeCommit = flaw{"notify-before-commit", "NotifyAfterCommit"}
)

var flaws = []flaw{
	lostUpdate, ignoresExpected, createOverwrites, expectedOverflows, validatesLate, tornWrite,
	staleCache, staleReplica,
	microsecondDeadlines, epochIsNone, missingWithoutID, keepsStaleTail, truncatesData, truncatesEvents,
	foldsCase, truncatesIDs, concatenatedKeys,
	aliasesData, appendsIntoCallerData, sortsCallerEvents, ackSortsEvents, ackAppliedLazily, pendingSharesBuffer,
	dueByID, dueTiesUnsorted, dueExclusive, duePops, dueCapped, dueKeepsCleared, deleteKeepsDeadline, dueSeparateStep,
	forgetsFloor, floorIgnoresExpected, tombstoneDropsData, deleteIgnoresVersion, deleteMissingSetsFloor, deleteDropsOutbox,
	eventsOnConflict, eventsBeforeRecord, recordBeforeEvents, pendingByLobby, pendingZeroLimit, pendingDrains, ackStopsAtUnknown,
	ignoresContext, contextAfterWrite,
	claimsNotHeld, claimsByWallClock, claimReversed, writeKeepsClaim, claimZeroHold, notifySilent, notifyNeverCloses, notifyBeforeCommit,
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
		tombs:   map[string][]byte{},
		index:   map[string]store.Due{},
		claims:  map[string]time.Time{},
		cache:   map[string]store.Record{},
		replica: map[string]store.Record{},
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
	switch s.flaw {
	case foldsCase:
		return strings.ToLower(id)
	case truncatesIDs:
		return id[:min(len(id), store.MaxIDLen)]
	}
	return id
}

// eventKey names an event in the outbox.
func (s *simpleStore) eventKey(e store.Event) string {
	if s.flaw == concatenatedKeys {
		return e.Lobby + fmt.Sprint(e.Seq)
	}
	return fmt.Sprintf("%q/%d", e.Lobby, e.Seq)
}

func copyRecord(r store.Record) store.Record {
	r.Data = slices.Clone(r.Data)
	return r
}

func (s *simpleStore) copyData(b []byte) []byte {
	if s.flaw == truncatesData && len(b) > 4<<20 {
		b = b[:4<<20]
	}
	return slices.Clone(b)
}

func (s *simpleStore) copyEvents(events []store.Event) []store.Event {
	out := make([]store.Event, len(events))
	for i, e := range events {
		out[i] = store.Event{Lobby: e.Lobby, Seq: e.Seq, Data: s.copyData(e.Data)}
	}
	if s.flaw == truncatesEvents && len(out) > 256 {
		out = out[:256]
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
	records := s.records
	if s.flaw == staleReplica {
		s.loads++
		if s.loads%2 == 0 {
			records = s.replica
		}
	}
	r, ok := records[k]
	if !ok {
		if s.flaw == missingWithoutID {
			return store.Record{Version: s.floors[k], Data: slices.Clone(s.tombs[k])}, store.ErrNotFound
		}
		return store.Record{ID: id, Version: s.floors[k], Data: slices.Clone(s.tombs[k])}, store.ErrNotFound
	}
	if s.flaw == staleCache {
		s.cache[k] = copyRecord(r)
	}
	r.ID = id
	return copyRecord(r), nil
}

func (s *simpleStore) Write(ctx context.Context, w store.Write) error {
	if s.flaw != contextAfterWrite { // which looks only after committing, below
		if err := s.ctxErr(ctx); err != nil {
			return err
		}
	}
	if s.flaw == expectedOverflows || s.flaw == validatesLate {
		if w.ID == "" {
			return store.ErrInvalid
		}
	} else if err := w.Validate(); err != nil {
		return err
	}
	k := s.key(w.ID)
	rec := store.Record{ID: w.ID, Version: w.Expected + 1, Data: s.copyData(w.Data), Deadline: w.Deadline.Round(0)}
	switch s.flaw {
	case aliasesData:
		rec.Data = w.Data
	case appendsIntoCallerData:
		rec.Data = slices.Clone(append(w.Data, 0)[:len(w.Data)])
	case sortsCallerEvents:
		slices.SortFunc(w.Events, func(a, b store.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	case microsecondDeadlines:
		rec.Deadline = rec.Deadline.Truncate(time.Microsecond)
	case epochIsNone:
		if rec.Deadline.Equal(time.Unix(0, 0)) {
			rec.Deadline = time.Time{}
		}
	}
	events := s.copyEvents(w.Events)

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

	case eventsBeforeRecord, recordBeforeEvents, tornWrite, dueSeparateStep, staleReplica, notifyBeforeCommit:
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
		case dueSeparateStep:
			old := s.index[k]
			s.commit(k, rec, events)
			s.setIndex(k, old)
		case staleReplica:
			s.commit(k, rec, events)
		case notifyBeforeCommit:
			s.poke()
		}
		s.mu.Unlock()
		if s.flaw == notifyBeforeCommit {
			time.Sleep(5 * time.Millisecond) // long enough for the reader to look too early
		} else {
			window()
		}
		s.mu.Lock()
		switch s.flaw {
		case recordBeforeEvents:
			s.outbox = append(s.outbox, events...)
		case dueSeparateStep:
			s.setIndex(k, store.Due{ID: rec.ID, Deadline: rec.Deadline})
		case staleReplica:
			s.replica[k] = copyRecord(rec)
		default:
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
	_, exists := s.records[k]
	switch {
	case s.flaw == ignoresExpected:
		rec.Version = s.floors[k] + 1
	case s.flaw == createOverwrites && w.Expected == 0 && exists:
	case s.floors[k] != w.Expected:
		return store.ErrConflict
	}
	if s.flaw == validatesLate {
		for _, e := range w.Events {
			if e.Lobby != w.ID {
				s.commit(k, rec, nil)
				return store.ErrInvalid
			}
		}
	}
	s.commit(k, rec, events)
	if s.flaw == contextAfterWrite {
		return ctx.Err()
	}
	return nil
}

// setIndex puts d in the due index under k, or takes k out for a zero
// deadline; the caller holds mu.
func (s *simpleStore) setIndex(k string, d store.Due) {
	if d.Deadline.IsZero() {
		delete(s.index, k)
	} else {
		s.index[k] = d
	}
}

// commit stores rec and appends events; the caller holds mu.
func (s *simpleStore) commit(k string, rec store.Record, events []store.Event) {
	if s.flaw == dueKeepsCleared && rec.Deadline.IsZero() {
		rec.Deadline = s.records[k].Deadline
	}
	if old, ok := s.records[k]; ok && s.flaw == keepsStaleTail && len(rec.Data) < len(old.Data) {
		rec.Data = append(rec.Data, old.Data[len(rec.Data):]...)
	}
	s.records[k] = rec
	s.floors[k] = rec.Version
	s.setIndex(k, store.Due{ID: rec.ID, Deadline: rec.Deadline})
	s.outbox = append(s.outbox, events...)
	if s.flaw != writeKeepsClaim {
		delete(s.claims, k)
	}
	if s.flaw != staleReplica {
		s.replica[k] = copyRecord(rec)
	}
	if s.flaw != notifyBeforeCommit { // which poked before committing
		s.poke()
	}
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
		if s.flaw == deleteMissingSetsFloor {
			s.floors[k] = max(s.floors[k], floor)
		}
		return store.ErrNotFound
	}
	if r.Version != expected && s.flaw != deleteIgnoresVersion {
		return store.ErrConflict
	}
	delete(s.records, k)
	delete(s.replica, k)
	delete(s.claims, k)
	if s.flaw != deleteKeepsDeadline {
		delete(s.index, k)
	}
	s.floors[k] = max(r.Version, floor)
	if s.flaw != tombstoneDropsData {
		s.tombs[k] = slices.Clone(r.Data)
	}
	switch s.flaw {
	case forgetsFloor:
		delete(s.floors, k)
	case floorIgnoresExpected:
		s.floors[k] = floor
	case deleteDropsOutbox:
		s.outbox = slices.DeleteFunc(s.outbox, func(e store.Event) bool { return s.key(e.Lobby) == k })
	}
	s.poke()
	return nil
}

func (s *simpleStore) due(now time.Time, limit int, skipClaimed bool) []store.Due {
	var out []store.Due
	for k, d := range s.index {
		if d.Deadline.After(now) {
			continue
		}
		if s.flaw == dueExclusive && d.Deadline.Equal(now) {
			continue
		}
		until, ok := s.claims[k]
		held := ok && now.Before(until)
		if s.flaw == claimsByWallClock {
			held = ok && time.Now().Before(until)
		}
		if skipClaimed && held {
			continue
		}
		out = append(out, d)
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
	if s.flaw == dueCapped {
		limit = min(limit, 4096)
	}
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
	out := s.due(now, limit, false)
	if s.flaw == duePops {
		for _, d := range out {
			delete(s.index, s.key(d.ID))
		}
	}
	return out, nil
}

func (s *simpleStore) Claim(ctx context.Context, now time.Time, limit int, hold time.Duration) ([]store.Due, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 || hold < 0 || (hold == 0 && s.flaw != claimZeroHold) {
		return nil, store.ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.due(now, limit, s.flaw != claimsNotHeld)
	for _, d := range out {
		if s.flaw == claimsByWallClock {
			s.claims[s.key(d.ID)] = time.Now().Add(hold)
		} else {
			s.claims[s.key(d.ID)] = now.Add(hold)
		}
	}
	if s.flaw == claimReversed {
		slices.Reverse(out)
	}
	return out, nil
}

func (s *simpleStore) Pending(ctx context.Context, limit int) ([]store.Event, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	if limit < 0 || (limit == 0 && s.flaw != pendingZeroLimit) {
		return nil, store.ErrInvalid
	}
	if limit == 0 {
		limit = 1 << 30
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, acks := range s.lazyAck {
		s.ack(acks)
	}
	s.lazyAck = nil
	all := s.outbox
	if s.flaw == pendingByLobby {
		all = slices.Clone(all)
		first := map[string]int{}
		for i, e := range all {
			if _, ok := first[e.Lobby]; !ok {
				first[e.Lobby] = i
			}
		}
		slices.SortStableFunc(all, func(a, b store.Event) int { return cmp.Compare(first[a.Lobby], first[b.Lobby]) })
	}
	n := min(limit, len(all))
	out := s.copyEvents(all[:n])
	if s.flaw == pendingSharesBuffer {
		var buf []byte
		for _, e := range out {
			buf = append(buf, e.Data...)
		}
		at := 0
		for i := range out {
			n := len(out[i].Data)
			out[i].Data = buf[at : at+n]
			at += n
		}
	}
	if s.flaw == pendingDrains {
		s.outbox = slices.Delete(s.outbox, 0, n)
	}
	return out, nil
}

func (s *simpleStore) Ack(ctx context.Context, events []store.Event) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.flaw {
	case ackSortsEvents:
		slices.SortFunc(events, func(a, b store.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	case ackAppliedLazily:
		s.lazyAck = append(s.lazyAck, events)
		return nil
	}
	s.ack(events)
	return nil
}

// ack removes events from the outbox; the caller holds mu.
func (s *simpleStore) ack(events []store.Event) {
	acked := map[string]bool{}
	for _, e := range events {
		if s.flaw == ackStopsAtUnknown && !slices.ContainsFunc(s.outbox, func(o store.Event) bool { return o.Lobby == e.Lobby && o.Seq == e.Seq }) {
			break
		}
		acked[s.eventKey(e)] = true
	}
	s.outbox = slices.DeleteFunc(s.outbox, func(e store.Event) bool { return acked[s.eventKey(e)] })
}

func (s *simpleStore) Notify(ctx context.Context) (<-chan struct{}, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	sub := &simpleSub{ch: make(chan struct{}, 1)}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	if s.flaw == notifyNeverCloses {
		return sub.ch, nil
	}
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
