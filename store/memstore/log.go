package memstore

import (
	"context"
	"fmt"

	"github.com/lobbyhost/lobbyhost/store"
)

// This file holds the effects log. Each lobby's kept entries live in a ring
// buffer hanging off its entry in the shard, so an append happens under the
// same lock as the record it belongs to, and reading a lobby's log locks
// only its shard.

// lobbyLog is one lobby's effects log. Its fields are guarded by the lock
// of the lobby's shard (cursors' own fields follow the rules in
// consumer.go).
type lobbyLog struct {
	ring  []logEntry // kept entries, oldest at ring[start], n of them
	start int
	n     int
	last  uint64  // position of the newest entry ever appended, kept or not
	key   instant // age key of the newest entry ever appended
	// aged is set while the lobby has an item in the age index or a TrimLog
	// that took its item out is working on it; it is never set when the
	// store has no Age bound.
	aged    bool
	cursors []*cursor // by consumer index; nil where that consumer has none
}

// logEntry is one kept entry. data is the store's own copy.
type logEntry struct {
	pos  uint64
	at   instant // Write.At, as returned in store.Entry
	key  instant // age key: at, or the previous entry's key if that is later
	data []byte
}

// The ring's size: at least minRing slots, and given back when it is
// mostly empty.
const minRing = 4

func (l *lobbyLog) slot(i int) *logEntry {
	return &l.ring[(l.start+i)%len(l.ring)]
}

func (l *lobbyLog) oldest() *logEntry { return l.slot(0) }

func (l *lobbyLog) newest() uint64 {
	if l.n == 0 {
		return 0
	}
	return l.slot(l.n - 1).pos
}

// push appends x, growing the ring when it is full.
func (l *lobbyLog) push(x logEntry) {
	if l.n == len(l.ring) {
		l.resize(max(minRing, 2*l.n))
	}
	*l.slot(l.n) = x
	l.n++
}

// popOldest removes the oldest entry and returns its position.
func (l *lobbyLog) popOldest() uint64 {
	x := l.oldest()
	pos := x.pos
	*x = logEntry{} // let the data go
	l.start = (l.start + 1) % len(l.ring)
	l.n--
	return pos
}

// shrink gives memory back after trims left the ring mostly empty.
func (l *lobbyLog) shrink() {
	switch {
	case l.n == 0:
		l.ring, l.start = nil, 0
	case len(l.ring) > 4*minRing && l.n < len(l.ring)/4:
		l.resize(2 * l.n)
	}
}

func (l *lobbyLog) resize(size int) {
	ring := make([]logEntry, size)
	for i := range l.n {
		ring[i] = *l.slot(i)
	}
	l.ring, l.start = ring, 0
}

// search returns the index of the first kept entry whose position is
// after the given one (l.n if none); positions increase along the ring.
func (l *lobbyLog) search(after uint64) int {
	lo, hi := 0, l.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if l.slot(m).pos <= after {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// head is the position a consumer's cursor must reach to have nothing left
// to learn about the lobby: its newest entry, or what retention trimmed if
// that is later. The caller holds the shard's lock.
func (e *entry) head() uint64 {
	h := e.trimmed
	if e.log != nil {
		h = max(h, e.log.last)
	}
	return h
}

// appendLog appends data (the store's own copy) to e's log at position
// pos, trims the oldest entry if the lobby now holds more than the
// retention's count, and tells the age index and the consumers. The caller
// holds the shard's lock.
func (s *Store) appendLog(e *entry, pos uint64, at instant, data []byte) {
	l := e.log
	if l == nil {
		l = &lobbyLog{}
		e.log = l
	}
	key := at
	if l.n > 0 && at.before(l.key) {
		// Keep age keys non-decreasing along the log, so that trimming by
		// age always removes a prefix of it.
		key = l.key
	}
	if s.entries > 0 && l.n >= s.entries {
		e.trimmed = max(e.trimmed, l.popOldest())
	}
	l.push(logEntry{pos: pos, at: at, key: key, data: data})
	l.last, l.key = pos, key
	if s.age > 0 && !l.aged {
		l.aged = true
		s.aged.push(ageItem{key: l.oldest().key, e: e})
	}
	if set := s.cons.set.Load(); set != nil {
		s.noteWork(set, e, pos)
	}
}

// ReadLog returns copies of up to limit entries of the lobby's log after
// position after, in position order; nil if there are none. If retention
// trimmed an entry after that position (or the lobby has neither record
// nor tombstone and after is below the store-wide floor) it returns a
// *store.CompactedError. An empty ID or a limit below 1 is
// store.ErrInvalid.
func (s *Store) ReadLog(ctx context.Context, id string, after uint64, limit int) ([]store.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, errEmptyID
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	sh := s.shardOf(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[id]
	if e == nil {
		if g := s.floor(); after < g {
			return nil, &store.CompactedError{Lobby: id, After: after, Trimmed: g}
		}
		return nil, nil
	}
	if after < e.trimmed {
		return nil, &store.CompactedError{Lobby: id, After: after, Trimmed: e.trimmed}
	}
	l := e.log
	if l == nil {
		return nil, nil
	}
	first := l.search(after)
	n := min(limit, l.n-first)
	if n <= 0 {
		return nil, nil
	}
	size := 0
	for i := range n {
		size += len(l.slot(first + i).data)
	}
	out := make([]store.Entry, n)
	buf := make([]byte, 0, size)
	for i := range out {
		x := l.slot(first + i)
		out[i] = store.Entry{Lobby: e.id, Version: x.pos, At: x.at.time()}
		if len(x.data) > 0 {
			start := len(buf)
			buf = append(buf, x.data...)
			// Cap each slice so appending to one cannot overwrite the next.
			out[i].Data = buf[start:len(buf):len(buf)]
		}
	}
	return out, nil
}

// LogHeads returns, for each ID, the position of its newest kept log entry
// (0 if it has none). It locks the shards of all the IDs at once (in shard
// order, as RegisterConsumer does), so the heads are one snapshot. An
// empty ID is store.ErrInvalid.
func (s *Store) LogHeads(ctx context.Context, ids []string) ([]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var which [numShards]bool
	idx := make([]uint8, len(ids))
	for i, id := range ids {
		if id == "" {
			return nil, errEmptyID
		}
		idx[i] = s.shardIndex(id)
		which[idx[i]] = true
	}
	for i := range which {
		if which[i] {
			s.shards[i].mu.Lock()
		}
	}
	heads := make([]uint64, len(ids))
	for i, id := range ids {
		if e := s.shards[idx[i]].entries[id]; e != nil && e.log != nil {
			heads[i] = e.log.newest()
		}
	}
	for i := range which {
		if which[i] {
			s.shards[i].mu.Unlock()
		}
	}
	return heads, nil
}
