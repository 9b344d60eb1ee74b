package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/server"
	"github.com/lobbyhost/lobbyhost/lobby"
)

// waitLimit bounds how long a test waits for something it expects. It is a
// failure timeout, never a synchronisation delay.
const waitLimit = 15 * time.Second

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// env is one server behind an httptest listener, on a fake clock.
type env struct {
	t     *testing.T
	srv   *server.Server
	ts    *httptest.Server
	clock *clockwork.FakeClock
	cfg   server.Config
}

// testPolicy has an 8 s grace and heartbeat deadlines far away, so that
// advancing the clock through a grace never times a socket out.
func testPolicy() lobby.Policy {
	p := lobby.DefaultPolicy()
	p.Grace = 8 * time.Second
	p.HeartbeatTTL = time.Hour
	return p
}

func newEnv(t *testing.T, mutate func(*server.Config)) *env {
	t.Helper()
	clock := clockwork.NewFakeClockAt(epoch)
	cfg := server.Config{
		Authenticator: server.HeaderAuthenticator{},
		Clock:         clock,
		Policy:        testPolicy(),
		Logger:        slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	return startEnv(t, cfg, nil)
}

// startEnv starts a server for cfg; wrap, if set, wraps the test listener.
func startEnv(t *testing.T, cfg server.Config, wrap func(*httptest.Server)) *env {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	if wrap != nil {
		wrap(ts)
	}
	if cfg.AllowedOrigins == nil {
		// What the command allows by default: its listen address.
		addr := ts.Listener.Addr().String()
		cfg.AllowedOrigins = []string{"http://" + addr, "https://" + addr}
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	serve(t, srv, ts)
	fc, _ := cfg.Clock.(*clockwork.FakeClock)
	return &env{t: t, srv: srv, ts: ts, clock: fc, cfg: cfg}
}

// serve starts ts with srv's handler and srv.Run, and at the end of the
// test shuts srv down, checks that Run returned cleanly and closes ts.
func serve(tb testing.TB, srv *server.Server, ts *httptest.Server) {
	tb.Helper()
	ts.Config = srv.HTTPServer()
	ts.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	tb.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), waitLimit)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
		ts.Close()
	})
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (e *env) wsURL(path string) string {
	return "ws" + strings.TrimPrefix(e.ts.URL, "http") + path
}

// requestTicket posts to the ticket endpoint as user ("" sends no header).
func (e *env) requestTicket(room, user string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.ts.URL+"/rooms/"+url.PathEscape(room)+"/socket-ticket", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("X-Authenticated-User", user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST ticket: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// ticket returns a fresh ticket for user in room.
func (e *env) ticket(room, user string) string {
	e.t.Helper()
	resp, body := e.requestTicket(room, user)
	if resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("POST ticket for %s in %s: status %d, body %s", user, room, resp.StatusCode, body)
	}
	var tr struct{ Ticket string }
	if err := json.Unmarshal(body, &tr); err != nil || tr.Ticket == "" {
		e.t.Fatalf("ticket response %s: %v", body, err)
	}
	return tr.Ticket
}

// dialRaw opens a socket at path (which includes the query) and returns
// the HTTP status of a refusal.
func (e *env) dialRaw(path string) (*websocket.Conn, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, e.wsURL(path), nil)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	return c, status, err
}

// join gets a ticket and attaches user to room on /rooms/{room}/socket.
func (e *env) join(room, user string) *wsClient {
	e.t.Helper()
	tk := e.ticket(room, user)
	return e.joinWith(user, "/rooms/"+url.PathEscape(room)+"/socket?ticket="+url.QueryEscape(tk))
}

func (e *env) joinWith(user, path string) *wsClient {
	e.t.Helper()
	c, status, err := e.dialRaw(path)
	if err != nil {
		e.t.Fatalf("dial %s as %s: status %d: %v", path, user, status, err)
	}
	wc := newWSClient(e.t, user, c)
	select {
	case <-wc.attached:
	case <-wc.closed:
		e.t.Fatalf("%s: socket closed before the welcome: %v", user, wc.closeErr)
	case <-time.After(waitLimit):
		e.t.Fatalf("%s: no welcome within %v", user, waitLimit)
	}
	return wc
}

// snapshot reads a lobby through the Service.
func (e *env) snapshot(room string) lobby.Snapshot {
	e.t.Helper()
	snap, err := e.srv.Service().Snapshot(context.Background(), room)
	if err != nil {
		e.t.Fatalf("Snapshot(%s): %v", room, err)
	}
	return snap
}

// member is one entry of lobby.state's members.
type member struct {
	UserID      string `json:"userId"`
	JoinSeq     uint64 `json:"joinSeq"`
	Status      string `json:"status"`
	Host        bool   `json:"host"`
	ReconnectBy string `json:"reconnectBy"`
}

