package lobby_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/store/memstore"
	"github.com/lobbyhost/lobbyhost/succession"
)

// The pure machine: time is an argument, so a whole history is replayed
// without waiting.
func ExampleMachine() {
	m, _ := rules.NewMachine(lobby.DefaultPolicy()) // grace 8 s, heartbeat TTL 15 s
	s := rules.NewState("room-1", 0)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	host, _ := m.Apply(s, rules.Join("ana", nil), t0)
	m.Apply(s, rules.Join("bo", nil), t0.Add(time.Second))
	m.Apply(s, rules.Disconnect("ana", host.Gen), t0.Add(2*time.Second))
	fmt.Println("after the drop:", s.Host, "revision", s.Revision)

	// Ten seconds later bo heartbeats; first, ana's grace (which ran out at
	// 2 s + 8 s) is applied as of its deadline.
	res, _ := m.Apply(s, rules.Heartbeat("bo", 2), t0.Add(12*time.Second))
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

// Update changes a member's attributes on the server's word, without a
// connection. With an eligibility rule that reads them, it can fill an
// empty host seat, but never unseats a host.
func ExampleUpdate() {
	p := lobby.DefaultPolicy()
	p.Succession.Eligible = func(c succession.Candidate) bool { return c.Attrs["role"] != "spectator" }
	m, _ := rules.NewMachine(p)
	s := rules.NewState("room-1", 0)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	m.Apply(s, rules.Join("ana", map[string]string{"role": "spectator"}), t0)
	fmt.Printf("host %q\n", s.Host)
	res, _ := m.Apply(s, rules.Update("ana", map[string]string{"role": "player"}), t0.Add(time.Second))
	e := res.Events[0]
	fmt.Println(e.Reason, e.Subject, "host:", e.Host, "attrs:", e.Members[0].Attrs)
	// Output:
	// host ""
	// updated ana host: ana attrs: map[role:player]
}

// Kick removes a member at once. The host (also while in its grace) or the
// server may kick; a block keeps the player out until it ends.
func ExampleKick() {
	m, _ := rules.NewMachine(lobby.DefaultPolicy())
	s := rules.NewState("room-1", 0)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m.Apply(s, rules.Join("ana", nil), t0)
	m.Apply(s, rules.Join("bo", nil), t0)

	_, err := m.Apply(s, rules.Kick("bo", "ana", 0), t0.Add(time.Second))
	fmt.Println("bo kicks ana:", errors.Is(err, lobby.ErrNotHost))

	res, _ := m.Apply(s, rules.Kick("ana", "bo", time.Minute), t0.Add(time.Second))
	fmt.Println(res.Events[0].Reason, res.Events[0].Subject, "blocked until", s.BlockedUntil().Sub(t0))

	_, err = m.Apply(s, rules.Join("bo", nil), t0.Add(time.Minute))
	fmt.Println("bo at 1m:", errors.Is(err, lobby.ErrBlocked))
	_, err = m.Apply(s, rules.Join("bo", nil), t0.Add(time.Minute+time.Second))
	fmt.Println("bo at 1m1s:", err)
	// Output:
	// bo kicks ana: true
	// kicked bo blocked until 1m1s
	// bo at 1m: true
	// bo at 1m1s: <nil>
}

// A locked lobby refuses new players, never members coming back.
func ExampleLock() {
	m, _ := rules.NewMachine(lobby.DefaultPolicy())
	s := rules.NewState("room-1", 0)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ana, _ := m.Apply(s, rules.Join("ana", nil), t0)

	res, _ := m.Apply(s, rules.Lock("ana"), t0)
	fmt.Println(res.Events[0].Reason, "by", res.Events[0].Subject)
	_, err := m.Apply(s, rules.Join("bo", nil), t0)
	fmt.Println("bo:", errors.Is(err, lobby.ErrLocked))

	m.Apply(s, rules.Disconnect("ana", ana.Gen), t0)
	res, err = m.Apply(s, rules.Join("ana", nil), t0.Add(time.Second))
	fmt.Println("ana:", res.Events[0].Reason, err)
	// Output:
	// locked by ana
	// bo: true
	// ana: reconnected <nil>
}

// Configure gives one lobby its own values for some settings of the policy;
// they apply to deadlines set after it.
func ExampleConfigure() {
	m, _ := rules.NewMachine(lobby.DefaultPolicy()) // grace 8 s
	s := rules.NewState("room-1", 0)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	o := lobby.Overrides{}.WithGrace(30 * time.Second).WithMaxMembers(2)
	res, _ := m.Apply(s, rules.Configure(o), t0)
	fmt.Println(res.Events[0].Reason, "changed:", res.Changed)

	ana, _ := m.Apply(s, rules.Join("ana", nil), t0)
	m.Apply(s, rules.Join("bo", nil), t0)
	_, err := m.Apply(s, rules.Join("cy", nil), t0)
	fmt.Println("cy:", errors.Is(err, lobby.ErrLobbyFull))

	m.Apply(s, rules.Disconnect("ana", ana.Gen), t0)
	fmt.Println("ana may come back for", s.View()[0].ReconnectDeadline.Sub(t0))
	// Output:
	// configured changed: true
	// cy: true
	// ana may come back for 30s
}

// Events have a documented JSON form for clients.
func ExampleEvent_MarshalJSON() {
	m, _ := rules.NewMachine(lobby.DefaultPolicy())
	s := rules.NewState("room-1", 0)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ana, _ := m.Apply(s, rules.Join("ana", map[string]string{"role": "captain"}), t0)
	res, _ := m.Apply(s, rules.Disconnect("ana", ana.Gen), t0.Add(time.Second))

	data, _ := json.MarshalIndent(res.Events[0], "", "  ")
	fmt.Println(string(data))
	// Output:
	// {
	//   "lobby": "room-1",
	//   "revision": 2,
	//   "term": 1,
	//   "host": "ana",
	//   "previous_host": "ana",
	//   "reason": "disconnected",
	//   "subject": "ana",
	//   "at": "2026-01-01T12:00:01Z",
	//   "locked": false,
	//   "overrides": {},
	//   "members": [
	//     {
	//       "player": "ana",
	//       "join_seq": 1,
	//       "status": "reconnecting",
	//       "attrs": {
	//         "role": "captain"
	//       },
	//       "reconnect_deadline": "2026-01-01T12:00:09Z"
	//     }
	//   ]
	// }
}
