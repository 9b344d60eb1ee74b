package server

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// brokenHijack is a ResponseWriter whose connection cannot be taken over:
// the upgrade fails after Accept decided to answer 101.
type brokenHijack struct{ *httptest.ResponseRecorder }

func (brokenHijack) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, errors.New("connection gone")
}

// A join committed for an upgrade that then fails is undone: the
// generation is reported closed, so it holds no place as online.
func TestFailedUpgradeUndoesTheJoin(t *testing.T) {
	s, err := New(Config{Authenticator: HeaderAuthenticator{}, Clock: clockwork.NewFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tk, err := s.cfg.Tickets.Issue(ctx, "r", "alice")
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/ws?ticket="+tk.Value, nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	s.Handler().ServeHTTP(brokenHijack{httptest.NewRecorder()}, r)

	snap, err := s.svc.Snapshot(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != 2 || len(snap.Members) != 1 || snap.Members[0].Status != lobby.StatusReconnecting {
		t.Fatalf("lobby after a failed upgrade: revision %d, members %+v; want revision 2 (joined, disconnected), alice reconnecting",
			snap.Revision, snap.Members)
	}
}
