package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// This file holds the age index behind TrimLog: a min-heap with one item
// per lobby that has kept log entries, keyed by the age key of its oldest
// entry. Appends push an item only when a lobby's log goes from empty to
// non-empty; when the count bound trims a lobby's oldest entry, its item is
// left as it is. An item's key is therefore at or before the lobby's real
// oldest key, never after it, and TrimLog corrects a stale key when it
// meets one. Keys along one lobby's log never decrease (see appendLog), so
// trimming by age always removes a prefix of a lobby's log.

//
// The same heap type, keyed by Deletion.Keep, holds the tombstones whose
// deleter asked them to be kept to a time. An item there is stale when its
// lobby was written (or deleted with another Keep) since; TrimLog checks
// the lobby itself before it drops anything.

// ageItem is one lobby in a timeHeap.
type ageItem struct {
	key instant
	e   *entry
}

// timeHeap is a min-heap of lobbies by time. Lock order: a shard's lock
// before mu; ageIndex.trim before either.
type timeHeap struct {
	mu sync.Mutex // guards h
	h  []ageItem
}

// ageIndex is the age heap and the lock that lets one TrimLog run at a
// time.
type ageIndex struct {
	timeHeap
	trim sync.Mutex
}

func (a *timeHeap) push(x ageItem) {
	a.mu.Lock()
	a.h = append(a.h, x)
	h := a.h
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].key.before(h[p].key) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	a.mu.Unlock()
}

// popBefore removes and returns the item with the earliest key if that key
// is before cutoff, together with the key of the item that is then
// earliest (ok2 false if none). The caller holds a.mu.
func (a *timeHeap) popBefore(cutoff instant) (x ageItem, next instant, ok, ok2 bool) {
	h := a.h
	if len(h) == 0 || !h[0].key.before(cutoff) {
		return ageItem{}, instant{}, false, false
	}
	x = h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = ageItem{}
	h = h[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h[r].key.before(h[c].key) {
			c = r
		}
		if !h[c].key.before(h[i].key) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	a.h = h
	if c := cap(a.h); c > 64 && len(a.h) < c/4 {
		a.h = append([]ageItem(nil), a.h...)
	}
	if len(h) > 0 {
		return x, a.h[0].key, true, true
	}
	return x, instant{}, true, false
}

// TrimLog removes up to limit log entries whose Write.At is more than the
// retention's Age before now, oldest first, and drops the tombstones due at
// now: those without entries left whose Deletion.Keep is zero or at or
// before now. Within a lobby, entries go in position order: an entry whose
// At is earlier than that of an entry before it counts as being as old as
// that one. A dropped tombstone's floor and At fold into the store-wide
// floor. Without an Age bound it removes no entry but still drops the
// tombstones whose Keep has come.
//
// It returns the entries removed plus the tombstones dropped for their Keep
// with no entry left to remove (one whose last entry this call removes is
// counted with that entry), at most limit in all. A limit below 1 is
// store.ErrInvalid.
//
// Its cost is O(log L) per lobby it touches for L lobbies with kept entries
// or Keep times, plus one step per entry removed.
func (s *Store) TrimLog(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	s.aged.trim.Lock()
	defer s.aged.trim.Unlock()
	removed := 0
	at := instantOf(now)
	if s.age > 0 {
		removed = s.trimAged(instantOf(now.Add(-s.age)), at, limit)
	}
	// Keep items due at now: their key is at or before now, so before the
	// instant one nanosecond later.
	after := instant{sec: at.sec, nsec: at.nsec + 1}
	if after.nsec == 1e9 {
		after = instant{sec: at.sec + 1}
	}
	for removed < limit {
		s.kept.mu.Lock()
		x, _, ok, _ := s.kept.popBefore(after)
		s.kept.mu.Unlock()
		if !ok {
			break
		}
		e := x.e
		sh := s.shardOf(e.id)
		sh.mu.Lock()
		// A stale item (the lobby was folded, written or deleted again
		// since) is just dropped; a tombstone that still has entries goes
		// when TrimLog removes its last one.
		if sh.entries[e.id] == e && e.hasKeep && e.keep == x.key && e.foldable(at) {
			s.fold(sh, e)
			removed++
		}
		sh.mu.Unlock()
	}
	return removed, nil
}

// trimAged removes up to limit entries whose age key is before cutoff and
// returns how many. A tombstone whose last entry goes is dropped unless its
// Keep is after now. The caller holds s.aged.trim.
func (s *Store) trimAged(cutoff, now instant, limit int) int {
	a := &s.aged
	removed := 0
	for removed < limit {
		a.mu.Lock()
		x, next, ok, hasNext := a.popBefore(cutoff)
		a.mu.Unlock()
		if !ok {
			break
		}
		// The item is out of the heap but the lobby's aged flag stays set,
		// so no Write pushes a second item for it meanwhile; x.e is still
		// in its shard, since only a log that went empty (here, under the
		// shard lock) lets its tombstone fold.
		e := x.e
		sh := s.shardOf(e.id)
		sh.mu.Lock()
		l := e.log
		// Entries of another lobby whose key comes first go first.
		expired := func(k instant) bool {
			return k.before(cutoff) && (!hasNext || !next.before(k))
		}
		for removed < limit && l.n > 0 && expired(l.oldest().key) {
			e.trimmed = max(e.trimmed, l.popOldest())
			removed++
		}
		l.shrink()
		if l.n > 0 {
			// A stale key, or one that comes after another lobby's:
			// back in the heap at the oldest entry's real key.
			a.push(ageItem{key: l.oldest().key, e: e})
		} else {
			l.aged = false
			if e.foldable(now) {
				s.fold(sh, e)
			}
		}
		sh.mu.Unlock()
	}
	return removed
}
