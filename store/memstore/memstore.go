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
// Each shard has its own lock, its own map and its own deadline heap, so
// writes to different lobbies rarely wait for each other. A Write whose data
// fits the record's current buffer and that carries no events allocates
// nothing; Load, Pending and Due allocate the copies they return. Due and
// Claim lock and peek at every shard and then walk only the due entries that
// can still make the limit, so a query costs O(shards + k log k) for k
// results in the common case, never a scan of all lobbies. An idle lobby
// costs its data plus roughly 200 bytes.
//
// # Floors
//
// Delete keeps a small tombstone for the ID (its floor and the deleted
// record's data, which for a reclaimed lobby is the empty lobby: its counters
// and last transition time), so versions never repeat and time never runs
// backward after a lobby is created again. Tombstones are never dropped: a
// process that churns through unbounded numbers of distinct lobby IDs grows
// by about 150 bytes plus the last record per deleted ID.
package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// Compile-time checks that Store offers the contract and both optional
// capabilities.
var (
	_ store.Store    = (*Store)(nil)
	_ store.Claimer  = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
)

// numShards is the number of independently locked partitions. It is a power
// of two well above the core counts lobbyhost targets, so two writers land on
// the same shard rarely; more shards only make Due visit more heaps.
const numShards = 64

// Store is an in-memory store.Store, also implementing store.Claimer and
// store.Notifier. The zero value is not usable; call New. A Store is safe for
// concurrent use by any number of goroutines.
type Store struct {
	seed   maphash.Seed
	shards [numShards]shard
	out    outbox
	notes  notifier
}

// shard is one partition of the lobbies. mu guards everything in it,
// including the fields of its entries.
type shard struct {
	mu      sync.Mutex
	entries map[string]*entry
	due     []slot // min-heap by (deadline, ID) of the entries with a deadline

	// Keep neighbouring shards' locks off each other's cache lines.
	_ [128 - (8+8+24)%128]byte
}

// entry is one lobby ID: its record, or after Delete its tombstone.
type entry struct {
	id       string
	data     []byte    // the record's data; in a tombstone, the deleted record's
	deadline time.Time // as written, without monotonic reading; zero if none
	version  uint64    // the record's version, or a tombstone's floor
	claim    instant   // claimed until then, valid while claimed
	heapIdx  int32     // index in shard.due, or -1
	present  bool      // false for a tombstone
	claimed  bool
}

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

// New returns an empty Store.
func New() *Store {
	s := &Store{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].entries = make(map[string]*entry)
	}
	s.out.init()
	return s
}

func (s *Store) shardOf(id string) *shard {
	return &s.shards[maphash.String(s.seed, id)%numShards]
}

// Load returns a copy of the lobby's record. If the lobby has no record it
// returns store.ErrNotFound with a Record holding the ID, its floor (0 if
// the ID was never written) and, after Delete, the deleted record's data.
// An empty ID is store.ErrInvalid.
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
			rec.Version, rec.Data = e.version, clone(e.data)
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

// Write stores w if the lobby's version (or floor) equals w.Expected. The
// data and the events' data are copied; the caller keeps ownership of w.
//
// It returns store.ErrInvalid, writing nothing, if w.ID is empty, an event
// names another lobby, or w.Expected is the largest uint64 (no version
// follows it); store.ErrConflict, writing nothing, if the version differs.
// A successful Write releases the lobby's claim and, if it carries events,
// wakes Notify channels.
func (s *Store) Write(ctx context.Context, w store.Write) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := w.Validate(); err != nil {
		return err
	}

	sh := s.shardOf(w.ID)
	sh.mu.Lock()
	e := sh.entries[w.ID]
	var current uint64
	if e != nil {
		current = e.version
	}
	if current != w.Expected {
		sh.mu.Unlock()
		return fmt.Errorf("%w: lobby %q is at version %d, not %d", store.ErrConflict, w.ID, current, w.Expected)
	}
	if e == nil {
		// Clone the ID so a key cut from a larger string does not keep
		// that string alive.
		e = &entry{id: strings.Clone(w.ID), heapIdx: -1}
		sh.entries[e.id] = e
	}
	// The outbox append happens under the shard lock: whoever can see the
	// events can, by locking the shard, only see the record written with them.
	if len(w.Events) > 0 {
		s.out.append(w.Events)
	}
	e.version = w.Expected + 1
	e.present = true
	e.data = copyInto(e.data, w.Data)
	e.claimed = false
	sh.setDeadline(e, w.Deadline)
	sh.mu.Unlock()

	if len(w.Events) > 0 {
		s.notes.poke()
	}
	return nil
}

// Delete removes the lobby's record and deadline if its version equals
// expected, keeping max(expected, floor) as the ID's floor and the record's
// data as its tombstone; pending events stay in the outbox. It returns store.ErrNotFound if there is no record,
// store.ErrConflict if the version differs (in both cases changing nothing),
// and store.ErrInvalid for an empty ID.
func (s *Store) Delete(ctx context.Context, id string, expected, floor uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if id == "" {
		return errEmptyID
	}
	sh := s.shardOf(id)
	sh.mu.Lock()
	e := sh.entries[id]
	if e == nil || !e.present {
		sh.mu.Unlock()
		return fmt.Errorf("%w: lobby %q", store.ErrNotFound, id)
	}
	if e.version != expected {
		v := e.version
		sh.mu.Unlock()
		return fmt.Errorf("%w: lobby %q is at version %d, not %d", store.ErrConflict, id, v, expected)
	}
	e.present = false
	e.claimed = false
	e.version = max(expected, floor)
	sh.setDeadline(e, time.Time{})
	sh.mu.Unlock()
	return nil
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

// notifier hands out the channels of Notify. subs is replaced, never
// modified, so a writer reads it with one atomic load and no lock.
type notifier struct {
	mu   sync.Mutex // serialises changes to subs
	subs atomic.Pointer[[]*subscriber]
}

type subscriber struct {
	mu     sync.Mutex // guards closing ch against a concurrent send
	ch     chan struct{}
	closed bool
}

// poke wakes every subscriber without blocking. A subscriber whose channel
// already holds a value is skipped without locking: the value it holds
// already stands for this write.
func (n *notifier) poke() {
	p := n.subs.Load()
	if p == nil {
		return
	}
	for _, sub := range *p {
		if len(sub.ch) > 0 {
			continue
		}
		sub.mu.Lock()
		if !sub.closed {
			select {
			case sub.ch <- struct{}{}:
			default:
			}
		}
		sub.mu.Unlock()
	}
}

// Notify returns a channel that receives a value (coalesced) after every
// successful Write that appends events to s from now on, and is closed once
// ctx is done. With a context that is never done, the channel lives as long as s.
func (s *Store) Notify(ctx context.Context) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sub := &subscriber{ch: make(chan struct{}, 1)}
	n := &s.notes
	n.mu.Lock()
	var subs []*subscriber
	if p := n.subs.Load(); p != nil {
		subs = append(subs, *p...)
	}
	subs = append(subs, sub)
	n.subs.Store(&subs)
	n.mu.Unlock()

	context.AfterFunc(ctx, func() {
		n.mu.Lock()
		old := *n.subs.Load()
		kept := make([]*subscriber, 0, len(old))
		for _, o := range old {
			if o != sub {
				kept = append(kept, o)
			}
		}
		if len(kept) == 0 {
			n.subs.Store(nil)
		} else {
			n.subs.Store(&kept)
		}
		n.mu.Unlock()

		sub.mu.Lock()
		sub.closed = true
		close(sub.ch)
		sub.mu.Unlock()
	})
	return sub.ch, nil
}
