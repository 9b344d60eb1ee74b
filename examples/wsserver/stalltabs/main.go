// Command stalltabs measures what sockets that never read cost a running
// wsserver: it fills a room's chat history with the largest messages the
// server takes (text that JSON escapes to six bytes a character, from a
// user with a 128-byte ID), then opens many sockets to that room that
// never read a byte, and prints the server's resident memory (current and
// peak, from /proc) and the time an innocent user's joins take meanwhile.
//
//	go run ./examples/wsserver -max-tabs 0 & # the server under test
//	go run ./examples/wsserver/stalltabs -pid $! -tabs 300
//
// It prints figures and judges nothing. Run the server with -max-tabs 0
// (every stalled socket belongs to one user) and a loopback -addr.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "stalltabs:", err)
		os.Exit(1)
	}
}

type options struct {
	addr     string
	pid      int
	tabs     int
	messages int
	text     int
	joins    int
	readers  int
	settle   time.Duration
}

func run() error {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8080", "the server's address")
	flag.IntVar(&o.pid, "pid", 0, "the server's process ID, for its memory (required)")
	flag.IntVar(&o.tabs, "tabs", 300, "sockets that never read")
	flag.IntVar(&o.messages, "messages", 100, "chat messages to fill the history with")
	flag.IntVar(&o.text, "text", 2000, "characters per chat message ('<', six bytes each once escaped)")
	flag.IntVar(&o.readers, "readers", 63, "users (128-byte IDs) who send a read receipt for every message")
	flag.IntVar(&o.joins, "joins", 20, "joins of an innocent user to time while the tabs are open")
	flag.DurationVar(&o.settle, "settle", 3*time.Second, "how long to wait after the last tab before reading the memory")
	flag.Parse()
	if o.pid == 0 {
		return errors.New("-pid is required")
	}
	base := "http://" + o.addr
	ctx := context.Background()
	filler := strings.Repeat("<", 128)
	room := "stalled"

	before, _ := memory(o.pid)
	fmt.Printf("server RSS before: %s\n", before)

	// Fill the history, at a rate the default message budget accepts.
	conn, err := dial(ctx, base, room, filler)
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	ids := make(chan string, o.messages)
	go collectIDs(conn, ids)
	text := strings.Repeat("<", o.text)
	for range o.messages {
		msg, _ := json.Marshal(map[string]string{"type": "chat.send", "text": text})
		if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
			return fmt.Errorf("chat: %w", err)
		}
		time.Sleep(60 * time.Millisecond) // under 20 a second
	}
	var messageIDs []string
	for range o.messages {
		select {
		case id := <-ids:
			messageIDs = append(messageIDs, id)
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%d of %d chat messages echoed", len(messageIDs), o.messages)
		}
	}
	// Then the receipts: readers with 128-byte IDs read every message,
	// and leave.
	// A few at a time: each receipt goes to every socket of the room.
	const together = 8
	failed := 0
	for first := 0; first < o.readers; first += together {
		n := min(together, o.readers-first)
		errc := make(chan error, n)
		for i := first; i < first+n; i++ {
			go func() {
				errc <- readAll(ctx, base, room, fmt.Sprintf("%s%04d", strings.Repeat("<", 124), i), messageIDs)
			}()
		}
		for range n {
			if err := <-errc; err != nil {
				fmt.Println("reader:", err)
				failed++
			}
		}
	}
	if failed > 0 {
		fmt.Printf("%d of %d readers failed\n", failed, o.readers)
	}
	time.Sleep(500 * time.Millisecond)
	hist, err := historySize(ctx, base, room)
	if err != nil {
		return err
	}
	fmt.Printf("chat.history a joiner gets: %d bytes\n", hist)

	start := time.Now()
	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	for i := range o.tabs {
		c, err := openStalled(base, room, filler)
		if err != nil {
			return fmt.Errorf("tab %d: %w", i, err)
		}
		stalled = append(stalled, c)
	}
	fmt.Printf("%d stalled tabs opened in %v\n", o.tabs, time.Since(start).Round(time.Millisecond))
	var joins []time.Duration
	for i := range o.joins {
		t0 := time.Now()
		c, err := dial(ctx, base, room, fmt.Sprint("innocent-", i))
		if err != nil {
			fmt.Printf("innocent join %d: %v\n", i, err)
			continue
		}
		_, _, err = c.Read(ctx) // its first state
		joins = append(joins, time.Since(t0))
		c.CloseNow()
		if err != nil {
			fmt.Printf("innocent join %d: %v\n", i, err)
		}
	}
	time.Sleep(o.settle)
	after, err := memory(o.pid)
	if err != nil {
		return err
	}
	sockets, _ := metric(base, "wsserver_sockets")
	closed, _ := metric(base, "wsserver_slow_consumers_closed_total")
	fmt.Printf("server RSS with the tabs: %s\n", after)
	fmt.Printf("sockets attached: %v; closed as slow consumers: %v\n", sockets, closed)
	if len(joins) > 0 {
		slices.Sort(joins)
		fmt.Printf("innocent joins: %d, p50 %v, max %v\n", len(joins), joins[len(joins)/2].Round(time.Millisecond), joins[len(joins)-1].Round(time.Millisecond))
	}
	return nil
}

