package shadow_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/shadow"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

var lobbies = []string{"party-1", "party-2", "party-3"}

// traffic drives a seeded random schedule of evidence over three lobbies
// through the naive logic and sh, calling before(step) before each step and
// check(decision) after each legacy decision.
func traffic(t *testing.T, sh *shadow.Shadow, clock *clockwork.FakeClock, steps int, before func(step int), check func(id string, d shadow.Decision)) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(15, 3))
	legacy := map[string]*naive{}
	live := map[string][]sock{} // lobbyhost-side sockets per lobby
	for _, id := range lobbies {
		legacy[id] = &naive{}
	}
	players := []string{"ann", "bob", "cid", "dee"}
	for step := range steps {
		before(step)
		id := lobbies[rng.IntN(len(lobbies))]
		leg := legacy[id]
		switch k := rng.IntN(10); {
		case k < 3 || len(live[id]) == 0: // join
			p := players[rng.IntN(len(players))]
			res, err := sh.Join(ctx, id, p, nil)
			if err != nil {
				t.Fatal(err)
			}
			leg.open(p, res.Gen)
			live[id] = append(live[id], sock{p, res.Gen})
		case k < 6: // close
			i := rng.IntN(len(live[id]))
			s := live[id][i]
			live[id] = slices.Delete(live[id], i, i+1)
			if _, err := sh.Disconnect(ctx, id, s.player, s.gen); err != nil {
				t.Fatal(err)
			}
			leg.close(s.player, s.gen)
		case k < 9: // heartbeats on every socket
			for _, s := range live[id] {
				if _, err := sh.Heartbeat(ctx, id, s.player, s.gen); err != nil {
					t.Fatal(err)
				}
			}
		default: // leave
			p := live[id][rng.IntN(len(live[id]))].player
			live[id] = slices.DeleteFunc(live[id], func(s sock) bool { return s.player == p })
			if _, err := sh.Leave(ctx, id, p); err != nil {
				t.Fatal(err)
			}
			leg.leave(p)
		}
		d, err := sh.ReportLegacyHost(ctx, id, leg.host, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		check(id, d)
		clock.Advance(time.Duration(rng.IntN(4000)) * time.Millisecond)
	}
}

func newShadow(t *testing.T, sw *shadow.Switch) (*shadow.Shadow, store.Store, *clockwork.FakeClock) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(start)
	st := memstore.New(memstore.WithRetention(store.Retention{})) // the test reads every entry back
	sh, err := shadow.New(st, shadow.Config{Clock: clock, Switch: sw}, lobby.WithPseudonymKey([]byte("0123456789abcdef-test")))
	if err != nil {
		t.Fatal(err)
	}
	return sh, st, clock
}

// stored returns every event the lobbies committed, lobby by lobby in the
// order of lobbies, each lobby's in log order (the store keeps them all).
func stored(t *testing.T, st store.Store) []lobby.Event {
	t.Helper()
	var out []lobby.Event
	for _, id := range lobbies {
		var after uint64
		for {
			entries, err := st.ReadLog(context.Background(), id, after, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) == 0 {
				break
			}
			for _, e := range entries {
				fx, err := rules.DecodeEffects(e.Data)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, fx.Events...)
				after = e.Version
			}
		}
	}
	return out
}

