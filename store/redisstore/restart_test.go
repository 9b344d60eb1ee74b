package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
)

// These tests start redis-server processes of their own on free loopback
// ports, so that stopping them disturbs no one else. They run whenever the
// Redis tests run (LOBBYHOST_REDIS_ADDR is set) and need redis-server on
// PATH.

// server is a redis-server process started by a test.
type server struct {
	t    *testing.T
	bin  string
	port int
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// startServer starts redis-server with extra arguments and waits until it
// answers PING. It stops the server when the test ends.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	sharedClient(t) // the same switch as every other Redis test
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "redis-server is not on PATH")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &server{t: t, bin: bin, port: port, args: args}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *server) start() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", ""}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
	// Poll for readiness, bounded: the server is ours and starts in
	// milliseconds.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr(), time.Second)
		if err == nil {
			_, err = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 7)
			if err == nil {
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				_, err = c.Read(buf)
			}
			c.Close()
			if err == nil && string(buf) == "+PONG\r\n" {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on port %d not ready after 10s: %v", s.port, err)
		}
		select {
		case <-s.done:
			s.t.Fatalf("redis-server on port %d exited at start", s.port)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kill stops the server at once, as a crash or a power cut would, and
// waits for the process to be gone.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

func dial(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	c, err := newClient(addr)
	if err != nil {
		t.Fatalf("connecting to %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// isServerDown reports whether err is the clear failure expected while the
// server is down: an error, and none of the store's verdicts.
func isServerDown(err error) bool {
	return err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrInvalid)
}

// TestRestartMidTraffic stops a server without persistence under writers,
// checks that calls fail clearly while it is down, restarts it, and checks
// that the writers recover on the empty server.
func TestRestartMidTraffic(t *testing.T) {
	srv := startServer(t, "--appendonly", "no")
	c := dial(t, srv.addr())
	s, err := redisstore.New(c, redisstore.WithShards(2))
	if err != nil {
		t.Fatal(err)
	}

	const writers = 4
	var (
		ok         [writers]atomic.Int64
		firstAfter [writers]atomic.Uint64 // version of the first write after the crash
		fails      atomic.Int64
		crashed    atomic.Bool
		stop       = make(chan struct{})
		wg         sync.WaitGroup
	)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("w%d", i)
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Only a call begun after the crash is surely served by
				// the new server.
				after := crashed.Load()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				r, err := s.Load(ctx, id)
				if err == nil || errors.Is(err, store.ErrNotFound) {
					err = s.Write(ctx, store.Write{ID: id, Expected: r.Version, Data: []byte("x"), Deadline: t0,
						At: t0, Effects: []byte("e")})
				}
				cancel()
				switch {
				case err == nil:
					ok[i].Add(1)
					if after {
						firstAfter[i].CompareAndSwap(0, r.Version+1)
					}
				case errors.Is(err, store.ErrConflict):
					// Only if it loaded from the old server and wrote to
					// the new one: load again.
				case errors.Is(err, store.ErrInvalid):
					t.Errorf("writer %s: %v", id, err)
					return
				default:
					fails.Add(1)
					time.Sleep(5 * time.Millisecond) // pace retries while the server is down
				}
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()

	waitAll := func(what string, atLeast [writers]int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for i := range writers {
			for ok[i].Load() < atLeast[i] {
				if time.Now().After(deadline) {
					t.Fatalf("%s: writer %d has %d successful writes after 30s, want %d", what, i, ok[i].Load(), atLeast[i])
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	waitAll("before the restart", [writers]int64{20, 20, 20, 20})

	// A Feed opened before the crash must outlive it.
	feed, err := s.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	feed.Take() // forget what came before
	srv.kill()
	crashed.Store(true)

	// While the server is down, every call fails with an error that is not
	// a verdict about the data. Writes fail at once; rueidis retries the
	// reads (Load, Due, ReadLog, LogHeads) for a moment first, bounded here by the
	// context. The calls run at once so the test waits only for the slowest.
	calls := map[string]func(ctx context.Context) error{
		"Load":    func(ctx context.Context) error { _, err := s.Load(ctx, "w0"); return err },
		"Write":   func(ctx context.Context) error { return s.Write(ctx, store.Write{ID: "down", Data: []byte("x")}) },
		"Delete":  func(ctx context.Context) error { return s.Delete(ctx, store.Deletion{ID: "w0", Expected: 1}) },
		"Due":     func(ctx context.Context) error { _, err := s.Due(ctx, t0, 10); return err },
		"Claim":   func(ctx context.Context) error { _, err := s.Claim(ctx, t0, 10, time.Second); return err },
		"ReadLog": func(ctx context.Context) error { _, err := s.ReadLog(ctx, "w0", 0, 10); return err },
		"LogHeads": func(ctx context.Context) error {
			_, err := s.LogHeads(ctx, []string{"w0", "w1"})
			return err
		},
		"TrimLog":          func(ctx context.Context) error { _, err := s.TrimLog(ctx, t0, 10); return err },
		"RegisterConsumer": func(ctx context.Context) error { return s.RegisterConsumer(ctx, "relay") },
		"ClaimLog": func(ctx context.Context) error {
			_, err := s.ClaimLog(ctx, "relay2", t0, 10, time.Second)
			return err
		},
		"CommitLog": func(ctx context.Context) error { return s.CommitLog(ctx, "relay", "w0", 1) },
		"Subscribe": func(ctx context.Context) error { _, err := s.Subscribe(ctx); return err },
	}
	var downWG sync.WaitGroup
	for op, call := range calls {
		downWG.Add(1)
		go func() {
			defer downWG.Done()
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			start := time.Now()
			err := call(ctx)
			if took := time.Since(start); !isServerDown(err) || took > 4*time.Second {
				t.Errorf("%s with the server down = %v after %v, want a connection error within the 3s context", op, err, took)
			}
		}()
	}
	downWG.Wait()
	before := [writers]int64{}
	for i := range writers {
		before[i] = ok[i].Load()
	}

	srv.start()

	// The server came back empty: the writers start over from version 0
	// (which is why production needs persistence; see docs/redis.md).
	waitAll("after the restart", [writers]int64{before[0] + 10, before[1] + 10, before[2] + 10, before[3] + 10})
	// The feed must say it was lost (the subscription broke), and then
	// name the writers' lobbies again: changes count from the first Take
	// after the one that reported the loss.
	var lost bool
	seen := map[string]bool{}
	timeout := time.After(10 * time.Second)
	for !lost || len(seen) < writers {
		select {
		case <-feed.Ready():
			changes, l := feed.Take()
			if l {
				lost = true
				clear(seen)
				continue
			}
			for _, c := range changes {
				seen[c.Lobby] = true
			}
		case <-timeout:
			t.Fatalf("10s after the restart the feed reported lost %v and changes of %v; want lost and every writer", lost, seen)
		}
	}
	if fails.Load() == 0 {
		t.Error("no writer saw a failure while the server was down")
	}
	for i := range writers {
		if v := firstAfter[i].Load(); v != 1 {
			t.Errorf("writer %d: first write after the restart made version %d, want 1 (the server forgot everything)", i, v)
		}
	}
}

// TestRestartWithAOF shows what persistence buys: with appendfsync always a
// server killed without warning comes back with every acknowledged write.
// It also checks the NOSCRIPT fallback, since scripts do not survive.
func TestRestartWithAOF(t *testing.T) {
	dir := t.TempDir()
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always", "--dir", dir)
	cc := &counting{Client: dial(t, srv.addr())}
	s, err := redisstore.New(cc, redisstore.WithPrefix("aof"))
	if err != nil {
		t.Fatal(err)
	}
	for v := range uint64(5) {
		mustWrite(t, s, store.Write{ID: "kept", Expected: v, Data: []byte("v" + strconv.Itoa(int(v+1))), Deadline: t0,
			At: t0, Effects: []byte("e" + strconv.Itoa(int(v+1)))})
	}
	if err := s.Delete(t.Context(), store.Deletion{ID: "kept", Expected: 5, Floor: 9}); err != nil {
		t.Fatal(err)
	}
	srv.kill()
	srv.start()

	r, err := s.Load(t.Context(), "kept")
	if !errors.Is(err, store.ErrNotFound) || r.Version != 9 {
		t.Fatalf("Load after restart = %+v, %v; want floor 9, %v", r, err, store.ErrNotFound)
	}
	if string(r.Data) != "v5" {
		t.Errorf("Load after restart = data %q, want the tombstone's v5", r.Data)
	}
	es, err := s.ReadLog(t.Context(), "kept", 0, 10)
	if err != nil || len(es) != 5 || string(es[4].Data) != "e5" {
		t.Fatalf("ReadLog after restart = %v, %v; want 5 entries up to e5", es, err)
	}
	cc.take()
	mustWrite(t, s, store.Write{ID: "kept", Expected: 9, Data: []byte("again")})
	if d := cmp.Diff([]string{"EVALSHA", "EVAL"}, cc.take()); d != "" {
		t.Errorf("commands of the first write after a restart (-want +got):\n%s", d)
	}
	mustWrite(t, s, store.Write{ID: "kept", Expected: 10, Data: []byte("and again")})
	if d := cmp.Diff([]string{"EVALSHA"}, cc.take()); d != "" {
		t.Errorf("commands of the second write after a restart (-want +got):\n%s", d)
	}
}
