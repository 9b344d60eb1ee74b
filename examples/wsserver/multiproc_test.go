package main

// Three real server processes (the built binary, started with exec) on one
// shared store, driven by a seeded random schedule of joins (some in bursts
// on every process at once), closes, second
// tabs on another process (superseding the first under -max-tabs 1) and
// sockets that go silent, then a kill -9 of one process. Every ticket is
// fetched from a process other than the one its socket upgrades on, as
// behind a load balancer. Every socket's
// lobby.state stream is checked for gaps, duplicates and reordering, and
// every connection the server ended must carry that process's own close code.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
)

// Timings of the multi-process test. The heartbeat TTL and grace are short
// so that silent sockets and a killed process's players end within the run.
// The guards are hang guards only: nothing asserts how fast anything is.
const (
	mpHeartbeatTTL = 4 * time.Second
	mpGrace        = 3 * time.Second
	mpGuard        = 10 * time.Second // a message or close still missing after this is a failure
	mpSilence      = 12 * time.Second // how long a silent socket neither reads nor writes
	mpSteps        = 70
)

func TestMultiProcess(t *testing.T) { mpOnStores(t, mpRun) }

// mpOnStores builds the command and runs f on a fresh PostgreSQL schema and
// a fresh Redis prefix, with the arguments that select them.
func mpOnStores(t *testing.T, f func(t *testing.T, bin string, storeArgs ...string)) {
	bin := filepath.Join(t.TempDir(), "wsserver")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("LOBBYHOST_POSTGRES_DSN")
		if dsn == "" {
			if underCI() {
				t.Fatal("LOBBYHOST_POSTGRES_DSN is not set; CI must run the multi-process PostgreSQL test")
			}
			t.Skip("skipping: set LOBBYHOST_POSTGRES_DSN=postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run it")
		}
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		if err := pool.Ping(context.Background()); err != nil {
			if underCI() {
				t.Fatalf("PostgreSQL unreachable: %v", err)
			}
			t.Skipf("skipping: PostgreSQL unreachable: %v", err)
		}
		schema := randomName("wsmulti_")
		t.Cleanup(func() {
			if _, err := pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`); err != nil {
				t.Errorf("dropping schema %s: %v", schema, err)
			}
		})
		f(t, bin, "-store", "postgres", "-postgres-dsn", dsn, "-postgres-schema", schema)
	})
	t.Run("redis", func(t *testing.T) {
		addr := os.Getenv("LOBBYHOST_REDIS_ADDR")
		if addr == "" {
			if underCI() {
				t.Fatal("LOBBYHOST_REDIS_ADDR is not set; CI must run the multi-process Redis test")
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
		t.Cleanup(c.Close)
		prefix := randomName("wsmulti-")
		t.Cleanup(func() {
			ctx := context.Background()
			keys, err := c.Do(ctx, c.B().Keys().Pattern("*"+prefix+"*").Build()).AsStrSlice()
			if err != nil {
				t.Errorf("listing test keys: %v", err)
				return
			}
			for _, k := range keys {
				c.Do(ctx, c.B().Del().Key(k).Build())
			}
		})
		f(t, bin, "-store", "redis", "-redis-addr", addr, "-redis-prefix", prefix)
	})
}

// mpProc is one server process.
type mpProc struct {
	idx    int
	base   string
	cmd    *exec.Cmd
	exited chan struct{}
	stderr *lockedBuffer
	killed bool
}

func mpStart(t *testing.T, bin string, idx int, args ...string) *mpProc {
	t.Helper()
	args = append([]string{"-addr", "127.0.0.1:0", "-log-level", "warn",
		"-grace", mpGrace.String(), "-heartbeat-ttl", mpHeartbeatTTL.String(), "-max-tabs", "1",
		"-ticket-keys", testTicketKeyHex}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	p := &mpProc{idx: idx, cmd: cmd, exited: make(chan struct{}), stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.exited) }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		<-p.exited
		t.Fatalf("process %d printed no URL: %v\n%s", idx, err, p.stderr.String())
	}
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("process %d: first line has no URL: %q", idx, line)
	}
	p.base = strings.TrimSuffix(strings.Fields(line[i:])[0], "/")
	t.Cleanup(func() {
		if !p.killed {
			cmd.Process.Signal(syscall.SIGINT)
		}
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			t.Errorf("process %d still running 15s after SIGINT; killing it", idx)
			cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("process %d stderr (tail):\n%s", idx, mpTail(p.stderr.String(), 4000))
		}
	})
	return p
}

func mpTail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// mpState is a lobby.state as the test reads it.
type mpState struct {
	Type      string  `json:"type"`
	Version   uint64  `json:"version"`
	HostID    *string `json:"hostId"`
	PlayerIDs []string
	Members   []struct{ UserID, Status string }
	Reason    string          `json:"reason"`
	SubjectID json.RawMessage `json:"subjectId"`
	at        time.Time
}

func (s mpState) subject() string {
	var v string
	_ = json.Unmarshal(s.SubjectID, &v)
	return v
}

func (s mpState) status(user string) string {
	for _, m := range s.Members {
		if m.UserID == user {
			return m.Status
		}
	}
	return "absent"
}

// gateConn lets the test freeze a socket: while frozen, the client neither
// reads (so pings go unseen) nor sends (so no pong leaves), as a client whose
// network went silent.
type gateConn struct {
	net.Conn
	mu     sync.Mutex
	frozen chan struct{} // non-nil while frozen; closed on thaw
}

func (g *gateConn) wait() {
	g.mu.Lock()
	ch := g.frozen
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (g *gateConn) Read(b []byte) (int, error) { g.wait(); return g.Conn.Read(b) }

// Write drops what the client writes while frozen: only a pong to a ping
// read just before the freeze can be written then.
func (g *gateConn) Write(b []byte) (int, error) {
	g.mu.Lock()
	frozen := g.frozen != nil
	g.mu.Unlock()
	if frozen {
		return len(b), nil
	}
	return g.Conn.Write(b)
}

func (g *gateConn) freeze() {
	g.mu.Lock()
	g.frozen = make(chan struct{})
	g.mu.Unlock()
}

func (g *gateConn) thaw() {
	g.mu.Lock()
	if g.frozen != nil {
		close(g.frozen)
		g.frozen = nil
	}
	g.mu.Unlock()
}

// Why a socket is expected to end.
const (
	endNone       = ""
	endClient     = "closed by the client"
	endSuperseded = "superseded"
	endSilent     = "silent"
	endKilled     = "process killed"
)

// mpSock is one client socket and everything it received.
type mpSock struct {
	id   int
	room string
	user string
	proc *mpProc
	gate *gateConn
	conn *websocket.Conn

	mu       sync.Mutex
	states   []mpState
	done     chan struct{} // closed when the socket ended
	code     websocket.StatusCode
	err      error
	endedAt  time.Time
	expect   string
	expectAt time.Time
	// For a superseded socket: the first version of the tab that superseded
	// it. Anything newer was committed after the supersession.
	supersededBy   *mpSock
	supersedeLimit uint64
}

func (s *mpSock) String() string {
	return fmt.Sprintf("socket %d (%s in %s on process %d)", s.id, s.user, s.room, s.proc.idx)
}

func (s *mpSock) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *mpSock) snapshot() []mpState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.states)
}

func (s *mpSock) first() (mpState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.states) == 0 {
		return mpState{}, false
	}
	return s.states[0], true
}

// waitFor waits up to the guard for a state matching pred; it reports
// whether one arrived.
func (s *mpSock) waitFor(pred func(mpState) bool) bool {
	deadline := time.Now().Add(mpGuard)
	for {
		for _, st := range s.snapshot() {
			if pred(st) {
				return true
			}
		}
		if s.ended() || time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling the recorded stream
	}
}

type mpHarness struct {
	t     *testing.T
	procs []*mpProc
	mu    sync.Mutex
	socks []*mpSock
}

// mpTicket asks base for a ticket for user in room.
func mpTicket(base, room, user string) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/rooms/"+url.PathEscape(room)+"/socket-ticket", nil)
	req.Header.Set("x-authenticated-user", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	var tr struct{ Ticket string }
	err = json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("ticket from %s: %d %v", base, resp.StatusCode, err)
	}
	return tr.Ticket, nil
}

// issuer returns the live process after p (in index order): the one p's
// sockets get their tickets from.
func (h *mpHarness) issuer(p *mpProc) *mpProc {
	for i := 1; i <= len(h.procs); i++ {
		if q := h.procs[(p.idx+i)%len(h.procs)]; q != p && !q.killed {
			return q
		}
	}
	return p
}

// mpDial opens a socket on p with a ticket issued by another process.
func mpDial(t *testing.T, h *mpHarness, p *mpProc, room, user string) (*mpSock, error) {
	issuer := h.issuer(p)
	if issuer == p {
		return nil, fmt.Errorf("no live process besides %d to issue a ticket", p.idx)
	}
	ticket, err := mpTicket(issuer.base, room, user)
	if err != nil {
		return nil, err
	}
	s := &mpSock{room: room, user: user, proc: p, done: make(chan struct{})}
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		s.gate = &gateConn{Conn: c}
		return s.gate, nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), mpGuard)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(p.base, "http")+"/ws?ticket="+url.QueryEscape(ticket),
		&websocket.DialOptions{HTTPClient: &http.Client{Transport: transport}})
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	c.SetReadLimit(1 << 20)
	s.conn = c
	h.mu.Lock()
	s.id = len(h.socks)
	h.socks = append(h.socks, s)
	h.mu.Unlock()
	go func() {
		defer close(s.done)
		for {
			_, data, err := c.Read(context.Background())
			now := time.Now()
			if err != nil {
				s.mu.Lock()
				s.err, s.code, s.endedAt = err, websocket.CloseStatus(err), now
				s.mu.Unlock()
				return
			}
			var st mpState
			if json.Unmarshal(data, &st) == nil && st.Type == "lobby.state" {
				st.at = now
				s.mu.Lock()
				s.states = append(s.states, st)
				s.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { c.CloseNow() })
	// The join is committed before the upgrade completes; wait for the
	// state the server sends on attach, so the test's view is settled.
	deadline := time.Now().Add(mpGuard)
	for {
		if _, ok := s.first(); ok {
			return s, nil
		}
		if s.ended() {
			return s, fmt.Errorf("%v ended before its first state: %v", s, s.err)
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("%v: no lobby.state within %v of attaching", s, mpGuard)
		}
		time.Sleep(5 * time.Millisecond) // polling the reader
	}
}

func (h *mpHarness) all() []*mpSock {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.socks)
}

// live returns the sockets the test expects to be open, optionally only those
// of one room.
func (h *mpHarness) live(room string) []*mpSock {
	var out []*mpSock
	for _, s := range h.all() {
		s.mu.Lock()
		ok := s.expect == endNone && (room == "" || s.room == room)
		s.mu.Unlock()
		if ok && !s.ended() {
			out = append(out, s)
		}
	}
	return out
}

func (h *mpHarness) expectEnd(s *mpSock, why string) {
	s.mu.Lock()
	s.expect, s.expectAt = why, time.Now()
	s.mu.Unlock()
}

func mpRun(t *testing.T, bin string, storeArgs ...string) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("LOBBYHOST_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LOBBYHOST_SEED: %v", err)
		}
		seed = n
	}
	t.Logf("seed %d (replay with LOBBYHOST_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	h := &mpHarness{t: t}
	for i := range 3 {
		h.procs = append(h.procs, mpStart(t, bin, i, storeArgs...))
	}
	for _, p := range h.procs {
		(&process{base: p.base}).healthy(t)
	}
	rooms := make([]string, 4)
	for i := range rooms {
		rooms[i] = randomName(fmt.Sprintf("room%d-", i))
	}
	users := []string{"ann", "bob", "cat", "dan", "eve", "fay", "gus"}
	var wg sync.WaitGroup
	defer wg.Wait()

	// Every room starts with one member on each process, so every process
	// serves every room.
	for _, room := range rooms {
		for i, p := range h.procs {
			if _, err := mpDial(t, h, p, room, users[i]); err != nil {
				t.Fatal(err)
			}
		}
	}

	hasSocket := func(room, user string) bool {
		for _, s := range h.all() {
			s.mu.Lock()
			busy := s.room == room && s.user == user && (s.expect == endNone || s.expect == endSilent) && !s.ended()
			s.mu.Unlock()
			if busy {
				return true
			}
		}
		return false
	}
	otherProc := func(p *mpProc) *mpProc {
		for {
			q := h.procs[rng.IntN(len(h.procs))]
			if q != p && !q.killed {
				return q
			}
		}
	}
	liveProc := func() *mpProc {
		for {
			if q := h.procs[rng.IntN(len(h.procs))]; !q.killed {
				return q
			}
		}
	}

	step := func(i int) {
		room := rooms[rng.IntN(len(rooms))]
		live := h.live(room)
		switch a := rng.IntN(12); {
		case a >= 10: // a burst: players join at once on every process
			var joiners []string
			for _, u := range users {
				if !hasSocket(room, u) && len(joiners) < 3 {
					joiners = append(joiners, u)
				}
			}
			var bw sync.WaitGroup
			for j, u := range joiners {
				p := h.procs[(i+j)%len(h.procs)]
				if p.killed {
					continue
				}
				bw.Add(1)
				go func() {
					defer bw.Done()
					if _, err := mpDial(t, h, p, room, u); err != nil {
						t.Errorf("step %d: burst join %s in %s on process %d: %v", i, u, room, p.idx, err)
					}
				}()
			}
			bw.Wait()
		case a < 4: // a join on a random process
			user := users[rng.IntN(len(users))]
			if hasSocket(room, user) {
				return
			}
			p := liveProc()
			if _, err := mpDial(t, h, p, room, user); err != nil {
				t.Errorf("step %d: join %s in %s on process %d: %v", i, user, room, p.idx, err)
			}
		case a < 6: // the client closes its socket
			if len(live) <= 2 {
				return
			}
			s := live[rng.IntN(len(live))]
			h.expectEnd(s, endClient)
			go s.conn.Close(websocket.StatusNormalClosure, "bye")
		case a < 8: // a second tab on another process supersedes the first
			if len(live) == 0 {
				return
			}
			s := live[rng.IntN(len(live))]
			q := otherProc(s.proc)
			h.expectEnd(s, endSuperseded)
			n, err := mpDial(t, h, q, room, s.user)
			if err != nil {
				t.Errorf("step %d: second tab of %s in %s on process %d: %v", i, s.user, room, q.idx, err)
				return
			}
			f, _ := n.first()
			s.mu.Lock()
			s.supersededBy, s.supersedeLimit = n, f.Version
			s.mu.Unlock()
		default: // the socket goes silent: no pongs, no reads
			if len(live) <= 2 {
				return
			}
			s := live[rng.IntN(len(live))]
			h.expectEnd(s, endSilent)
			s.gate.freeze()
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(mpSilence)
				s.gate.thaw() // read what is left, and the close
			}()
		}
	}

	for i := range mpSteps {
		step(i)
		time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond)
	}

	// kill -9 one process mid-run; the others keep going.
	victim := h.procs[rng.IntN(len(h.procs))]
	var orphans []*mpSock // sockets whose players only the killed process held
	for _, s := range h.live("") {
		if s.proc == victim {
			orphans = append(orphans, s)
		}
	}
	t.Logf("killing process %d (%d live sockets on it)", victim.idx, len(orphans))
	for _, s := range h.all() {
		if s.proc == victim && !s.ended() {
			h.expectEnd(s, endKilled)
		}
	}
	victim.killed = true
	killedAt := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	for i := range mpSteps / 2 {
		step(mpSteps + i)
		time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond)
	}

	// The killed process's players time out as seen from the other
	// processes (nobody reported their closes), unless they came back.
	rejoined := func(room, user string) bool {
		for _, s := range h.all() {
			f, ok := s.first()
			if s.room == room && s.user == user && ok && f.at.After(killedAt) {
				return true
			}
		}
		return false
	}
	var slowest time.Duration
	for _, o := range orphans {
		if rejoined(o.room, o.user) {
			continue
		}
		// Its end is a timed_out revision, or a snapshot (a documented jump)
		// that shows it no longer online.
		timedOut := func(st mpState) bool {
			return st.at.After(killedAt) && (st.Reason == "timed_out" && st.subject() == o.user ||
				st.Reason == "snapshot" && st.status(o.user) != "online")
		}
		var witness *mpSock
		for _, s := range h.live(o.room) {
			if s.proc != victim && s.user != o.user {
				witness = s
				break
			}
		}
		if witness == nil {
			t.Logf("%v: no socket left in its room to witness its timeout", o)
			continue
		}
		ok := false
		deadline := time.Now().Add(mpHeartbeatTTL + mpGrace + mpGuard)
		for !ok && time.Now().Before(deadline) && !witness.ended() {
			states := witness.snapshot()
			if i := slices.IndexFunc(states, timedOut); i >= 0 {
				ok = true
				slowest = max(slowest, states[i].at.Sub(killedAt))
			}
			time.Sleep(50 * time.Millisecond) // polling the recorded stream
		}
		if !ok && !rejoined(o.room, o.user) {
			t.Errorf("%v on the killed process: %v never saw its player time out", o, witness)
		}
	}
	// A figure, not a check: the session TTL (the heartbeat TTL here)
	// bounds it, plus a renewal interval and the time to apply.
	t.Logf("kill -9 to the last of its players shown timed out on another process: %v (session TTL %v)", slowest.Round(time.Millisecond), mpHeartbeatTTL)

	// A marker change in every room: each live socket must get it, and with
	// a gapless stream that means it got everything before it.
	for _, room := range rooms {
		p := liveProc()
		m, err := mpDial(t, h, p, room, "marker")
		if err != nil {
			t.Errorf("marker in %s: %v", room, err)
			continue
		}
		f, _ := m.first()
		for _, s := range h.live(room) {
			if !s.waitFor(func(st mpState) bool { return st.Version >= f.Version }) {
				t.Errorf("%v: never received revision %d (the marker's join) within %v", s, f.Version, mpGuard)
			}
		}
	}
	wg.Wait() // silent sockets thawed
	mpCheck(t, h, victim)
}

// mpCheck asserts the streams and the ends of every socket.
func mpCheck(t *testing.T, h *mpHarness, victim *mpProc) {
	byRoomVersion := map[string]map[uint64]string{} // one content per revision
	closes := map[string]int{}
	for _, s := range h.all() {
		if s.expect != endNone && s.expect != endClient && s.expect != endKilled {
			// wait for the server's close (hang guard)
			select {
			case <-s.done:
			case <-time.After(time.Until(s.expectAt.Add(mpSilence + mpGuard))):
			}
		}
		s.mu.Lock()
		states := slices.Clone(s.states)
		expect, code, err := s.expect, s.code, s.err
		limit, by := s.supersedeLimit, s.supersededBy
		s.mu.Unlock()
		ended := s.ended()

		// The stream: strictly increasing, +1 each time unless the server
		// marks the jump as a snapshot.
		for i := 1; i < len(states); i++ {
			prev, cur := states[i-1], states[i]
			switch {
			case cur.Version <= prev.Version:
				t.Errorf("%v: revision %d after %d (duplicate or out of order)", s, cur.Version, prev.Version)
			case cur.Version != prev.Version+1 && cur.Reason != "snapshot":
				t.Errorf("%v: revision %d (%s %s) after %d (%s %s): a gap not marked as a snapshot; stream: %s",
					s, cur.Version, cur.Reason, cur.subject(), prev.Version, prev.Reason, prev.subject(), mpStream(states))
			}
		}
		m := byRoomVersion[s.room]
		if m == nil {
			m = map[uint64]string{}
			byRoomVersion[s.room] = m
		}
		for _, st := range states {
			host := "<none>"
			if st.HostID != nil {
				host = *st.HostID
			}
			var ms []string
			for _, mb := range st.Members {
				ms = append(ms, mb.UserID+"/"+mb.Status)
			}
			content := host + " " + strings.Join(ms, ",")
			if prev, ok := m[st.Version]; ok && prev != content {
				t.Errorf("%v: revision %d is %q here but %q on another socket", s, st.Version, content, prev)
			}
			m[st.Version] = content
		}

		switch expect {
		case endNone:
			if ended && s.proc != victim {
				t.Errorf("%v ended unexpectedly: close %d (%v)", s, code, err)
			}
		case endSuperseded:
			closes[fmt.Sprintf("4002 expected, got %d", code)]++
			if !ended {
				t.Errorf("%v: superseded by %v but still open %v later", s, by, mpSilence+mpGuard)
			} else if code != 4002 {
				t.Errorf("%v: superseded by %v, closed with %d (%v), want 4002", s, by, code, err)
			}
			// Prompt: it must not hear of anything committed after the tab
			// that superseded it.
			for _, st := range states {
				if st.Version > limit {
					t.Errorf("%v: superseded by %v (first revision %d) but then received revision %d (%s): the supersession reached it late",
						s, by, limit, st.Version, st.Reason)
					break
				}
			}
		case endSilent:
			closes[fmt.Sprintf("4001/4004 expected, got %d", code)]++
			if !ended {
				t.Errorf("%v: silent for %v but the server never closed it", s, mpSilence)
			} else if code != 4001 && code != 4004 {
				t.Errorf("%v: silent, closed with %d (%v), want 4001 (timed out) or 4004 (ping timeout)", s, code, err)
			}
		}
	}
	t.Logf("sockets: %d; closes: %v", len(h.all()), closes)
}

// mpStream renders a socket's states for a failure message.
func mpStream(states []mpState) string {
	var b strings.Builder
	for i, st := range states {
		if i == 12 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, " %d:%s(%s)", st.Version, st.Reason, st.subject())
	}
	return b.String()
}
