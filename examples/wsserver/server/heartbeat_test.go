package server_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
)

type observerFunc func(lobby.Observation)

func (f observerFunc) Observe(_ context.Context, o lobby.Observation) { f(o) }

// heartbeats returns a Config mutation that reports every applied
// heartbeat's player on the returned channel.
func heartbeats(ttl time.Duration, mutate func(*serverConfig)) (func(*serverConfig), <-chan string) {
	ch := make(chan string, 1024)
	return func(c *serverConfig) {
		c.Policy.HeartbeatTTL = ttl
		c.Observer = observerFunc(func(o lobby.Observation) {
			if o.Command.Op == rules.OpHeartbeat && o.Err == nil && o.Result.Outcome == lobby.OutcomeApplied {
				ch <- o.Command.Player
			}
		})
		if mutate != nil {
			mutate(c)
		}
	}, ch
}

func waitHeartbeats(t *testing.T, ch <-chan string, players ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, p := range players {
		want[p] = true
	}
	timeout := time.After(waitLimit)
	for len(want) > 0 {
		select {
		case p := <-ch:
			delete(want, p)
		case <-timeout:
			t.Fatalf("no heartbeat from %v within %v", want, waitLimit)
		}
	}
}

// Sockets that answer WebSocket pings (every browser does) stay members
// however long they stay silent otherwise.
func TestPongsKeepSocketsAlive(t *testing.T) {
	const ttl = 30 * time.Second
	mutate, beats := heartbeats(ttl, nil)
	e := newEnv(t, mutate)
	alice := e.join("r", "alice")
	bob := e.join("r", "bob")
	bob.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })
	rev := e.snapshot("r").Revision

	for range 6 { // 60 s in all, twice the TTL
		e.clock.Advance(ttl / 3)
		waitHeartbeats(t, beats, "alice", "bob")
	}
	snap := e.snapshot("r")
	if snap.Revision != rev || snap.Members[0].Status != lobby.StatusOnline || snap.Members[1].Status != lobby.StatusOnline {
		t.Fatalf("after 2 TTLs of pongs: revision %d members %v, want revision %d, both online", snap.Revision, snap.Members, rev)
	}
	for _, c := range []*wsClient{alice, bob} {
		for _, m := range c.roundTrip() {
			if m.Type == "lobby.state" && m.Version > rev {
				t.Errorf("%s got a state while everybody stayed online: %s", c.user, m.raw)
			}
		}
	}
}

// A socket that does not answer a ping in time (a vanished tab, a dead
// network) is closed by the server, which reports the close at once rather
// than waiting for the heartbeat deadline.
func TestUnansweredPingClosesSocket(t *testing.T) {
	const ttl = 30 * time.Second
	mutate, beats := heartbeats(ttl, func(c *serverConfig) { c.PingTimeout = 100 * time.Millisecond })
	e := newEnv(t, mutate)
	bob := e.join("r", "bob")
	bob.waitType("typing.state")
	tk := e.ticket("r", "mute")
	mute, status, err := e.dialRaw("/ws?ticket=" + tk) // never reads: answers no ping
	if err != nil {
		t.Fatalf("dial: %d %v", status, err)
	}
	defer mute.CloseNow()
	bob.waitState("mute joined", func(m msg) bool { return hasMember(m, "mute", "online") })

	e.clock.Advance(ttl / 3)
	pingedAt := e.clock.Now()
	waitHeartbeats(t, beats, "bob")
	out := bob.waitState("mute reconnecting", func(m msg) bool { return hasMember(m, "mute", "reconnecting") })
	if out.Reason != "disconnected" {
		t.Errorf("unanswered ping ended the socket with reason %q, want disconnected", out.Reason)
	}
	if want := pingedAt.UTC().Format(time.RFC3339Nano); out.At != want {
		t.Errorf("disconnected at %s, want %s (when the ping went unanswered, before the deadline)", out.At, want)
	}
}

