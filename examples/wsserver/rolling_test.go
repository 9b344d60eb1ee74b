package main

// A rolling restart: three server processes on one store behind a
// round-robin front, players that are the browser client library itself
// (client/dist/lobbyhost-client.js under Node, so the reconnect rules are
// the library's own, not a copy of them), and every process stopped with
// SIGTERM and started again in turn. Nobody may notice more than a
// reconnect: no host change, no revision lost by an open socket, nobody
// losing their seat.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rrFront is a round-robin front: each new connection (ticket request or
// WebSocket) goes to the next backend, or the one after if it refuses.
type rrFront struct {
	mu       sync.Mutex
	backends []string // host:port
	next     int
	open     map[string]int // connections open to each backend
}

// countedConn keeps its backend's count of open connections.
type countedConn struct {
	net.Conn
	f    *rrFront
	addr string
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.f.mu.Lock()
		c.f.open[c.addr]--
		c.f.mu.Unlock()
	})
	return c.Conn.Close()
}

// sockets returns how many connections are open to backend i: between
// ticket requests (a connection each, closed with the answer), its sockets.
func (f *rrFront) sockets(i int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open[f.backends[i]]
}

func (f *rrFront) set(i int, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backends[i] = addr
}

func (f *rrFront) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	f.mu.Lock()
	list := slices.Clone(f.backends)
	start := f.next
	f.next++
	f.mu.Unlock()
	var d net.Dialer
	for i := range list {
		addr := list[(start+i)%len(list)]
		if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
			f.mu.Lock()
			f.open[addr]++
			f.mu.Unlock()
			return &countedConn{Conn: c, f: f, addr: addr}, nil
		}
	}
	return nil, errors.New("front: no backend accepts connections")
}

func (f *rrFront) handler() http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "backend"})
		},
		// A connection per request, so that every request is balanced.
		Transport: &http.Transport{DialContext: f.dial, DisableKeepAlives: true},
	}
}

// rrPlayer is what the test learnt of one player from its events.
type rrPlayer struct {
	room, user  string
	status      string
	reason      string
	revision    int64
	term        int64
	host        string
	online      []string
	lost        int // gaps inside an open socket's stream
	resyncs     int // gaps bridged by a reconnect's first state
	leaves      []string
	hostChanges int
	reconnects  int
}

type rrEvent struct {
	Room, User   string
	Ev           string `json:"ev"`
	Status       string
	Reason       *string
	Cause        string
	Revision     int64
	Term         int64
	Host         *string
	Online       []string
	Member       string
	PreviousTerm *int64
	OnReconnect  bool
	From, To     int64
}

func findNode(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("node"); err == nil {
		return p
	}
	if underCI() {
		t.Fatal("node is not installed; CI must run the rolling restart with the client library")
	}
	t.Skip("skipping: node not found (the players are the client library under Node)")
	return ""
}

func TestRollingRestart(t *testing.T) {
	node := findNode(t)
	mpOnStores(t, func(t *testing.T, bin string, storeArgs ...string) { rollingRun(t, node, bin, storeArgs...) })
}

