package lobby

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby/rules"
)

// lobbyTable is the Service's in-memory side of its lobbies: for each lobby
// ID that a transaction is using, the lock that serialises this Service's
// transactions on it, and, as an optional cache, the lobby as this Service
// last committed it.
//
// The two are kept apart in purpose. A lock lives exactly as long as some
// goroutine holds or waits for it (it is reference-counted). A cached lobby
// lives until it is evicted: the table keeps at most maxCached lobbies per
// Service, least recently used first out, and drops any lobby not used for
// idle. The cache never changes an outcome: a cached copy is only ever a
// committed version, and every judgement made on it is checked against the
// store's version before it counts (see Service.attempts).
type lobbyTable struct {
	seed      maphash.Seed
	cache     bool
	maxCached int // per shard
	idle      time.Duration
	shards    [tableShards]tableShard
}

const tableShards = 32

type tableShard struct {
	mu     sync.Mutex
	slots  map[string]*slot
	lru    slot // sentinel of the list of cached slots, most recent first
	cached int
}

// slot is one lobby in the table.
type slot struct {
	id string
	sh *tableShard
	// sem holds one token while a transaction owns the lobby.
	sem chan struct{}

	// Guarded by sem (the lobby's lock).
	state   *rules.State // the committed lobby at version, or nil: load first
	version uint64

	// Guarded by the shard's mutex.
	refs       int // goroutines holding or waiting for sem
	used       time.Time
	prev, next *slot // in the shard's LRU list while cached
}

func newLobbyTable(cache bool, maxCached int, idle time.Duration) *lobbyTable {
	t := &lobbyTable{seed: maphash.MakeSeed(), cache: cache, idle: idle}
	t.maxCached = max(1, maxCached/tableShards)
	for i := range t.shards {
		sh := &t.shards[i]
		sh.slots = map[string]*slot{}
		sh.lru.prev, sh.lru.next = &sh.lru, &sh.lru
	}
	return t
}

func (t *lobbyTable) shard(id string) *tableShard {
	return &t.shards[maphash.String(t.seed, id)%tableShards]
}

// acquire takes lobby id's lock, waiting no longer than ctx allows. yield,
// if set, is called instead of blocking while the lock is taken (a
// deterministic test scheduler parks the goroutine there); acquire then
// tries again.
func (t *lobbyTable) acquire(ctx context.Context, id string, yield func(context.Context) error) (*slot, error) {
	sh := t.shard(id)
	sh.mu.Lock()
	sl := sh.slots[id]
	if sl == nil {
		sl = &slot{id: id, sh: sh, sem: make(chan struct{}, 1)}
		sh.slots[id] = sl
	}
	sl.refs++
	sh.mu.Unlock()

	var err error
	for {
		select {
		case sl.sem <- struct{}{}:
			return sl, nil
		default:
		}
		if yield != nil {
			if err = yield(ctx); err != nil {
				break
			}
			continue
		}
		select {
		case sl.sem <- struct{}{}:
			return sl, nil
		case <-ctx.Done():
			err = ctx.Err()
		}
		break
	}
	sh.mu.Lock()
	sl.refs--
	t.forget(sh, sl)
	sh.mu.Unlock()
	return nil, err
}

// release gives up the lock on sl. With keep, sl's state (a committed
// version) stays cached, if caching is on; otherwise it is dropped. now is
// the Service's clock, for idle eviction.
func (t *lobbyTable) release(sl *slot, keep bool, now time.Time) {
	keep = keep && t.cache && sl.state != nil
	if !keep {
		sl.state = nil
	}
	sh := sl.sh
	sh.mu.Lock()
	sl.refs--
	<-sl.sem
	switch {
	case keep:
		sl.used = now
		if sl.next != nil {
			sl.unlink()
		} else {
			sh.cached++
		}
		sl.linkAfter(&sh.lru)
	case sl.next != nil:
		sl.unlink()
		sh.cached--
	}
	t.forget(sh, sl)
	t.evict(sh, now, false)
	sh.mu.Unlock()
}

// forget removes sl from the table if nobody uses it and it holds no
// cached lobby. The shard's mutex must be held.
func (t *lobbyTable) forget(sh *tableShard, sl *slot) {
	if sl.refs == 0 && sl.next == nil && sh.slots[sl.id] == sl {
		delete(sh.slots, sl.id)
	}
}

// evict drops cached lobbies over the size bound or idle too long, least
// recently used first; with all, it looks past slots in use. The shard's
// mutex must be held.
func (t *lobbyTable) evict(sh *tableShard, now time.Time, all bool) {
	for sl := sh.lru.prev; sl != &sh.lru; {
		prev := sl.prev
		over := sh.cached > t.maxCached || now.Sub(sl.used) > t.idle
		if !over {
			return // the rest were used more recently
		}
		if sl.refs == 0 {
			// Nobody holds or waits for the lock, so nobody reads state.
			sl.state = nil
			sl.unlink()
			sh.cached--
			t.forget(sh, sl)
		} else if !all {
			return
		}
		sl = prev
	}
}

// trim evicts idle lobbies from every shard.
func (t *lobbyTable) trim(now time.Time) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		t.evict(sh, now, true)
		sh.mu.Unlock()
	}
}

// size reports how many slots the table holds and how many of them cache a
// lobby.
func (t *lobbyTable) size() (slots, cached int) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		slots += len(sh.slots)
		cached += sh.cached
		sh.mu.Unlock()
	}
	return slots, cached
}

func (sl *slot) unlink() {
	sl.prev.next, sl.next.prev = sl.next, sl.prev
	sl.prev, sl.next = nil, nil
}

func (sl *slot) linkAfter(at *slot) {
	sl.prev, sl.next = at, at.next
	at.next.prev = sl
	at.next = sl
}
