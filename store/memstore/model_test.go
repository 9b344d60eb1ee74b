package memstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/storetest"
)

// checkLog verifies the log's internal invariants: kept positions increase
// and age keys never decrease along each log, no log exceeds the count
// bound, only lobbies with entries are in the age index (exactly once, at
// or before their oldest key), tombstones have entries, and each
// consumer's queue holds exactly its cursors that are behind.
func checkLog(t *testing.T, s *Store) {
	t.Helper()
	s.aged.mu.Lock()
	inHeap := map[*entry]instant{}
	for i, x := range s.aged.h {
		if i > 0 && x.key.before(s.aged.h[(i-1)/2].key) {
			t.Fatalf("age index: item %d (%q) sorts before its parent", i, x.e.id)
		}
		if _, dup := inHeap[x.e]; dup {
			t.Fatalf("age index: %q twice", x.e.id)
		}
		inHeap[x.e] = x.key
	}
	s.aged.mu.Unlock()
	set := s.cons.set.Load()
	queued := map[*cursor]bool{}
	if set != nil {
		for _, c := range set.list {
			c.mu.Lock()
			for x := c.queue.next; x != &c.queue; x = x.next {
				if !x.queued || queued[x] {
					t.Fatalf("consumer %s: cursor of %q in the queue, queued=%v, seen before=%v", c.name, x.id, x.queued, queued[x])
				}
				queued[x] = true
			}
			for id, x := range c.orphans {
				if !queued[x] || x.id != id {
					t.Fatalf("consumer %s: orphan %q not queued", c.name, id)
				}
			}
			c.mu.Unlock()
		}
	}
	for si := range s.shards {
		sh := &s.shards[si]
		sh.mu.Lock()
		for id, e := range sh.entries {
			l := e.log
			n := 0
			if l != nil {
				n = l.n
			}
			if !e.present && n == 0 {
				t.Fatalf("%q: a tombstone without log entries", id)
			}
			if s.entries > 0 && n > s.entries {
				t.Fatalf("%q: %d entries kept, bound %d", id, n, s.entries)
			}
			key, ok := inHeap[e]
			if want := s.age > 0 && n > 0; ok != want || (l != nil && l.aged != want) {
				t.Fatalf("%q: in the age index %v, want %v", id, ok, want)
			}
			delete(inHeap, e)
			if l == nil {
				continue
			}
			for i := range n {
				x := l.slot(i)
				if x.pos <= e.trimmed {
					t.Fatalf("%q: keeps position %d, trimmed up to %d", id, x.pos, e.trimmed)
				}
				if i > 0 && (x.pos <= l.slot(i-1).pos || x.key.before(l.slot(i-1).key)) {
					t.Fatalf("%q: entry %d out of order", id, i)
				}
			}
			if n > 0 && (l.oldest().key.before(key) || l.slot(n-1).pos != l.last) {
				t.Fatalf("%q: index key after its oldest entry's, or last %d wrong", id, l.last)
			}
			for i, x := range l.cursors {
				if x == nil {
					continue
				}
				if x.queued != (x.after < e.head()) || x.queued != queued[x] {
					t.Fatalf("%q: consumer %d's cursor at %d, head %d, queued %v, in queue %v", id, i, x.after, e.head(), x.queued, queued[x])
				}
				delete(queued, x)
			}
		}
		sh.mu.Unlock()
	}
	if len(inHeap) != 0 {
		t.Fatalf("age index holds %d lobbies that are gone", len(inHeap))
	}
	if set != nil {
		for _, c := range set.list {
			for _, x := range c.orphans {
				delete(queued, x)
			}
		}
	}
	if len(queued) != 0 {
		t.Fatalf("%d queued cursors belong to no lobby", len(queued))
	}
}

// modelLobby is what the model keeps per ID.
type modelLobby struct {
	present bool
	version uint64 // or floor
	data    string
	trimmed uint64
	log     []modelEntry
}

type modelEntry struct {
	pos  uint64
	at   time.Time
	key  time.Time
	data string
}

