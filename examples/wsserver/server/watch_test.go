package server_test

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/server"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// twoServers starts two servers on one shared store and one fake clock,
// as two processes of one deployment would run.
func twoServers(t *testing.T, mutate func(*server.Config)) (a, b *env) {
	t.Helper()
	st := memstore.New()
	clock := clockwork.NewFakeClockAt(epoch)
	cfg := server.Config{
		Store:         st,
		Authenticator: server.HeaderAuthenticator{},
		Clock:         clock,
		Policy:        testPolicy(),
		Logger:        slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	return startEnv(t, cfg, nil), startEnv(t, cfg, nil)
}

// dialRefused opens a socket for user in room that the server upgrades
// and then refuses: it returns the error code of the first message and
// the close code.
func (e *env) dialRefused(room, user string) (string, websocket.StatusCode) {
	e.t.Helper()
	tk := e.ticket(room, user)
	conn, status, err := e.dialRaw("/rooms/" + url.PathEscape(room) + "/socket?ticket=" + url.QueryEscape(tk))
	if err != nil {
		e.t.Fatalf("dial as %s: %d %v", user, status, err)
	}
	c := newWSClient(e.t, user, conn)
	m := c.next()
	if m.Type != "error" {
		e.t.Errorf("%s: first message %s, want an error", user, m.raw)
	}
	return m.Code, c.waitClosed()
}

// storeCalls reads lobbyhost_store_calls_total for method from /metrics.
func (e *env) storeCalls(method string) float64 {
	e.t.Helper()
	return e.metricValue(`lobbyhost_store_calls_total{method="` + method + `"}`)
}

// A tab superseded by a join on another server is closed with 4002 at
// once: the fake clock never moves, so no heartbeat is involved.
func TestSupersededAcrossServersAtOnce(t *testing.T) {
	a, b := twoServers(t, func(c *server.Config) { c.Policy.MaxConnectionsPerPlayer = 1 })
	first := a.join("r", "alice")
	first.waitState("alice", func(m msg) bool { return m.host() == "alice" })
	second := b.join("r", "alice")
	if code := first.waitClosed(); code != server.CloseSuperseded {
		t.Errorf("tab superseded from the other server: closed with %d, want %d", code, server.CloseSuperseded)
	}
	for _, m := range second.roundTrip() {
		if m.Type == "lobby.state" && !hasMember(m, "alice", "online") {
			t.Errorf("the newer tab saw %s", m.view())
		}
	}
}

// The host kicks a player whose socket is on the other server: that socket
// is closed with the kicked code at once, everybody sees the kick, and the
// player's return is refused (blocked) while the block lasts.
func TestKickAcrossServers(t *testing.T) {
	a, b := twoServers(t, nil)
	alice := a.join("r", "alice")
	bob := b.join("r", "bob")
	alice.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })
	bob.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })

	// Only the host may kick; the server judges, whatever the page shows.
	bob.send(map[string]any{"type": "kick", "target": "alice"})
	if m := bob.waitType("error"); m.Code != "not_host" || m.RequestType != "kick" {
		t.Errorf("kick by a non-host: %s, want error not_host", m.raw)
	}
	alice.send(map[string]any{"type": "kick", "target": "nobody"})
	if m := alice.waitType("error"); m.Code != "not_member" {
		t.Errorf("kick of a non-member: %s, want error not_member", m.raw)
	}
	alice.send(map[string]any{"type": "kick", "target": "bob", "block_ms": -1})
	if m := alice.waitType("error"); m.Code != "bad_field" {
		t.Errorf("kick with a negative block: %s, want error bad_field", m.raw)
	}

	alice.send(map[string]any{"type": "kick", "target": "bob", "block_ms": 60000})
	m := alice.waitState("bob kicked", func(m msg) bool { return m.Reason == "kicked" })
	if players(m) != "alice" || m.SubjectID == nil || *m.SubjectID != "bob" {
		t.Errorf("kick event: %s, want bob removed", m.raw)
	}
	if code := bob.waitClosed(); code != server.CloseKicked {
		t.Errorf("kicked socket on the other server: closed with %d, want %d", code, server.CloseKicked)
	}
	for _, e := range []*env{a, b} {
		if code, close := e.dialRefused("r", "bob"); code != "blocked" || close != server.CloseBlocked {
			t.Errorf("kicked bob joining again: %q, close %d; want blocked, %d", code, close, server.CloseBlocked)
		}
	}
}

// A locked lobby refuses new players on every server; members still come
// back; unlocking admits new players again. Only the host locks.
func TestLockAcrossServers(t *testing.T) {
	a, b := twoServers(t, nil)
	alice := a.join("r", "alice")
	bob := b.join("r", "bob")
	bob.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })

	bob.send(map[string]any{"type": "lock", "locked": true})
	if m := bob.waitType("error"); m.Code != "not_host" || m.RequestType != "lock" {
		t.Errorf("lock by a non-host: %s, want error not_host", m.raw)
	}
	alice.send(map[string]any{"type": "lock"})
	if m := alice.waitType("error"); m.Code != "bad_field" {
		t.Errorf("lock without a flag: %s, want error bad_field", m.raw)
	}

	alice.send(map[string]any{"type": "lock", "locked": true})
	for _, c := range []*wsClient{alice, bob} {
		m := c.waitState("locked", func(m msg) bool { return m.Reason == "locked" })
		if !strings.Contains(m.raw, `"locked":true`) {
			t.Errorf("%s: locked event %s does not say locked", c.user, m.raw)
		}
	}
	for _, e := range []*env{a, b} {
		if code, close := e.dialRefused("r", "carol"); code != "lobby_locked" || close != server.CloseLobbyLocked {
			t.Errorf("new player joining a locked lobby: %q, close %d; want lobby_locked, %d", code, close, server.CloseLobbyLocked)
		}
	}
	// A member's further tab is still admitted.
	b.join("r", "alice")

	alice.send(map[string]any{"type": "lock", "locked": false})
	bob.waitState("unlocked", func(m msg) bool { return m.Reason == "unlocked" && strings.Contains(m.raw, `"locked":false`) })
	carol := b.join("r", "carol")
	carol.waitState("carol in", func(m msg) bool { return players(m) == "alice,bob,carol" })
}

