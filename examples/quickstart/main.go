// Command quickstart shows lobbyhost deciding a host in one process, with the
// in-memory store and the real clock: four players join, the host's socket
// drops and comes back inside the grace (it stays host), then drops for good,
// and the member who joined next takes over when the grace runs out.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A short grace so the demo finishes quickly; production uses seconds.
	policy := lobby.DefaultPolicy()
	policy.Grace = 500 * time.Millisecond

	start := time.Now()
	events := make(chan lobby.Event, 64)
	publish := lobby.PublisherFunc(func(_ context.Context, evs []lobby.Event) error {
		for _, e := range evs {
			events <- e
		}
		return nil
	})

	svc, err := lobby.NewService(memstore.New(), lobby.WithPolicy(policy), lobby.WithPublisher(publish))
	if err != nil {
		log.Fatal(err)
	}
	go svc.Run(ctx) // fires expiries at their deadlines and relays events

	// waitFor prints events as they arrive until one has the given reason.
	waitFor := func(reason lobby.Reason) {
		for e := range events {
			host := e.Host
			if host == "" {
				host = "(none)"
			}
			var members []string
			for _, m := range e.Members {
				members = append(members, fmt.Sprintf("%s#%d:%s", m.Player, m.JoinSeq, m.Status))
			}
			fmt.Printf("+%4dms  rev %2d  %-16s %-6s host=%-6s members=[%s]\n",
				e.At.Sub(start).Milliseconds(), e.Revision, e.Reason, e.Subject, host, strings.Join(members, " "))
			if e.Reason == reason {
				return
			}
		}
	}

	const room = "room-1"
	gens := map[string]uint64{}
	for _, p := range []string{"p-17", "p-23", "p-41", "p-62"} {
		res, err := svc.Join(ctx, room, p, nil)
		if err != nil {
			log.Fatal(err)
		}
		gens[p] = res.Gen // every later report about this socket names it
		waitFor(lobby.ReasonJoined)
	}

	fmt.Println("-- the host's socket drops; it comes back inside the grace")
	if _, err := svc.Disconnect(ctx, room, "p-17", gens["p-17"]); err != nil {
		log.Fatal(err)
	}
	waitFor(lobby.ReasonDisconnected)
	time.Sleep(200 * time.Millisecond)
	res, err := svc.Join(ctx, room, "p-17", nil)
	if err != nil {
		log.Fatal(err)
	}
	waitFor(lobby.ReasonReconnected)

	// The old socket's close arrives late: it names an old generation, so it
	// changes nothing.
	stale, err := svc.Disconnect(ctx, room, "p-17", gens["p-17"])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("-- late close of the old socket: %v\n", stale.Outcome)

	fmt.Println("-- the host drops for good; when its grace runs out, p-23 (lowest join sequence) succeeds")
	if _, err := svc.Disconnect(ctx, room, "p-17", res.Gen); err != nil {
		log.Fatal(err)
	}
	waitFor(lobby.ReasonDisconnected)
	waitFor(lobby.ReasonLeaseExpired)

	snap, err := svc.Snapshot(ctx, room)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("-- final: revision %d, host %s\n", snap.Revision, snap.Host)
}
