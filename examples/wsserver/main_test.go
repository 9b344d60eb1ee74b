package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
)

const waitLimit = 15 * time.Second

func underCI() bool { return os.Getenv("CI") == "true" }

// process is one run of the command, as a user starts it.
type process struct {
	base   string // http://host:port
	cancel context.CancelFunc
	done   chan error
	stderr *lockedBuffer
	once   sync.Once
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs the command with args and an environment of only env, and
// waits for it to print its URL.
func start(t *testing.T, env map[string]string, args ...string) *process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	p := &process{cancel: cancel, done: make(chan error, 1), stderr: &lockedBuffer{}}
	go func() {
		err := run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), pw, p.stderr, func(k string) string { return env[k] })
		pw.CloseWithError(io.EOF)
		p.done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr)
	if err != nil {
		cancel()
		t.Fatalf("the command printed no URL: %v (exit: %v)\n%s", err, <-p.done, p.stderr.String())
	}
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("first line has no URL: %q", line)
	}
	p.base = strings.TrimSuffix(strings.Fields(line[i:])[0], "/")
	t.Cleanup(func() {
		p.stop(t)
	})
	return p
}

// stop ends the command as SIGINT would and checks that it exits cleanly.
func (p *process) stop(t *testing.T) {
	t.Helper()
	p.once.Do(func() {
		p.cancel()
		select {
		case err := <-p.done:
			if err != nil {
				t.Errorf("command exited with %v\n%s", err, p.stderr.String())
			}
		case <-time.After(waitLimit):
			t.Errorf("command still running %v after the interrupt", waitLimit)
		}
	})
}

func (p *process) healthy(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		resp, err := http.Get(p.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz not OK after %v: %v", waitLimit, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a freshly started process
	}
}

type state struct {
	Type      string
	Version   uint64
	HostID    *string
	PlayerIDs []string
	Members   []struct{ UserID, Status string }
}

// attach gets a ticket for user in room and opens a socket. Its states
// arrive on the channel, which is closed when the socket ends; then
// closeErr holds the error that ended it.
func (p *process) attach(t *testing.T, room, user string) (*websocket.Conn, <-chan state) {
	c, states, _ := p.attachErr(t, room, user)
	return c, states
}

func (p *process) attachErr(t *testing.T, room, user string) (*websocket.Conn, <-chan state, *error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.base+"/rooms/"+url.PathEscape(room)+"/socket-ticket", nil)
	req.Header.Set("x-authenticated-user", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct{ Ticket string }
	err = json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("ticket: %d %v", resp.StatusCode, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(p.base, "http")+"/ws?ticket="+url.QueryEscape(tr.Ticket), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	states := make(chan state, 256)
	var closeErr error
	go func() {
		defer close(states)
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				closeErr = err
				return
			}
			var s state
			if json.Unmarshal(data, &s) == nil && s.Type == "lobby.state" {
				states <- s
			}
		}
	}()
	t.Cleanup(func() { c.CloseNow() })
	return c, states, &closeErr
}

func waitState(t *testing.T, who string, states <-chan state, desc string, pred func(state) bool) state {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case s, ok := <-states:
			if !ok {
				t.Fatalf("%s: socket closed while waiting for %s", who, desc)
			}
			if pred(s) {
				return s
			}
		case <-timeout:
			t.Fatalf("%s: no state with %s within %v", who, desc, waitLimit)
		}
	}
}

func players(s state) string { return strings.Join(s.PlayerIDs, ",") }

func reconnecting(s state, user string) bool {
	for _, m := range s.Members {
		if m.UserID == user && m.Status == "reconnecting" {
			return true
		}
	}
	return false
}

// The first command a new user runs: it serves, prints the URL, answers,
// and stops cleanly on an interrupt.
func TestRunServesAndStops(t *testing.T) {
	p := start(t, map[string]string{"LOBBYHOST_GRACE": "2s"}, "-heartbeat-ttl", "0", "-log-format", "json")
	p.healthy(t)
	resp, err := http.Get(p.base + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %v %v", resp, err)
	}
	resp.Body.Close()
	_, states, closeErr := p.attachErr(t, "r", "alice")
	s := waitState(t, "alice", states, "alice hosting", func(s state) bool { return s.HostID != nil && *s.HostID == "alice" })
	if s.Version != 1 {
		t.Errorf("first state version %d, want 1", s.Version)
	}
	p.stop(t)
	for range states { // until the socket ends
	}
	if status := websocket.CloseStatus(*closeErr); status != websocket.StatusGoingAway {
		t.Errorf("socket closed with %d on shutdown, want 1001", status)
	}
	logs := p.stderr.String()
	for _, want := range []string{"DEMO AUTHENTICATION", `"msg":"shutting down"`, `"grace":2000000000`, `"heartbeat_ttl":0`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "alice") {
		t.Errorf("log names a player in clear:\n%s", logs)
	}
}

