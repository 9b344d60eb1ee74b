package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/server"
	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// A client that has completed its upgrade is in the lobby: in each of many
// rooms, a second player dials only after the first one's upgrade
// returned, and the first one is the host every time.
func TestJoinOrderFollowsUpgrades(t *testing.T) {
	rooms := 500
	if testing.Short() {
		rooms = 100
	}
	rng := rand.New(rand.NewPCG(testSeed(t), 0))
	e := newEnv(t, nil)
	type pair struct {
		room, first, second string
		tFirst, tSecond     string
	}
	pairs := make([]pair, rooms)
	for i := range pairs {
		p := pair{room: fmt.Sprintf("order-%d", i), first: fmt.Sprintf("a%d", i), second: fmt.Sprintf("b%d", i)}
		p.tFirst, p.tSecond = e.ticket(p.room, p.first), e.ticket(p.room, p.second)
		pairs[i] = p
	}
	// Rooms in a random order, four at a time, so that handlers of
	// different rooms compete as under ordinary load.
	rng.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	work := make(chan pair)
	var mu sync.Mutex
	var problems []string
	report := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				a, _, err := websocket.Dial(ctx, e.wsURL("/rooms/"+p.room+"/socket?ticket="+url.QueryEscape(p.tFirst)), nil)
				if err != nil {
					cancel()
					report("%s: first dial: %v", p.room, err)
					continue
				}
				// The first upgrade is complete: only now does the second
				// player knock.
				b, _, err := websocket.Dial(ctx, e.wsURL("/rooms/"+p.room+"/socket?ticket="+url.QueryEscape(p.tSecond)), nil)
				if err != nil {
					a.CloseNow()
					cancel()
					report("%s: second dial: %v", p.room, err)
					continue
				}
				// The first player's view once both are in.
				for {
					_, data, err := a.Read(ctx)
					if err != nil {
						report("%s: reading: %v", p.room, err)
						break
					}
					var m msg
					if json.Unmarshal(data, &m) != nil || m.Type != "lobby.state" || len(m.Members) < 2 {
						continue
					}
					if m.host() != p.first || m.Members[0].UserID != p.first {
						report("%s: %s upgraded first, but the lobby says %s", p.room, p.first, m.view())
					}
					break
				}
				a.CloseNow()
				b.CloseNow()
				cancel()
			}
		}()
	}
	for _, p := range pairs {
		work <- p
	}
	close(work)
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Errorf("%d of %d rooms out of upgrade order", len(problems), rooms)
	}
}

