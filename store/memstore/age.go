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

// ageItem is one lobby in the age index.
type ageItem struct {
	key instant
	e   *entry
}

// ageIndex is the heap and its locks. Lock order: a shard's lock before
// mu; trim before either.
type ageIndex struct {
	mu   sync.Mutex // guards h
	h    []ageItem
	trim sync.Mutex // one TrimLog at a time
}

func (a *ageIndex) push(x ageItem) {
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
func (a *ageIndex) popBefore(cutoff instant) (x ageItem, next instant, ok, ok2 bool) {
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
// retention's Age before now, oldest first, and returns how many it
// removed. Within a lobby, entries go in position order: an entry whose
// At is earlier than that of an entry before it counts as being as old as
// that one. A tombstone whose last entry goes is dropped and its floor
// folds into the store-wide floor. Without an Age bound it returns 0. A
// limit below 1 is store.ErrInvalid.
//
// Its cost is O(log L) per lobby it touches for L lobbies with kept
// entries, plus one step per entry removed.
func (s *Store) TrimLog(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	if s.age <= 0 {
		return 0, nil
	}
	cutoff := instantOf(now.Add(-s.age))
	a := &s.aged
	a.trim.Lock()
	defer a.trim.Unlock()
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
			if !e.present {
				s.fold(sh, e)
			}
		}
		sh.mu.Unlock()
	}
	return removed, nil
}