// -pprof serves the runtime profiles on a listener of its own; the public
// handler never serves them.
func TestRunServesProfilesOnlyWhenAsked(t *testing.T) {
	p := start(t, nil, "-log-format", "json")
	p.healthy(t)
	resp, err := http.Get(p.base + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("public handler serves /debug/pprof/ without -pprof")
	}
	if strings.Contains(p.stderr.String(), "profiling endpoint") {
		t.Errorf("profiling endpoint announced without -pprof:\n%s", p.stderr.String())
	}

	q := start(t, nil, "-log-format", "json", "-pprof", "127.0.0.1:0")
	q.healthy(t)
	var addr string
	for _, line := range strings.Split(q.stderr.String(), "\n") {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, "profiling endpoint") {
			addr = rec.Addr
		}
	}
	if addr == "" {
		t.Fatalf("no profiling endpoint logged:\n%s", q.stderr.String())
	}
	resp, err = http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Errorf("profiling endpoint answered %d:\n%.200s", resp.StatusCode, body)
	}
	resp, err = http.Get(q.base + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("public handler serves /debug/pprof/ with -pprof")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"unknown store", []string{"-store", "mongo"}, nil},
		{"postgres without DSN", []string{"-store", "postgres"}, nil},
		{"redis without address", []string{"-store", "redis"}, nil},
		{"short ticket key", []string{"-ticket-keys", strings.Repeat("ab", 31)}, nil},
		{"second ticket key not hex", []string{"-ticket-keys", testTicketKeyHex + ",zz"}, nil},
		{"short pseudonym key", []string{"-pseudonym-key", "abcd"}, nil},
		{"zero grace", []string{"-grace", "0"}, nil},
		{"bad log level", []string{"-log-level", "loud"}, nil},
		{"stray argument", []string{"extra"}, nil},
		{"unusable profiling address", []string{"-pprof", "127.0.0.1:notaport"}, nil},
		{"origin without a scheme", []string{"-allow-origins", "lobby.example.com"}, nil},
		{"unknown store from the environment", nil, map[string]string{"LOBBYHOST_STORE": "mongo"}},
		{"bad grace from the environment", nil, map[string]string{"LOBBYHOST_GRACE": "soon"}},
		{"negative TTL from the environment", nil, map[string]string{"LOBBYHOST_HEARTBEAT_TTL": "-1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), append([]string{"-addr", "127.0.0.1:0"}, tt.args...), io.Discard, io.Discard,
				func(k string) string { return tt.env[k] })
			if err == nil {
				t.Fatal("run succeeded, want an error")
			}
		})
	}
	if err := run(context.Background(), []string{"-h"}, io.Discard, io.Discard, func(string) string { return "" }); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
}

// On a shared store without a ticket key, tickets would be known only to
// the process that issued them, and an upgrade reaching another process
// would fail: the command refuses to start, before it even opens the store.
func TestRunSharedStoreNeedsTicketKeys(t *testing.T) {
	for _, args := range [][]string{
		{"-store", "postgres", "-postgres-dsn", "postgres://127.0.0.1:1/x"},
		{"-store", "redis", "-redis-addr", "127.0.0.1:1"},
	} {
		err := run(context.Background(), append([]string{"-addr", "127.0.0.1:0"}, args...), io.Discard, io.Discard,
			func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), "-ticket-keys") {
			t.Errorf("%v without a ticket key: %v, want an error naming -ticket-keys", args, err)
		}
	}
}

func randomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// twoProcesses runs the scenario across two server processes sharing one
// store: each player sees the other's changes, whichever process's relay
// published them.
func twoProcesses(t *testing.T, env map[string]string, args ...string) {
	args = append(args, "-grace", "30s")
	a := start(t, env, args...)
	b := start(t, env, args...)
	a.healthy(t)
	b.healthy(t)
	room := randomName("room-")
	alice, aliceStates := a.attach(t, room, "alice")
	waitState(t, "alice", aliceStates, "alice hosting", func(s state) bool { return players(s) == "alice" })
	_, bobStates := b.attach(t, room, "bob")
	waitState(t, "bob", bobStates, "both", func(s state) bool { return players(s) == "alice,bob" })
	waitState(t, "alice", aliceStates, "bob from the other process", func(s state) bool { return players(s) == "alice,bob" })
	alice.CloseNow()
	s := waitState(t, "bob", bobStates, "alice reconnecting", func(s state) bool { return reconnecting(s, "alice") })
	if s.HostID == nil || *s.HostID != "alice" {
		t.Errorf("host during alice's grace: %v, want alice", s.HostID)
	}
	_, alice2States := b.attach(t, room, "alice")
	s = waitState(t, "alice", alice2States, "alice back", func(s state) bool { return players(s) == "alice,bob" && !reconnecting(s, "alice") })
	if s.HostID == nil || *s.HostID != "alice" {
		t.Errorf("host after alice came back on the other process: %v, want alice", s.HostID)
	}
}

