package server

import (
	"context"

	"github.com/coder/websocket"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// Delivery to sockets is lobby.Rooms' job: the Server has one, and each
// socket joins through it with its client as the lobby.Sink. Rooms follows
// each lobby that has sockets here with one watcher and hands every socket
// the lobby's changes in revision order, whichever process committed them,
// and tells the socket when a commit ended its connection generation. What
// stays here is the transport: encoding a change once per room, queueing
// it on the socket (which never blocks), and the close code of an ended
// connection.

// encodedSlots is how many recent lobby.state encodings a room keeps for
// its sockets, which each take a change on their own schedule: the change
// being handed out and the one before it (or the event and the state of
// one revision), for a socket whose delivery comes a change late. Every
// slot holds its encoding for as long as the room lives, however quiet:
// with rooms of a few players, more slots would keep most of a room's
// join history encoded in memory (about 1 KB a change), shared with no
// one, while a socket more than one change behind costs only an encoding.
const encodedSlots = 2

// encodedState is one lobby.state encoding of a room.
type encodedState struct {
	rev   uint64
	state bool // a whole-lobby state (reason snapshot), not an event
	b     []byte
}

// encode returns the lobby.state message for d, encoded once for every
// socket of the room that takes it: the sockets of a room get the same
// changes, each on its own goroutine, at nearly the same time.
func (r *room) encode(d lobby.Delivery) []byte {
	state := d.State != nil
	r.encMu.Lock()
	defer r.encMu.Unlock()
	for i := range r.enc {
		if e := &r.enc[i]; e.b != nil && e.rev == d.Revision && e.state == state {
			return e.b
		}
	}
	var b []byte
	if state {
		b = encodeSnapshot(d.State, r.clock.Now())
	} else {
		b = encodeEvent(d.Event, r.clock.Now())
	}
	r.enc[r.encNext] = encodedState{rev: d.Revision, state: state, b: b}
	r.encNext = (r.encNext + 1) % len(r.enc)
	return b
}

// Send implements lobby.Sink: it queues the change on the socket, encoded
// once per room. It never blocks: a socket that does not keep up is closed
// by its own queue's bounds (CloseSlowConsumer).
func (c *client) Send(_ context.Context, d lobby.Delivery) {
	c.enqueue(c.room.encode(d))
}

var _ lobby.Starter = (*client)(nil)

// Start implements lobby.Starter: Rooms calls it when the socket's join has
// committed, before any Send, so the socket's first state is queued ahead
// of every later change. That state is the change the join made (reason
// joined, reconnected, ...), or the lobby as it is (snapshot) when the join
// changed nothing others see, a further tab; either is encoded once for
// the room.
func (c *client) Start(a *lobby.Attachment, snap lobby.Snapshot) {
	c.mu.Lock()
	c.att = a
	c.mu.Unlock()
	first := lobby.Delivery{Lobby: snap.Lobby, Revision: snap.Revision, State: &snap}
	if ev := a.Result().Events; len(ev) > 0 && ev[len(ev)-1].Revision == snap.Revision {
		first = lobby.Delivery{Lobby: snap.Lobby, Revision: snap.Revision, Event: &ev[len(ev)-1]}
	}
	c.enqueue(c.room.encode(first))
}

// End implements lobby.Sink: a commit ended the socket's connection
// generation, here or on another process. The socket is closed with the
// close code of the cause, after what is queued for it.
func (c *client) End(e lobby.Ended) {
	if c.s.draining.Load() {
		// Ended by this process's drain: reconnect elsewhere at once.
		c.kick(websocket.StatusGoingAway, "server shutting down", false)
		return
	}
	switch e.Cause {
	case lobby.EndKicked:
		c.kick(CloseKicked, "removed from the lobby by the host", false)
	case lobby.EndTimedOut:
		c.kick(CloseRejoin, "heartbeat deadline passed; rejoin", false)
	case lobby.EndSuperseded:
		c.kick(CloseSuperseded, "superseded by a newer connection", false)
	case lobby.EndLeft:
		c.kick(CloseLeft, "left the lobby", false)
	default:
		c.kick(websocket.StatusNormalClosure, "connection ended", false)
	}
}
