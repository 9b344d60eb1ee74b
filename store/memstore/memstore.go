// Package memstore is the in-memory [store.Store]: the default store of a
// lobbyhost process that keeps its lobbies to itself, and the reference
// implementation that package storetest is checked against.
//
// Everything lives in the process's memory and is lost when it exits; use a
// shared store (PostgreSQL, Redis) when several processes serve the same
// lobbies or when lobbies must survive a restart.
//
// # Cost
//
// Lobbies are spread over a fixed number of shards by a hash of their ID.
// Each shard has its own lock, its own map and its own deadline heap, and
// each lobby's effects log lives next to its record in the shard, so writes
// to different lobbies rarely wait for each other and a record and its log
// entry are stored under one lock. A Write whose data fits the record's
// current buffer and that carries no Effects allocates nothing; a Write
// with Effects allocates the entry's copy. Load, ReadLog and Due allocate
// the copies they return. [Store.WriteBatch] costs what its Writes would
// one by one: memory has no round trip to save. Due and Claim lock and
// peek at every shard and then walk only the due entries that can still
// make the limit, so a query costs O(shards + k log k) for k results in
// the common case, never a scan of all lobbies. An idle lobby without log entries costs its data plus
// roughly 200 bytes; each kept log entry costs its data plus 64 to 128
// bytes (its slot in a ring buffer that grows by doubling up to the count
// bound, and shrinks again when TrimLog empties it).
//
// # Retention
//
// Without [WithRetention] a Store keeps, per lobby, the newest
// [DefaultRetentionEntries] (1024) log entries, trimming the oldest at the append that
// would exceed them, and entries no older than [DefaultRetentionAge] (10 minutes).
// Age is enforced only by [Store.TrimLog]: memstore runs no goroutine and
// reads no clock of its own, so whoever owns the store must call TrimLog
// now and then (entries whose Write.At is the zero time are as old as can
// be). TrimLog finds old entries through an index holding one item per
// lobby with kept entries, ordered by the age of its oldest entry, so its
// cost follows what it removes, not the number of lobbies.
//
// # Floors
//
// Delete keeps a small tombstone for the ID (its floor, the deleted lobby's
// last transition time and the deleted record's data, which for a
// reclaimed lobby is the empty lobby: its counters and blocks) for as long
// as the lobby has log entries and, if the Deletion has a Keep, until a
// TrimLog at or after it, so versions never repeat and time never runs
// backward after a lobby is created again while its tombstone lasts. When
// neither holds it any more (at Delete, if there is no entry and no Keep),
// the tombstone is dropped and its floor and time raise the store-wide
// floor that Load reports for every ID without a record or tombstone.
// TrimLog finds the tombstones whose Keep has come through a heap by Keep
// time, so it never scans for them. A process that churns through
// unbounded numbers of distinct lobby IDs therefore holds per deleted ID
// only what the retention and the Keep times ask for; the price is that
// creating a lobby under a fresh ID expects the store-wide floor, which
// another lobby's fold can raise (the Write then fails with ErrConflict,
// and a new Load tells the new floor).
//
// # Durable consumers and feeds
//
// Each registered consumer name keeps a cursor per lobby that received
// entries since the name was registered, and a queue of the lobbies whose
// cursor is behind, in the order their work arrived (a claimed lobby moves
// to the back), so ClaimLog walks only lobbies with work. A Write with
// Effects touches each consumer's lock only when the lobby's cursor was
// caught up. A cursor lives with its lobby's log, and one that is behind
// outlives even a folded tombstone (so the consumer still learns what it
// missed). Consumers are never forgotten: a name that stops claiming keeps
// a cursor for every lobby written since, so register only names that keep
// consuming.
//
// Subscribe hands out [store.Feed] values; every Write with Effects adds a
// Change to each live feed after it unlocks, without waiting for readers.
// The memstore never loses a change, so its feeds are lost only when they
// overflow.
//
// # Sessions
//
// The store.Sessions capability lives under one lock of its own, with a
// heap of the opened sessions by (deadline, ID) and, per session, the set
// of lobbies whose last Write listed it. A Write changes the sets while
// still holding its lobby's shard lock, so no reader sees the record
// without the index or the reverse. ExpiredSessions walks the heap in
// order, visiting only what it returns and the sessions over that hold
// nothing, which it forgets; SessionLobbies sorts the session's set on
// each call, so it costs O(n log n) for a session holding n lobbies.
//
// # Sizes
//
// memstore stores IDs, consumer names and writes of any size, including
// more than store.MaxIDLen and store.MaxWriteBytes; it refuses only empty
// IDs and names.
package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// Compile-time checks that Store offers the contract and the optional
// capabilities.
var (
	_ store.Store       = (*Store)(nil)
	_ store.Claimer     = (*Store)(nil)
	_ store.Notifier    = (*Store)(nil)
	_ store.BatchWriter = (*Store)(nil)
	_ store.Sessions    = (*Store)(nil)
)