// Authority moves to lobbyhost for a cohort mid-traffic and back, twice:
// the stored history is exactly the history of a run that never switched,
// revisions stay consecutive, and the host the server acts on is
// lobbyhost's while it is authoritative and the legacy one otherwise.
func TestSwitchBothWaysMidTrafficRewritesNothing(t *testing.T) {
	const steps = 400
	control, cst, cclock := newShadow(t, nil)
	traffic(t, control, cclock, steps, func(int) {}, func(string, shadow.Decision) {})
	want := stored(t, cst)

	sw := shadow.NewSwitch(nil)
	sh, st, clock := newShadow(t, sw)
	inCohort := func(id string) bool { return id == "party-1" || id == "party-2" }
	var toLobbyhost, toLegacy int
	before := func(step int) {
		switch step {
		case 100, 300:
			sw.Set(inCohort) // authority to lobbyhost for the cohort
		case 200:
			sw.Set(nil) // roll back
		}
	}
	prev := map[string]shadow.Authority{}
	check := func(id string, d shadow.Decision) {
		wantAuth := shadow.Legacy
		if sw.Authority(id) == shadow.Lobbyhost {
			wantAuth = shadow.Lobbyhost
		}
		if d.Authority != wantAuth {
			t.Fatalf("lobby %s: authority %v, want %v", id, d.Authority, wantAuth)
		}
		if prev[id] != d.Authority {
			if d.Authority == shadow.Lobbyhost {
				toLobbyhost++
			} else {
				toLegacy++
			}
			prev[id] = d.Authority
		}
		if d.Authority == shadow.Lobbyhost {
			snap, err := sh.Service().Snapshot(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if d.Host != snap.Host || d.Host != d.Lobbyhost {
				t.Fatalf("lobby %s under lobbyhost: acts on %q, Service hosts %q", id, d.Host, snap.Host)
			}
		} else if d.Host != d.Legacy {
			t.Fatalf("lobby %s under legacy: acts on %q, legacy chose %q", id, d.Host, d.Legacy)
		}
	}
	traffic(t, sh, clock, steps, before, check)
	if toLobbyhost < 4 || toLegacy < 2 {
		t.Fatalf("switched %d times to lobbyhost and %d back, want the cohort's two lobbies switched both ways", toLobbyhost, toLegacy)
	}

	got := stored(t, st)
	if len(got) != len(want) {
		t.Fatalf("%d events stored, want %d as without switching", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(rules.EncodeEvent(&got[i]), rules.EncodeEvent(&want[i])) {
			t.Fatalf("stored event %d differs from the run without switching: %s#%d vs %s#%d", i, got[i].Lobby, got[i].Revision, want[i].Lobby, want[i].Revision)
		}
	}
	next := map[string]uint64{}
	for _, ev := range got {
		if ev.Revision != next[ev.Lobby]+1 {
			t.Fatalf("lobby %s: revision %d after %d", ev.Lobby, ev.Revision, next[ev.Lobby])
		}
		next[ev.Lobby] = ev.Revision
	}
	if len(next) != len(lobbies) {
		t.Fatalf("events of %d lobbies, want %d", len(next), len(lobbies))
	}
}

func TestSwitchPublisherPassesOnlyTheCohort(t *testing.T) {
	sw := shadow.NewSwitch(func(id string) bool { return id == "b" })
	var got []string
	pub := sw.Publisher(lobby.PublisherFunc(func(_ context.Context, evs []lobby.Event) error {
		for _, e := range evs {
			got = append(got, fmt.Sprintf("%s#%d", e.Lobby, e.Revision))
		}
		return nil
	}))
	evs := []lobby.Event{{Lobby: "a", Revision: 1}, {Lobby: "b", Revision: 1}, {Lobby: "a", Revision: 2}, {Lobby: "b", Revision: 2}}
	if err := pub.Publish(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	sw.Set(nil)
	if err := pub.Publish(context.Background(), []lobby.Event{{Lobby: "b", Revision: 3}}); err != nil {
		t.Fatal(err)
	}
	sw.Set(func(string) bool { return true })
	if err := pub.Publish(context.Background(), []lobby.Event{{Lobby: "a", Revision: 3}}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"b#1", "b#2", "a#3"}; !slices.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	if err := shadow.NewSwitch(nil).Publisher(nil).Publish(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
}

// Under a relay that runs, lobbyhost's events reach the server's
// Publisher only for the cohort.
func TestShadowPublishesNothingOutsideTheCohort(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	sw := shadow.NewSwitch(func(id string) bool { return id == "on" })
	got := make(chan string, 16)
	pub := lobby.PublisherFunc(func(_ context.Context, evs []lobby.Event) error {
		for _, e := range evs {
			got <- e.Lobby
		}
		return nil
	})
	st := memstore.New()
	sh, err := shadow.New(st, shadow.Config{Clock: clock, Switch: sw, Publisher: pub})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sh.Service().Run(ctx) }()
	defer func() { cancel(); <-done }()
	for _, id := range []string{"off", "on", "off"} {
		if _, err := sh.Join(ctx, id, "ann"+id, nil); err != nil {
			t.Fatal(err)
		}
	}
	if l := <-got; l != "on" {
		t.Fatalf("published an event of %q, want only lobby on", l)
	}
	// Every event is relayed though only one is published: relaying
	// until nothing is left hands the Switch the other lobby's events too.
	for {
		n, err := sh.Service().Relay(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	select {
	case l := <-got:
		t.Fatalf("published an event of %q, want only lobby on", l)
	default:
	}
}