// A client that never answers pings is told why it is closed: 4004 in a
// close frame, not a bare TCP reset.
func TestPingTimeoutSendsCloseCode(t *testing.T) {
	const ttl = 30 * time.Second
	mutate, _ := heartbeats(ttl, func(c *serverConfig) { c.PingTimeout = 100 * time.Millisecond })
	e := newEnv(t, mutate)
	tk := e.ticket("r", "mute")
	ctx, cancel := contextWithLimit()
	defer cancel()
	conn, _, err := websocket.Dial(ctx, e.wsURL("/ws?ticket="+tk), &websocket.DialOptions{
		// Reads everything, answers no ping.
		OnPingReceived: func(context.Context, []byte) bool { return false },
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	mute := newWSClient(t, "mute", conn)
	mute.waitType("typing.state")
	e.clock.Advance(ttl / 3)
	if code := mute.waitClosed(); code != server.ClosePingTimeout {
		t.Fatalf("unanswered ping: the client saw close status %d, want %d", code, server.ClosePingTimeout)
	}
}

// A client that stops reading is dropped as a slow consumer, and when it
// reads again it finds 4008 in a close frame after what was queued.
func TestSlowConsumerSendsCloseCode(t *testing.T) {
	e := startEnv(t, server.Config{
		Authenticator: server.HeaderAuthenticator{},
		Clock:         newEnvClock(),
		Policy:        testPolicy(),
		SendQueue:     8,
		MessageBurst:  1000,
		FrameBurst:    1000,
		CloseTimeout:  waitLimit,
		WriteTimeout:  waitLimit,
	}, func(ts *httptest.Server) { ts.Listener = smallBuffers{ts.Listener} })
	alice := e.join("r", "alice")
	alice.waitType("typing.state")

	// slow's socket has a small receive buffer and nobody reads it yet.
	conn := e.dialStalled("r", "slow", alice)

	e.chatUntilDropped(alice, conn, strings.Repeat("x", 1500), 400)
}

// A page served from a name that resolves to this server (DNS rebinding:
// Host and Origin both the attacker's name) gets neither a ticket nor a
// socket; the listen address itself, as a browser spells it, gets both.
func TestOriginAllowList(t *testing.T) {
	e := newEnv(t, nil)
	u, _ := url.Parse(e.ts.URL)
	_, port, _ := net.SplitHostPort(u.Host)
	rebound := "rebound.example:" + port

	post := func(host, origin string) int {
		req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/rooms/r/socket-ticket", nil)
		req.Host = host
		req.Header.Set("Origin", origin)
		req.Header.Set("X-Authenticated-User", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(rebound, "http://"+rebound); got != http.StatusForbidden {
		t.Errorf("ticket for a rebound host and origin: status %d, want 403", got)
	}
	if got := post(u.Host, "http://"+u.Host); got != http.StatusCreated {
		t.Errorf("ticket for the listen address: status %d, want 201", got)
	}

	dial := func(host, origin string) (int, error) {
		tk := e.ticket("r", "alice")
		ctx, cancel := contextWithLimit()
		defer cancel()
		c, resp, err := websocket.Dial(ctx, e.wsURL("/ws?ticket="+url.QueryEscape(tk)), &websocket.DialOptions{
			Host: host, HTTPHeader: http.Header{"Origin": {origin}}})
		if err == nil {
			c.CloseNow()
		}
		if resp == nil {
			return 0, err
		}
		return resp.StatusCode, err
	}
	if status, err := dial(rebound, "http://"+rebound); err == nil || status != http.StatusForbidden {
		t.Errorf("socket for a rebound host and origin: status %d (%v), want 403", status, err)
	}
	if status, err := dial(u.Host, "https://"+u.Host); err != nil {
		t.Errorf("socket from https://%s (allowed by default): status %d: %v", u.Host, status, err)
	}
	if status, err := dial(u.Host, "http://elsewhere.example"); err == nil || status != http.StatusForbidden {
		t.Errorf("socket from another origin: status %d (%v), want 403", status, err)
	}
}

// A Config policy that sets only some fields keeps them: the others get
// their defaults, the set ones are not replaced by the default policy.
func TestPolicyFieldsAreKept(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) {
		c.Policy = lobby.Policy{MaxMembers: 2, MaxConnectionsPerPlayer: 1}
	})
	a := e.join("r", "a")
	if w := a.waitType("welcome"); w.GraceMs != lobby.DefaultPolicy().Grace.Milliseconds() {
		t.Errorf("grace of a policy that set none: %d ms, want the default %v", w.GraceMs, lobby.DefaultPolicy().Grace)
	}
	e.join("r", "b")
	a.waitState("both", func(m msg) bool { return players(m) == "a,b" })

	tk := e.ticket("r", "c")
	conn, status, err := e.dialRaw("/ws?ticket=" + tk)
	if err != nil {
		t.Fatalf("dial: %d %v", status, err)
	}
	c := newWSClient(t, "c", conn)
	if m := c.next(); m.Type != "error" || m.Code != "lobby_full" {
		t.Errorf("third player with MaxMembers 2: first message %s, want error lobby_full", m.raw)
	}
	if code := c.waitClosed(); code != server.CloseLobbyFull {
		t.Errorf("third player: closed with %d, want %d", code, server.CloseLobbyFull)
	}
	// MaxConnectionsPerPlayer 1: a's second tab supersedes the first.
	e.join("r", "a")
	if code := a.waitClosed(); code != server.CloseSuperseded {
		t.Errorf("a's first tab after a second one: closed with %d, want %d", code, server.CloseSuperseded)
	}
}

// Without a configured cap, a room holds DefaultMaxMembers players.
func TestDefaultMemberCap(t *testing.T) {
	e := newEnv(t, nil)
	const room = "crowd"
	for i := range server.DefaultMaxMembers {
		tk := e.ticket(room, fmt.Sprintf("p%02d", i))
		c, status, err := e.dialRaw("/ws?ticket=" + tk)
		if err != nil {
			t.Fatalf("player %d: dial: %d %v", i, status, err)
		}
		defer c.CloseNow()
	}
	tk := e.ticket(room, "one-too-many")
	conn, status, err := e.dialRaw("/ws?ticket=" + tk)
	if err != nil {
		t.Fatalf("dial: %d %v", status, err)
	}
	late := newWSClient(t, "one-too-many", conn)
	late.waitFor("lobby_full", func(m msg) bool { return m.Type == "error" && m.Code == "lobby_full" })
	if code := late.waitClosed(); code != server.CloseLobbyFull {
		t.Errorf("player %d: closed with %d, want %d", server.DefaultMaxMembers+1, code, server.CloseLobbyFull)
	}
	if n := len(e.snapshot(room).Members); n != server.DefaultMaxMembers {
		t.Errorf("members: %d, want %d", n, server.DefaultMaxMembers)
	}
}

// One user cannot hoard tickets: past its cap it is refused (429) while
// others are still served.
func TestTicketsPerUserCapped(t *testing.T) {
	e := newEnv(t, nil)
	refused := -1
	var first string
	for i := range 200 {
		resp, body := e.requestTicket("r", "hoarder")
		if resp.StatusCode == http.StatusCreated {
			if first == "" {
				var tr struct{ Ticket string }
				_ = json.Unmarshal(body, &tr)
				first = tr.Ticket
			}
			continue
		}
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "too_many_tickets") {
			t.Fatalf("ticket %d: status %d %s, want 201 or 429 too_many_tickets", i, resp.StatusCode, body)
		}
		refused = i
		break
	}
	if refused != server.DefaultTicketsPerUser {
		t.Fatalf("first refused ticket: #%d, want #%d (the per-user cap)", refused, server.DefaultTicketsPerUser)
	}
	if resp, body := e.requestTicket("r", "bob"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("another user's ticket: %d %s, want 201", resp.StatusCode, body)
	}
	// Using a ticket gives its place back.
	e.joinWith("hoarder", "/ws?ticket="+url.QueryEscape(first))
	if resp, body := e.requestTicket("r", "hoarder"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("ticket after redeeming one: %d %s, want 201", resp.StatusCode, body)
	}
}

// Refusing over-rate messages costs the server at most one notice: a
// burst far over the limit neither floods the sender with errors nor
// gets its socket dropped.
func TestRateLimitRefusalsDoNotAmplify(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) { c.FrameBurst = 1000 })
	alice := e.join("r", "alice")
	alice.waitType("typing.state")
	const burst = 170
	for range burst {
		alice.send(map[string]string{"type": "ping"})
	}
	// The burst's pongs, one notice, and nothing for the other 129.
	expectReplies(t, alice, 40, 1)
	e.waitMetric(`wsserver_client_messages_refused_total{code="rate_limited"}`, burst-40) // all read
	e.clock.Advance(time.Minute)                                                          // refills the bucket
	for _, m := range alice.drain() {
		t.Errorf("after the burst's replies: %s", m.raw)
	}
}