// numShards is the number of independently locked partitions. It is a power
// of two well above the core counts lobbyhost targets, so two writers land on
// the same shard rarely; more shards only make Due visit more heaps.
const numShards = 64

// The retention of a Store made without WithRetention.
const (
	// DefaultRetentionEntries is how many log entries per lobby a Store keeps by
	// default.
	DefaultRetentionEntries = 1024
	// DefaultRetentionAge is how long a Store keeps log entries by default, judged
	// by TrimLog.
	DefaultRetentionAge = 10 * time.Minute
)

// Option configures a Store made by New.
type Option func(*config)

type config struct {
	retention store.Retention
}

// WithRetention sets the log retention to r, replacing the defaults
// (DefaultRetentionEntries, DefaultRetentionAge) as a whole: a zero or negative field imposes
// no bound, so WithRetention(store.Retention{}) keeps every entry forever.
func WithRetention(r store.Retention) Option {
	return func(c *config) { c.retention = r }
}

// Store is an in-memory store.Store, also implementing store.Claimer,
// store.Notifier, store.BatchWriter and store.Sessions. The zero value is not usable; call New. A Store is safe for
// concurrent use by any number of goroutines.
type Store struct {
	seed    maphash.Seed
	entries int           // log entries kept per lobby; 0 for no bound
	age     time.Duration // how long entries are kept; 0 for no bound

	// wide is the store-wide floor: the highest floor and the latest At of
	// the tombstones folded so far. Neither part ever goes down, and a fold
	// raises them while holding the lock of the tombstone's shard, before
	// the tombstone goes. It is never nil.
	wide atomic.Pointer[wideFloor]

	shards [numShards]shard
	aged   ageIndex
	kept   timeHeap // tombstones with a Deletion.Keep, by Keep; guarded by its own lock
	cons   consumers
	feeds  feeds
	sess   sessionTable
}

// shard is one partition of the lobbies. mu guards everything in it,
// including the fields of its entries and of their logs.
type shard struct {
	mu      sync.Mutex
	entries map[string]*entry
	due     []slot // min-heap by (deadline, ID) of the entries with a deadline

	// Keep neighbouring shards' locks off each other's cache lines.
	_ [128 - (8+8+24)%128]byte
}

// entry is one lobby ID: its record, or after Delete its tombstone, and its
// effects log.
type entry struct {
	id       string
	data     []byte    // the record's data; in a tombstone, the deleted record's
	deadline time.Time // as written, without monotonic reading; zero if none
	version  uint64    // the record's version, or a tombstone's floor
	// trimmed is the highest log position retention removed, or, for an
	// entry created over the store-wide floor, that floor (positions up to
	// it may have belonged to a folded tombstone's log).
	trimmed uint64
	log     *lobbyLog // nil until the first Write with Effects
	claim   instant   // claimed until then, valid while claimed
	heapIdx int32     // index in shard.due, or -1
	present bool      // false for a tombstone
	claimed bool
	// In a tombstone: Deletion.At, and Deletion.Keep if hasKeep. A
	// tombstone with hasKeep has an item in Store.kept keyed by keep.
	at      instant
	keep    instant
	hasKeep bool
	// sessions is the Write.Sessions of the record's last write (nil in
	// a tombstone): the sessions whose index holds this lobby.
	sessions []string
}

// wideFloor is one value of the store-wide floor.
type wideFloor struct {
	version uint64
	at      instant // the latest At folded, valid if hasAt
	hasAt   bool
}

// raised returns w raised to a tombstone's floor and At.
func (w *wideFloor) raised(version uint64, at instant) *wideFloor {
	r := *w
	r.version = max(r.version, version)
	if !r.hasAt || r.at.before(at) {
		r.at, r.hasAt = at, true
	}
	return &r
}

// atTime returns the folded At as Load reports it.
func (w *wideFloor) atTime() time.Time {
	if !w.hasAt {
		return time.Time{}
	}
	return w.at.time()
}

// floor returns the store-wide floor's version.
func (s *Store) floor() uint64 { return s.wide.Load().version }

