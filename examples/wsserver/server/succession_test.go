package server_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The scenario the server exists for, over real sockets: the host's socket
// dies, the host comes back inside the grace and keeps the role; it dies
// again and stays away, and when the grace runs out the other player, who
// joined next, is host. The other player sees every step in revision
// order; timing comes from the fake clock, and only order is asserted.
func TestHostSuccessionOverSockets(t *testing.T) {
	e := newEnv(t, nil)
	const room = "room-1"
	grace := e.cfg.Policy.Grace

	alice := e.join(room, "alice")
	alice.waitState("alice hosting", func(m msg) bool { return m.host() == "alice" && players(m) == "alice" })
	bob := e.join(room, "bob")
	joined := bob.waitState("both members", func(m msg) bool { return players(m) == "alice,bob" })
	alice.waitState("bob joined", func(m msg) bool { return players(m) == "alice,bob" })

	// The host's socket is force-closed (no close frame).
	alice.conn.CloseNow()
	bob.waitState("alice reconnecting", func(m msg) bool { return hasMember(m, "alice", "reconnecting") })

	// Back inside the grace: same host, same join sequence.
	e.clock.Advance(grace - time.Second)
	alice2 := e.join(room, "alice")
	back := alice2.waitState("alice online again", func(m msg) bool { return hasMember(m, "alice", "online") })
	if back.host() != "alice" {
		t.Fatalf("host after reconnecting inside the grace = %q, want alice", back.host())
	}
	if got := back.Members[0]; got.UserID != "alice" || got.JoinSeq != 1 {
		t.Fatalf("alice's member entry after reconnect = %+v, want join sequence 1 kept", got)
	}
	bob.waitState("alice reconnected", func(m msg) bool { return m.Reason == "reconnected" })

	// Gone for good this time: past the deadline bob is host.
	alice2.conn.CloseNow()
	gone := bob.waitState("alice reconnecting again", func(m msg) bool { return hasMember(m, "alice", "reconnecting") })
	disconnectedAt := e.clock.Now()
	var expired msg
	e.advanceUntil(grace, func(d time.Duration) bool {
		var ok bool
		expired, ok = bob.tryFor(d, func(m msg) bool { return m.Type == "lobby.state" && m.Reason == "lease_expired" })
		return ok
	})
	if expired.host() != "bob" || players(expired) != "bob" {
		t.Fatalf("after the grace: %s, want bob hosting alone", expired.view())
	}
	if expired.PreviousHostID == nil || *expired.PreviousHostID != "alice" {
		t.Errorf("previousHostId = %v, want alice", expired.PreviousHostID)
	}
	// The expiry is stamped with its deadline, not with when the sweeper ran.
	if want := disconnectedAt.Add(grace).UTC().Format(time.RFC3339Nano); expired.At != want {
		t.Errorf("lease_expired at %s, want the deadline %s", expired.At, want)
	}
	if gone.Version+1 != expired.Version {
		t.Errorf("lease_expired revision %d, want %d (right after the disconnect)", expired.Version, gone.Version+1)
	}

	want := []string{
		"v2 joined host=alice [alice bob]",
		"v3 disconnected host=alice [alice~reconnecting bob]",
		"v4 reconnected host=alice [alice bob]",
		"v5 disconnected host=alice [alice~reconnecting bob]",
		"v6 lease_expired host=bob [bob]",
	}
	if diff := cmp.Diff(want, bob.statesSince(joined.Version)); diff != "" {
		t.Errorf("states bob saw (-want +got):\n%s", diff)
	}
}

// A second tab is a second connection generation: it receives the current
// state at once, changes no revision, and closing one of two tabs leaves
// the player online.
func TestSecondTab(t *testing.T) {
	e := newEnv(t, nil)
	const room = "tabs"
	tab1 := e.join(room, "alice")
	first := tab1.next()
	if first.Type != "lobby.state" {
		t.Fatalf("first message on attach = %s, want lobby.state", first.raw)
	}
	w1 := tab1.waitType("welcome")

	tab2 := e.join(room, "alice")
	got := tab2.next()
	if got.Type != "lobby.state" || got.Version != first.Version || got.host() != "alice" {
		t.Fatalf("second tab's first message = %s, want the current state (revision %d)", got.raw, first.Version)
	}
	w2 := tab2.waitType("welcome")
	if w2.Connection <= w1.Connection {
		t.Errorf("second tab's connection generation %d, want above the first's %d", w2.Connection, w1.Connection)
	}
	if snap := e.snapshot(room); snap.Revision != first.Version {
		t.Errorf("revision after a second tab = %d, want %d (unchanged)", snap.Revision, first.Version)
	}

	bob := e.join(room, "bob")
	bob.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })
	tab1.conn.CloseNow()
	// Nothing visible happens; bob's round trip shows no state in between.
	for _, m := range bob.roundTrip() {
		if m.Type == "lobby.state" {
			t.Errorf("closing one of two tabs sent a state: %s", m.raw)
		}
	}
	tab2.conn.Close(1000, "bye")
	s := bob.waitState("alice reconnecting", func(m msg) bool { return hasMember(m, "alice", "reconnecting") })
	if s.Reason != "disconnected" || s.host() != "alice" {
		t.Errorf("after the last tab closed: %s, want disconnected with alice still host", s.view())
	}
}

