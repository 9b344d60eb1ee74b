package memstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// This file holds the deadline index: one binary min-heap per shard, ordered
// by (deadline, ID). The heap holds each deadline inline next to its entry,
// so sifting compares contiguous memory and touches an entry only to break a
// tie or to record its new position; a changed deadline costs O(log n).

// slot is one heap element.
type slot struct {
	key instant
	e   *entry
}

// less orders the deadline index: by instant, then by ID in byte order.
func less(a, b *slot) bool {
	if a.key != b.key {
		return a.key.before(b.key)
	}
	return a.e.id < b.e.id
}

// setDeadline moves e in the shard's heap to deadline d (zero: out of it).
// A deadline naming the same instant as before leaves the heap untouched.
// The caller holds sh.mu.
func (sh *shard) setDeadline(e *entry, d time.Time) {
	if d.IsZero() {
		e.deadline = time.Time{}
		if e.heapIdx >= 0 {
			sh.remove(int(e.heapIdx))
		}
		return
	}
	e.deadline = d.Round(0) // drop the monotonic reading; keep the location
	k := instantOf(d)
	if i := int(e.heapIdx); i >= 0 {
		if sh.due[i].key == k {
			return
		}
		sh.due[i].key = k
		sh.fix(i)
		return
	}
	sh.due = append(sh.due, slot{key: k, e: e})
	sh.up(len(sh.due) - 1)
}

// up moves the slot at i towards the root until its parent sorts first.
func (sh *shard) up(i int) {
	h := sh.due
	x := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !less(&x, &h[p]) {
			break
		}
		h[i] = h[p]
		h[i].e.heapIdx = int32(i)
		i = p
	}
	h[i] = x
	x.e.heapIdx = int32(i)
}

// down moves the slot at i towards the leaves until no child sorts before
// it, and reports whether it moved.
func (sh *shard) down(i int) bool {
	h := sh.due
	n := len(h)
	x := h[i]
	start := i
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && less(&h[r], &h[c]) {
			c = r
		}
		if !less(&h[c], &x) {
			break
		}
		h[i] = h[c]
		h[i].e.heapIdx = int32(i)
		i = c
	}
	h[i] = x
	x.e.heapIdx = int32(i)
	return i > start
}

func (sh *shard) fix(i int) {
	if !sh.down(i) {
		sh.up(i)
	}
}

func (sh *shard) remove(i int) {
	h := sh.due
	last := len(h) - 1
	h[i].e.heapIdx = -1
	if i != last {
		h[i] = h[last]
	}
	h[last] = slot{}
	sh.due = h[:last]
	if i != last {
		sh.fix(i)
	}
	// Give memory back after a mass expiry.
	if c := cap(sh.due); c > 64 && len(sh.due) < c/4 {
		sh.due = slices.Clip(slices.Clone(sh.due))
	}
}

// candidate is a due entry picked by a search, copied out of its shard.
type candidate struct {
	e        *entry
	key      instant
	id       string
	deadline time.Time
}

func candLess(a, b *candidate) bool {
	if a.key != b.key {
		return a.key.before(b.key)
	}
	return a.id < b.id
}

// best keeps the limit smallest candidates seen so far as a max-heap, so the
// worst kept one (the bar a newcomer must beat once it is full) is at [0].
type best struct {
	limit int
	h     []candidate
}

func (b *best) full() bool { return len(b.h) >= b.limit }

// beats reports whether the entry in slot x would be kept.
func (b *best) beats(x *slot) bool {
	if !b.full() {
		return true
	}
	w := &b.h[0]
	if x.key != w.key {
		return x.key.before(w.key)
	}
	return x.e.id < w.id
}

func (b *best) add(c candidate) {
	if !b.full() {
		b.h = append(b.h, c)
		for i := len(b.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !candLess(&b.h[p], &b.h[i]) {
				break
			}
			b.h[i], b.h[p] = b.h[p], b.h[i]
			i = p
		}
		return
	}
	b.h[0] = c
	n := len(b.h)
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && candLess(&b.h[c], &b.h[r]) {
			c = r
		}
		if !candLess(&b.h[i], &b.h[c]) {
			break
		}
		b.h[i], b.h[c] = b.h[c], b.h[i]
		i = c
	}
}