// Sockets on both servers receive every revision of the room, in order,
// whichever server made each change.
func TestEveryRevisionOnBothServers(t *testing.T) {
	a, b := twoServers(t, nil)
	watchA := a.join("r", "wa")
	watchB := b.join("r", "wb")
	first := watchB.waitState("both watchers", func(m msg) bool { return players(m) == "wa,wb" }).Version

	var last uint64
	for i := range 6 {
		e := a
		if i%2 == 1 {
			e = b
		}
		p := e.join("r", fmt.Sprintf("p%d", i))
		last = p.waitState("own join", func(m msg) bool { return hasMember(m, p.user, "online") }).Version
		if i%3 == 2 {
			p.send(map[string]string{"type": "leave"})
			if code := p.waitClosed(); code != server.CloseLeft {
				t.Errorf("%s left: closed with %d, want %d", p.user, code, server.CloseLeft)
			}
			last++
		}
	}
	watchA.send(map[string]any{"type": "lock", "locked": true})
	last++
	for _, w := range []*wsClient{watchA, watchB} {
		w.waitState("the last revision", func(m msg) bool { return m.Version == last })
		got := w.statesSince(first)
		var versions []uint64
		w.mu.Lock()
		for _, s := range w.states {
			if s.Version >= first {
				versions = append(versions, s.Version)
			}
		}
		w.mu.Unlock()
		for i, v := range versions {
			if v != first+uint64(i) {
				t.Errorf("%s: revisions %v from %d, want every one in order; states:\n%s", w.user, versions, first, strings.Join(got, "\n"))
				break
			}
		}
		if n := len(versions); n == 0 || versions[n-1] != last {
			t.Errorf("%s: revisions %v, want up to %d", w.user, versions, last)
		}
	}
}

// A change in one room made on server b costs server a, which serves many
// rooms, at most a constant number of log reads and no load at all: a
// reads only the room that changed, and only its log.
func TestOneChangeCostsNoSnapshotPerRoom(t *testing.T) {
	a, b := twoServers(t, nil)
	const rooms = 12
	var socks []*wsClient
	for i := range rooms {
		c := a.join(fmt.Sprintf("room-%d", i), fmt.Sprintf("u%d", i))
		c.waitState("own join", func(m msg) bool { return m.host() == c.user })
		socks = append(socks, c)
	}
	methods := []string{"Load", "ReadLog", "LogHeads"}
	before := map[string]float64{}
	for _, m := range methods {
		before[m] = a.storeCalls(m)
		if before[m] < 0 {
			t.Fatalf("/metrics has no lobbyhost_store_calls_total for %s", m)
		}
	}

	b.join("room-0", "visitor")
	socks[0].waitState("the visitor, via server b", func(m msg) bool { return players(m) == "u0,visitor" })
	// Every other room's socket has nothing new.
	for _, c := range socks[1:] {
		for _, m := range c.roundTrip() {
			if m.Type == "lobby.state" {
				t.Errorf("%s: unexpected state %s", c.user, m.view())
			}
		}
	}
	delta := map[string]float64{}
	for _, m := range methods {
		delta[m] = a.storeCalls(m) - before[m]
	}
	t.Logf("server a's store calls for one change on server b with %d rooms: %v", rooms, delta)
	if n := delta["ReadLog"] + delta["LogHeads"]; n > 2 {
		t.Errorf("ReadLog+LogHeads rose by %v for one change in one of %d rooms, want at most 2", n, rooms)
	}
	if delta["ReadLog"] < 1 {
		t.Errorf("ReadLog rose by %v: server a learned of the change without reading its log?", delta["ReadLog"])
	}
	if delta["Load"] != 0 {
		t.Errorf("Load rose by %v, want 0 (no room is re-read)", delta["Load"])
	}
}

// lock (like kick) spends the socket's message budget like any other
// message: past the burst (the fake clock never refills it) one
// rate_limited error comes back and the lobby hears of nothing more.
func TestHostCommandsAreRateLimited(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.MessageBurst = 5; c.MessageRate = 1 })
	alice := e.join("r", "alice")
	e.join("r", "bob")
	alice.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })
	for i := range 10 {
		alice.send(map[string]any{"type": "lock", "locked": i%2 == 0})
	}
	m := alice.waitType("error")
	if m.Code != "rate_limited" {
		t.Errorf("lock flood: %s, want rate_limited", m.raw)
	}
	// Five messages went through: lock, unlock, lock, unlock, lock.
	if snap := e.snapshot("r"); !snap.Locked {
		t.Errorf("after five accepted lock toggles the lobby is unlocked, want locked")
	}
	// The readLoop handles messages in order, so by the time the error
	// came the five accepted ones were committed; the rest were dropped.
	if snap := e.snapshot("r"); snap.Revision != 2+5 {
		t.Errorf("revision %d after two joins and five accepted toggles, want 7", snap.Revision)
	}
}