// memory reads the resident set of pid, now and at its peak.
func memory(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", err
	}
	var rss, hwm string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("%s (peak %s)", rss, hwm), nil
}

// ticket gets a socket ticket for user in room, waiting while the user
// holds as many unused ones as it may (its sockets are still upgrading).
func ticket(base, room, user string) (string, error) {
	for try := 0; ; try++ {
		req, _ := http.NewRequest(http.MethodPost, base+"/rooms/"+url.PathEscape(room)+"/socket-ticket", nil)
		req.Header.Set("X-Authenticated-User", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		var tr struct{ Ticket string }
		err = json.NewDecoder(resp.Body).Decode(&tr)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusTooManyRequests && try < 1000:
			time.Sleep(20 * time.Millisecond)
			continue
		case err != nil || resp.StatusCode != http.StatusCreated:
			return "", fmt.Errorf("ticket: status %d: %v", resp.StatusCode, err)
		}
		return tr.Ticket, nil
	}
}

func dial(ctx context.Context, base, room, user string) (*websocket.Conn, error) {
	tk, err := ticket(base, room, user)
	if err != nil {
		return nil, err
	}
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws?ticket="+url.QueryEscape(tk), nil)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(-1)
	return c, nil
}

// collectIDs reads c and sends the IDs of the chat messages it receives.
func collectIDs(c *websocket.Conn, ids chan<- string) {
	for {
		_, data, err := c.Read(context.Background())
		if err != nil {
			return
		}
		var m struct{ Type, MessageID string }
		if json.Unmarshal(data, &m) == nil && m.Type == "chat.message" {
			select {
			case ids <- m.MessageID:
			default:
			}
		}
	}
}

// readAll joins as user, sends a receipt for every message (within the
// message budget) and leaves.
func readAll(ctx context.Context, base, room, user string, ids []string) error {
	c, err := dial(ctx, base, room, user)
	if err != nil {
		return fmt.Errorf("reader: %w", err)
	}
	defer c.CloseNow()
	go func() {
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}()
	for _, id := range ids {
		msg, _ := json.Marshal(map[string]string{"type": "message.read", "messageId": id})
		if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
			return fmt.Errorf("receipt: %w", err)
		}
		time.Sleep(60 * time.Millisecond)
	}
	return c.Write(ctx, websocket.MessageText, []byte(`{"type":"leave"}`))
}

// historySize joins as a reader and returns the size of its chat.history.
func historySize(ctx context.Context, base, room string) (int, error) {
	c, err := dial(ctx, base, room, "reader")
	if err != nil {
		return 0, err
	}
	defer c.CloseNow()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return 0, err
		}
		if strings.HasPrefix(string(data), `{"type":"chat.history"`) {
			return len(data), nil
		}
	}
}

// openStalled performs the opening handshake by hand and never reads a
// byte of what the server sends.
func openStalled(base, room, user string) (net.Conn, error) {
	tk, err := ticket(base, room, user)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	var key [16]byte
	_, _ = rand.Read(key[:])
	_, err = fmt.Fprintf(conn, "GET /ws?ticket=%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", url.QueryEscape(tk), u.Host, base64.StdEncoding.EncodeToString(key[:]))
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// metric reads one sample from /metrics.
func metric(base, name string) (float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			var v float64
			_, err := fmt.Sscan(rest, &v)
			return v, err
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return 0, fmt.Errorf("no %s on /metrics", name)
}
