package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/server"
)

// chatUntilDropped has sender chat text until the server drops the stalled
// socket conn as a slow consumer, at most limit times, and checks that the
// socket finds the slow consumer's close code after what was queued.
func (e *env) chatUntilDropped(sender *wsClient, conn *websocket.Conn, text string, limit int) {
	e.t.Helper()
	for i := 0; e.metricValue("wsserver_slow_consumers_closed_total") < 1; i++ {
		if i == limit {
			e.t.Fatalf("%d chat messages of %d bytes and the stalled socket was not dropped", limit, len(text))
		}
		sender.send(map[string]string{"type": "chat.send", "text": text})
		sender.waitType("chat.message")
	}
	stalled := newWSClient(e.t, "stalled", conn)
	if code := stalled.waitClosed(); code != server.CloseSlowConsumer {
		e.t.Fatalf("stalled socket: close status %d, want %d", code, server.CloseSlowConsumer)
	}
}

// dialStalled opens a socket for user in room whose client reads nothing
// (a small receive buffer, nobody reading it) and returns it once the
// others see it joined.
func (e *env) dialStalled(room, user string, watcher *wsClient) *websocket.Conn {
	e.t.Helper()
	tk := e.ticket(room, user)
	ctx, cancel := contextWithLimit()
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4 << 10)
		}
		return c, err
	}}}
	conn, _, err := websocket.Dial(ctx, e.wsURL("/ws?ticket="+tk), &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	e.t.Cleanup(func() { conn.CloseNow() })
	watcher.waitState(user+" joined", func(m msg) bool { return hasMember(m, user, "online") })
	return conn
}

// A socket that stops reading is closed as too slow (4008) once what waits
// for it passes its byte budget, even when its queue has room for many
// more messages: a few large messages count as much as many small ones.
func TestSendQueueBoundedInBytes(t *testing.T) {
	e := startEnv(t, server.Config{
		Authenticator:     server.HeaderAuthenticator{},
		Clock:             newEnvClock(),
		Policy:            testPolicy(),
		SendQueue:         1 << 20, // never the limit here
		MaxChatBytes:      1000,
		ReadersPerMessage: 1,
		ChatHistoryBytes:  16 << 10,
		SendQueueBytes:    80 << 10,
		MessageBurst:      1000,
		FrameBurst:        1000,
		CloseTimeout:      waitLimit,
		WriteTimeout:      waitLimit,
	}, func(ts *httptest.Server) { ts.Listener = smallBuffers{ts.Listener} })
	alice := e.join("r", "alice")
	alice.waitType("typing.state")
	conn := e.dialStalled("r", "slow", alice)

	// 1000 '<' are 6000 bytes as sent: 80 KiB is 14 such messages, plus
	// what the kernel buffers hold.
	e.chatUntilDropped(alice, conn, strings.Repeat("<", 1000), 300)
	// alice, who reads, is still served.
	alice.roundTrip()
}

// The history a joining socket gets is bounded by its encoded size, and
// holds the newest messages.
func TestChatHistoryBoundedInBytes(t *testing.T) {
	const limit = 16 << 10
	e := newEnv(t, func(c *serverConfig) {
		c.MaxChatBytes = 1000
		c.ReadersPerMessage = 1
		c.ChatHistoryBytes = limit
		c.MessageBurst = 1000
	})
	alice := e.join("r", "alice")
	text := strings.Repeat("<", 1000)
	var last string
	for range 10 {
		alice.send(map[string]string{"type": "chat.send", "text": text})
		last = alice.waitType("chat.message").MessageID
	}
	bob := e.join("r", "bob")
	hist := bob.waitType("chat.history")
	if len(hist.raw) > limit {
		t.Errorf("chat.history of %d bytes, over the %d allowed", len(hist.raw), limit)
	}
	if n := len(hist.Messages); n == 0 || n == 10 || hist.Messages[n-1].MessageID != last {
		t.Errorf("chat.history of %d messages, want fewer than 10 ending with the newest", n)
	}
}

