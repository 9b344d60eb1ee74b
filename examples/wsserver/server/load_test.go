package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/server"
)

// smallBuffers gives every accepted connection a small kernel send buffer,
// so that a client that stops reading backs up into the server's queue
// after kilobytes instead of megabytes.
type smallBuffers struct{ net.Listener }

// loadSockets is how many sockets the load test attaches (200 with
// -short). Under -race each costs three goroutines, well below the race
// detector's limit of 8128.
const loadSockets = 2000

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	return c, err
}

// loadClient is a lightweight socket for the load test.
type loadClient struct {
	user  string
	room  int
	conn  *websocket.Conn
	full  chan struct{} // closed at the first state listing the whole room
	chats atomic.Int64  // chat.message received
	chat  chan struct{} // poked at every chat.message
	// Closed when a state shows the slow client online, then reconnecting.
	slowIn, slowGone chan struct{}
	done             chan struct{}
	err              atomic.Value
}

func (c *loadClient) read(roomSize int) {
	defer close(c.done)
	var fullOnce, inOnce, goneOnce sync.Once
	for {
		_, data, err := c.conn.Read(context.Background())
		if err != nil {
			if websocket.CloseStatus(err) == -1 && !strings.Contains(err.Error(), "closed") {
				c.err.Store(err)
			}
			return
		}
		var m struct {
			Type    string
			Members []member
		}
		if err := json.Unmarshal(data, &m); err != nil {
			c.err.Store(err)
			return
		}
		switch m.Type {
		case "chat.message":
			c.chats.Add(1)
			select {
			case c.chat <- struct{}{}:
			default:
			}
		case "lobby.state":
			if len(m.Members) >= roomSize {
				fullOnce.Do(func() { close(c.full) })
			}
			for _, p := range m.Members {
				if p.UserID == "slow" && p.Status == "online" {
					inOnce.Do(func() { close(c.slowIn) })
				}
				if p.UserID == "slow" && p.Status == "reconnecting" {
					goneOnce.Do(func() { close(c.slowGone) })
				}
			}
		}
	}
}

// waitChats waits until c has received want chat messages, and fails if
// it gets more or the deadline passes first.
func (c *loadClient) waitChats(t *testing.T, want int64, deadline <-chan time.Time) {
	t.Helper()
	for c.chats.Load() < want {
		select {
		case <-c.chat:
		case <-c.done:
			t.Fatalf("%s: socket closed after %d of %d chat messages", c.user, c.chats.Load(), want)
		case <-deadline:
			t.Fatalf("%s: %d of %d chat messages before the deadline", c.user, c.chats.Load(), want)
		}
	}
	if got := c.chats.Load(); got != want {
		t.Fatalf("%s received %d chat messages, want %d", c.user, got, want)
	}
}

func waitClosedChan(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(2 * waitLimit):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Thousands of sockets in hundreds of rooms, and one client in a busy room
// that never reads: the server closes the slow one (its bounded queue
// overflows) and everybody else still gets every message.
func TestManySocketsAndASlowClient(t *testing.T) {
	n := loadSockets
	if testing.Short() {
		n = 200
	}
	const roomSize = 10
	const chats, chatBytes = 304, 1500

	clock := clockwork.NewFakeClockAt(epoch)
	e := startEnv(t, server.Config{
		Authenticator: server.HeaderAuthenticator{},
		Clock:         clock,
		Policy:        testPolicy(),
		SendQueue:     16,
		MessageRate:   1e6,
		MessageBurst:  1e6,
		FrameRate:     1e6,
		FrameBurst:    1e6,
		Logger:        slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError})),
	}, func(ts *httptest.Server) { ts.Listener = smallBuffers{ts.Listener} })

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	ticket := func(room, user string) (string, error) {
		req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/rooms/"+room+"/socket-ticket", nil)
		req.Header.Set("X-Authenticated-User", user)
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var tr struct{ Ticket string }
		if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || resp.StatusCode != 201 {
			return "", fmt.Errorf("ticket: status %d: %v", resp.StatusCode, err)
		}
		return tr.Ticket, nil
	}
	dial := func(room, user string, opts *websocket.DialOptions) (*websocket.Conn, error) {
		tk, err := ticket(room, user)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
		defer cancel()
		c, _, err := websocket.Dial(ctx, e.wsURL("/rooms/"+room+"/socket?ticket="+url.QueryEscape(tk)), opts)
		return c, err
	}

	start := time.Now()
	clients := make([]*loadClient, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				lc := &loadClient{user: fmt.Sprintf("p%d", i), room: i / roomSize,
					full: make(chan struct{}), chat: make(chan struct{}, 1), slowIn: make(chan struct{}), slowGone: make(chan struct{}), done: make(chan struct{})}
				c, err := dial(fmt.Sprintf("load-%d", lc.room), lc.user, nil)
				if err != nil {
					errs <- fmt.Errorf("%s: %w", lc.user, err)
					continue
				}
				lc.conn = c
				clients[i] = lc
				go lc.read(roomSize)
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("attaching %d sockets: %v", n, err)
	}
	t.Cleanup(func() {
		for _, c := range clients {
			c.conn.CloseNow()
			<-c.done
			if err := c.err.Load(); err != nil {
				t.Errorf("%s: %v", c.user, err)
			}
		}
	})
	for _, c := range clients {
		waitClosedChan(t, c.full, c.user+"'s full room")
	}
	t.Logf("%d sockets in %d rooms attached and complete after %v", n, n/roomSize, time.Since(start))

	// The slow client: a tiny receive buffer, and it never reads.
	slowDialer := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4 << 10)
		}
		return c, err
	}}}
	slow, err := dial("load-0", "slow", &websocket.DialOptions{HTTPClient: slowDialer})
	if err != nil {
		t.Fatalf("slow client: %v", err)
	}
	defer slow.CloseNow()
	room0 := clients[:roomSize]
	for _, c := range room0 {
		waitClosedChan(t, c.slowIn, c.user+" seeing the slow client join")
	}

	// The chat is busy but paced: batches of 8 (half the queue), each
	// delivered to the fast members before the next. The slow client's
	// queue fills up all the same, since it never drains.
	text := strings.Repeat("x", chatBytes)
	deadline := time.After(2 * waitLimit)
	for sent := 0; sent < chats; {
		for range 8 {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			err := room0[0].conn.Write(ctx, websocket.MessageText, []byte(`{"type":"chat.send","text":"`+text+`"}`))
			cancel()
			if err != nil {
				t.Fatalf("sending chat: %v", err)
			}
			sent++
		}
		for _, c := range room0 {
			c.waitChats(t, int64(sent), deadline)
		}
	}
	for _, c := range room0 {
		waitClosedChan(t, c.slowGone, c.user+" seeing the slow client dropped")
	}
	resp, err := hc.Get(e.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "wsserver_slow_consumers_closed_total 1\n") {
		t.Errorf("metrics do not count the one slow consumer:\n%s", grepLines(string(body), "wsserver_"))
	}

	// Every room still works: one message per room reaches all its members.
	for i := 0; i < n; i += roomSize {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		err := clients[i].conn.Write(ctx, websocket.MessageText, []byte(`{"type":"chat.send","text":"hello room"}`))
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", clients[i].user, err)
		}
	}
	for _, c := range clients {
		want := int64(1)
		if c.room == 0 {
			want += chats
		}
		c.waitChats(t, want, deadline)
	}
	t.Logf("done after %v", time.Since(start))
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
