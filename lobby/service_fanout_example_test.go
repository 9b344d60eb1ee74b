package lobby_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// socket stands for a transport's connection: what a real server would
// write to a WebSocket, it writes to a channel, one line per message.
type socket struct {
	name string
	out  chan string
}

func (s *socket) Send(ctx context.Context, d lobby.Delivery) {
	line := fmt.Sprintf("%s gets the whole lobby at revision %d", s.name, d.Revision)
	if d.Event != nil {
		line = fmt.Sprintf("%s gets revision %d: %s %s", s.name, d.Revision, d.Event.Reason, d.Event.Subject)
	}
	select {
	case s.out <- line:
	case <-ctx.Done():
	}
}

func (s *socket) End(e lobby.Ended) {
	s.out <- fmt.Sprintf("%s is closed: %s", s.name, e.Cause)
}

func members(snap lobby.Snapshot) string {
	var names []string
	for _, m := range snap.Members {
		names = append(names, m.Player)
	}
	return strings.Join(names, ", ")
}

// Two sockets attached to one lobby. Each renders the snapshot its join
// returns, then receives the lobby's changes in order; the kick reaches
// both, and only the kicked player's socket is closed.
func ExampleRooms() {
	ctx := context.Background()
	svc, _ := lobby.NewService(memstore.New(), lobby.WithClock(clockwork.NewFakeClock()))
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go svc.Run(runCtx) // carries other processes' commits to the rooms
	rooms, _ := lobby.NewRooms(svc)

	ana := &socket{name: "ana", out: make(chan string, 8)}
	bo := &socket{name: "bo", out: make(chan string, 8)}
	atAna, snap, _ := rooms.Join(ctx, "duel", "ana", nil, ana)
	defer atAna.Close()
	fmt.Printf("ana renders revision %d: %s (host %s)\n", snap.Revision, members(snap), snap.Host)
	atBo, snap, _ := rooms.Join(ctx, "duel", "bo", nil, bo)
	defer atBo.Close()
	fmt.Printf("bo renders revision %d: %s (host %s)\n", snap.Revision, members(snap), snap.Host)
	fmt.Println(<-ana.out)

	svc.Kick(ctx, "duel", "ana", "bo", 0)
	fmt.Println(<-ana.out)
	fmt.Println(<-bo.out)
	fmt.Println(<-bo.out)
	// Output:
	// ana renders revision 1: ana (host ana)
	// bo renders revision 2: ana, bo (host ana)
	// ana gets revision 2: joined bo
	// ana gets revision 3: kicked bo
	// bo gets revision 3: kicked bo
	// bo is closed: kicked
}
