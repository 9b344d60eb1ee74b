package lobbytest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// testWatchAcrossServices: three Services (three processes' worth of store
// handles) run, and each watches every lobby. Commands go through random
// Services: joins, second tabs that supersede the first (a tab cap of 1),
// closes, leaves and kicks. Every watcher must see every revision of its
// lobby exactly once and in order, ending at the lobby's final revision,
// and every connection a commit ended, whichever Service committed it.
// This is what a store's change notifications and effects log must carry
// for a server with sockets in several processes. A store without
// notifications passes too: Run then looks at the log heads every watch
// poll, on the Services' fake clock, which the check moves on while the
// watchers wait.
func testWatchAcrossServices(t *testing.T, h Harness) {
	ctx := t.Context()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	clock := clockwork.NewFakeClockAt(t0)
	policy := policyOf(8*time.Second, 0)
	policy.MaxConnectionsPerPlayer = 1
	base := h.NewStore(t)
	lobbies := []string{"w0", "w1", "w2"}
	players := []string{"p0", "p1", "p2", "p3"}

	type follower struct {
		svc   int
		id    string
		w     *lobby.Watcher
		rev   uint64
		ended map[string]bool // "player/gen" seen ended
	}
	var svcs []*lobby.Service
	var followers []*follower
	for i := range 3 {
		s := base
		if i > 0 {
			s = h.Connect(t, base)
		}
		svc := newService(t, s, clock, lobby.WithPolicy(policy), lobby.WithWatchPoll(watchPoll))
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := svc.Run(runCtx); err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		t.Cleanup(func() { stop(); <-done })
		svcs = append(svcs, svc)
		for _, id := range lobbies {
			w, err := svc.Watch(ctx, id, 0)
			if err != nil {
				t.Fatalf("Watch(%q): %v", id, err)
			}
			t.Cleanup(w.Close)
			followers = append(followers, &follower{svc: i, id: id, w: w, ended: map[string]bool{}})
		}
	}

	gens := map[string]uint64{}
	wantEnded := map[string]map[string]bool{} // lobby → "player/gen"
	for _, id := range lobbies {
		wantEnded[id] = map[string]bool{}
	}
	// Rounds of commands, each followed by every watcher catching up. In
	// the last round one Service makes every commit: the others' watchers
	// then learn of them only from the store (its notifications, or the
	// log heads), not from a commit of their own that exposes a gap.
	for round := range 4 {
		cmds := 40
		if round == 3 {
			cmds = 12
		}
		for range cmds {
			svc := svcs[rng.IntN(len(svcs))]
			if round == 3 {
				svc = svcs[0]
			}
			id := lobbies[rng.IntN(len(lobbies))]
			p := players[rng.IntN(len(players))]
			var res lobby.Result
			var err error
			switch r := rng.IntN(10); {
			case r < 5:
				res, err = svc.Join(ctx, id, p, nil)
				if err == nil {
					gens[id+"/"+p] = res.Gen
				}
			case r < 7:
				if g := gens[id+"/"+p]; g != 0 {
					res, err = svc.Disconnect(ctx, id, p, g)
				}
			case r < 8:
				res, err = svc.Leave(ctx, id, p)
			default:
				res, err = svc.Kick(ctx, id, "", p, 0)
				if lobby.IsRefusal(err) {
					err = nil // not a member
				}
			}
			if err != nil {
				t.Fatalf("command on %q: %v", id, err)
			}
			for _, e := range res.Ended {
				wantEnded[id][fmt.Sprintf("%s/%d", e.Player, e.Gen)] = true
			}
		}
		final := map[string]uint64{}
		for _, id := range lobbies {
			snap, err := svcs[0].Snapshot(ctx, id)
			if err != nil {
				t.Fatalf("Snapshot(%q): %v", id, err)
			}
			final[id] = snap.Revision
		}
		var wg sync.WaitGroup
		stopClock := moveClock(clock)
		for _, f := range followers {
			wg.Go(func() {
				c, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				for f.rev < final[f.id] || len(f.ended) < len(wantEnded[f.id]) {
					ch, err := f.w.Next(c)
					if errors.Is(err, lobby.ErrNotRunning) {
						// Run has not started yet; its start wakes
						// the watcher.
						select {
						case <-f.w.Ready():
							continue
						case <-c.Done():
							err = c.Err()
						}
					}
					if err != nil {
						t.Errorf("round %d: watcher of %q in Service %d: at revision %d of %d with %d of %d ended connections: %v",
							round, f.id, f.svc, f.rev, final[f.id], len(f.ended), len(wantEnded[f.id]), err)
						return
					}
					if ch.Snapshot != nil {
						t.Errorf("watcher of %q in Service %d: a snapshot at revision %d; the log should have kept every entry", f.id, f.svc, ch.Snapshot.Revision)
						f.rev = ch.Snapshot.Revision
						continue
					}
					for _, e := range ch.Events {
						if e.Revision != f.rev+1 {
							t.Errorf("watcher of %q in Service %d: revision %d after %d", f.id, f.svc, e.Revision, f.rev)
						}
						f.rev = e.Revision
					}
					for _, e := range ch.Ended {
						k := fmt.Sprintf("%s/%d", e.Player, e.Gen)
						if f.ended[k] {
							t.Errorf("watcher of %q in Service %d: connection %s ended twice", f.id, f.svc, k)
						}
						f.ended[k] = true
					}
				}
			})
		}
		wg.Wait()
		stopClock()
		if t.Failed() {
			return
		}
	}
	for _, f := range followers {
		for k := range wantEnded[f.id] {
			if !f.ended[k] {
				t.Errorf("watcher of %q in Service %d never saw connection %s end", f.id, f.svc, k)
			}
		}
	}
}

// watchPoll is how often the check's Services look at the log heads of the
// lobbies they watch when the store has no notifications: short against
// the policy's grace, since the fake clock moves by it while watchers wait.
const watchPoll = 10 * time.Millisecond

// moveClock advances clock by watchPoll at every tick of a real-time
// ticker until the returned function is called, so that a Service polling
// the log heads on it polls while the check waits. It stands for the time
// that passes while a process waits for news; the check's assertions do
// not depend on how much of it passes.
func moveClock(clock *clockwork.FakeClock) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				clock.Advance(watchPoll)
			}
		}
	}()
	return func() { close(done); <-finished }
}