func rollingRun(t *testing.T, node, bin string, storeArgs ...string) {
	_, file, _, _ := runtime.Caller(0)
	here := filepath.Dir(file)
	bundle := filepath.Join(here, "..", "..", "client", "dist", "lobbyhost-client.js")
	script := filepath.Join(here, "testdata", "rolling-clients.mjs")
	// A grace that covers a restart comfortably: the clients come back at
	// once on a going-away close, so they need a fraction of it.
	args := append(slices.Clone(storeArgs), "-grace", "10s", "-heartbeat-ttl", "10s")

	front := &rrFront{backends: make([]string, 3), open: map[string]int{}}
	procs := make([]*mpProc, 3)
	for i := range procs {
		procs[i] = mpStart(t, bin, i, args...)
		(&process{base: procs[i].base}).healthy(t)
		front.set(i, strings.TrimPrefix(procs[i].base, "http://"))
	}
	fs := httptest.NewServer(front.handler())
	t.Cleanup(fs.Close)

	var players []map[string]string
	byKey := map[string]*rrPlayer{}
	var rooms []string
	// LOBBYHOST_ROLLING_ROOMS scales the run up for a measurement by hand.
	nrooms := 4
	if v := os.Getenv("LOBBYHOST_ROLLING_ROOMS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LOBBYHOST_ROLLING_ROOMS=%q: want a positive number", v)
		}
		nrooms = n
	}
	for r := range nrooms {
		room := randomName(fmt.Sprintf("roll%d-", r))
		rooms = append(rooms, room)
		for _, u := range []string{"ann", "bob", "cat"} {
			players = append(players, map[string]string{"room": room, "user": u})
			byKey[room+"/"+u] = &rrPlayer{room: room, user: u}
		}
	}
	cfg, _ := json.Marshal(map[string]any{"base": fs.URL, "players": players})
	cfgFile := filepath.Join(t.TempDir(), "players.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "--experimental-websocket", script, bundle, "@"+cfgFile)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev rrEvent
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			mu.Lock()
			p := byKey[ev.Room+"/"+ev.User]
			if p == nil {
				mu.Unlock()
				continue
			}
			switch ev.Ev {
			case "conn":
				if ev.Status == "reconnecting" && p.status == "open" {
					p.reconnects++
				}
				p.status = ev.Status
				if ev.Reason != nil {
					p.reason = *ev.Reason
				}
			case "sync":
				p.revision, p.term, p.online = ev.Revision, ev.Term, ev.Online
				p.host = ""
				if ev.Host != nil {
					p.host = *ev.Host
				}
			case "gap":
				if ev.OnReconnect {
					p.resyncs++
				} else {
					p.lost++
				}
			case "leave":
				reason := ""
				if ev.Reason != nil {
					reason = *ev.Reason
				}
				p.leaves = append(p.leaves, ev.Member+":"+reason)
			case "host":
				if ev.PreviousTerm != nil {
					p.hostChanges++
				}
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		fmt.Fprintln(stdin, "quit")
		select {
		case <-readDone:
		case <-time.After(mpGuard):
			cmd.Process.Kill()
		}
		cmd.Wait()
		if t.Failed() {
			t.Logf("node stderr:\n%s", mpTail(stderr.String(), 4000))
		}
	})

	// allBack: every player open, and seeing its whole room online, after
	// at least minReconnects reconnects in all.
	minReconnects := 0
	allBack := func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, p := range byKey {
			n += p.reconnects
		}
		if n < minReconnects {
			return false
		}
		for _, p := range byKey {
			if p.status != "open" || len(p.online) != 3 {
				return false
			}
		}
		return true
	}
	waitBack := func(what string) time.Duration {
		t.Helper()
		start := time.Now()
		for !allBack() {
			if time.Since(start) > 2*mpGuard {
				mu.Lock()
				var s []string
				for _, p := range byKey {
					s = append(s, fmt.Sprintf("%s/%s:%s(%s) online=%v", p.room, p.user, p.status, p.reason, p.online))
				}
				mu.Unlock()
				sort.Strings(s)
				t.Fatalf("%s: players not all back within %v:\n%s", what, 2*mpGuard, strings.Join(s, "\n"))
			}
			time.Sleep(10 * time.Millisecond) // polling the recorded events
		}
		return time.Since(start)
	}
	waitBack("joining")
	type roomHost struct {
		host string
		term int64
	}
	initial := map[string]roomHost{}
	mu.Lock()
	for _, p := range byKey {
		initial[p.room] = roomHost{p.host, p.term}
	}
	mu.Unlock()

	var backTimes []time.Duration
	for i := range procs {
		old := procs[i]
		// Its players must each reconnect before they count as back.
		onIt := front.sockets(i)
		mu.Lock()
		total := 0
		for _, p := range byKey {
			total += p.reconnects
		}
		mu.Unlock()
		minReconnects = total + onIt
		t.Logf("stopping process %d with %d sockets", i, onIt)
		stopped := time.Now()
		if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-old.exited:
		case <-time.After(2 * mpGuard):
			t.Fatalf("process %d still running %v after SIGTERM", i, 2*mpGuard)
		}
		old.killed = true // exited: its cleanup has nothing to stop
		// Back on the other two processes (a reconnect, not a new seat).
		waitBack(fmt.Sprintf("after stopping process %d", i))
		backTimes = append(backTimes, time.Since(stopped))
		procs[i] = mpStart(t, bin, i, args...)
		(&process{base: procs[i].base}).healthy(t)
		front.set(i, strings.TrimPrefix(procs[i].base, "http://"))
	}

	mu.Lock()
	defer mu.Unlock()
	var lost, leaves, hostChanges, reconnects, resyncs int
	for _, p := range byKey {
		lost += p.lost
		leaves += len(p.leaves)
		hostChanges += p.hostChanges
		reconnects += p.reconnects
		resyncs += p.resyncs
		if p.lost != 0 {
			t.Errorf("%s/%s: %d revisions lost on an open socket", p.room, p.user, p.lost)
		}
		if len(p.leaves) != 0 {
			t.Errorf("%s/%s saw members leave: %v", p.room, p.user, p.leaves)
		}
		if p.hostChanges != 0 || p.host != initial[p.room].host || p.term != initial[p.room].term {
			t.Errorf("%s/%s: %d host changes; host %s term %d, was %s term %d", p.room, p.user, p.hostChanges,
				p.host, p.term, initial[p.room].host, initial[p.room].term)
		}
		if p.status != "open" {
			t.Errorf("%s/%s ended %s (%s)", p.room, p.user, p.status, p.reason)
		}
	}
	t.Logf("rolling restart of 3 processes, %d players in %d rooms: host changes %d, revisions lost %d, seats lost %d, "+
		"reconnects %d (resynced on reconnect %d); every player back after each SIGTERM within %v",
		len(byKey), len(rooms), hostChanges, lost, leaves, reconnects, resyncs, backTimes)
}
