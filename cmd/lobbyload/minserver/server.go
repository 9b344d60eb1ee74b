package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// ticketTTL is how long a socket ticket stays good.
const ticketTTL = 30 * time.Second

// ticket names the room and user a socket upgrade joins.
type ticket struct {
	room, user string
	expires    time.Time
}

// server holds the tickets and the rooms. Each room has its own mutex;
// server.mu guards only the two maps.
type server struct {
	grace time.Duration
	// pingEvery is how often a socket is pinged (0: never); heartbeatEvery
	// the interval the welcome asks clients to send heartbeats at.
	pingEvery, heartbeatEvery time.Duration
	// afterAccept, if set, runs once a socket's upgrade completed, before
	// the socket is served (tests place other events there).
	afterAccept func(user string)

	mu      sync.Mutex
	tickets map[string]ticket
	rooms   map[string]*room
}

// newServer makes a server with the given grace and heartbeat TTL. Like
// examples/wsserver, it pings every socket every third of the TTL and asks
// clients for app heartbeats a little more often than that; a TTL of 0
// turns both off.
func newServer(grace, heartbeatTTL time.Duration) *server {
	s := &server{grace: grace, tickets: map[string]ticket{}, rooms: map[string]*room{}}
	if heartbeatTTL > 0 {
		s.pingEvery = heartbeatTTL / 3
		s.heartbeatEvery = s.pingEvery * 9 / 10
	}
	return s
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rooms/{roomId}/socket-ticket", s.issueTicket)
	mux.HandleFunc("GET /ws", s.socket)
	return mux
}

// issueTicket answers 201 {"ticket","roomId","userId"}.
func (s *server) issueTicket(w http.ResponseWriter, r *http.Request) {
	user, room := r.Header.Get("x-authenticated-user"), r.PathValue("roomId")
	if user == "" || room == "" {
		http.Error(w, `{"error":"unauthenticated"}`, http.StatusUnauthorized)
		return
	}
	b := make([]byte, 32)
	rand.Read(b)
	t := base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	s.tickets[t] = ticket{room: room, user: user, expires: time.Now().Add(ticketTTL)}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]string{"ticket": t, "roomId": room, "userId": user})
}

// redeem spends a ticket and returns the room it joins, created if new.
func (s *server) redeem(t string) (ticket, *room, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tk, ok := s.tickets[t]
	delete(s.tickets, t)
	if !ok || time.Now().After(tk.expires) {
		return ticket{}, nil, false
	}
	rm := s.rooms[tk.room]
	if rm == nil {
		rm = &room{id: tk.room, srv: s, members: map[string]*member{}, socks: map[*sock]bool{}}
		s.rooms[tk.room] = rm
	}
	rm.refs++ // held until the socket is registered or given up
	return tk, rm, true
}

// forget drops done references to rm (taken by redeem) and forgets the
// room once it has neither members nor references. Called with rm.mu held.
func (s *server) forget(rm *room, done int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm.refs -= done
	if rm.refs == 0 && len(rm.members) == 0 {
		delete(s.rooms, rm.id)
	}
}

// socket joins the ticket's user and registers the socket with the room in
// one critical section, then completes the upgrade, then serves the socket
// until it closes. Registering before the upgrade matters: the client may
// act as soon as its handshake completes, and a change committed between
// the join and a later registration would reach the socket only folded into
// its first state, without its reason.
func (s *server) socket(w http.ResponseWriter, r *http.Request) {
	tk, rm, ok := s.redeem(r.URL.Query().Get("ticket"))
	if !ok {
		http.Error(w, `{"error":"ticket_unknown"}`, http.StatusUnauthorized)
		return
	}
	sk := &sock{out: make(chan []byte, sendQueue)}
	rm.mu.Lock()
	m := rm.join(tk.user)
	rm.socks[sk] = true
	sk.send(rm.state("snapshot", ""))
	sk.send(s.welcome(tk))
	rm.mu.Unlock()
	conn, err := websocket.Accept(w, r, nil)
	if err == nil && s.afterAccept != nil {
		s.afterAccept(tk.user)
	}
	rm.mu.Lock()
	if err != nil {
		delete(rm.socks, sk)
		rm.socketClosed(m)
		s.forget(rm, 1)
		rm.mu.Unlock()
		return
	}
	sk.conn = conn
	if sk.cut {
		conn.CloseNow() // its queue overflowed during the upgrade
	}
	s.forget(rm, 1)
	rm.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	go sk.write(ctx)
	if s.pingEvery > 0 {
		go s.ping(ctx, rm, m, conn)
	}
	for { // reading answers the client's pings, takes its heartbeats and sees the close
		_, data, err := conn.Read(ctx)
		if err != nil {
			break
		}
		var msg struct{ Type string }
		if json.Unmarshal(data, &msg) != nil || (msg.Type != "ping" && msg.Type != "heartbeat") {
			continue // the rest of the protocol is not modelled
		}
		rm.mu.Lock()
		rm.heartbeat(m)
		if msg.Type == "ping" {
			sk.send([]byte(`{"type":"pong"}`))
		}
		rm.mu.Unlock()
	}
	cancel()
	conn.CloseNow()
	rm.mu.Lock()
	delete(rm.socks, sk)
	rm.socketClosed(m)
	rm.mu.Unlock()
}

// welcomeJSON is the wire form of the welcome message.
type welcomeJSON struct {
	Type        string `json:"type"`
	RoomID      string `json:"roomId"`
	UserID      string `json:"userId"`
	HeartbeatMs int64  `json:"heartbeatMs"`
	GraceMs     int64  `json:"graceMs"`
}

// welcome is the message a socket gets after its first state: how often to
// send heartbeats (0: never) and the grace.
func (s *server) welcome(tk ticket) []byte {
	b, _ := json.Marshal(welcomeJSON{Type: "welcome", RoomID: tk.room, UserID: tk.user,
		HeartbeatMs: s.heartbeatEvery.Milliseconds(), GraceMs: s.grace.Milliseconds()}) // cannot fail
	return b
}

// ping pings conn every s.pingEvery until ctx ends. A pong is a heartbeat
// of m (taken under the room's mutex, as the example server hands each to
// its lobby); a ping unanswered within the interval closes the socket with
// 4004, which the read loop then sees as a close.
func (s *server) ping(ctx context.Context, rm *room, m *member, conn *websocket.Conn) {
	t := time.NewTicker(s.pingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, s.pingEvery)
		err := conn.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				conn.Close(4004, "ping timeout")
			}
			return
		}
		rm.mu.Lock()
		rm.heartbeat(m)
		rm.mu.Unlock()
	}
}

// sendQueue is how many states may wait for a slow socket before it is cut.
const sendQueue = 256

// sock is one socket of a room, registered from its join on; its writer
// goroutine drains out in order once the upgrade completed. conn and cut
// are guarded by the room's mutex.
type sock struct {
	conn *websocket.Conn // nil until the upgrade completes
	cut  bool            // the queue overflowed before the upgrade completed
	out  chan []byte
}

// send queues a message, or cuts the socket if its queue is full. Called
// with the room's mutex held, so a room's messages queue in commit order.
func (sk *sock) send(msg []byte) {
	select {
	case sk.out <- msg:
	default:
		if sk.conn == nil {
			sk.cut = true
			return
		}
		sk.conn.CloseNow()
	}
}

func (sk *sock) write(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case msg := <-sk.out:
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := sk.conn.Write(wctx, websocket.MessageText, msg)
			cancel()
			if err != nil {
				sk.conn.CloseNow()
				return
			}
		}
	}
}
