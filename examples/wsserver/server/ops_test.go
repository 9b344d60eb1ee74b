package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/server"
	"github.com/lobbyhost/lobbyhost/lease"
	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// Two server processes on one shared store: players on different servers
// see each other's changes, each server following the room through its
// own watcher of the lobby's effects log.
func TestTwoServersShareAStore(t *testing.T) {
	st := memstore.New()
	clock := clockwork.NewFakeClockAt(epoch)
	cfg := func(st store.Store) server.Config {
		return server.Config{
			Store:         st,
			Authenticator: server.HeaderAuthenticator{},
			Clock:         clock,
			Policy:        testPolicy(),
			Logger:        slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}
	}
	a := startEnv(t, cfg(st), nil)
	b := startEnv(t, cfg(st), nil)
	const room = "shared"

	alice := a.join(room, "alice")
	alice.waitState("alice", func(m msg) bool { return m.host() == "alice" })
	bob := b.join(room, "bob")
	bob.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })
	alice.waitState("bob, via the other server", func(m msg) bool { return players(m) == "alice,bob" })

	carol := b.join(room, "carol")
	carol.waitState("three", func(m msg) bool { return players(m) == "alice,bob,carol" })
	alice.waitState("carol, via the other server", func(m msg) bool { return players(m) == "alice,bob,carol" })

	alice.conn.CloseNow()
	for _, c := range []*wsClient{bob, carol} {
		c.waitState("alice reconnecting", func(m msg) bool { return hasMember(m, "alice", "reconnecting") && m.host() == "alice" })
	}
	// Back on the other server, inside the grace: still host.
	alice2 := b.join(room, "alice")
	m := alice2.waitState("alice online", func(m msg) bool { return hasMember(m, "alice", "online") })
	if m.host() != "alice" {
		t.Errorf("alice back on another server: host %q, want alice", m.host())
	}
}

// Shutdown closes every socket with 1001 and reports each close, so the
// members are reconnecting (and may come back elsewhere within the grace).
func TestShutdown(t *testing.T) {
	e := newEnv(t, nil)
	alice := e.join("r", "alice")
	bob := e.join("r", "bob")
	bob.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })
	resp, _ := e.get("/healthz", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("healthz while running: %d", resp.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, c := range []*wsClient{alice, bob} {
		if code := c.waitClosed(); code != 1001 {
			t.Errorf("%s closed with %d, want 1001", c.user, code)
		}
	}
	snap := e.snapshot("r")
	for _, m := range snap.Members {
		if m.Status.String() != "reconnecting" {
			t.Errorf("after shutdown %s is %s, want reconnecting", m.Player, m.Status)
		}
	}
	if snap.Host != "alice" {
		t.Errorf("host after shutdown %q, want alice (kept through the grace)", snap.Host)
	}
	resp, _ = e.get("/healthz", nil)
	if resp.StatusCode != 503 {
		t.Errorf("healthz after shutdown: %d, want 503", resp.StatusCode)
	}
	if _, status, err := e.dialRaw("/ws?ticket=x"); err == nil || status != 503 {
		t.Errorf("socket after shutdown: status %d (%v), want 503", status, err)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, nil)
	alice := e.join("r", "alice")
	bob := e.join("r", "bob")
	bob.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })
	alice.conn.CloseNow()
	bob.waitState("alice reconnecting", func(m msg) bool { return hasMember(m, "alice", "reconnecting") })
	e.dialRaw("/ws?ticket=nope")
	e.advanceUntil(e.cfg.Policy.Grace, func(d time.Duration) bool {
		_, ok := bob.tryFor(d, func(m msg) bool { return m.Type == "lobby.state" && m.host() == "bob" })
		return ok
	})

	e.waitMetrics(
		"lobbyhost_reconnect_deadlines_started_total 1",
		"lobbyhost_lease_expirations_total 1",
		"lobbyhost_reconnects_within_grace_total 0",
		"lobbyhost_generations_timed_out_total 0",
		"lobbyhost_stale_events_total 0",
		`lobbyhost_host_changes_total{reason="lease_expired"} 1`,
		"lobbyhost_hostless_seconds_total 0",
		`lobbyhost_commands_total{operation="join",outcome="applied"} 2`,
		`lobbyhost_commands_total{operation="disconnect",outcome="applied"} 1`,
		`lobbyhost_command_duration_seconds_count{operation="join"} 2`,
		"lobbyhost_lobbies 1",
		"lobbyhost_members 1",
		"lobbyhost_members_online 1",
		"lobbyhost_members_reconnecting 0",
		// alice never came back: an expiry, no return, so no advice yet.
		"lobbyhost_grace_advisor_expiries_total 1",
		"lobbyhost_grace_advisor_returns_total 0",
		"lobbyhost_grace_advice_seconds 0",
		"wsserver_tickets_issued_total 2",
		`wsserver_upgrades_refused_total{reason="ticket_unknown"} 1`,
		"wsserver_sockets 1",
	)
}