// Binary and oversized frames spend the socket's message budget like any
// other: after the budget is gone, a chat message is dropped.
func TestEveryMessageCountsAgainstTheBudget(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) { c.MessageBurst = 10; c.FrameBurst = 1000 })
	alice := e.join("r", "alice")
	alice.waitType("typing.state")
	for range 5 {
		alice.sendRaw(websocket.MessageBinary, []byte(`{"type":"ping"}`))
	}
	for range 5 {
		alice.sendRaw(websocket.MessageText, []byte(`{"type":"chat.send","text":"`+strings.Repeat("a", 20<<10)+`"}`))
	}
	alice.send(map[string]string{"type": "chat.send", "text": "over the budget"})
	var refusals []string
	for len(refusals) < 11 {
		m := alice.next()
		if m.Type == "chat.message" {
			t.Fatalf("the chat message after 10 binary and oversized frames with a budget of 10 was sent: %s", m.raw)
		}
		if m.Type != "error" {
			t.Fatalf("unexpected %s", m.raw)
		}
		refusals = append(refusals, m.Code)
	}
	want := "unsupported unsupported unsupported unsupported unsupported too_large too_large too_large too_large too_large rate_limited"
	if got := strings.Join(refusals, " "); got != want {
		t.Errorf("refusals:\n got %s\nwant %s", got, want)
	}
	e.clock.Advance(time.Minute)
	for _, m := range alice.roundTrip() {
		t.Errorf("after the refill, before the pong: %s", m.raw)
	}
}

