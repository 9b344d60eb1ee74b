package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

type testState struct {
	Type    string  `json:"type"`
	Version uint64  `json:"version"`
	HostID  *string `json:"hostId"`
	Reason  string  `json:"reason"`
	Members []struct {
		UserID  string `json:"userId"`
		JoinSeq uint64 `json:"joinSeq"`
		Status  string `json:"status"`
		Host    bool   `json:"host"`
	} `json:"members"`
}

// join gets a ticket and opens a socket; the returned channel yields every
// state the socket receives.
func join(t *testing.T, base, room, user string) (*websocket.Conn, <-chan testState) {
	t.Helper()
	conn := dial(t, base, room, user)
	ch := make(chan testState, 64)
	go func() {
		defer close(ch)
		for {
			_, data, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			var s testState
			if json.Unmarshal(data, &s) == nil && s.Type == "lobby.state" {
				ch <- s
			}
		}
	}()
	return conn, ch
}

// dial gets a ticket and opens a socket.
func dial(t *testing.T, base, room, user string) *websocket.Conn {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/rooms/"+room+"/socket-ticket", nil)
	req.Header.Set("x-authenticated-user", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct{ Ticket string }
	json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || tr.Ticket == "" {
		t.Fatalf("ticket: HTTP %d %q", resp.StatusCode, tr.Ticket)
	}
	conn, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(base, "http")+"/ws?ticket="+tr.Ticket, nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// A socket gets, after its first state, a welcome asking for heartbeats at
// 9/10 of the ping interval (a third of the TTL); an app ping is answered
// with a pong; with a TTL of 0 no heartbeats are asked for.
func TestWelcomeAndPong(t *testing.T) {
	for _, tc := range []struct {
		ttl    time.Duration
		wantMs int64
	}{{15 * time.Second, 4500}, {0, 0}} {
		ts := httptest.NewServer(newServer(time.Hour, tc.ttl).routes())
		conn := dial(t, ts.URL, "r", "a")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var types []string
		var welcome struct {
			Type        string
			HeartbeatMs int64
			GraceMs     int64
		}
		for len(types) < 2 {
			_, data, err := conn.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var m struct{ Type string }
			json.Unmarshal(data, &m)
			types = append(types, m.Type)
			if m.Type == "welcome" {
				json.Unmarshal(data, &welcome)
			}
		}
		if types[0] != "lobby.state" || types[1] != "welcome" || welcome.HeartbeatMs != tc.wantMs || welcome.GraceMs != 3600_000 {
			t.Errorf("TTL %v: messages %v, welcome %+v; want lobby.state then welcome with heartbeatMs %d, graceMs 3600000", tc.ttl, types, welcome, tc.wantMs)
		}
		if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"ping"}`)); err != nil {
			t.Fatal(err)
		}
		_, data, err := conn.Read(ctx)
		if err != nil || string(data) != `{"type":"pong"}` {
			t.Errorf("TTL %v: answer to a ping %q (%v), want a pong", tc.ttl, data, err)
		}
		cancel()
		conn.CloseNow()
		ts.Close()
	}
}

// await returns the first state from ch that ok accepts, failing after 10 s.
func await(t *testing.T, ch <-chan testState, what string, ok func(testState) bool) testState {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case s, open := <-ch:
			if !open {
				t.Fatalf("socket closed waiting for %s", what)
			}
			if ok(s) {
				return s
			}
		case <-timeout:
			t.Fatalf("no state with %s within 10s", what)
		}
	}
}

func host(s testState) string {
	if s.HostID == nil {
		return ""
	}
	return *s.HostID
}

// The first member hosts; when it drops, it stays host through the grace
// (reconnecting), then the online member with the lowest joinSeq takes over,
// and revisions only go up.
func TestFailoverToLowestJoinSeq(t *testing.T) {
	ts := httptest.NewServer(newServer(100*time.Millisecond, 0).routes())
	defer ts.Close()
	a, _ := join(t, ts.URL, "r1", "alice")
	_, bch := join(t, ts.URL, "r1", "bob")
	_, cch := join(t, ts.URL, "r1", "carol")
	s := await(t, cch, "3 members", func(s testState) bool { return len(s.Members) == 3 })
	if host(s) != "alice" || s.Members[0].JoinSeq >= s.Members[1].JoinSeq || !s.Members[0].Host {
		t.Fatalf("state after joins %+v, want alice hosting, joinSeq ascending", s)
	}
	a.Close(websocket.StatusNormalClosure, "bye")
	d := await(t, bch, "alice reconnecting", func(s testState) bool { return s.Reason == "disconnected" })
	if host(d) != "alice" || d.Members[0].Status != "reconnecting" {
		t.Errorf("after alice's close %+v, want alice still host and reconnecting", d)
	}
	f := await(t, bch, "a new host", func(s testState) bool { return host(s) != "alice" })
	if host(f) != "bob" || len(f.Members) != 2 || f.Version != d.Version+1 {
		t.Errorf("after the grace %+v, want bob hosting 2 members at version %d", f, d.Version+1)
	}
	if c := await(t, cch, "a new host", func(s testState) bool { return host(s) != "alice" }); c.Version != f.Version || host(c) != "bob" {
		t.Errorf("carol saw %+v, bob saw %+v", c, f)
	}
}

// A member that comes back within the grace keeps its place and the host
// role.
func TestReconnectWithinGrace(t *testing.T) {
	ts := httptest.NewServer(newServer(time.Hour, 0).routes())
	defer ts.Close()
	a, _ := join(t, ts.URL, "r1", "alice")
	_, bch := join(t, ts.URL, "r1", "bob")
	a.CloseNow()
	await(t, bch, "alice reconnecting", func(s testState) bool { return s.Reason == "disconnected" })
	join(t, ts.URL, "r1", "alice")
	s := await(t, bch, "alice back", func(s testState) bool { return s.Reason == "reconnected" })
	if host(s) != "alice" || s.Members[0].UserID != "alice" || s.Members[0].Status != "online" {
		t.Errorf("after reconnect %+v, want alice online, first and hosting", s)
	}
}

// A change committed right after a socket's upgrade completes, before the
// server goes on, reaches that socket with its reason: the socket belongs
// to the room from its join on.
func TestChangeRightAfterUpgrade(t *testing.T) {
	srv := newServer(time.Hour, 0)
	var a *websocket.Conn // alice's socket, set before bob joins
	srv.afterAccept = func(user string) {
		if user != "bob" {
			return
		}
		a.CloseNow()
		// Wait until alice's close is committed.
		deadline := time.Now().Add(10 * time.Second)
		for {
			srv.mu.Lock()
			rm := srv.rooms["r1"]
			srv.mu.Unlock()
			rm.mu.Lock()
			m := rm.members["alice"]
			gone := m != nil && m.sockets == 0
			rm.mu.Unlock()
			if gone {
				return
			}
			if time.Now().After(deadline) {
				t.Error("alice's close was never committed")
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	ts := httptest.NewServer(srv.routes())
	defer ts.Close()
	a, _ = join(t, ts.URL, "r1", "alice")
	_, bch := join(t, ts.URL, "r1", "bob")
	d := await(t, bch, "alice reconnecting", func(s testState) bool { return s.Reason == "disconnected" })
	if host(d) != "alice" || d.Members[0].Status != "reconnecting" {
		t.Errorf("after alice's close %+v, want alice hosting and reconnecting", d)
	}
}

// A ticket works once.
func TestTicketSingleUse(t *testing.T) {
	ts := httptest.NewServer(newServer(time.Second, 0).routes())
	defer ts.Close()
	srv := newServer(time.Second, 0)
	srv.tickets["x"] = ticket{room: "r", user: "u", expires: time.Now().Add(time.Minute)}
	if _, _, ok := srv.redeem("x"); !ok {
		t.Fatal("first redeem refused")
	}
	if _, _, ok := srv.redeem("x"); ok {
		t.Fatal("second redeem accepted")
	}
	resp, err := http.Get(ts.URL + "/ws?ticket=nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unknown ticket: HTTP %d, want 401", resp.StatusCode)
	}
}

// A socket that does not answer the server's pings is closed (4004) and
// its member turns reconnecting, while a socket that reads, and so answers
// them, stays online.
func TestUnansweredPingsCloseTheSocket(t *testing.T) {
	ts := httptest.NewServer(newServer(time.Hour, 3*time.Second).routes()) // a ping a second
	defer ts.Close()
	deaf := dial(t, ts.URL, "r", "a") // never read: the library answers pings only while reading
	defer deaf.CloseNow()
	b, states := join(t, ts.URL, "r", "b")
	defer b.CloseNow()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case s, open := <-states:
			if !open {
				t.Fatal("b's socket, which answers pings, was closed")
			}
			for _, m := range s.Members {
				if m.UserID == "a" && m.Status == "reconnecting" {
					if host(s) != "a" || s.Reason != "disconnected" {
						t.Errorf("state %+v; want a still host (within the grace), reason disconnected", s)
					}
					return
				}
			}
		case <-timeout:
			t.Fatal("a, which never answered a ping, still online after 60 s")
		}
	}
}