// While a ping waits for its pong, the socket's writer goes on: a client
// that answers pings only after it has read what was sent before (as any
// client reading in order does, behind a slow link or a busy room) gets
// the room's messages during the round trip, and its pong is still taken.
func TestWritesGoOnWhileAPingIsOutstanding(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) {
		c.PingInterval = time.Second
		c.PingTimeout = 4 * waitLimit // never reached here: the wait is the test's
	})
	alice := e.join("r", "alice")
	alice.waitType("typing.state")
	raw := e.dialRawSocket("/ws?ticket=" + url.QueryEscape(e.ticket("r", "busy")))
	frames := raw.frames()
	// waitFrame reads frames until one satisfies ok.
	waitFrame := func(what string, ok func(serverFrame) bool) serverFrame {
		t.Helper()
		deadline := time.After(waitLimit)
		for {
			select {
			case f, open := <-frames:
				if !open {
					t.Fatalf("connection ended while waiting for %s", what)
				}
				if ok(f) {
					return f
				}
			case <-deadline:
				t.Fatalf("no %s within %v", what, waitLimit)
			}
		}
	}
	text := func(s string) func(serverFrame) bool {
		return func(f serverFrame) bool { return f.op == opText && strings.Contains(string(f.payload), s) }
	}
	waitFrame("typing.state", text(`"typing.state"`))
	alice.waitState("busy joined", func(m msg) bool { return hasMember(m, "busy", "online") })

	e.clock.Advance(time.Second)
	ping := waitFrame("ping", func(f serverFrame) bool { return f.op == opPing })
	for i := range 3 {
		alice.send(map[string]string{"type": "chat.send", "text": fmt.Sprint("during the ping ", i)})
		waitFrame("chat message during the ping", text(fmt.Sprint("during the ping ", i)))
	}
	raw.write(clientFrame(true, opPong, ping.payload))
	alice.send(map[string]string{"type": "chat.send", "text": "after the pong"})
	waitFrame("chat message after the pong", text("after the pong"))
	if got := e.metricValue("wsserver_slow_consumers_closed_total"); got != 0 {
		t.Errorf("%v sockets closed as slow", got)
	}
}

// A sender that keeps over the rate gets one rate_limited notice for the
// whole burst, not one per message it gets through; once it has let its
// budget refill completely, a new burst gets a new notice.
func TestOneRateLimitedNoticePerBurst(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) { c.MessageBurst = 3; c.MessageRate = 1; c.FrameBurst = 1000 })
	alice := e.join("r", "alice")
	alice.waitType("typing.state")
	const refused = `wsserver_client_messages_refused_total{code="rate_limited"}`
	for range 5 {
		alice.send(map[string]string{"type": "ping"})
	}
	expectReplies(t, alice, 3, 1)
	e.waitMetric(refused, 2)

	// One token back: one ping through, the next one dropped, silently:
	// the burst goes on.
	e.clock.Advance(time.Second)
	alice.send(map[string]string{"type": "ping"})
	alice.send(map[string]string{"type": "ping"})
	if m := alice.next(); m.Type != "pong" {
		t.Fatalf("first ping after a token came back: %s, want a pong", m.raw)
	}
	e.waitMetric(refused, 3)
	e.clock.Advance(time.Second)
	for _, m := range alice.roundTrip() {
		t.Errorf("a second notice within one burst: %s", m.raw)
	}

	// The budget refills completely: the next burst is told again.
	e.clock.Advance(time.Minute)
	for range 4 {
		alice.send(map[string]string{"type": "ping"})
	}
	expectReplies(t, alice, 3, 1)
}

// A client frame without a masking key ends the socket with a close frame
// saying why: 1002, protocol error.
func TestUnmaskedFrameClosesWithProtocolError(t *testing.T) {
	e := newEnv(t, nil)
	raw := e.dialRawSocket("/ws?ticket=" + url.QueryEscape(e.ticket("r", "bare")))
	frames := raw.frames()
	payload := []byte(`{"type":"ping"}`)
	raw.write(append([]byte{0x80 | opText, byte(len(payload))}, payload...))
	deadline := time.After(waitLimit)
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("connection ended without a close frame")
			}
			if f.op != opClose {
				continue
			}
			if len(f.payload) < 2 {
				t.Fatalf("close frame without a code: %q", f.payload)
			}
			if code := int(f.payload[0])<<8 | int(f.payload[1]); code != int(websocket.StatusProtocolError) {
				t.Fatalf("unmasked frame: close code %d, want %d", code, websocket.StatusProtocolError)
			}
			return
		case <-deadline:
			t.Fatalf("no close frame within %v", waitLimit)
		}
	}
}

// Request headers are capped at MaxHeaderBytes, request line and the blank
// line after the headers included: exactly that much is served, one byte
// more is refused with 431.
func TestHeaderCapHolds(t *testing.T) {
	for _, limit := range []int{16 << 10, 8 << 10} {
		var mutate func(*serverConfig) // 16 KiB is the default
		if limit != 16<<10 {
			mutate = func(c *serverConfig) { c.MaxHeaderBytes = limit }
		}
		e := newEnv(t, mutate)
		u, _ := url.Parse(e.ts.URL)
		status := func(size int) int {
			t.Helper()
			head := "GET /healthz HTTP/1.1\r\nHost: " + u.Host + "\r\nX-Pad: "
			tail := "\r\nConnection: close\r\n\r\n"
			req := head + strings.Repeat("p", size-len(head)-len(tail)) + tail
			conn, err := net.DialTimeout("tcp", u.Host, waitLimit)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(waitLimit))
			if _, err := conn.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("%d bytes of headers: %v", size, err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if got := status(limit); got != http.StatusOK {
			t.Errorf("cap %d: headers of exactly %d bytes: status %d, want 200", limit, limit, got)
		}
		if got := status(limit + 1); got != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("cap %d: headers of %d bytes: status %d, want 431", limit, limit+1, got)
		}
	}
}

