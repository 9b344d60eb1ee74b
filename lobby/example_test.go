package lobby_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// The pure machine: time is an argument, so a whole history is replayed
// without waiting.
func ExampleMachine() {
	m, _ := lobby.NewMachine(lobby.DefaultPolicy()) // grace 8 s, heartbeat TTL 15 s
	s := lobby.NewState("room-1", 0)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	host, _ := m.Apply(s, lobby.Join("ana", nil), t0)
	m.Apply(s, lobby.Join("bo", nil), t0.Add(time.Second))
	m.Apply(s, lobby.Disconnect("ana", host.Gen), t0.Add(2*time.Second))
	fmt.Println("after the drop:", s.Host, "revision", s.Revision)

	// Ten seconds later bo heartbeats; first, ana's grace (which ran out at
	// 2 s + 8 s) is applied as of its deadline.
	res, _ := m.Apply(s, lobby.Heartbeat("bo", 2), t0.Add(12*time.Second))
	for _, e := range res.Events {
		fmt.Println(e.Revision, e.Reason, e.Subject, "host:", e.Host, "at", e.At.Sub(t0))
	}
	// Output:
	// after the drop: ana revision 3
	// 4 lease_expired ana host: bo at 10s
}

// A Service over the in-memory store. Tests drive its clock; production
// uses the real one (the default).
func ExampleService() {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	svc, err := lobby.NewService(memstore.New(), lobby.WithClock(clock))
	if err != nil {
		panic(err)
	}
	gens := map[string]uint64{}
	for _, p := range []string{"p-17", "p-23", "p-41"} {
		res, _ := svc.Join(ctx, "room-1", p, nil)
		gens[p] = res.Gen
	}
	svc.Disconnect(ctx, "room-1", "p-17", gens["p-17"])

	clock.Advance(7 * time.Second) // inside the grace: p-17 still hosts
	snap, _ := svc.Snapshot(ctx, "room-1")
	fmt.Println(snap.Revision, snap.Host, snap.Members[0].Status)

	clock.Advance(time.Second) // the grace is over
	snap, _ = svc.Snapshot(ctx, "room-1")
	fmt.Println(snap.Revision, snap.Host, len(snap.Members))
	// Output:
	// 4 p-17 reconnecting
	// 5 p-23 2
}

// fence is another system that accepts host-only actions (say, a match
// service's "start the match"): it keeps the highest host term it has seen
// per lobby and refuses an action stamped with an older one.
type fence struct{ highest map[string]uint64 }

func (f *fence) accept(lobbyID string, term uint64) bool {
	if term < f.highest[lobbyID] {
		return false
	}
	f.highest[lobbyID] = term
	return true
}

// Example_fencing: revisions order what clients see; the host term fences
// what a host may do elsewhere. A host that was replaced while it was cut
// off still believes it hosts, and its late action carries the old term.
func Example_fencing() {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	svc, err := lobby.NewService(memstore.New(), lobby.WithClock(clock))
	if err != nil {
		panic(err)
	}
	alice, _ := svc.Join(ctx, "room", "alice", nil)
	_, _ = svc.Join(ctx, "room", "bob", nil)
	snap, _ := svc.Snapshot(ctx, "room")
	aliceTerm := snap.Term // alice acts as host, stamping her actions with it
	matches := &fence{highest: map[string]uint64{}}
	fmt.Println("alice starts the match at term", aliceTerm, "→ accepted:", matches.accept("room", aliceTerm))

	// alice's connection drops and her grace runs out: bob takes over.
	_, _ = svc.Disconnect(ctx, "room", "alice", alice.Gen)
	clock.Advance(lobby.DefaultPolicy().Grace)
	snap, _ = svc.Snapshot(ctx, "room")
	fmt.Println(snap.Host, "starts the next match at term", snap.Term, "→ accepted:", matches.accept("room", snap.Term))

	// alice, cut off all along, still thinks she hosts.
	fmt.Println("alice ends the match at term", aliceTerm, "→ accepted:", matches.accept("room", aliceTerm))
	// Output:
	// alice starts the match at term 1 → accepted: true
	// bob starts the next match at term 2 → accepted: true
	// alice ends the match at term 1 → accepted: false
}