// A ping storm is read at the socket's frame rate: once the burst is
// spent, the server reads no further frame until the clock allows it.
func TestPingFloodIsThrottled(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) { c.FrameBurst = 20; c.FrameRate = 10 })
	raw := e.dialRawSocket("/ws?ticket=" + url.QueryEscape(e.ticket("r", "storm")))
	frames := raw.frames()
	var flood []byte
	for i := range 100 {
		flood = append(flood, clientFrame(true, opPing, []byte(fmt.Sprint(i)))...)
	}
	raw.write(flood)
	e.waitMetric("wsserver_frames_throttled_total", 1)
	pongs := 0
	for pongs < 20 {
		f, ok := <-frames
		if !ok {
			t.Fatalf("connection ended after %d pongs", pongs)
		}
		if f.op == opPong {
			pongs++
		}
	}
	// 20 pongs for the burst; the rest only as the clock lets them through.
	for step := 0; pongs < 100; step++ {
		if step == 100 {
			t.Fatalf("%d of 100 pongs after advancing the clock %d times", pongs, step)
		}
		e.clock.Advance(10 * time.Second)
		timer := time.NewTimer(100 * time.Millisecond)
	drain:
		for pongs < 100 {
			select {
			case f, ok := <-frames:
				if !ok {
					t.Fatalf("connection ended after %d pongs", pongs)
				}
				if f.op == opPong {
					pongs++
				}
			case <-timer.C:
				break drain
			}
		}
		timer.Stop()
	}
}

// A message that never ends (a text frame followed by empty continuation
// frames forever) is throttled like any other frame stream.
func TestContinuationFloodIsThrottled(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) { c.FrameBurst = 20; c.FrameRate = 10 })
	raw := e.dialRawSocket("/ws?ticket=" + url.QueryEscape(e.ticket("r", "storm")))
	flood := clientFrame(false, opText, []byte(`{"type":`))
	for range 200 {
		flood = append(flood, clientFrame(false, opContinuation, nil)...)
	}
	raw.write(flood)
	e.waitMetric("wsserver_frames_throttled_total", 1)
}

// Two tabs of one user on two processes, with one tab allowed and
// heartbeat deadlines on: the tab the other process superseded is told so
// (4002), not asked to rejoin (4001), so the two pages do not take turns
// superseding each other; and the clock moving on (heartbeats, pings) does
// not change that.
func TestSupersededOnAnotherProcess(t *testing.T) {
	st := memstore.New()
	clock := newEnvClock()
	cfg := server.Config{
		Store:         st,
		Authenticator: server.HeaderAuthenticator{},
		Clock:         clock,
		Policy:        testPolicy(),
	}
	cfg.Policy.MaxConnectionsPerPlayer = 1
	cfg.Policy.HeartbeatTTL = 30 * time.Second
	a := startEnv(t, cfg, nil)
	b := startEnv(t, cfg, nil)
	first := a.join("r", "alice")
	first.waitType("typing.state")
	second := b.join("r", "alice")
	second.waitType("typing.state")
	a.advanceUntil(10*time.Second, func(d time.Duration) bool {
		select {
		case <-first.closed:
			return true
		case <-time.After(d):
			return false
		}
	})
	if code := first.waitClosed(); code != server.CloseSuperseded {
		t.Errorf("tab superseded on another process: closed with %d, want %d", code, server.CloseSuperseded)
	}
	if got := second.roundTrip(); len(got) > 0 {
		for _, m := range got {
			if m.Type == "lobby.state" && !hasMember(m, "alice", "online") {
				t.Errorf("the newer tab saw %s", m.view())
			}
		}
	}
}

// Expired tickets are forgotten on a timer, not only when somebody asks
// for a new one.
func TestExpiredTicketsAreCollected(t *testing.T) {
	clock := newEnvClock()
	tickets, err := server.NewMemoryTickets(clock, time.Minute, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *serverConfig) { c.Clock = clock; c.Tickets = tickets; c.TicketTTL = time.Minute })
	for i := range 5 {
		e.ticket("r", fmt.Sprintf("u%d", i))
	}
	if n := tickets.Len(); n != 5 {
		t.Fatalf("tickets remembered: %d, want 5", n)
	}
	// The janitor arms its ticker when its goroutine starts, which may be
	// after the first Advance on a busy machine; whole periods make sure a
	// tick comes whenever the ticker was armed.
	for range 10 {
		e.clock.Advance(time.Minute)
		deadline := time.Now().Add(time.Second)
		for tickets.Len() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if tickets.Len() == 0 {
			return
		}
	}
	t.Fatalf("%d expired tickets still remembered after ten ticket TTLs", tickets.Len())
}

