package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestTicketEndpoint(t *testing.T) {
	e := newEnv(t, nil)
	long := strings.Repeat("r", 129)
	tests := []struct {
		name, room, user string
		wantStatus       int
		wantCode         string
	}{
		{name: "no user header", room: "r", user: "", wantStatus: 401, wantCode: "unauthenticated"},
		{name: "blank user header", room: "r", user: "   ", wantStatus: 401, wantCode: "unauthenticated"},
		{name: "room ID too long", room: long, user: "alice", wantStatus: 400, wantCode: "bad_room"},
		{name: "room ID not UTF-8", room: "\xff", user: "alice", wantStatus: 400, wantCode: "bad_room"},
		{name: "user ID too long", room: "r", user: strings.Repeat("u", 129), wantStatus: 400, wantCode: "bad_user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.requestTicket(tt.room, tt.user)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d (body %s)", resp.StatusCode, tt.wantStatus, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			var got struct{ Error string }
			if err := json.Unmarshal(body, &got); err != nil || got.Error != tt.wantCode {
				t.Errorf("body %s, want error code %q", body, tt.wantCode)
			}
		})
	}

	t.Run("issued", func(t *testing.T) {
		resp, body := e.requestTicket("room 1/ä", "alice")
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("status %d, Content-Type %q; want 201 application/json", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var got struct {
			Ticket, RoomID, UserID string
			ExpiresInMs            int64
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Ticket) < 40 || got.RoomID != "room 1/ä" || got.UserID != "alice" || got.ExpiresInMs != e.ticketTTL().Milliseconds() {
			t.Errorf("ticket response %s: want a long ticket for alice in %q, expiring in the TTL", body, "room 1/ä")
		}
	})

	t.Run("wrong method", func(t *testing.T) {
		resp, _ := e.get("/rooms/r/socket-ticket", map[string]string{"X-Authenticated-User": "alice"})
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET on the ticket endpoint: %d, want 405", resp.StatusCode)
		}
	})
}

// Every refused upgrade leaves the lobbies untouched: nothing is attached,
// no member joins, no revision moves.
func TestTicketRefusals(t *testing.T) {
	e := newEnv(t, nil)
	untouched := func(t *testing.T, rooms ...string) {
		t.Helper()
		for _, r := range rooms {
			if snap := e.snapshot(r); snap.Revision != 0 || len(snap.Members) != 0 {
				t.Errorf("lobby %s after a refused upgrade: revision %d, members %v; want untouched", r, snap.Revision, snap.Members)
			}
		}
	}
	refused := func(t *testing.T, path string, wantStatus int) {
		t.Helper()
		c, status, err := e.dialRaw(path)
		if err == nil {
			c.CloseNow()
			t.Fatalf("dial %s succeeded, want refusal %d", path, wantStatus)
		}
		if status != wantStatus {
			t.Fatalf("dial %s: status %d, want %d (%v)", path, status, wantStatus, err)
		}
	}

	t.Run("no ticket", func(t *testing.T) {
		refused(t, "/ws", 401)
		refused(t, "/rooms/a/socket", 401)
		refused(t, "/rooms/a/socket?ticket=", 401)
		untouched(t, "a")
	})
	t.Run("unknown ticket", func(t *testing.T) {
		refused(t, "/ws?ticket=bm90LWEtdGlja2V0", 401)
		untouched(t, "a")
	})
	t.Run("reused ticket", func(t *testing.T) {
		tk := e.ticket("reuse", "alice")
		c := e.joinWith("alice", "/ws?ticket="+url.QueryEscape(tk))
		c.waitType("welcome")
		rev := e.snapshot("reuse").Revision
		c.conn.Close(1000, "")
		refused(t, "/ws?ticket="+url.QueryEscape(tk), 401)
		// The server commits the close when its reader sees the socket
		// end, which may come after the client's Close returned.
		snap := e.snapshot("reuse")
		for deadline := time.Now().Add(waitLimit); snap.Revision == rev && time.Now().Before(deadline); snap = e.snapshot("reuse") {
			time.Sleep(time.Millisecond)
		}
		if snap.Revision != rev+1 || snap.Members[0].Status.String() != "reconnecting" {
			t.Errorf("after the reuse: revision %d (%v), want only the close (revision %d, reconnecting)", snap.Revision, snap.Members, rev+1)
		}
	})
	t.Run("expired ticket", func(t *testing.T) {
		tk := e.ticket("a", "alice")
		e.clock.Advance(e.ticketTTL())
		refused(t, "/rooms/a/socket?ticket="+url.QueryEscape(tk), 401)
		untouched(t, "a")
	})
	t.Run("another room in the path", func(t *testing.T) {
		tk := e.ticket("a", "alice")
		refused(t, "/rooms/b/socket?ticket="+url.QueryEscape(tk), 403)
		untouched(t, "a", "b")
		// The refused ticket is spent.
		refused(t, "/rooms/a/socket?ticket="+url.QueryEscape(tk), 401)
		untouched(t, "a")
	})
	t.Run("another room in the query", func(t *testing.T) {
		tk := e.ticket("a", "alice")
		refused(t, "/ws?roomId=b&ticket="+url.QueryEscape(tk), 403)
		untouched(t, "a", "b")
	})
	t.Run("plain GET keeps the ticket", func(t *testing.T) {
		tk := e.ticket("plain", "alice")
		resp, _ := e.get("/ws?ticket="+url.QueryEscape(tk), nil)
		if resp.StatusCode != http.StatusUpgradeRequired {
			t.Fatalf("plain GET with a ticket: %d, want 426", resp.StatusCode)
		}
		c := e.joinWith("alice", "/ws?ticket="+url.QueryEscape(tk))
		c.waitState("alice", func(m msg) bool { return m.host() == "alice" })
	})
	t.Run("foreign origin", func(t *testing.T) {
		tk := e.ticket("a", "alice")
		ctx, cancel := contextWithLimit()
		defer cancel()
		_, resp, err := dialWithOrigin(ctx, e.wsURL("/ws?ticket="+url.QueryEscape(tk)), "https://evil.example")
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("dial from a foreign origin: %v, %v; want 403", resp, err)
		}
		untouched(t, "a")
	})
}

// Existing clients open sockets on many paths; any path with a ticket works.
func TestSocketOnAnyPath(t *testing.T) {
	e := newEnv(t, nil)
	for _, p := range []string{"/ws", "/socket", "/rooms/any/socket", "/rooms/any/ws", "/some/other/path", "/"} {
		tk := e.ticket("any", "u"+p)
		c := e.joinWith("u"+p, p+"?ticket="+url.QueryEscape(tk))
		m := c.next()
		if m.Type != "lobby.state" || !hasMember(m, "u"+p, "online") {
			t.Errorf("socket on %s: first message %s, want a lobby.state listing the user", p, m.raw)
		}
	}
}
