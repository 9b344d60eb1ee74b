package memstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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
			if err := s.Delete(ctx, store.Deletion{ID: id, Expected: version[id]}); err != nil {
				t.Fatal(err)
			}
			delete(deadline, id)
			continue
		}
		var d time.Time
		if rng.IntN(5) > 0 {
			d = t0.Add(time.Duration(rng.IntN(100)) * time.Second)
		}
		if _, live := deadline[id]; !live {
			// A new or deleted lobby starts at the floor Load reports,
			// which tombstone folds move.
			r, err := s.Load(ctx, id)
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("Load(%q) of a lobby without record = %v", id, err)
			}
			version[id] = r.Version
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

// A feed whose context ends is dropped from the store's list, and a
// cancelled subscription never holds up writers.
func TestFeedsLeaveNothingBehind(t *testing.T) {
	ctx := context.Background()
	s := New()
	var cancels []context.CancelFunc
	for range 3 {
		fctx, cancel := context.WithCancel(ctx)
		if _, err := s.Subscribe(fctx); err != nil {
			t.Fatal(err)
		}
		cancels = append(cancels, cancel)
	}
	if p := s.feeds.list.Load(); p == nil || len(*p) != 3 {
		t.Fatalf("store holds %v subscriptions, want 3", p)
	}
	for _, cancel := range cancels {
		cancel()
	}
	// context.AfterFunc runs the removal in its own goroutine: wait for it
	// (a leak makes this loop, and so the test, time out).
	for s.feeds.list.Load() != nil {
		time.Sleep(time.Millisecond)
	}
	if err := s.Write(ctx, store.Write{ID: "a", Effects: []byte("x")}); err != nil {
		t.Fatal(err)
	}
}

// Writers, deleters, trimmers, readers and a consumer running at once
// leave the log's structures consistent, and no reader ever sees a lobby's
// versions or kept positions go backward.
func TestConcurrentLogUse(t *testing.T) {
	ctx := context.Background()
	s := New(WithRetention(store.Retention{Entries: 4, Age: time.Second}))
	if err := s.RegisterConsumer(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	const workers, steps = 6, 3000
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var clock atomic.Int64 // milliseconds since t0, shared so ages make sense
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			lastSeen := map[string]uint64{}
			for range steps {
				now := t0.Add(time.Duration(clock.Add(int64(rng.IntN(3)))) * time.Millisecond)
				id := ids[rng.IntN(len(ids))]
				switch rng.IntN(6) {
				case 0, 1:
					r, err := s.Load(ctx, id)
					if err != nil && !errors.Is(err, store.ErrNotFound) {
						t.Error(err)
						return
					}
					err = s.Write(ctx, store.Write{ID: id, Expected: r.Version, At: now, Effects: []byte{byte(g)}})
					if err != nil && !errors.Is(err, store.ErrConflict) {
						t.Error(err)
						return
					}
				case 2:
					if r, err := s.Load(ctx, id); err == nil {
						_ = s.Delete(ctx, store.Deletion{ID: id, Expected: r.Version, Floor: r.Version + uint64(rng.IntN(2))})
					}
				case 3:
					if _, err := s.TrimLog(ctx, now, 1+rng.IntN(5)); err != nil {
						t.Error(err)
						return
					}
				case 4:
					heads, err := s.LogHeads(ctx, []string{id})
					if err != nil {
						t.Error(err)
						return
					}
					if heads[0] != 0 && heads[0] < lastSeen[id] {
						t.Errorf("%s: head went from %d to %d", id, lastSeen[id], heads[0])
					}
					lastSeen[id] = max(lastSeen[id], heads[0])
				default:
					got, err := s.ClaimLog(ctx, "relay", now, 2, time.Millisecond)
					if err != nil {
						t.Error(err)
						return
					}
					for _, c := range got {
						after := c.After
						entries, err := s.ReadLog(ctx, c.Lobby, after, 10)
						var ce *store.CompactedError
						switch {
						case errors.As(err, &ce):
							after = ce.Trimmed
						case err != nil:
							t.Error(err)
							return
						case len(entries) > 0:
							after = entries[len(entries)-1].Version
						}
						if err := s.CommitLog(ctx, "relay", c.Lobby, after); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	checkLog(t, s)
}