// The HTTP server refuses to be held open: headers or a body trickled
// slower than its timeouts end the connection, and a body over the limit
// is refused outright.
func TestHTTPTimeoutsAndBodyLimit(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) {
		c.ReadHeaderTimeout = 200 * time.Millisecond
		c.ReadTimeout = 400 * time.Millisecond
	})
	u, _ := url.Parse(e.ts.URL)
	open := func(request string) net.Conn {
		conn, err := net.DialTimeout("tcp", u.Host, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := conn.Write([]byte(request)); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	// waitEOF reads until the server closes the connection; a server that
	// keeps it open fails the test after waitLimit.
	waitEOF := func(conn net.Conn, what string) string {
		_ = conn.SetReadDeadline(time.Now().Add(waitLimit))
		var got []byte
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("%s: the server kept the connection open for %v", what, waitLimit)
				}
				return string(got)
			}
		}
	}
	waitEOF(open("POST /rooms/r/socket-ticket HTTP/1.1\r\nHost: "+u.Host+"\r\nX-Authenticated-User: al"), "trickled headers")
	got := waitEOF(open("POST /rooms/r/socket-ticket HTTP/1.1\r\nHost: "+u.Host+"\r\nX-Authenticated-User: alice\r\n"+
		"Content-Length: 1000\r\n\r\n{"), "trickled body")
	if !strings.HasPrefix(got, "HTTP/1.1 201") {
		t.Errorf("ticket request with a trickled body: %q, want 201 before the close", got)
	}
	req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/rooms/r/socket-ticket", strings.NewReader(strings.Repeat("x", 5000)))
	req.Header.Set("X-Authenticated-User", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("ticket request with a 5000-byte body: status %d, want 413", resp.StatusCode)
	}
}

// Read receipts are bounded per message: past ReadersPerMessage, further
// readers are neither recorded nor announced.
func TestReadReceiptsBounded(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) { c.ReadersPerMessage = 2 })
	alice := e.join("r", "alice")
	readers := []*wsClient{e.join("r", "bob"), e.join("r", "carol"), e.join("r", "dave")}
	alice.send(map[string]string{"type": "chat.send", "text": "hello"})
	id := alice.waitType("chat.message").MessageID
	for _, r := range readers {
		r.waitFor("alice's message", func(m msg) bool { return m.Type == "chat.message" && m.MessageID == id })
		r.send(map[string]string{"type": "message.read", "messageId": id})
		r.roundTrip()
	}
	var got []string
	for _, m := range alice.roundTrip() {
		if m.Type == "message.read" {
			got = append(got, m.UserID)
		}
	}
	if strings.Join(got, ",") != "bob,carol" {
		t.Errorf("receipts announced: %v, want bob,carol (two readers kept per message)", got)
	}
	late := e.join("r", "erin")
	h := late.waitType("chat.history")
	if len(h.Messages) != 1 || strings.Join(h.Messages[0].ReadBy, ",") != "bob,carol" {
		t.Errorf("history for a new socket: %s, want one message read by bob,carol", h.raw)
	}
}

// lobby.state tells when each reconnecting member's grace runs out: from
// the event that started it, and, on a process that did not see that
// event, from the stored lobby.
func TestReconnectDeadlineInState(t *testing.T) {
	st := memstore.New()
	clock := newEnvClock()
	cfg := server.Config{Store: st, Authenticator: server.HeaderAuthenticator{}, Clock: clock, Policy: testPolicy()}
	a := startEnv(t, cfg, nil)
	alice := a.join("r", "alice")
	bob := a.join("r", "bob")
	bob.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })
	alice.conn.CloseNow()
	m := bob.waitState("alice reconnecting", func(m msg) bool { return hasMember(m, "alice", "reconnecting") })
	at, err := time.Parse(time.RFC3339Nano, m.At)
	if err != nil {
		t.Fatalf("at %q: %v", m.At, err)
	}
	want := at.Add(cfg.Policy.Grace).UTC().Format(time.RFC3339Nano)
	reconnectBy := func(m msg, user string) string {
		for _, p := range m.Members {
			if p.UserID == user {
				return p.ReconnectBy
			}
		}
		return "(not a member)"
	}
	if got := reconnectBy(m, "alice"); got != want {
		t.Errorf("alice's reconnectBy in the disconnected event: %q, want %q (the event's time plus the grace)", got, want)
	}
	if got := reconnectBy(m, "bob"); got != "" {
		t.Errorf("online bob's reconnectBy: %q, want none", got)
	}
	if m.ServerTime != m.At {
		t.Errorf("serverTime %q, want the clock's time %q", m.ServerTime, m.At)
	}
	// Another process that never saw alice leave.
	b := startEnv(t, cfg, nil)
	carol := b.join("r", "carol")
	m = carol.waitState("three", func(m msg) bool { return players(m) == "alice,bob,carol" })
	if got := reconnectBy(m, "alice"); got != want {
		t.Errorf("alice's reconnectBy on another process: %q, want %q", got, want)
	}
}