// The grace advisor's proposal is on /metrics: fed by a member that came
// back 3 s after its socket closed.
func TestMetricsGraceAdvice(t *testing.T) {
	e := newEnv(t, nil)
	e.join("r", "alice").conn.CloseNow()
	bob := e.join("r", "bob")
	bob.waitState("alice reconnecting", func(m msg) bool { return hasMember(m, "alice", "reconnecting") })
	e.clock.Advance(3 * time.Second)
	e.join("r", "alice")
	bob.waitState("alice back", func(m msg) bool { return hasMember(m, "alice", "online") })

	var ref lease.Advisor
	ref.ObserveReturn(3 * time.Second)
	want := ref.Suggest(0.95).Grace
	e.waitMetrics(
		"lobbyhost_reconnects_within_grace_total 1",
		"lobbyhost_grace_advisor_returns_total 1",
		"lobbyhost_grace_advisor_expiries_total 0",
		"lobbyhost_grace_advice_seconds "+strconv.FormatFloat(want.Seconds(), 'g', -1, 64),
	)
	if got := e.srv.GraceAdvice(); got.Grace != want || got.Returns != 1 {
		t.Errorf("GraceAdvice() = %+v, want %v from 1 return", got, want)
	}
	// The Service's own measurement, per client class (Go's client is a
	// desktop by its User-Agent).
	e.waitMetrics(
		`lobbyhost_class_returns_total{class="desktop"} 1`,
		`lobbyhost_class_grace_advice_seconds{class="desktop"} `+strconv.FormatFloat(want.Seconds(), 'g', -1, 64),
	)
	if got := e.srv.GraceAdviceByClass(); len(got) != 1 || got[0].Class != "desktop" || got[0].Grace.Grace != want {
		t.Errorf("GraceAdviceByClass() = %+v, want desktop with %v", got, want)
	}
}