// TestAgainstModel runs random writes, deletes, trims and reads against a
// plain model of the contract as memstore documents it (retention by count
// and age, tombstones folding into the store-wide floor), checking the
// internal invariants as it goes; a durable consumer follows along, and at
// the end has read every entry once or been told it was trimmed.
func TestAgainstModel(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(storetest.Seed(t), 3))
	const entries, age = 3, time.Minute
	s := New(WithRetention(store.Retention{Entries: entries, Age: age}))
	if err := s.RegisterConsumer(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	model := map[string]*modelLobby{}
	var floor uint64
	now := t0
	get := func(id string) *modelLobby {
		if m := model[id]; m != nil {
			return m
		}
		return &modelLobby{version: floor, trimmed: floor}
	}
	fold := func(id string, m *modelLobby) {
		floor = max(floor, m.version)
		delete(model, id)
	}
	// What the consumer read, and what it was told it missed.
	read := map[string][]uint64{}
	missed := map[string][][2]uint64{}
	appended := map[string][]uint64{}

	consume := func(limit int, claimAt time.Time) int {
		got, err := s.ClaimLog(ctx, "relay", claimAt, limit, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got {
			after := c.After
			entries, err := s.ReadLog(ctx, c.Lobby, after, 1+rng.IntN(4))
			var ce *store.CompactedError
			switch {
			case errors.As(err, &ce):
				missed[c.Lobby] = append(missed[c.Lobby], [2]uint64{after, ce.Trimmed})
				after = ce.Trimmed
			case err != nil:
				t.Fatal(err)
			default:
				for _, e := range entries {
					read[c.Lobby] = append(read[c.Lobby], e.Version)
					after = e.Version
				}
			}
			if err := s.CommitLog(ctx, "relay", c.Lobby, after); err != nil {
				t.Fatal(err)
			}
		}
		return len(got)
	}

	for step := range 30000 {
		id := fmt.Sprintf("l%d", rng.IntN(40))
		m := get(id)
		now = now.Add(time.Duration(rng.IntN(200)) * time.Millisecond)
		switch op := rng.IntN(100); {
		case op < 50: // write
			at := now.Add(time.Duration(rng.IntN(5000)-2500) * time.Millisecond)
			w := store.Write{ID: id, Expected: m.version, Data: []byte(fmt.Sprint(id, step)), At: at}
			if rng.IntN(4) > 0 {
				w.Effects = []byte(fmt.Sprint("e", step))
			}
			if rng.IntN(20) == 0 {
				w.Expected++ // a stale version
				if err := s.Write(ctx, w); !errors.Is(err, store.ErrConflict) {
					t.Fatalf("step %d: Write(%s, %d) at version %d = %v, want ErrConflict", step, id, w.Expected, m.version, err)
				}
				continue
			}
			if err := s.Write(ctx, w); err != nil {
				t.Fatalf("step %d: Write(%s, %d) = %v", step, id, w.Expected, err)
			}
			model[id] = m
			m.present, m.version, m.data = true, w.Expected+1, string(w.Data)
			if w.Effects != nil {
				key := at.Round(0).Truncate(0)
				if n := len(m.log); n > 0 && key.Before(m.log[n-1].key) {
					key = m.log[n-1].key
				}
				if len(m.log) == entries {
					m.trimmed = m.log[0].pos
					m.log = m.log[1:]
				}
				m.log = append(m.log, modelEntry{pos: m.version, at: at, key: key, data: string(w.Effects)})
				appended[id] = append(appended[id], m.version)
			}
		case op < 58: // delete
			if !m.present {
				if err := s.Delete(ctx, store.Deletion{ID: id, Expected: m.version}); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("step %d: Delete(%s) without record = %v", step, id, err)
				}
				continue
			}
			f := m.version + uint64(rng.IntN(3))
			if err := s.Delete(ctx, store.Deletion{ID: id, Expected: m.version, Floor: f}); err != nil {
				t.Fatalf("step %d: Delete(%s) = %v", step, id, err)
			}
			m.present, m.version = false, f
			if len(m.log) == 0 {
				fold(id, m)
			}
		case op < 63: // trim by age
			limit := 1 + rng.IntN(10)
			cutoff := now.Add(-age)
			type ref struct {
				id string
				e  modelEntry
			}
			var old []ref
			for mid, ml := range model {
				for _, e := range ml.log {
					if e.key.Before(cutoff) {
						old = append(old, ref{mid, e})
					}
				}
			}
			slices.SortFunc(old, func(a, b ref) int {
				return cmp.Or(a.e.key.Compare(b.e.key), cmp.Compare(a.id, b.id), cmp.Compare(a.e.pos, b.e.pos))
			})
			old = old[:min(limit, len(old))]
			for _, r := range old {
				ml := model[r.id]
				if ml.log[0].pos != r.e.pos {
					t.Fatalf("model: trimming %s:%d out of order", r.id, r.e.pos)
				}
				ml.trimmed = r.e.pos
				ml.log = ml.log[1:]
				if len(ml.log) == 0 && !ml.present {
					fold(r.id, ml)
				}
			}
			n, err := s.TrimLog(ctx, now, limit)
			if err != nil || n != len(old) {
				t.Fatalf("step %d: TrimLog(%v, %d) = %d, %v; want %d", step, now, limit, n, err, len(old))
			}
		case op < 85: // read
			after := uint64(0)
			if m.version > 0 {
				after = uint64(rng.Int64N(int64(m.version) + 2))
			}
			limit := 1 + rng.IntN(4)
			got, err := s.ReadLog(ctx, id, after, limit)
			if after < m.trimmed {
				var ce *store.CompactedError
				if !errors.As(err, &ce) || *ce != (store.CompactedError{Lobby: id, After: after, Trimmed: m.trimmed}) {
					t.Fatalf("step %d: ReadLog(%s, %d) = %v, %v; want compaction up to %d", step, id, after, got, err, m.trimmed)
				}
				continue
			}
			if err != nil {
				t.Fatalf("step %d: ReadLog(%s, %d) = %v", step, id, after, err)
			}
			var want []store.Entry
			for _, e := range m.log {
				if e.pos > after && len(want) < limit {
					want = append(want, store.Entry{Lobby: id, Version: e.pos, At: e.at.UTC(), Data: []byte(e.data)})
				}
			}
			if len(got) != len(want) {
				t.Fatalf("step %d: ReadLog(%s, %d, %d) = %v, want %v", step, id, after, limit, got, want)
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.Lobby != w.Lobby || g.Version != w.Version || !g.At.Equal(w.At) || g.At.Location() != time.UTC || string(g.Data) != string(w.Data) {
					t.Fatalf("step %d: ReadLog(%s, %d)[%d] = %+v, want %+v", step, id, after, i, g, w)
				}
			}
		case op < 92: // load and heads
			r, err := s.Load(ctx, id)
			if m.present != (err == nil) || r.Version != m.version {
				t.Fatalf("step %d: Load(%s) = %+v, %v; want version %d, present %v", step, id, r, err, m.version, m.present)
			}
			if m.present || model[id] != nil {
				if string(r.Data) != m.data {
					t.Fatalf("step %d: Load(%s) data %q, want %q", step, id, r.Data, m.data)
				}
			} else if r.Data != nil {
				t.Fatalf("step %d: Load(%s) of a folded ID has data %q", step, id, r.Data)
			}
			heads, err := s.LogHeads(ctx, []string{id})
			var want uint64
			if n := len(m.log); n > 0 {
				want = m.log[n-1].pos
			}
			if err != nil || heads[0] != want {
				t.Fatalf("step %d: LogHeads(%s) = %v, %v; want %d", step, id, heads, err, want)
			}
		default: // the consumer
			consume(1+rng.IntN(3), now)
		}
		if step%500 == 0 {
			checkLog(t, s)
		}
	}
	checkLog(t, s)
	var nRead, nMissed, nAppended int
	for id := range appended {
		nRead, nMissed, nAppended = nRead+len(read[id]), nMissed+len(missed[id]), nAppended+len(appended[id])
	}
	t.Logf("%d entries appended, the consumer read %d and was told of %d gaps; store-wide floor %d", nAppended, nRead, nMissed, floor)
	if nRead == 0 || nMissed == 0 || floor == 0 {
		t.Errorf("the run exercised too little: %d read, %d gaps, floor %d", nRead, nMissed, floor)
	}

	// Drain the consumer, claims long expired.
	for i := 0; consume(100, now.Add(time.Duration(i+1)*time.Hour)) > 0; i++ {
	}
	checkLog(t, s)
	for id, ps := range appended {
		if !slices.IsSorted(read[id]) || len(slices.Compact(slices.Clone(read[id]))) != len(read[id]) {
			t.Fatalf("%s: the consumer read %v: out of order or twice", id, read[id])
		}
		for _, p := range ps {
			if slices.Contains(read[id], p) {
				continue
			}
			told := slices.ContainsFunc(missed[id], func(r [2]uint64) bool { return r[0] < p && p <= r[1] })
			if !told {
				t.Fatalf("%s: entry %d neither read nor reported trimmed (read %v, missed %v)", id, p, read[id], missed[id])
			}
		}
	}

	// Trimming everything leaves only records: the age index, the
	// tombstones and the consumer's queue are empty.
	if _, err := s.TrimLog(ctx, now.Add(time.Hour), 1<<30); err != nil {
		t.Fatal(err)
	}
	for i := 0; consume(100, now.Add(time.Duration(i+1000)*time.Hour)) > 0; i++ {
	}
	checkLog(t, s)
	if n := len(s.aged.h); n != 0 {
		t.Errorf("age index holds %d lobbies after trimming everything", n)
	}
	c := s.cons.set.Load().list[0]
	if c.queue.next != &c.queue || len(c.orphans) != 0 {
		t.Errorf("consumer queue not empty (%d orphans) after draining", len(c.orphans))
	}
}
