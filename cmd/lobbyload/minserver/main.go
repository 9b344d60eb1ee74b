// Command minserver is a measuring baseline for lobbyload, not a product: the
// smallest lobby server that speaks the subset of examples/wsserver's
// protocol the failover scenario uses, with no persistence, no limits and
// no security. It shows what joins and host failover cost when nothing but
// a mutex per room and a WebSocket library (coder/websocket) stands between
// the clients. Where a fair comparison needs it, it does the example
// server's per-socket work: every room has its own mutex, taken for every
// join, close, expiry and heartbeat (server.mu guards only the ticket and
// room maps, never a room's state); sockets are pinged and heartbeats
// answered as the example server does (below). Nothing is persisted.
//
// Protocol subset:
//
//   - POST /rooms/{roomId}/socket-ticket with header x-authenticated-user
//     answers 201 {"ticket","roomId","userId"}; a ticket is good for one
//     upgrade within 30 s.
//   - A WebSocket on /ws?ticket=... joins the ticket's user to the room
//     before the upgrade completes (the first member in hosts). Every socket
//     of the room then receives a lobby.state message for every change
//     (type, version, hostId, playerIds, roomId, members {userId, joinSeq,
//     status, host}, reason, subjectId), starting with the current state.
//   - After its first state a socket gets {"type":"welcome", roomId, userId,
//     heartbeatMs, graceMs}. Every socket is pinged (WebSocket ping) every
//     third of -heartbeat-ttl (15 s; 0: never); a ping unanswered within
//     that interval closes the socket with 4004. {"type":"ping"} is answered
//     {"type":"pong"}; it and {"type":"heartbeat"} are heartbeats, as is
//     every pong: each takes the room's mutex, standing for the heartbeat
//     the example server hands its lobby (which is a store write there;
//     here it only notes the time). heartbeatMs is 9/10 of the ping
//     interval, as in the example server. Other client messages are ignored.
//   - When a member's last socket closes it turns reconnecting (one change);
//     if it does not come back within -grace it is removed, and if it hosted,
//     the online member with the lowest joinSeq becomes host (one change).
//
// It prints its URL on the first line of stdout, like examples/wsserver.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	grace := flag.Duration("grace", 8*time.Second, "how long a dropped member keeps its place and the host role")
	ttl := flag.Duration("heartbeat-ttl", 15*time.Second, "sockets are pinged every third of this; 0: no pings and no heartbeats asked for")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("minserver: listening on http://%s/ (a measuring baseline)\n", ln.Addr())
	srv := &http.Server{Handler: newServer(*grace, *ttl).routes(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close() // sockets are hijacked: they end with the process
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
