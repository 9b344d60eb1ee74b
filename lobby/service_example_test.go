package lobby_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// Two processes share one store. The first follows lobby "duel" for its
// sockets; the second runs the commands. Run (normally started once per
// process) carries the second process's commits to the first one's
// watcher, in order; a superseded tab shows up as an ended connection.
func ExampleService_Watch() {
	ctx := context.Background()
	shared := memstore.New()
	clock := clockwork.NewFakeClock()
	policy := lobby.DefaultPolicy()
	policy.MaxConnectionsPerPlayer = 1
	here, _ := lobby.NewService(shared, lobby.WithClock(clock), lobby.WithPolicy(policy))
	there, _ := lobby.NewService(shared, lobby.WithClock(clock), lobby.WithPolicy(policy))
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go here.Run(runCtx)

	w, _ := here.Watch(ctx, "duel", 0) // a new lobby: revision 0, nothing to catch up
	defer w.Close()

	there.Join(ctx, "duel", "ana", nil)
	there.Join(ctx, "duel", "bo", nil)
	there.Join(ctx, "duel", "ana", nil) // a second tab: the first one ends
	there.Kick(ctx, "duel", "ana", "bo", 0)

	for n := 0; n < 4; {
		c, err := w.Next(ctx)
		if errors.Is(err, lobby.ErrNotRunning) {
			<-w.Ready() // Run has not started yet; its start wakes w
			continue
		}
		n++
		for _, e := range c.Events {
			fmt.Printf("revision %d: %s %s (host %s)\n", e.Revision, e.Reason, e.Subject, e.Host)
		}
		for _, x := range c.Ended {
			fmt.Printf("close %s's connection %d: %s\n", x.Player, x.Gen, x.Cause)
		}
	}
	// Output:
	// revision 1: joined ana (host ana)
	// revision 2: joined bo (host ana)
	// close ana's connection 1: superseded
	// revision 3: kicked bo (host ana)
	// close bo's connection 2: kicked
}

// A process shutting down on purpose drains: the connections its session
// holds end at once as closes, in one transition per lobby, so each
// player's grace starts now and the host keeps its seat while its client
// reconnects to another process.
func ExampleService_Drain() {
	ctx := context.Background()
	shared := memstore.New()
	clock := clockwork.NewFakeClock()
	leaving, _ := lobby.NewService(shared, lobby.WithClock(clock))
	staying, _ := lobby.NewService(shared, lobby.WithClock(clock))
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go leaving.Run(runCtx) // Run opens the session the joins go through
	for leaving.Session() == "" {
		time.Sleep(time.Millisecond)
	}
	leaving.Join(ctx, "duel", "ana", nil)
	leaving.Join(ctx, "duel", "bo", nil)

	if err := leaving.Drain(ctx); err != nil {
		fmt.Println(err)
	}
	snap, _ := staying.Snapshot(ctx, "duel")
	fmt.Println("host:", snap.Host)
	for _, m := range snap.Members {
		fmt.Println(m.Player, m.Status)
	}
	res, _ := staying.Join(ctx, "duel", "ana", nil) // ana's client, back through another process
	fmt.Println(res.Events[0].Reason, "host:", res.Events[0].Host)
	// Output:
	// host: ana
	// ana reconnecting
	// bo reconnecting
	// reconnected host: ana
}