// waitMetrics fetches /metrics until it has every line of wants (an
// observation is recorded after the command's outcome, which a client may
// see first), and reports the missing ones after waitLimit.
func (e *env) waitMetrics(wants ...string) {
	e.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		resp, body := e.get("/metrics", nil)
		if resp.StatusCode != 200 {
			e.t.Fatalf("/metrics: %d", resp.StatusCode)
		}
		var missing []string
		for _, want := range wants {
			if !strings.Contains(string(body), want+"\n") {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, m := range missing {
				e.t.Errorf("/metrics lacks %q", m)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Routine logs carry pseudonyms, never player IDs, tickets, chat text or
// addresses.
func TestLogsArePseudonymous(t *testing.T) {
	var buf syncBuffer
	e := newEnv(t, func(c *serverConfig) {
		c.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		c.PseudonymKey = []byte("0123456789abcdef0123456789abcdef")
	})
	const alice, bob = "alice-real-name", "bob-real-name"
	tk := e.ticket("logs", alice)
	a := e.joinWith(alice, "/ws?ticket="+url.QueryEscape(tk))
	b := e.join("logs", bob)
	b.waitState("both", func(m msg) bool { return len(m.PlayerIDs) == 2 })
	a.send(map[string]string{"type": "chat.send", "text": "SECRET-CHAT-TEXT"})
	b.waitType("chat.message")
	e.dialRaw("/ws?ticket=" + url.QueryEscape(tk)) // reuse, refused
	a.conn.CloseNow()
	b.waitState("alice reconnecting", func(m msg) bool { return hasMember(m, alice, "reconnecting") })
	// Shutdown returns once every socket handler is done, detach logs
	// included.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	pseudoBob := e.srv.Service().Pseudonym(bob)

	logs := buf.String()
	for _, secret := range []string{alice, bob, tk, "SECRET-CHAT-TEXT", "127.0.0.1"} {
		if strings.Contains(logs, secret) {
			t.Errorf("log contains %q:\n%s", secret, logs)
		}
	}
	for _, want := range []string{e.srv.Service().Pseudonym(alice), pseudoBob, `"reason":"ticket_used"`, `"msg":"lobby transition"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	// Every line is JSON (a structured log).
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %s", line)
		}
	}
}

func TestPageAndHTTPAPI(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		path, wantType, wantBody string
	}{
		{"/", "text/html; charset=utf-8", "x-authenticated-user"},
		{"/static/app.js", "text/javascript; charset=utf-8", "from './lobbyhost-client.js'"},
		{"/static/lobbyhost-client.js", "text/javascript; charset=utf-8", "LobbyClient"},
		{"/static/style.css", "text/css; charset=utf-8", ".reconnecting"},
	}
	for _, tt := range tests {
		resp, body := e.get(tt.path, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tt.wantType {
			t.Errorf("GET %s: %d %q, want 200 %q", tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), tt.wantType)
		}
		if !strings.Contains(string(body), tt.wantBody) {
			t.Errorf("GET %s: body lacks %q", tt.path, tt.wantBody)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tt.path, csp)
		}
	}

	alice := e.join("api", "alice")
	alice.waitType("typing.state")
	resp, body := e.get("/rooms/api", map[string]string{"X-Authenticated-User": "bob"})
	var state msg
	if resp.StatusCode != 200 || json.Unmarshal(body, &state) != nil || state.Type != "lobby.state" ||
		state.host() != "alice" || state.Reason != "snapshot" || state.Version != 1 {
		t.Errorf("GET /rooms/api: %d %s, want a snapshot state at revision 1 hosted by alice", resp.StatusCode, body)
	}
	if resp, _ := e.get("/rooms/api", nil); resp.StatusCode != 401 {
		t.Errorf("GET /rooms/api without a user: %d, want 401", resp.StatusCode)
	}
	if resp, _ := e.get("/nope", nil); resp.StatusCode != 404 {
		t.Errorf("GET /nope: %d, want 404", resp.StatusCode)
	}
}

func TestConfigValidation(t *testing.T) {
	auth := server.HeaderAuthenticator{}
	tests := []struct {
		name string
		cfg  server.Config
	}{
		{"no authenticator", server.Config{}},
		{"tiny queue", server.Config{Authenticator: auth, SendQueue: 2}},
		{"tiny frames", server.Config{Authenticator: auth, MaxMessageBytes: 10}},
		{"chat above frame", server.Config{Authenticator: auth, MaxChatBytes: 1 << 20}},
		{"short pseudonym key", server.Config{Authenticator: auth, PseudonymKey: []byte("short")}},
		{"negative duration", server.Config{Authenticator: auth, WriteTimeout: -time.Second}},
	}
	for _, tt := range tests {
		if _, err := server.New(tt.cfg); err == nil {
			t.Errorf("%s: New succeeded, want an error", tt.name)
		}
	}
	if _, err := server.New(server.Config{Authenticator: auth}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// deleteSignal is a memstore that reports each Delete.
type deleteSignal struct {
	*memstore.Store
	deleted chan string
}

func (d deleteSignal) Delete(ctx context.Context, del store.Deletion) error {
	err := d.Store.Delete(ctx, del)
	if err == nil {
		d.deleted <- del.ID
	}
	return err
}

// A lobby whose last member is gone is reclaimed; created again, it
// continues above every revision it had.
func TestEmptyLobbyIsReclaimed(t *testing.T) {
	st := deleteSignal{memstore.New(), make(chan string, 8)}
	closed := make(chan struct{}, 8)
	e := newEnv(t, func(c *serverConfig) {
		c.Store = st
		c.Observer = observerFunc(func(o lobby.Observation) {
			if o.Command.Op == rules.OpDisconnect && o.Committed {
				closed <- struct{}{}
			}
		})
	})
	alice := e.join("ephemeral", "alice")
	alice.waitType("typing.state")
	alice.conn.CloseNow()
	select {
	case <-closed:
	case <-time.After(waitLimit):
		t.Fatal("the close was never committed")
	}
	e.advanceUntil(e.cfg.Policy.Grace, func(d time.Duration) bool {
		select {
		case id := <-st.deleted:
			if id != "ephemeral" {
				t.Fatalf("reclaimed %q, want ephemeral", id)
			}
			return true
		case <-time.After(d):
			return false
		}
	})
	rec, err := st.Load(context.Background(), "ephemeral")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load after the reclaim: %v, want ErrNotFound", err)
	}
	again := e.join("ephemeral", "alice")
	m := again.waitState("alice back", func(m msg) bool { return m.host() == "alice" })
	if m.Version <= 3 {
		t.Errorf("revision of the lobby created again = %d, want above 3 (joined, disconnected, expired); floor %d", m.Version, rec.Version)
	}
}

// A lobby at its member cap refuses a new player: an error, close 4009,
// and nothing changes for the others.
func TestLobbyFull(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) { c.Policy.MaxMembers = 1 })
	alice := e.join("small", "alice")
	alice.waitType("typing.state")
	tk := e.ticket("small", "bob")
	c, status, err := e.dialRaw("/ws?ticket=" + tk)
	if err != nil {
		t.Fatalf("dial: %d %v", status, err)
	}
	bob := newWSClient(t, "bob", c)
	if m := bob.next(); m.Type != "error" || m.Code != "lobby_full" {
		t.Errorf("bob's first message: %s, want error lobby_full", m.raw)
	}
	if code := bob.waitClosed(); code != 4009 {
		t.Errorf("bob's socket closed with %d, want 4009", code)
	}
	if got := alice.roundTrip(); len(got) != 0 {
		t.Errorf("alice got %v, want nothing", got)
	}
	if snap := e.snapshot("small"); snap.Revision != 1 || len(snap.Members) != 1 {
		t.Errorf("lobby after the refusal: revision %d members %v, want unchanged", snap.Revision, snap.Members)
	}
}