// Host-only actions are judged on the current state, never on the client's
// word.
func TestHostTransfer(t *testing.T) {
	e := newEnv(t, nil)
	const room = "transfer"
	alice := e.join(room, "alice")
	bob := e.join(room, "bob")
	bob.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })
	alice.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })

	bob.send(map[string]string{"type": "host.transfer", "to": "bob"})
	if m := bob.waitType("error"); m.Code != "not_host" {
		t.Fatalf("transfer by a non-host: %s, want not_host", m.raw)
	}
	alice.send(map[string]string{"type": "host.transfer", "to": "carol"})
	if m := alice.waitType("error"); m.Code != "not_member" {
		t.Fatalf("transfer to a non-member: %s, want not_member", m.raw)
	}

	alice.send(map[string]string{"type": "host.transfer", "to": "bob"})
	for _, c := range []*wsClient{alice, bob} {
		m := c.waitState("bob hosting", func(m msg) bool { return m.host() == "bob" })
		if m.Reason != "host_transferred" || m.SubjectID == nil || *m.SubjectID != "bob" {
			t.Errorf("%s saw %s, want host_transferred to bob", c.user, m.raw)
		}
	}
	// alice's old role is gone: a second transfer is refused.
	alice.send(map[string]string{"type": "host.transfer", "targetUserId": "alice"})
	if m := alice.waitType("error"); m.Code != "not_host" {
		t.Fatalf("transfer by the former host: %s, want not_host", m.raw)
	}

	// A reconnecting member cannot be made host.
	alice.conn.CloseNow()
	bob.waitState("alice reconnecting", func(m msg) bool { return hasMember(m, "alice", "reconnecting") })
	bob.send(map[string]string{"type": "host.transfer", "to": "alice"})
	if m := bob.waitType("error"); m.Code != "not_eligible" {
		t.Fatalf("transfer to a reconnecting member: %s, want not_eligible", m.raw)
	}
}

// With MaxConnectionsPerPlayer, a new tab supersedes the oldest, whose
// socket the server closes with CloseSuperseded.
func TestSupersededTabIsClosed(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) { c.Policy.MaxConnectionsPerPlayer = 1 })
	tab1 := e.join("r", "alice")
	tab1.waitType("welcome")
	tab2 := e.join("r", "alice")
	tab2.waitType("welcome")
	if code := tab1.waitClosed(); code != 4002 {
		t.Fatalf("old tab closed with %d, want 4002 (superseded)", code)
	}
	if snap := e.snapshot("r"); len(snap.Members) != 1 || snap.Members[0].Status.String() != "online" {
		t.Fatalf("after superseding: %+v, want alice online", snap.Members)
	}
}

// Leave removes the player at once, with every socket.
func TestLeave(t *testing.T) {
	e := newEnv(t, nil)
	alice := e.join("r", "alice")
	alice2 := e.join("r", "alice")
	bob := e.join("r", "bob")
	bob.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })
	alice.send(map[string]string{"type": "leave"})
	for _, c := range []*wsClient{alice, alice2} {
		if code := c.waitClosed(); code != 4003 {
			t.Errorf("%s socket closed with %d, want 4003 (left)", c.user, code)
		}
	}
	m := bob.waitState("alice gone", func(m msg) bool { return players(m) == "bob" })
	if m.Reason != "left" || m.host() != "bob" {
		t.Errorf("after leaving: %s, want left with bob hosting", m.view())
	}
}

// The host term in lobby.state grows by one when the host changes and
// not otherwise.
func TestStateCarriesHostTerm(t *testing.T) {
	e := newEnv(t, nil)
	alice := e.join("r", "alice")
	first := alice.waitState("alice hosts", func(m msg) bool { return m.HostID != nil && *m.HostID == "alice" })
	bob := e.join("r", "bob")
	joined := bob.waitState("bob listed", func(m msg) bool { return hasMember(m, "bob", "online") })
	if first.Term != 1 || joined.Term != 1 {
		t.Fatalf("terms %d and %d while alice hosts, want 1 and 1", first.Term, joined.Term)
	}
	alice.send(map[string]any{"type": "leave"})
	after := bob.waitState("bob hosts", func(m msg) bool { return m.HostID != nil && *m.HostID == "bob" })
	if after.Term != 2 {
		t.Fatalf("term %d after the host left, want 2", after.Term)
	}
}
