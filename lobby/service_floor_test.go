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

// TestPropertyNumbersNeverRepeat: lobbies joined, left, kicked, reclaimed
// (by hand and by the empty-lobby TTL) and created again, on a store with
// the shortest retention, so that tombstones fold into the store-wide floor
// as soon as they can. Whatever the schedule, a lobby ID's versions,
// revisions, host terms and generations only ever increase: no value is
// issued twice, across every incarnation.
func TestPropertyNumbersNeverRepeat(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clock := clockwork.NewFakeClockAt(t0)
		mem := memstore.New(memstore.WithRetention(store.Retention{Entries: 1, Age: time.Second}))
		vl := &versionLog{Store: mem, versions: map[string][]uint64{}}
		svc, err := lobby.NewService(vl, lobby.WithClock(clock), lobby.WithEmptyLobbyTTL(3*time.Second))
		if err != nil {
			rt.Fatal(err)
		}
		lobbies := []string{"a", "b"}
		players := []string{"p", "q", "r"}
		lastRev, lastTerm, lastGen := map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
		gens := map[string]uint64{}
		check := func(id string, res lobby.Result) {
			for _, e := range res.Events {
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
			var res lobby.Result
			var err error
			switch rapid.IntRange(0, 7).Draw(rt, "op") {
			case 0, 1:
				res, err = svc.Join(ctx, id, p, nil)
				gens[id+p] = res.Gen
			case 2:
				res, err = svc.Leave(ctx, id, p)
			case 3:
				res, err = svc.Disconnect(ctx, id, p, max(gens[id+p], 1))
			case 4:
				snap, serr := svc.Snapshot(ctx, id)
				if serr == nil && snap.Host != "" && snap.Host != p {
					res, err = svc.Kick(ctx, id, snap.Host, p, time.Duration(rapid.IntRange(0, 2).Draw(rt, "block"))*time.Second)
				}
			case 5:
				err = svc.Reclaim(ctx, id)
			case 6:
				clock.Advance(time.Duration(rapid.IntRange(1, 5000).Draw(rt, "ms")) * time.Millisecond)
				_, err = svc.Sweep(ctx)
			case 7:
				// Trim as a sweep would, whenever it is due.
				_, err = mem.TrimLog(ctx, clock.Now(), 100)
			}
			if err != nil && !lobby.IsRefusal(err) && !errors.Is(err, lobby.ErrNotEmpty) {
				rt.Fatalf("%v", err)
			}
			check(id, res)
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
