package lobby_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"pgregory.net/rapid"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// versionLog records, per lobby, every version a successful Write created.
type versionLog struct {
	store.Store
	mu       sync.Mutex
	versions map[string][]uint64
}

func (v *versionLog) Write(ctx context.Context, w store.Write) error {
	err := v.Store.Write(ctx, w)
	if err == nil {
		v.mu.Lock()
		v.versions[w.ID] = append(v.versions[w.ID], w.Expected+1)
		v.mu.Unlock()
	}
	return err
}

// TestPropertyNumbersNeverRepeat: lobbies joined, left, kicked with and
// without blocks, reclaimed (by hand and by the empty-lobby TTL) and created
// again, on a store with the shortest retention, so that tombstones fold
// into the store-wide floor as soon as they can, by two Services of which
// one has a clock behind the other's. Whatever the schedule, a lobby ID's
// versions, revisions, host terms and generations only ever increase (no
// value is issued twice, across every incarnation), its transition times
// never go backward, and a blocked player is admitted no earlier than its
// block's end, less the lag of the admitting process's clock (a tombstone
// goes once the trimming clock has passed the block's end; a clock behind
// that one may still read earlier).
func TestPropertyNumbersNeverRepeat(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clock := clockwork.NewFakeClockAt(t0)
		lag := time.Duration(rapid.SampledFrom([]int{0, 500, 1500, 4000}).Draw(rt, "lagMs")) * time.Millisecond
		behind := clockwork.NewFakeClockAt(t0.Add(-lag))
		mem := memstore.New(memstore.WithRetention(store.Retention{Entries: 1, Age: time.Second}))
		vl := &versionLog{Store: mem, versions: map[string][]uint64{}}
		svc, err := lobby.NewService(vl, lobby.WithClock(clock), lobby.WithEmptyLobbyTTL(3*time.Second))
		if err != nil {
			rt.Fatal(err)
		}
		late, err := lobby.NewService(vl, lobby.WithClock(behind), lobby.WithEmptyLobbyTTL(3*time.Second))
		if err != nil {
			rt.Fatal(err)
		}
		lobbies := []string{"a", "b"}
		players := []string{"p", "q", "r"}
		lastRev, lastTerm, lastGen := map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
		lastAt := map[string]time.Time{}
		blockEnd := map[string]time.Time{} // lobby+player → end of its latest block
		gens := map[string]uint64{}
		check := func(id string, res lobby.Result, by *lobby.Service, block time.Duration) {
			for _, e := range res.Events {
				if e.At.Before(lastAt[id]) {
					rt.Fatalf("lobby %s: revision %d at %v, after a transition at %v", id, e.Revision, e.At, lastAt[id])
				}
				lastAt[id] = e.At
				switch e.Reason {
				case lobby.ReasonKicked:
					if block > 0 {
						blockEnd[id+e.Subject] = e.At.Add(block)
					}
				case lobby.ReasonJoined:
					slack := time.Duration(0)
					if by == late {
						slack = lag
					}
					if end, ok := blockEnd[id+e.Subject]; ok && e.At.Before(end.Add(-slack)) {
						rt.Fatalf("lobby %s: %s admitted at %v, blocked until %v", id, e.Subject, e.At, end)
					}
				}
				if e.Revision <= lastRev[id] {
					rt.Fatalf("lobby %s: revision %d issued after %d", id, e.Revision, lastRev[id])
				}
				lastRev[id] = e.Revision
				if e.Term < lastTerm[id] {
					rt.Fatalf("lobby %s: term %d after %d", id, e.Term, lastTerm[id])
				}
				lastTerm[id] = e.Term
			}
			if res.Gen != 0 {
				if res.Gen <= lastGen[id] {
					rt.Fatalf("lobby %s: generation %d issued after %d", id, res.Gen, lastGen[id])
				}
				lastGen[id] = res.Gen
			}
		}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			id := rapid.SampledFrom(lobbies).Draw(rt, "lobby")
			p := rapid.SampledFrom(players).Draw(rt, "player")
			svc := svc
			if rapid.Bool().Draw(rt, "late") {
				svc = late
			}
			var res lobby.Result
			var err error
			var block time.Duration
			switch rapid.IntRange(0, 8).Draw(rt, "op") {
			case 0, 1:
				res, err = svc.Join(ctx, id, p, nil)
				gens[id+p] = res.Gen
			case 2:
				res, err = svc.Leave(ctx, id, p)
			case 3:
				res, err = svc.Disconnect(ctx, id, p, max(gens[id+p], 1))
			case 4:
				snap, serr := svc.Snapshot(ctx, id)
				block = time.Duration(rapid.IntRange(0, 2).Draw(rt, "block")) * time.Second
				if serr == nil && snap.Host != "" && snap.Host != p {
					res, err = svc.Kick(ctx, id, snap.Host, p, block)
				}
			case 8:
				// The server kicks, with a block of up to 5 s.
				block = time.Duration(rapid.IntRange(0, 5000).Draw(rt, "serverBlockMs")) * time.Millisecond
				res, err = svc.Kick(ctx, id, "", p, block)
			case 5:
				err = svc.Reclaim(ctx, id)
			case 6:
				d := time.Duration(rapid.IntRange(1, 5000).Draw(rt, "ms")) * time.Millisecond
				clock.Advance(d)
				behind.Advance(d)
				_, err = svc.Sweep(ctx)
			case 7:
				// Trim as a sweep would, whenever it is due.
				_, err = mem.TrimLog(ctx, clock.Now(), 100)
			}
			if err != nil && !lobby.IsRefusal(err) && !errors.Is(err, lobby.ErrNotEmpty) {
				rt.Fatalf("%v", err)
			}
			check(id, res, svc, block)
		}
		vl.mu.Lock()
		defer vl.mu.Unlock()
		for id, vs := range vl.versions {
			for i := 1; i < len(vs); i++ {
				if vs[i] <= vs[i-1] {
					rt.Fatalf("lobby %s: version %d written after %d (all: %v)", id, vs[i], vs[i-1], vs)
				}
			}
		}
	})
}
