package memstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// This file holds the durable consumers of ClaimLog and CommitLog.
//
// A consumer has a cursor per lobby whose log received an entry since the
// consumer was registered. The lobby's log holds its cursors (indexed by
// consumer), so an append finds them without any shared lock; the consumer
// holds a queue of the cursors that are behind their lobby, so ClaimLog
// walks only lobbies with work. Lock order: a shard's lock, then a
// consumer's.
//
// A cursor's after and queued fields change only with both its lobby's
// shard lock and its consumer's lock held, so either lock suffices to read
// them; its list links and claim are guarded by the consumer's lock alone.

// consumers is the registry. set is replaced, never modified, so Write reads
// it with one atomic load.
type consumers struct {
	mu  sync.Mutex // serialises registrations
	set atomic.Pointer[consumerSet]
}

type consumerSet struct {
	list   []*consumer // by index
	byName map[string]*consumer
}

// consumer is one registered name.
type consumer struct {
	name string
	idx  int // index in consumerSet.list and in lobbyLog.cursors

	mu    sync.Mutex
	queue cursor // sentinel of the queue: queue.next is the first in line
	// orphans holds the queued cursors of lobbies whose tombstone folded,
	// by lobby ID: they have nowhere else to live, and their consumer
	// still has to learn that it missed trimmed entries.
	orphans map[string]*cursor
}

// cursor is where one consumer stands in one lobby's log.
type cursor struct {
	id     string
	after  uint64 // every entry up to here is committed
	queued bool   // in the consumer's queue: the lobby has work for it

	prev, next *cursor
	claimed    bool
	until      instant // claimed until then, valid while claimed
}

func (c *consumer) pushBack(x *cursor) {
	x.prev = c.queue.prev
	x.next = &c.queue
	c.queue.prev.next = x
	c.queue.prev = x
}

func (c *consumer) unlink(x *cursor) {
	x.prev.next = x.next
	x.next.prev = x.prev
	x.prev, x.next = nil, nil
}

// register returns the consumer called name, registering it if it is new.
//
// A new consumer is published with every shard locked, so no Write is
// under way while it appears: a Write either finished before (and the
// consumer never sees its entry) or reads the new set (and queues its
// entry for it).
func (s *Store) register(name string) *consumer {
	if set := s.cons.set.Load(); set != nil {
		if c := set.byName[name]; c != nil {
			return c
		}
	}
	r := &s.cons
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.set.Load()
	if old != nil {
		if c := old.byName[name]; c != nil {
			return c
		}
	}
	set := &consumerSet{byName: make(map[string]*consumer)}
	if old != nil {
		set.list = append(set.list, old.list...)
		for k, v := range old.byName {
			set.byName[k] = v
		}
	}
	c := &consumer{name: strings.Clone(name), idx: len(set.list), orphans: make(map[string]*cursor)}
	c.queue.prev, c.queue.next = &c.queue, &c.queue
	set.list = append(set.list, c)
	set.byName[c.name] = c
	for i := range s.shards {
		s.shards[i].mu.Lock()
	}
	r.set.Store(set)
	for i := range s.shards {
		s.shards[i].mu.Unlock()
	}
	return c
}

func (s *Store) lookup(name string) *consumer {
	if set := s.cons.set.Load(); set != nil {
		return set.byName[name]
	}
	return nil
}

// noteWork queues lobby e for every consumer after an entry at pos was
// appended, creating the consumer's cursor just before pos if it has none.
// A consumer whose cursor is already queued costs no lock. The caller
// holds e's shard lock.
func (s *Store) noteWork(set *consumerSet, e *entry, pos uint64) {
	l := e.log
	if len(l.cursors) < len(set.list) {
		l.cursors = append(l.cursors, make([]*cursor, len(set.list)-len(l.cursors))...)
	}
	for i, c := range set.list {
		x := l.cursors[i]
		if x != nil && (x.queued || pos <= x.after) {
			continue
		}
		c.mu.Lock()
		if x == nil {
			if o := c.orphans[e.id]; o != nil {
				// The lobby came back before the consumer caught up
				// with its folded past: carry on from where it stood.
				delete(c.orphans, e.id)
				x = o
			} else {
				x = &cursor{id: e.id, after: pos - 1}
			}
			l.cursors[i] = x
		}
		if !x.queued && pos > x.after {
			x.queued = true
			c.pushBack(x)
		}
		c.mu.Unlock()
	}
}