// msg is any server message, decoded loosely.
type msg struct {
	Type           string   `json:"type"`
	Version        uint64   `json:"version"`
	HostID         *string  `json:"hostId"`
	PlayerIDs      []string `json:"playerIds"`
	RoomID         string   `json:"roomId"`
	Term           uint64   `json:"term"`
	Members        []member `json:"members"`
	Reason         string   `json:"reason"`
	SubjectID      *string  `json:"subjectId"`
	PreviousHostID *string  `json:"previousHostId"`
	At             string   `json:"at"`
	ServerTime     string   `json:"serverTime"`

	Code        string   `json:"code"`
	RequestType string   `json:"requestType"`
	MessageID   string   `json:"messageId"`
	UserID      string   `json:"userId"`
	Text        string   `json:"text"`
	Typing      bool     `json:"typing"`
	UserIDs     []string `json:"userIds"`
	Connection  uint64   `json:"connection"`
	GraceMs     int64    `json:"graceMs"`
	Messages    []struct {
		MessageID string   `json:"messageId"`
		UserID    string   `json:"userId"`
		Text      string   `json:"text"`
		ReadBy    []string `json:"readBy"`
	} `json:"messages"`

	raw string
}

func (m msg) host() string {
	if m.HostID == nil {
		return ""
	}
	return *m.HostID
}

// view summarises a lobby.state for comparisons: "rev reason host [players]".
func (m msg) view() string {
	var ps []string
	for _, p := range m.Members {
		s := p.UserID
		if p.Status != "online" {
			s += "~" + p.Status
		}
		ps = append(ps, s)
	}
	host := m.host()
	if host == "" {
		host = "-"
	}
	return fmt.Sprintf("v%d %s host=%s [%s]", m.Version, m.Reason, host, strings.Join(ps, " "))
}

// wsClient is a test socket whose reader goroutine checks that lobby
// states arrive in strictly increasing revision order.
type wsClient struct {
	t    *testing.T
	user string
	conn *websocket.Conn
	in   chan msg

	closed   chan struct{}
	closeErr error
	attached chan struct{} // closed at the welcome message

	mu         sync.Mutex
	lastRev    uint64
	hasRev     bool
	violations []string
	states     []msg // every lobby.state received, in order
}

func newWSClient(t *testing.T, user string, c *websocket.Conn) *wsClient {
	wc := &wsClient{t: t, user: user, conn: c, in: make(chan msg, 4096), closed: make(chan struct{}), attached: make(chan struct{})}
	go wc.readLoop()
	t.Cleanup(func() {
		c.CloseNow()
		<-wc.closed
		wc.mu.Lock()
		defer wc.mu.Unlock()
		for _, v := range wc.violations {
			t.Errorf("%s: %s", user, v)
		}
	})
	return wc
}

func (c *wsClient) readLoop() {
	defer close(c.closed)
	for {
		_, data, err := c.conn.Read(context.Background())
		if err != nil {
			c.closeErr = err
			return
		}
		var m msg
		if err := json.Unmarshal(data, &m); err != nil {
			c.mu.Lock()
			c.violations = append(c.violations, fmt.Sprintf("undecodable server message %q: %v", data, err))
			c.mu.Unlock()
			continue
		}
		m.raw = string(data)
		if m.Type == "welcome" {
			close(c.attached)
		}
		if m.Type == "lobby.state" {
			c.mu.Lock()
			if c.hasRev && m.Version <= c.lastRev {
				c.violations = append(c.violations, fmt.Sprintf("revision %d after %d", m.Version, c.lastRev))
			}
			c.lastRev, c.hasRev = m.Version, true
			c.states = append(c.states, m)
			c.mu.Unlock()
		}
		c.in <- m
	}
}

func (c *wsClient) send(v any) {
	c.t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(websocket.MessageText, data)
}

func (c *wsClient) sendRaw(typ websocket.MessageType, data []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.conn.Write(ctx, typ, data); err != nil {
		c.t.Fatalf("%s: write: %v", c.user, err)
	}
}

// buffered returns a message the reader already received, if any. The
// reader queues every message before it marks the socket closed, so after
// closed a select may pick closed over a message still queued: callers
// look here before concluding that nothing came.
func (c *wsClient) buffered() (msg, bool) {
	select {
	case m := <-c.in:
		return m, true
	default:
		return msg{}, false
	}
}

// next returns the next message, failing the test after waitLimit.
func (c *wsClient) next() msg {
	c.t.Helper()
	select {
	case m := <-c.in:
		return m
	case <-c.closed:
		if m, ok := c.buffered(); ok {
			return m
		}
		c.t.Fatalf("%s: socket closed while waiting for a message: %v", c.user, c.closeErr)
	case <-time.After(waitLimit):
		c.t.Fatalf("%s: no message within %v", c.user, waitLimit)
	}
	return msg{}
}

