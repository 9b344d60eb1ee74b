package lobbytest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
)

// RunService runs the Service-level suite on the stores h provides, each
// check as a subtest of t with a stable name.
func RunService(t *testing.T, h Harness) {
	t.Helper()
	t.Run("TwoServicesExpireHostOnce", func(t *testing.T) {
		t.Run("claiming", func(t *testing.T) { testTwoServices(t, h, true) })
		t.Run("racing", func(t *testing.T) { testTwoServices(t, h, false) })
	})
	t.Run("KilledServiceLeases", func(t *testing.T) {
		t.Run("restarted", func(t *testing.T) { testKilledService(t, h, false) })
		t.Run("survivor", func(t *testing.T) { testKilledService(t, h, true) })
	})
	t.Run("WatchAcrossServices", func(t *testing.T) { testWatchAcrossServices(t, h) })
	// Optional capabilities: a check runs only if the harness offers
	// what it needs.
	durable, hasDurable := h.(Restarter)
	volatile, hasVolatile := h.(VolatileRestarter)
	if hasDurable || hasVolatile {
		t.Run("StoreRestart", func(t *testing.T) {
			if hasDurable {
				t.Run("durable", func(t *testing.T) { testRestartDurable(t, durable) })
			}
			if hasVolatile {
				t.Run("volatile", func(t *testing.T) { testRestartVolatile(t, volatile) })
			}
		})
	}
	if c, ok := h.(RoundTripCounter); ok {
		t.Run("OneRoundTrip", func(t *testing.T) { testOneRoundTrip(t, c) })
	}
	if hasSessions(t, h) {
		t.Run("Sessions", func(t *testing.T) {
			t.Run("KilledHolder", func(t *testing.T) { testKilledHolder(t, h) })
			t.Run("Paused", func(t *testing.T) { testLostSession(t, h, true) })
			t.Run("CutOff", func(t *testing.T) { testLostSession(t, h, false) })
			t.Run("Drain", func(t *testing.T) { testDrain(t, h) })
		})
	}
}

// hasSessions reports whether h's stores offer store.Sessions.
func hasSessions(t *testing.T, h Harness) bool {
	t.Helper()
	_, ok := h.NewStore(t).(store.Sessions)
	return ok
}

// t0 is the suite's start time on its fake clocks; its nanoseconds catch
// a store that rounds deadlines.
var t0 = time.Date(2031, time.March, 14, 15, 9, 26, 535897932, time.UTC)

