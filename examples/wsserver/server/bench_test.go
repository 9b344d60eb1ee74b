package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/server"
)

// The benchmarks measure the server's fixed costs through its public
// surface, with real sockets on loopback and the memory store: a join
// (ticket, upgrade, first state), one lobby change fanned out to a room's
// sockets, and an expiry (a host's close, its grace ending, the successor
// reaching the others). allocs/op counts every allocation in the process,
// the benchmark's clients included; compare runs with benchstat.

// benchServer is a server on a fake clock behind an httptest listener.
type benchServer struct {
	srv   *server.Server
	ts    *httptest.Server
	clock *clockwork.FakeClock
	hc    *http.Client
}

func newBenchServer(b *testing.B) *benchServer {
	b.Helper()
	clock := clockwork.NewFakeClockAt(epoch)
	srv, err := server.New(server.Config{
		Authenticator: server.HeaderAuthenticator{},
		Clock:         clock,
		Policy:        testPolicy(),
	})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	serve(b, srv, ts)
	return &benchServer{srv: srv, ts: ts, clock: clock, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
}

// benchSocket is a client socket whose reader records the lobby states.
type benchSocket struct {
	conn *websocket.Conn
	// tcp is the connection under conn, for dropping it without a close
	// frame.
	tcp  *net.TCPConn
	mu   sync.Mutex
	cond *sync.Cond
	rev  uint64
	host string
	// away: the host's member is reconnecting.
	away bool
	err  error
}

// join gets a ticket for user in room and opens a socket with it.
func (bs *benchServer) join(b *testing.B, room, user string) *benchSocket {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, bs.ts.URL+"/rooms/"+room+"/socket-ticket", nil)
	req.Header.Set(server.DemoUserHeader, user)
	resp, err := bs.hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var tr struct{ Ticket string }
	err = json.NewDecoder(resp.Body).Decode(&tr)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		b.Fatalf("ticket: %d %v", resp.StatusCode, err)
	}
	var tcp *net.TCPConn
	dialer := &net.Dialer{}
	opts := &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				tcp = tc
			}
			return c, err
		},
	}}}
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(bs.ts.URL, "http")+"/ws?ticket="+tr.Ticket, opts)
	if err != nil {
		b.Fatal(err)
	}
	s := &benchSocket{conn: c, tcp: tcp}
	s.cond = sync.NewCond(&s.mu)
	go s.read()
	return s
}

func (s *benchSocket) read() {
	for {
		_, data, err := s.conn.Read(context.Background())
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
		var m struct {
			Type    string  `json:"type"`
			Version uint64  `json:"version"`
			HostID  *string `json:"hostId"`
			Members []struct {
				Host   bool   `json:"host"`
				Status string `json:"status"`
			} `json:"members"`
		}
		if json.Unmarshal(data, &m) != nil || m.Type != server.TypeLobbyState {
			continue
		}
		s.mu.Lock()
		s.rev = m.Version
		s.host, s.away = "", false
		if m.HostID != nil {
			s.host = *m.HostID
		}
		for _, mm := range m.Members {
			if mm.Host && mm.Status == "reconnecting" {
				s.away = true
			}
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// waitFor waits until the socket's latest state satisfies ok.
func (s *benchSocket) waitFor(b *testing.B, ok func(rev uint64, host string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !ok(s.rev, s.host) {
		if s.err != nil {
			b.Fatalf("socket ended: %v", s.err)
		}
		s.cond.Wait()
	}
}

// poll reports whether the socket's latest state satisfies ok within d.
func (s *benchSocket) poll(ok func(rev uint64, host string) bool, d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		s.mu.Lock()
		done, failed := ok(s.rev, s.host), s.err != nil
		s.mu.Unlock()
		if done || failed || time.Now().After(end) {
			return done
		}
		time.Sleep(20 * time.Microsecond)
	}
}

func (s *benchSocket) close() { _ = s.conn.CloseNow() }

// BenchmarkJoin: one player's ticket, upgrade and first lobby.state, four
// players a room.
func BenchmarkJoin(b *testing.B) {
	bs := newBenchServer(b)
	var open []*benchSocket
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := bs.join(b, fmt.Sprintf("join-%d", i/4), fmt.Sprintf("p%d", i))
		s.waitFor(b, func(rev uint64, _ string) bool { return rev > 0 })
		open = append(open, s)
		if len(open) == 256 {
			b.StopTimer()
			for _, s := range open {
				s.close()
			}
			open = open[:0]
			b.StartTimer()
		}
	}
	b.StopTimer()
	for _, s := range open {
		s.close()
	}
}

// BenchmarkBroadcast: one lobby change (the host locks or unlocks) reaching
// every socket of a room of n.
func BenchmarkBroadcast(b *testing.B) {
	for _, n := range []int{4, 16, 64} {
		b.Run(fmt.Sprintf("sockets=%d", n), func(b *testing.B) {
			bs := newBenchServer(b)
			room := "bcast"
			socks := make([]*benchSocket, n)
			for i := range socks {
				socks[i] = bs.join(b, room, fmt.Sprintf("p%d", i))
			}
			snap, err := bs.srv.Service().Snapshot(context.Background(), room)
			if err != nil {
				b.Fatal(err)
			}
			rev := snap.Revision
			for _, s := range socks {
				s.waitFor(b, func(r uint64, _ string) bool { return r >= rev })
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				lock := bs.srv.Service().Unlock
				if i%2 == 0 {
					lock = bs.srv.Service().Lock
				}
				res, err := lock(context.Background(), room, "p0")
				if err != nil {
					b.Fatal(err)
				}
				rev := res.Events[len(res.Events)-1].Revision
				for _, s := range socks {
					s.waitFor(b, func(r uint64, _ string) bool { return r >= rev })
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
			for _, s := range socks {
				s.close()
			}
		})
	}
}

// BenchmarkExpiry: a room of four whose host's socket drops; the others see
// the host reconnecting, the grace passes (fake clock), and they see the
// successor. Setting up the room is not timed.
func BenchmarkExpiry(b *testing.B) {
	bs := newBenchServer(b)
	grace := testPolicy().Grace
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		room := fmt.Sprintf("exp-%d", i)
		socks := make([]*benchSocket, 4)
		for j := range socks {
			socks[j] = bs.join(b, room, fmt.Sprintf("p%d", j))
		}
		for _, s := range socks {
			s.waitFor(b, func(r uint64, _ string) bool { return r >= 4 })
		}
		b.StartTimer()
		socks[0].close()
		for _, s := range socks[1:] {
			s.mu.Lock()
			for !s.away {
				if s.err != nil {
					b.Fatalf("socket ended: %v", s.err)
				}
				s.cond.Wait()
			}
			s.mu.Unlock()
		}
		bs.clock.Advance(grace)
		for _, s := range socks[1:] {
			for !s.poll(func(_ uint64, host string) bool { return host == "p1" }, 100*time.Millisecond) {
				// The sweeper armed its timer after the advance.
				bs.clock.Advance(time.Second)
			}
		}
		b.StopTimer()
		for _, s := range socks[1:] {
			s.close()
		}
		b.StartTimer()
	}
}