// waitFor reads messages until one satisfies pred.
func (c *wsClient) waitFor(desc string, pred func(msg) bool) msg {
	c.t.Helper()
	deadline := time.After(waitLimit)
	var seen []string
	for {
		select {
		case m := <-c.in:
			if pred(m) {
				return m
			}
			seen = append(seen, m.raw)
		case <-c.closed:
			for {
				m, ok := c.buffered()
				if !ok {
					break
				}
				if pred(m) {
					return m
				}
				seen = append(seen, m.raw)
			}
			c.t.Fatalf("%s: socket closed (%v) while waiting for %s; saw:\n%s", c.user, c.closeErr, desc, strings.Join(seen, "\n"))
		case <-deadline:
			c.t.Fatalf("%s: no %s within %v; saw:\n%s", c.user, desc, waitLimit, strings.Join(seen, "\n"))
		}
	}
}

// tryFor is waitFor that gives up after d and reports whether it found one.
func (c *wsClient) tryFor(d time.Duration, pred func(msg) bool) (msg, bool) {
	c.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case m := <-c.in:
			if pred(m) {
				return m, true
			}
		case <-c.closed:
			for {
				m, ok := c.buffered()
				if !ok {
					return msg{}, false
				}
				if pred(m) {
					return m, true
				}
			}
		case <-timer.C:
			return msg{}, false
		}
	}
}

func (c *wsClient) waitState(desc string, pred func(msg) bool) msg {
	c.t.Helper()
	return c.waitFor("lobby.state with "+desc, func(m msg) bool { return m.Type == "lobby.state" && pred(m) })
}

func (c *wsClient) waitType(typ string) msg {
	c.t.Helper()
	return c.waitFor(typ, func(m msg) bool { return m.Type == typ })
}

// waitClosed waits for the server to close the socket and returns the
// close status (-1 if the socket failed without one).
func (c *wsClient) waitClosed() websocket.StatusCode {
	c.t.Helper()
	select {
	case <-c.closed:
		return websocket.CloseStatus(c.closeErr)
	case <-time.After(waitLimit):
		c.t.Fatalf("%s: socket still open after %v", c.user, waitLimit)
	}
	return 0
}

// roundTrip sends an app ping and returns every message received before
// the pong: everything the server had queued for this socket by then.
func (c *wsClient) roundTrip() []msg {
	c.t.Helper()
	c.send(map[string]string{"type": "ping"})
	var before []msg
	for {
		m := c.next()
		if m.Type == "pong" {
			return before
		}
		before = append(before, m)
	}
}

// drain sends a chat message as a marker and returns every message
// received before it came back: everything the server had queued for this
// socket by then, pongs included. The chat message must pass the rate
// limits.
func (c *wsClient) drain() []msg {
	c.t.Helper()
	marker := fmt.Sprintf("end of drain %d", time.Now().UnixNano())
	c.send(map[string]string{"type": "chat.send", "text": marker})
	var before []msg
	for {
		m := c.next()
		if m.Type == "chat.message" && m.Text == marker {
			return before
		}
		before = append(before, m)
	}
}

// statesSince returns the views of the lobby states received with a
// revision of at least from.
func (c *wsClient) statesSince(from uint64) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.states {
		if s.Version >= from {
			out = append(out, s.view())
		}
	}
	return out
}

func hasMember(m msg, user, status string) bool {
	for _, p := range m.Members {
		if p.UserID == user && p.Status == status {
			return true
		}
	}
	return false
}

func players(m msg) string { return strings.Join(m.PlayerIDs, ",") }

// advanceUntil moves the fake clock by first, then in small steps, until
// ok reports true. Expiries apply as of their deadlines whenever the
// sweeper gets to them, so the extra steps change no outcome; they only
// cover a sweeper that re-armed its timer just after an Advance.
func (e *env) advanceUntil(first time.Duration, ok func(wait time.Duration) bool) {
	e.t.Helper()
	e.clock.Advance(first)
	for i := 0; i < 100; i++ {
		if ok(100 * time.Millisecond) {
			return
		}
		e.clock.Advance(10 * time.Millisecond)
	}
	e.t.Fatalf("condition not reached after advancing the clock %v and 100 more steps", first)
}

// getJSON fetches path and decodes a JSON body.
func (e *env) get(path string, header map[string]string) (*http.Response, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.ts.URL+path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// syncBuffer is a bytes.Buffer safe for concurrent writers (log handlers).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type serverConfig = server.Config

func (e *env) ticketTTL() time.Duration {
	if e.cfg.TicketTTL != 0 {
		return e.cfg.TicketTTL
	}
	return server.DefaultTicketTTL
}

func contextWithLimit() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), waitLimit)
}

func dialWithOrigin(ctx context.Context, u, origin string) (*websocket.Conn, *http.Response, error) {
	return websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
}

func newEnvClock() *clockwork.FakeClock { return clockwork.NewFakeClockAt(epoch) }

// testSeed returns the seed for a randomised test: LOBBYHOST_SEED if set,
// else a fresh one. It logs the seed so that a failure can be replayed.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("LOBBYHOST_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LOBBYHOST_SEED=%q: %v", s, err)
		}
		t.Logf("seed %d (from LOBBYHOST_SEED)", seed)
		return seed
	}
	seed := rand.Uint64()
	t.Logf("seed %d (replay with LOBBYHOST_SEED=%d)", seed, seed)
	return seed
}