// orphanCursors hands the queued cursors of e, whose tombstone is folding,
// to their consumers' orphans, and forgets the others. The caller holds
// e's shard lock.
func (s *Store) orphanCursors(e *entry) {
	set := s.cons.set.Load()
	if set == nil {
		return
	}
	for i, x := range e.log.cursors {
		if x == nil || !x.queued {
			continue
		}
		c := set.list[i]
		c.mu.Lock()
		c.orphans[e.id] = x
		c.mu.Unlock()
	}
	e.log.cursors = nil
}

// RegisterConsumer registers name as a durable consumer (see ClaimLog).
// Registering a registered name changes nothing. An empty name is
// store.ErrInvalid.
func (s *Store) RegisterConsumer(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if name == "" {
		return errEmptyName
	}
	s.register(name)
	return nil
}

var errEmptyName = fmt.Errorf("%w: empty consumer name", store.ErrInvalid)

// ClaimLog registers name if it is new, then returns up to limit lobbies
// with entries after name's cursor, each with that cursor, and claims them
// for name until now+hold; nil if none. Lobbies come in the order their
// work arrived, a lobby claimed before counting from its claim; a lobby
// whose claim under name has not ended at now (claims are judged by the
// now arguments only) is skipped. Its cost follows the number of lobbies
// with work for name. An empty name, a limit below 1 or a hold below 1ns is
// store.ErrInvalid.
func (s *Store) ClaimLog(ctx context.Context, name string, now time.Time, limit int, hold time.Duration) ([]store.Cursor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if name == "" {
		return nil, errEmptyName
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	if hold <= 0 {
		return nil, fmt.Errorf("%w: hold %v", store.ErrInvalid, hold)
	}
	c := s.register(name)
	nowKey := instantOf(now)
	until := instantOf(now.Add(hold))
	var out []store.Cursor
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queue.next == &c.queue {
		return nil, nil
	}
	// Claimed lobbies move to the back, keeping their order; stop at the
	// one that was last when the walk began, so none is visited twice.
	last := c.queue.prev
	for x := c.queue.next; len(out) < limit; {
		next := x.next
		if !x.claimed || !nowKey.before(x.until) {
			x.claimed, x.until = true, until
			out = append(out, store.Cursor{Lobby: x.id, After: x.after})
			c.unlink(x)
			c.pushBack(x)
		}
		if x == last {
			break
		}
		x = next
	}
	return out, nil
}

// CommitLog moves name's cursor for lobby id forward to after (a lower
// value changes nothing) and releases name's claim on the lobby. The lobby
// stays in name's queue while entries after the cursor exist (or were
// trimmed unseen), so a Write between ClaimLog and CommitLog is never
// lost. A lobby name has no cursor for (nothing was appended to it since
// name was registered) is left alone. An unregistered or empty name, or an
// empty ID, is store.ErrInvalid.
func (s *Store) CommitLog(ctx context.Context, name, id string, after uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if name == "" {
		return errEmptyName
	}
	if id == "" {
		return errEmptyID
	}
	c := s.lookup(name)
	if c == nil {
		return fmt.Errorf("%w: consumer %q is not registered", store.ErrInvalid, name)
	}
	sh := s.shardOf(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[id]
	var x *cursor
	var head uint64
	if e != nil {
		head = e.head()
		if l := e.log; l != nil && c.idx < len(l.cursors) {
			x = l.cursors[c.idx]
		}
	} else {
		head = s.floor()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	orphan := false
	if x == nil {
		if x = c.orphans[id]; x == nil {
			return nil
		}
		orphan = true
	}
	x.after = max(x.after, after)
	x.claimed = false
	switch {
	case x.after < head:
		if !x.queued {
			x.queued = true
			c.pushBack(x)
		}
	case x.queued:
		x.queued = false
		c.unlink(x)
		fallthrough
	default:
		if orphan {
			delete(c.orphans, id)
		}
	}
	return nil
}