// /metrics answers only requests for the server's own names: loopback ones
// and those configured; a DNS-rebound name is refused.
func TestMetricsOnlyForKnownHosts(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) { c.MetricsHosts = []string{"Metrics.Internal", "10.1.2.3"} })
	u, _ := url.Parse(e.ts.URL)
	_, port, _ := net.SplitHostPort(u.Host)
	for _, tt := range []struct {
		host string
		want int
	}{
		{u.Host, http.StatusOK},
		{"localhost:" + port, http.StatusOK},
		{"127.0.0.2", http.StatusOK},
		{"[::1]:" + port, http.StatusOK},
		{"metrics.internal:9090", http.StatusOK},
		{"10.1.2.3", http.StatusOK},
		{"evil.example:" + port, http.StatusForbidden},
		{"evil.example", http.StatusForbidden},
		{"10.1.2.4:" + port, http.StatusForbidden},
		{"localhost.evil.example", http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodGet, e.ts.URL+"/metrics", nil)
		req.Host = tt.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET /metrics with Host %s: status %d, want %d", tt.host, resp.StatusCode, tt.want)
		}
	}
	if _, err := server.New(server.Config{Authenticator: server.HeaderAuthenticator{}, MetricsHosts: []string{"http://x"}}); err == nil {
		t.Error("a MetricsHosts entry with a scheme was accepted")
	}
}

// Made-up users filling the ticket table do not lock everybody out: a
// user who asks for a ticket afterwards gets one and opens a socket with
// it; the flood's oldest tickets are forgotten instead.
func TestFullTicketTableRefusesNobody(t *testing.T) {
	const limit = 64
	e := newEnv(t, func(c *serverConfig) { c.MaxTickets = limit })
	var flood []string
	for i := range limit / server.DefaultTicketsPerUser {
		for range server.DefaultTicketsPerUser {
			flood = append(flood, e.ticket("r", fmt.Sprint("made-up-", i)))
		}
	}
	alice := e.join("r", "alice") // a ticket, then the socket
	alice.waitState("alice hosting", func(m msg) bool { return m.host() == "alice" })
	if _, status, err := e.dialRaw("/ws?ticket=" + url.QueryEscape(flood[0])); err == nil || status != http.StatusUnauthorized {
		t.Errorf("the flood's oldest ticket after the table overflowed: status %d (%v), want 401", status, err)
	}
	if conn, _, err := e.dialRaw("/ws?ticket=" + url.QueryEscape(flood[len(flood)-1])); err != nil {
		t.Errorf("the flood's newest ticket: %v", err)
	} else {
		conn.CloseNow()
	}
}

// When the ticket table is full, the tickets shed are those of the users
// holding many unused ones (a flood of made-up users), not the older
// ticket of a user who holds just the one.
func TestFullTicketTableShedsTheHeaviestIssuers(t *testing.T) {
	ctx := context.Background()
	clock := newEnvClock()
	m, err := server.NewMemoryTickets(clock, time.Minute, 64, 8)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := m.Issue(ctx, "r", "alice") // the oldest, and unused
	if err != nil {
		t.Fatal(err)
	}
	var flood []server.Ticket
	for i := range 16 {
		for range 8 {
			tk, err := m.Issue(ctx, "r", fmt.Sprint("made-up-", i))
			if err != nil {
				t.Fatalf("flood ticket %d: %v", len(flood), err)
			}
			flood = append(flood, tk)
		}
	}
	if n := m.Len(); n != 64 {
		t.Errorf("%d tickets remembered, want the limit, 64", n)
	}
	if _, err := m.Redeem(ctx, alice.Value); err != nil {
		t.Errorf("alice's ticket, older than the whole flood: %v", err)
	}
	if _, err := m.Redeem(ctx, flood[0].Value); !errors.Is(err, server.ErrTicketUnknown) {
		t.Errorf("the flood's oldest ticket: %v, want ErrTicketUnknown (shed)", err)
	}
	if _, err := m.Redeem(ctx, flood[len(flood)-1].Value); err != nil {
		t.Errorf("the flood's newest ticket: %v", err)
	}
}
