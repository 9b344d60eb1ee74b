package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/storetest"
)

var t0 = time.Date(2031, 3, 14, 15, 9, 26, 535897932, time.UTC)

// checkIndex verifies every shard's heap: the heap order, each entry's
// remembered position, and that exactly the records with a deadline are in
// it.
func checkIndex(t *testing.T, s *Store) {
	t.Helper()
	for si := range s.shards {
		sh := &s.shards[si]
		sh.mu.Lock()
		for i := range sh.due {
			x := &sh.due[i]
			if int(x.e.heapIdx) != i {
				t.Fatalf("shard %d: entry %q at %d remembers %d", si, x.e.id, i, x.e.heapIdx)
			}
			if x.key != instantOf(x.e.deadline) {
				t.Fatalf("shard %d: entry %q has deadline %v, its slot %v", si, x.e.id, x.e.deadline, x.key)
			}
			if i > 0 && less(x, &sh.due[(i-1)/2]) {
				t.Fatalf("shard %d: entry %q at %d sorts before its parent", si, x.e.id, i)
			}
		}
		inHeap := 0
		for id, e := range sh.entries {
			want := e.present && !e.deadline.IsZero()
			if got := e.heapIdx >= 0; got != want {
				t.Fatalf("shard %d: %q in the index = %v, want %v", si, id, got, want)
			}
			if want {
				inHeap++
			}
		}
		if inHeap != len(sh.due) {
			t.Fatalf("shard %d: %d entries with deadlines, %d in the heap", si, inHeap, len(sh.due))
		}
		sh.mu.Unlock()
	}
}

// Random writes, deadline changes and deletes keep the index consistent,
// and Due agrees with a sort of all deadlines.
func TestIndexStaysConsistent(t *testing.T) {
	ctx := context.Background()
	s := New()
	rng := rand.New(rand.NewPCG(storetest.Seed(t), 8))
	version := map[string]uint64{}
	deadline := map[string]time.Time{}
	for step := range 20000 {
		id := fmt.Sprintf("l%d", rng.IntN(500))
		if _, ok := deadline[id]; ok && rng.IntN(10) == 0 {
			if err := s.Delete(ctx, id, version[id], 0); err != nil {
				t.Fatal(err)
			}
			delete(deadline, id)
			continue
		}
		var d time.Time
		if rng.IntN(5) > 0 {
			d = t0.Add(time.Duration(rng.IntN(100)) * time.Second)
		}
		if err := s.Write(ctx, store.Write{ID: id, Expected: version[id], Data: []byte(id), Deadline: d}); err != nil {
			t.Fatal(err)
		}
		version[id]++
		deadline[id] = d
		if step%1000 == 0 {
			checkIndex(t, s)
		}
	}
	checkIndex(t, s)
	for _, limit := range []int{1, 7, 100, 1000} {
		for _, now := range []time.Time{t0, t0.Add(50 * time.Second), t0.Add(time.Hour)} {
			got, err := s.Due(ctx, now, limit)
			if err != nil {
				t.Fatal(err)
			}
			var want []store.Due
			for id, d := range deadline {
				if !d.IsZero() && !d.After(now) {
					want = append(want, store.Due{ID: id, Deadline: d})
				}
			}
			sortDue(want)
			want = want[:min(limit, len(want))]
			if len(got) != len(want) {
				t.Fatalf("Due(%v, %d): %d lobbies, want %d", now, limit, len(got), len(want))
			}
			for i := range want {
				if got[i].ID != want[i].ID || !got[i].Deadline.Equal(want[i].Deadline) {
					t.Fatalf("Due(%v, %d)[%d] = %v, want %v", now, limit, i, got[i], want[i])
				}
			}
		}
	}
}

func sortDue(d []store.Due) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0; j-- {
			a, b := d[j-1], d[j]
			if a.Deadline.Before(b.Deadline) || (a.Deadline.Equal(b.Deadline) && a.ID < b.ID) {
				break
			}
			d[j-1], d[j] = b, a
		}
	}
}

// Acknowledged events leave nothing behind, whatever order the acks come
// in; so does Notify once its context is done.
func TestNothingLeaks(t *testing.T) {
	ctx := context.Background()
	s := New()
	var all []store.Event
	for i := range 200 {
		id := fmt.Sprintf("l%d", i%7)
		r, _ := s.Load(ctx, id)
		events := []store.Event{{Lobby: id, Seq: r.Version*2 + 1, Data: []byte("a")}, {Lobby: id, Seq: r.Version*2 + 2}}
		if err := s.Write(ctx, store.Write{ID: id, Expected: r.Version, Events: events}); err != nil {
			t.Fatal(err)
		}
		all = append(all, events...)
	}
	rng := rand.New(rand.NewPCG(storetest.Seed(t), 1))
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for len(all) > 0 {
		n := min(len(all), 1+rng.IntN(30))
		if err := s.Ack(ctx, all[:n]); err != nil {
			t.Fatal(err)
		}
		all = all[n:]
	}
	if n := len(s.out.index); n != 0 {
		t.Errorf("outbox index holds %d keys after acking everything", n)
	}
	if s.out.head.next != &s.out.head || s.out.head.prev != &s.out.head {
		t.Errorf("outbox list not empty after acking everything")
	}

	nctx, cancel := context.WithCancel(ctx)
	ch, err := s.Notify(nctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range ch {
	}
	if p := s.notes.subs.Load(); p != nil {
		t.Errorf("%d subscribers left after their context ended", len(*p))
	}
}