// instant is a time reduced to what orders it: seconds and nanoseconds since
// the Unix epoch, independent of location and monotonic reading.
type instant struct {
	sec  int64
	nsec int32
}

func instantOf(t time.Time) instant {
	return instant{sec: t.Unix(), nsec: int32(t.Nanosecond())}
}

func (a instant) before(b instant) bool {
	return a.sec < b.sec || (a.sec == b.sec && a.nsec < b.nsec)
}

// time returns the instant as a time.Time in UTC.
func (a instant) time() time.Time {
	return time.Unix(a.sec, int64(a.nsec)).UTC()
}

// New returns an empty Store. Without options it keeps DefaultRetentionEntries log
// entries per lobby for up to DefaultRetentionAge (see WithRetention).
func New(opts ...Option) *Store {
	c := config{retention: store.Retention{Entries: DefaultRetentionEntries, Age: DefaultRetentionAge}}
	for _, o := range opts {
		o(&c)
	}
	s := &Store{seed: maphash.MakeSeed(), entries: max(c.retention.Entries, 0), age: max(c.retention.Age, 0)}
	for i := range s.shards {
		s.shards[i].entries = make(map[string]*entry)
	}
	s.wide.Store(&wideFloor{})
	return s
}

func (s *Store) shardOf(id string) *shard {
	return &s.shards[s.shardIndex(id)]
}

func (s *Store) shardIndex(id string) uint8 {
	return uint8(maphash.String(s.seed, id) % numShards)
}

// Load returns a copy of the lobby's record. If the lobby has no record it
// returns store.ErrNotFound with a Record holding the ID, its floor and At
// and, while a tombstone lasts, the deleted record's data; without a
// tombstone the floor and At are the store-wide ones (0 and the zero time
// until a tombstone folded). A record that exists has a zero At. An empty
// ID is store.ErrInvalid.
func (s *Store) Load(ctx context.Context, id string) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	if id == "" {
		return store.Record{}, errEmptyID
	}
	sh := s.shardOf(id)
	sh.mu.Lock()
	e := sh.entries[id]
	if e == nil || !e.present {
		rec := store.Record{ID: id}
		if e != nil {
			rec.Version, rec.Data, rec.At = e.version, clone(e.data), e.at.time()
		} else {
			w := s.wide.Load()
			rec.Version, rec.At = w.version, w.atTime()
		}
		sh.mu.Unlock()
		return rec, store.ErrNotFound
	}
	rec := store.Record{
		ID:       id,
		Version:  e.version,
		Data:     clone(e.data),
		Deadline: e.deadline,
	}
	sh.mu.Unlock()
	return rec, nil
}

var errEmptyID = fmt.Errorf("%w: empty lobby ID", store.ErrInvalid)

// Write stores w if the lobby's version (or floor) equals w.Expected, and
// appends w.Effects, if not nil, to the lobby's log at position
// w.Expected+1. Data and Effects are copied; the caller keeps ownership of
// w. An append beyond the retention's entry count trims the lobby's oldest
// entry.
//
// It returns store.ErrInvalid, writing nothing, if w.ID is empty or
// w.Expected is the largest uint64 (no version follows it);
// store.ErrConflict, writing nothing, if the version differs. A successful
// Write releases the lobby's Claim and, if it appends, adds a Change to
// every live Feed.
func (s *Store) Write(ctx context.Context, w store.Write) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.write(&w)
}

// WriteBatch applies each of ws as Write would, one after another in the
// order given, and returns one outcome per write: nil where it committed,
// an error wrapping store.ErrConflict or store.ErrInvalid where it wrote
// nothing. Each write is its own compare-and-set under its own shard's
// lock, so a conflicting or invalid write leaves the others alone, and a
// write expecting the version an earlier write of the same batch creates
// commits after it. Readers may see some writes of the batch before the
// others.
//
// The context is looked at once, first: if it is already done, every
// outcome is ctx.Err() and nothing is written; otherwise the whole batch is
// applied (memory has no round trip to abandon halfway). WriteBatch costs
// what the same Writes would, plus the returned slice; it keeps none of ws
// and no Data or Effects slice.
func (s *Store) WriteBatch(ctx context.Context, ws []store.Write) []error {
	errs := make([]error, len(ws))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i := range ws {
		errs[i] = s.write(&ws[i])
	}
	return errs
}

