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