// newService returns a Service on s with the given clock and options, and
// fails the test if it cannot be built.
func newService(t testing.TB, s store.Store, clock clockwork.Clock, opts ...lobby.Option) *lobby.Service {
	t.Helper()
	svc, err := lobby.NewService(s, append([]lobby.Option{lobby.WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	return svc
}

// policyOf returns the default policy with the given grace and heartbeat TTL.
func policyOf(grace, ttl time.Duration) lobby.Policy {
	p := lobby.DefaultPolicy()
	p.Grace, p.HeartbeatTTL = grace, ttl
	return p
}

// testTwoServices: two Services (two processes' worth: each its own store
// handle and cache) serve the same lobbies. The host's connection closes
// through one of them; when its grace runs out, both sweep at the same
// instant. Exactly one commits each expiry (with claims: the one that
// claimed the lobby; without: the compare-and-set picks one), revisions are
// committed once each, and both Services then show the successor at the same
// revision.
func testTwoServices(t *testing.T, h Harness, claims bool) {
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(t0)
	policy := policyOf(8*time.Second, 0) // no heartbeat deadlines: only the graces expire
	base := h.NewStore(t)
	var recA, recB recorder
	pub := &collector{}
	a := newService(t, recA.wrap(base, claims, true), clock, lobby.WithPolicy(policy), lobby.WithPublisher(pub))
	b := newService(t, recB.wrap(h.Connect(t, base), claims, true), clock, lobby.WithPolicy(policy), lobby.WithPublisher(pub))
	lobbies := []string{"x0", "x1", "x2", "x3", "x4", "x5"}

	hostGen := map[string]uint64{}
	for _, id := range lobbies {
		for _, j := range []struct {
			via    *lobby.Service
			player string
		}{{a, "host"}, {b, "m1"}, {a, "m2"}} {
			res, err := j.via.Join(ctx, id, j.player, nil)
			if err != nil {
				t.Fatalf("Join(%q, %q): %v", id, j.player, err)
			}
			if j.player == "host" {
				hostGen[id] = res.Gen
			}
		}
	}
	clock.Advance(time.Second)
	closedAt := clock.Now()
	for _, id := range lobbies {
		if _, err := a.Disconnect(ctx, id, "host", hostGen[id]); err != nil {
			t.Fatalf("Disconnect(%q, host): %v", id, err)
		}
	}
	clock.Advance(policy.Grace)

	// Both sweep at once, then again until neither changes anything.
	for round := 0; ; round++ {
		var wg sync.WaitGroup
		var na, nb int
		var ea, eb error
		start := make(chan struct{})
		wg.Go(func() { <-start; na, ea = a.Sweep(ctx) })
		wg.Go(func() { <-start; nb, eb = b.Sweep(ctx) })
		close(start)
		wg.Wait()
		if ea != nil || eb != nil {
			t.Fatalf("Sweep: %v, %v", ea, eb)
		}
		if na+nb == 0 {
			break
		}
		if round == 10 {
			t.Fatalf("the sweepers still change lobbies after %d rounds", round)
		}
	}
	relayAll(t, ctx, a)
	relayAll(t, ctx, b)

	// Each revision committed once, by one of the two.
	committed := map[string][]uint64{}
	expiredBy := map[string][]string{}
	for _, p := range []struct {
		name string
		r    *recorder
	}{{"A", &recA}, {"B", &recB}} {
		for _, w := range p.r.list() {
			committed[w.id] = append(committed[w.id], w.seqs...)
			if slices.Contains(w.seqs, 5) {
				expiredBy[w.id] = append(expiredBy[w.id], p.name)
			}
		}
	}
	for _, id := range lobbies {
		revs := committed[id]
		slices.Sort(revs)
		if d := cmp.Diff([]uint64{1, 2, 3, 4, 5}, revs); d != "" {
			t.Errorf("lobby %q: revisions committed by the two Services (-want +got):\n%s", id, d)
		}
		if len(expiredBy[id]) != 1 {
			t.Errorf("lobby %q: the expiry (revision 5) committed by %v, want exactly one Service", id, expiredBy[id])
		}
		hist := pub.history(t, id)
		if len(hist) != 5 {
			t.Errorf("lobby %q: %d revisions published, want 5", id, len(hist))
			continue
		}
		want := lobby.Event{
			Lobby: id, Revision: 5, Host: "m1", PrevHost: "host",
			Members: []lobby.MemberView{
				{Player: "m1", JoinSeq: 2, Status: lobby.StatusOnline},
				{Player: "m2", JoinSeq: 3, Status: lobby.StatusOnline},
			},
			Reason: lobby.ReasonLeaseExpired, Subject: "host", At: closedAt.Add(policy.Grace),
		}
		if d := cmp.Diff(want, hist[4], cmpOpts, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Term" }, cmp.Ignore())); d != "" {
			t.Errorf("lobby %q: the expiry's event (-want +got):\n%s", id, d)
		}
		for _, svc := range []*lobby.Service{a, b} {
			snap, err := svc.Snapshot(ctx, id)
			if err != nil {
				t.Fatalf("Snapshot(%q): %v", id, err)
			}
			if snap.Revision != 5 || snap.Host != "m1" {
				t.Errorf("lobby %q: a Service's snapshot at revision %d with host %q, want revision 5 with host m1", id, snap.Revision, snap.Host)
			}
		}
	}
	t.Logf("expiries committed by: %v", expiredBy)
}

// testKilledService: a Service commits joins and disconnects whose graces
// and heartbeat deadlines all lie ahead, and is then abandoned mid-flight
// (a killed process: no callback runs, nothing more is written through it).
// Another Service applies every overdue transition from the deadlines in the
// store: a survivor that sweeps at each deadline, or a Service started after
// all of them passed, in its first sweep. Either way every lobby's published
// history and final state equal those of an uninterrupted run of the same
// commands at the same times on a fresh in-memory store, swept at every
// deadline.
func testKilledService(t *testing.T, h Harness, survivor bool) {
	ctx := t.Context()
	policy := policyOf(time.Second, 2*time.Second) // no heartbeats: every deadline follows from the commands
	type step struct {
		op, lobby, player string
		viaB              bool
	}
	var script []step
	joins := map[string][]string{"k0": {"host", "m1", "m2"}, "k1": {"host", "m1"}, "k2": {"host", "m1", "m2"}}
	closes := map[string][]string{"k0": {"host"}, "k1": {"m1", "host"}, "k2": {"m1", "host"}}
	lobbies := []string{"k0", "k1", "k2"}
	for _, id := range lobbies {
		for _, p := range joins[id] {
			script = append(script, step{"join", id, p, false})
		}
		if survivor {
			script = append(script, step{"join", id, "s", true})
		}
	}
	for _, id := range lobbies {
		for _, p := range closes[id] {
			script = append(script, step{"disconnect", id, p, false})
		}
	}
	// play runs the script, one command every 100ms of clock.
	play := func(clock *clockwork.FakeClock, a, b *lobby.Service) {
		t.Helper()
		gens := map[[2]string]uint64{}
		for _, st := range script {
			clock.Advance(100 * time.Millisecond)
			via := a
			if st.viaB {
				via = b
			}
			key := [2]string{st.lobby, st.player}
			var res lobby.Result
			var err error
			if st.op == "join" {
				res, err = via.Join(ctx, st.lobby, st.player, nil)
				gens[key] = res.Gen
			} else {
				res, err = via.Disconnect(ctx, st.lobby, st.player, gens[key])
			}
			if err != nil || len(res.Events) == 0 {
				t.Fatalf("%s %s/%s = %d events, %v; want a visible change", st.op, st.lobby, st.player, len(res.Events), err)
			}
			for _, ev := range res.Events {
				if ev.Reason == lobby.ReasonTimedOut || ev.Reason == lobby.ReasonLeaseExpired {
					t.Fatalf("%s %s/%s applied an expiry (%s of %s) during the script: the script must leave every deadline ahead",
						st.op, st.lobby, st.player, ev.Reason, ev.Subject)
				}
			}
		}
	}

	// The uninterrupted run.
	refStore := memstoreNew()
	refClock := clockwork.NewFakeClockAt(t0)
	refPub := &collector{}
	ref := newService(t, refStore, refClock, lobby.WithPolicy(policy), lobby.WithPublisher(refPub))
	play(refClock, ref, ref)
	var lastDeadline time.Time
	for {
		d, ok, err := nextDeadline(ctx, refStore)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		refClock.Advance(d.Sub(refClock.Now()))
		sweepAll(t, ctx, ref)
		lastDeadline = d
	}
	relayAll(t, ctx, ref)

	// The run whose Service dies.
	clock := clockwork.NewFakeClockAt(t0)
	pub := &collector{}
	base := h.NewStore(t)
	a := newService(t, base, clock, lobby.WithPolicy(policy), lobby.WithPublisher(pub))
	var b *lobby.Service
	if survivor {
		b = newService(t, h.Connect(t, base), clock, lobby.WithPolicy(policy), lobby.WithPublisher(pub))
	}
	play(clock, a, b)
	// a is dead from here on: nothing calls it again.

	finisher := b
	var rec recorder
	if survivor {
		for {
			d, ok, err := nextDeadline(ctx, base)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			clock.Advance(d.Sub(clock.Now()))
			sweepAll(t, ctx, b)
		}
	} else {
		// Down while every deadline passes, then a fresh Service.
		clock.Advance(lastDeadline.Sub(clock.Now()) + time.Second)
		finisher = newService(t, rec.wrap(h.Connect(t, base), true, true), clock, lobby.WithPolicy(policy), lobby.WithPublisher(pub))
		sweepAll(t, ctx, finisher)
	}
	relayAll(t, ctx, finisher)

	for _, id := range lobbies {
		want, got := refPub.history(t, id), pub.history(t, id)
		if d := cmp.Diff(want, got, cmpOpts); d != "" {
			t.Errorf("lobby %q: published history (-uninterrupted +after the kill):\n%s", id, d)
		}
		wantSnap, err := ref.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		gotSnap, err := finisher.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(wantSnap, gotSnap, cmpOpts); d != "" {
			t.Errorf("lobby %q: final state (-uninterrupted +after the kill):\n%s", id, d)
		}
	}
	if !survivor {
		// Its first sweep took every lobby with an overdue deadline, each
		// in one transition (several at once: their order is free).
		want := slices.Clone(lobbies)
		slices.Sort(want)
		var got []string
		for _, w := range rec.list() {
			got = append(got, w.id)
		}
		slices.Sort(got)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("lobbies written by the restarted Service (-want +got):\n%s", d)
		}
	}
}