// write is Write after its context check. It reads *w and keeps nothing of
// it.
func (s *Store) write(w *store.Write) error {
	if err := w.Validate(); err != nil {
		return err
	}
	var effects []byte
	if w.Effects != nil {
		// Copy before locking: the copy is the one allocation of an
		// append, and it need not hold up the shard.
		effects = clone(w.Effects)
	}

	sh := s.shardOf(w.ID)
	sh.mu.Lock()
	e := sh.entries[w.ID]
	var current uint64
	if e != nil {
		current = e.version
	} else {
		current = s.floor()
	}
	if current != w.Expected {
		sh.mu.Unlock()
		return fmt.Errorf("%w: lobby %q is at version %d, not %d", store.ErrConflict, w.ID, current, w.Expected)
	}
	if e == nil {
		// Clone the ID so a key cut from a larger string does not keep
		// that string alive.
		e = &entry{id: strings.Clone(w.ID), heapIdx: -1, trimmed: current}
		sh.entries[e.id] = e
	}
	version := w.Expected + 1
	if w.Effects != nil {
		// Under the shard lock: whoever can see the entry can, by locking
		// the shard, only see the record written with it.
		s.appendLog(e, version, instantOf(w.At), effects)
	}
	e.version = version
	e.present = true
	e.at, e.hasKeep = instant{}, false // a Keep item left in s.kept is stale now
	e.data = copyInto(e.data, w.Data)
	e.claimed = false
	sh.setDeadline(e, w.Deadline)
	if len(e.sessions) > 0 || len(w.Sessions) > 0 {
		s.reindex(e.id, e.sessions, w.Sessions)
		e.sessions = slices.Clone(w.Sessions)
	}
	id := e.id
	sh.mu.Unlock()

	if w.Effects != nil {
		s.feeds.add(store.Change{Lobby: id, Version: version})
	}
	return nil
}

// Delete removes the lobby's record and deadline if its version equals
// d.Expected, keeping max(d.Expected, d.Floor) as the ID's floor and d.At as
// its At. The log stays. The tombstone keeps the floor, At and the record's
// data while the log has entries and, if d.Keep is set, until a TrimLog at
// or after d.Keep; when neither holds it (no entries and no Keep) the
// tombstone folds into the store-wide floor at once. It returns
// store.ErrNotFound if there is no record, store.ErrConflict if the version
// differs (in both cases changing nothing), and store.ErrInvalid for an
// empty ID.
func (s *Store) Delete(ctx context.Context, d store.Deletion) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.Validate(); err != nil {
		return err
	}
	sh := s.shardOf(d.ID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[d.ID]
	if e == nil || !e.present {
		return fmt.Errorf("%w: lobby %q", store.ErrNotFound, d.ID)
	}
	if e.version != d.Expected {
		return fmt.Errorf("%w: lobby %q is at version %d, not %d", store.ErrConflict, d.ID, e.version, d.Expected)
	}
	e.present = false
	e.claimed = false
	e.version = max(d.Expected, d.Floor)
	e.at = instantOf(d.At)
	e.hasKeep = !d.Keep.IsZero()
	sh.setDeadline(e, time.Time{})
	s.reindex(e.id, e.sessions, nil)
	e.sessions = nil
	if e.hasKeep {
		e.keep = instantOf(d.Keep)
		s.kept.push(ageItem{key: e.keep, e: e})
	} else if e.log == nil || e.log.n == 0 {
		s.fold(sh, e)
	}
	return nil
}

// foldable reports whether the tombstone e may go at now: it has no log
// entries left and no Keep after now. The caller holds e's shard lock.
func (e *entry) foldable(now instant) bool {
	return !e.present && (e.log == nil || e.log.n == 0) && (!e.hasKeep || !now.before(e.keep))
}

// fold drops the tombstone e, whose log is empty, after raising the
// store-wide floor to its floor and At. Cursors of consumers that had not
// caught up with the lobby stay with their consumers, so they still learn
// that entries were trimmed. The caller holds sh.mu.
func (s *Store) fold(sh *shard, e *entry) {
	for {
		w := s.wide.Load()
		if s.wide.CompareAndSwap(w, w.raised(e.version, e.at)) {
			break
		}
	}
	if e.log != nil {
		s.orphanCursors(e)
	}
	delete(sh.entries, e.id)
}

// clone returns a copy of b that shares nothing with it (nil for empty b).
func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// copyInto returns src copied into dst's buffer when it fits without wasting
// much of it, else into a new buffer. Reusing the buffer is what keeps a
// steady stream of same-sized writes (heartbeats) free of allocations.
func copyInto(dst, src []byte) []byte {
	if len(src) == 0 {
		return nil
	}
	if c := cap(dst); c >= len(src) && c <= 2*len(src)+64 {
		return append(dst[:0], src...)
	}
	return clone(src)
}