func TestTwoProcessesOnPostgres(t *testing.T) {
	dsn := os.Getenv("LOBBYHOST_POSTGRES_DSN")
	if dsn == "" {
		if underCI() {
			t.Fatal("LOBBYHOST_POSTGRES_DSN is not set; CI must run the PostgreSQL test")
		}
		t.Skip("skipping: set LOBBYHOST_POSTGRES_DSN=postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run it")
	}
	schema := randomName("wsserver_")
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the schema is dropped (cleanups run last first)
	if err := pool.Ping(context.Background()); err != nil {
		if underCI() {
			t.Fatalf("PostgreSQL unreachable: %v", err)
		}
		t.Skipf("skipping: PostgreSQL unreachable: %v", err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	twoProcesses(t, map[string]string{"LOBBYHOST_POSTGRES_DSN": dsn, "LOBBYHOST_TICKET_KEYS": testTicketKeyHex}, "-store", "postgres", "-postgres-schema", schema)
}

func TestTwoProcessesOnRedis(t *testing.T) {
	addr := os.Getenv("LOBBYHOST_REDIS_ADDR")
	if addr == "" {
		if underCI() {
			t.Fatal("LOBBYHOST_REDIS_ADDR is not set; CI must run the Redis test")
		}
		t.Skip("skipping: set LOBBYHOST_REDIS_ADDR=127.0.0.1:6379 to run it")
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		if underCI() {
			t.Fatalf("Redis unreachable: %v", err)
		}
		t.Skipf("skipping: Redis unreachable: %v", err)
	}
	t.Cleanup(c.Close) // after the keys are deleted
	prefix := randomName("wsserver-test-")
	t.Cleanup(func() {
		ctx := context.Background()
		keys, err := c.Do(ctx, c.B().Keys().Pattern("{"+prefix+"*").Build()).AsStrSlice()
		if err != nil {
			t.Errorf("listing test keys: %v", err)
			return
		}
		for _, k := range keys {
			c.Do(ctx, c.B().Del().Key(k).Build())
		}
	})
	twoProcesses(t, map[string]string{"LOBBYHOST_REDIS_ADDR": addr, "LOBBYHOST_TICKET_KEYS": testTicketKeyHex}, "-store", "redis", "-redis-prefix", prefix)
}

// The command allows browsers on its own listen address, over http and
// https, and no other origin; -allow-origins replaces that list.
func TestRunAllowsItsOwnOrigin(t *testing.T) {
	status := func(base, origin string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/rooms/r/socket-ticket", nil)
		req.Header.Set("X-Authenticated-User", "alice")
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	p := start(t, map[string]string{})
	host := strings.TrimPrefix(p.base, "http://")
	for origin, want := range map[string]int{
		"http://" + host:              http.StatusCreated,
		"https://" + host:             http.StatusCreated,
		"http://rebound.example:8080": http.StatusForbidden,
	} {
		if got := status(p.base, origin); got != want {
			t.Errorf("default origins: ticket from %s: %d, want %d", origin, got, want)
		}
	}
	q := start(t, map[string]string{}, "-allow-origins", "https://lobby.example.com, https://*.games.example")
	for origin, want := range map[string]int{
		"https://lobby.example.com":                       http.StatusCreated,
		"https://eu.games.example":                        http.StatusCreated,
		"http://lobby.example.com":                        http.StatusForbidden,
		"http://" + strings.TrimPrefix(q.base, "http://"): http.StatusForbidden,
	} {
		if got := status(q.base, origin); got != want {
			t.Errorf("-allow-origins: ticket from %s: %d, want %d", origin, got, want)
		}
	}
}

// The command caps one player's sockets at four unless told otherwise: a
// fifth tab ends the oldest (4002).
func TestRunCapsTabsByDefault(t *testing.T) {
	p := start(t, nil)
	var first <-chan state
	var firstErr *error
	for i := range 5 {
		_, states, closeErr := p.attachErr(t, "r", "alice")
		waitState(t, "alice", states, "alice online", func(s state) bool { return len(s.PlayerIDs) == 1 })
		if i == 0 {
			first, firstErr = states, closeErr
		}
	}
	deadline := time.After(waitLimit)
	for open := true; open; {
		select {
		case _, open = <-first:
		case <-deadline:
			t.Fatalf("the first of five tabs still open after %v", waitLimit)
		}
	}
	if code := websocket.CloseStatus(*firstErr); code != 4002 {
		t.Errorf("first of five tabs closed with %d, want 4002", code)
	}
}

// /metrics answers for loopback names, the listen address and the hosts of
// -metrics-hosts; not for another name (a DNS-rebound page's).
func TestRunServesMetricsOnlyToItsHosts(t *testing.T) {
	p := start(t, nil, "-metrics-hosts", "scrape.internal")
	status := func(host string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, p.base+"/metrics", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	host := strings.TrimPrefix(p.base, "http://")
	for h, want := range map[string]int{
		host:                   http.StatusOK,
		"localhost":            http.StatusOK,
		"scrape.internal:8080": http.StatusOK,
		"rebound.example":      http.StatusForbidden,
	} {
		if got := status(h); got != want {
			t.Errorf("GET /metrics for Host %s: %d, want %d", h, got, want)
		}
	}
}