// {"type":"heartbeat"} keeps a socket alive where WebSocket pings do not
// happen; the same silence without it times out.
func TestAppHeartbeat(t *testing.T) {
	const ttl = 30 * time.Second
	mutate, beats := heartbeats(ttl, func(c *serverConfig) { c.PingInterval = 24 * time.Hour })
	e := newEnv(t, mutate)
	alice := e.join("r", "alice")
	carol := e.join("r", "carol")
	alice.waitState("both", func(m msg) bool { return players(m) == "alice,carol" })

	e.clock.Advance(ttl * 2 / 3)
	alice.send(map[string]string{"type": "heartbeat"})
	waitHeartbeats(t, beats, "alice")
	var out msg
	e.advanceUntil(ttl*2/3, func(d time.Duration) bool {
		var ok bool
		out, ok = alice.tryFor(d, func(m msg) bool { return m.Type == "lobby.state" && hasMember(m, "carol", "reconnecting") })
		return ok
	})
	if out.Reason != "timed_out" {
		t.Errorf("silent carol ended with reason %q, want timed_out", out.Reason)
	}
	if want := epoch.Add(ttl).UTC().Format(time.RFC3339Nano); out.At != want {
		t.Errorf("carol timed out at %s, want her deadline %s", out.At, want)
	}
	snap := e.snapshot("r")
	if snap.Members[0].Player != "alice" || snap.Members[0].Status != lobby.StatusOnline {
		t.Errorf("alice after heartbeating: %+v, want online", snap.Members[0])
	}
	if code := carol.waitClosed(); code != 4001 {
		t.Errorf("carol's socket closed with %d, want 4001 (rejoin)", code)
	}
}

// A heartbeat for a generation that already ended is stale: the socket is
// closed with 4001 so that the client rejoins with a new ticket.
func TestLateHeartbeatClosesWithRejoin(t *testing.T) {
	const ttl = 30 * time.Second
	mutate, _ := heartbeats(ttl, nil)
	e := newEnv(t, mutate)
	alice := e.join("r", "alice")
	alice.waitType("typing.state")
	// One jump past the deadline: whichever comes first, the pong's
	// heartbeat (stale after the catch-up) or the sweeper, ends the socket.
	e.clock.Advance(ttl + time.Second)
	if code := alice.waitClosed(); code != 4001 {
		t.Fatalf("closed with %d, want 4001", code)
	}
	again := e.join("r", "alice")
	m := again.waitState("alice back", func(m msg) bool { return hasMember(m, "alice", "online") })
	if m.Reason != "reconnected" || m.host() != "alice" {
		t.Errorf("rejoin after a timeout inside the grace: %s, want reconnected, still host", m.view())
	}
}

// A socket whose TCP connection dies while the server waits for the pong
// of its ping (a reset, no close frame) is reported closed at once: the
// member turns reconnecting without waiting for the ping's timeout, here
// longer than the test may run.
func TestDropDuringPingIsReportedAtOnce(t *testing.T) {
	const ttl = 30 * time.Second
	e := newEnv(t, func(c *serverConfig) {
		c.Policy.HeartbeatTTL = ttl
		c.PingTimeout = time.Hour
	})
	bob := e.join("r", "bob")
	bob.waitType("typing.state")
	mute := e.dialRawSocket("/ws?ticket=" + e.ticket("r", "mute")) // never answers a ping
	frames := mute.frames()
	bob.waitState("mute joined", func(m msg) bool { return hasMember(m, "mute", "online") })

	e.clock.Advance(ttl / 3)
	for pinged := false; !pinged; {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("mute's connection ended before a ping")
			}
			pinged = f.op == opPing
		case <-time.After(waitLimit):
			t.Fatalf("no ping within %v", waitLimit)
		}
	}
	// The ping waits for a pong. Reset the connection under it.
	tcp, ok := mute.conn.(*net.TCPConn)
	if !ok {
		t.Fatalf("raw socket on %T, want *net.TCPConn", mute.conn)
	}
	if err := tcp.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	tcp.Close()
	out := bob.waitState("mute reconnecting", func(m msg) bool { return hasMember(m, "mute", "reconnecting") })
	if out.Reason != "disconnected" {
		t.Errorf("dropped socket reported with reason %q, want disconnected", out.Reason)
	}
}