// search returns up to limit entries due at now (deadline <= now), in
// (deadline, ID) order, skipping those claimed past now when unclaimed is
// set. Each shard's heap is walked best-first from its root, expanding only
// nodes that are due and could still make the cut, so the work per shard is
// about the number of its entries that end up in the running best-of-limit
// set, not the size of the shard.
func (s *Store) search(now time.Time, limit int, unclaimed bool) []candidate {
	nowKey := instantOf(now)
	b := best{limit: limit}
	var frontier []int32 // indices into the shard's heap, a min-heap itself
	for si := range s.shards {
		sh := &s.shards[si]
		sh.mu.Lock()
		h := sh.due
		ok := func(i int) bool {
			return !nowKey.before(h[i].key) && b.beats(&h[i])
		}
		frontier = frontier[:0]
		if len(h) > 0 && ok(0) {
			frontier = append(frontier, 0)
		}
		for len(frontier) > 0 {
			i := int(popIndex(&frontier, h))
			x := &h[i]
			if !b.beats(x) {
				// Everything left in this shard sorts after x.
				break
			}
			if e := x.e; !unclaimed || !e.claimed || !nowKey.before(e.claim) {
				b.add(candidate{e: e, key: x.key, id: e.id, deadline: e.deadline})
			}
			for _, c := range [2]int{2*i + 1, 2*i + 2} {
				if c < len(h) && ok(c) {
					pushIndex(&frontier, h, int32(c))
				}
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(b.h, func(x, y candidate) int {
		if candLess(&x, &y) {
			return -1
		}
		return 1
	})
	return b.h
}

// pushIndex and popIndex keep f a min-heap of positions in h, ordered by the
// entries at those positions.
func pushIndex(f *[]int32, h []slot, i int32) {
	*f = append(*f, i)
	s := *f
	for j := len(s) - 1; j > 0; {
		p := (j - 1) / 2
		if !less(&h[s[j]], &h[s[p]]) {
			break
		}
		s[j], s[p] = s[p], s[j]
		j = p
	}
}

func popIndex(f *[]int32, h []slot) int32 {
	s := *f
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for j := 0; ; {
		c := 2*j + 1
		if c >= len(s) {
			break
		}
		if r := c + 1; r < len(s) && less(&h[s[r]], &h[s[c]]) {
			c = r
		}
		if !less(&h[s[c]], &h[s[j]]) {
			break
		}
		s[j], s[c] = s[c], s[j]
		j = c
	}
	*f = s
	return top
}

// Due returns up to limit lobbies whose deadline is at or before now, in
// (deadline, ID byte order) order; an empty result is nil. A limit below 1
// is store.ErrInvalid. Due ignores claims.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]store.Due, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	cands := s.search(now, limit, false)
	if len(cands) == 0 {
		return nil, nil
	}
	out := make([]store.Due, len(cands))
	for i, c := range cands {
		out[i] = store.Due{ID: c.id, Deadline: c.deadline}
	}
	return out, nil
}

// Claim is Due without the lobbies another Claim holds at now, and holds the
// lobbies it returns until now+hold (a Write to a lobby releases it). Claims
// are judged by the now arguments, not by the wall clock: a claim made with
// (now, hold) blocks calls whose now is before now+hold. A limit below 1 or a
// hold below 1ns is store.ErrInvalid.
//
// Concurrent Claims never return the same lobby for overlapping holds; one
// of them may then return fewer than limit lobbies although more are due.
func (s *Store) Claim(ctx context.Context, now time.Time, limit int, hold time.Duration) ([]store.Due, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	if hold <= 0 {
		return nil, fmt.Errorf("%w: hold %v", store.ErrInvalid, hold)
	}
	nowKey := instantOf(now)
	until := instantOf(now.Add(hold))
	cands := s.search(now, limit, true)
	var out []store.Due
	for _, c := range cands {
		// Between the search and here the lobby may have been written,
		// deleted or claimed by a concurrent call: take it only if it is
		// still the same due, unclaimed entry.
		sh := s.shardOf(c.id)
		sh.mu.Lock()
		e := sh.entries[c.id]
		if e == c.e && e.present && e.heapIdx >= 0 && sh.due[e.heapIdx].key == c.key &&
			(!e.claimed || !nowKey.before(e.claim)) {
			e.claimed = true
			e.claim = until
			out = append(out, store.Due{ID: c.id, Deadline: c.deadline})
		}
		sh.mu.Unlock()
	}
	return out, nil
}
