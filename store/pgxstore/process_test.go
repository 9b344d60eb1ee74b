package pgxstore

// A lobbyhost server process for the multi-process tests, and the harness
// that runs several of them. The child is this test binary started again
// with childEnv set: TestMain then runs childMain instead of the tests. It
// serves lobbies with a lobby.Service over pgxstore, running Run on the real
// clock, reads commands as JSON lines on stdin and writes JSON lines on
// stdout: the reply to each command, every event its Publisher receives,
// every commit that carried events (from an Observer), and, on every wake-up
// of store.Notifier, a Snapshot of each lobby it serves (as a server must
// tell its own sockets).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
)

// childEnv holds the child's configuration as JSON; set, the test binary is
// a child process.
const childEnv = "LOBBYHOST_PGXSTORE_CHILD"

// childConfig configures a child process.
type childConfig struct {
	Schema string        `json:"schema"`
	Grace  time.Duration `json:"grace"`
	TTL    time.Duration `json:"ttl"`
	Resync time.Duration `json:"resync"`
	// Heartbeat, if positive, makes the child heartbeat every connection
	// it holds at this interval, like the clients of a real server.
	Heartbeat time.Duration `json:"heartbeat"`
	// NoClaims hides store.Claimer from the Service, so that sweepers race
	// for due lobbies through compare-and-set alone.
	NoClaims bool `json:"no_claims"`
}

// childCmd is one command on a child's stdin.
type childCmd struct {
	ID     int    `json:"id"`
	Op     string `json:"op"` // join, disconnect, heartbeat, leave, snapshot
	Lobby  string `json:"lobby"`
	Player string `json:"player,omitempty"`
	Gen    uint64 `json:"gen,omitempty"`
}

// childMsg is one line of a child's stdout.
type childMsg struct {
	// Kind is ready (Run is up), result (the reply to command ID), event
	// (one event its Publisher received), commit (a committed transition
	// with events, Op naming the command), retry (a command that lost a
	// compare-and-set race and tried again) or snapshot (after a wake-up).
	Kind     string        `json:"kind"`
	ID       int           `json:"id,omitempty"`
	Lobby    string        `json:"lobby,omitempty"`
	Op       string        `json:"op,omitempty"`
	Outcome  string        `json:"outcome,omitempty"`
	Gen      uint64        `json:"gen,omitempty"`
	Err      string        `json:"err,omitempty"`
	Events   []lobby.Event `json:"events,omitempty"`
	Revision uint64        `json:"revision,omitempty"`
	Host     string        `json:"host,omitempty"`
}

// childPolicy is the lobby policy of a child with configuration cfg.
func childPolicy(cfg childConfig) lobby.Policy {
	p := lobby.DefaultPolicy()
	p.Grace, p.HeartbeatTTL = cfg.Grace, cfg.TTL
	return p
}

// notifyHook is the store a child's Service sees: the pgxstore Store, whose
// Subscribe also reports that Run has subscribed.
type notifyHook struct {
	store.Store
	n          store.Notifier
	subscribed func()
}

func (h notifyHook) Subscribe(ctx context.Context) (*store.Feed, error) {
	f, err := h.n.Subscribe(ctx)
	if err == nil {
		h.subscribed()
	}
	return f, err
}

// claimHook is notifyHook with store.Claimer.
type claimHook struct {
	notifyHook
	c store.Claimer
}

func (h claimHook) Claim(ctx context.Context, now time.Time, limit int, hold time.Duration) ([]store.Due, error) {
	return h.c.Claim(ctx, now, limit, hold)
}

var (
	_ store.Notifier = notifyHook{}
	_ store.Claimer  = claimHook{}
)

// childMain is a child process; it returns the exit code.
func childMain() int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad configuration:", err)
		return 2
	}
	if err := runChild(cfg, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// childOut writes JSON lines, one Write each.
type childOut struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *childOut) send(m childMsg) {
	b, err := json.Marshal(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: cannot encode a message:", err)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.w.Write(append(b, '\n'))
}

// childConns are the connections a child holds, for its heartbeats, and
// the lobbies it serves, for its snapshots.
type childConns struct {
	mu      sync.Mutex
	gens    map[[2]string]uint64 // (lobby, player) → latest generation
	lobbies []string
}

func (c *childConns) serve(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.lobbies, id) {
		c.lobbies = append(c.lobbies, id)
	}
}

func (c *childConns) served() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lobbies)
}

func runChild(cfg childConfig, in io.Reader, w io.Writer) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pcfg, err := pgxpool.ParseConfig(os.Getenv(dsnEnv))
	if err != nil {
		return err
	}
	pcfg.MaxConns = 6
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := New(pool, WithSchema(cfg.Schema))
	if err != nil {
		return err
	}
	out := &childOut{w: w}
	subscribed := make(chan struct{})
	var once sync.Once
	hook := notifyHook{Store: st, n: st, subscribed: func() { once.Do(func() { close(subscribed) }) }}
	var seen store.Store = hook
	if !cfg.NoClaims {
		seen = claimHook{notifyHook: hook, c: st}
	}
	publish := lobby.PublisherFunc(func(_ context.Context, events []lobby.Event) error {
		for _, ev := range events {
			out.send(childMsg{Kind: "event", Lobby: ev.Lobby, Events: []lobby.Event{ev}})
		}
		return nil
	})
	observe := observerFunc(func(o lobby.Observation) {
		if o.Committed && len(o.Result.Events) > 0 {
			out.send(childMsg{Kind: "commit", Lobby: o.Lobby, Op: o.Command.Op.String(), Events: o.Result.Events})
		}
		if o.Attempts > 1 {
			out.send(childMsg{Kind: "retry", Lobby: o.Lobby, Op: o.Command.Op.String()})
		}
	})
	svc, err := lobby.NewService(seen,
		lobby.WithPolicy(childPolicy(cfg)),
		lobby.WithResync(cfg.Resync),
		lobby.WithPublisher(publish),
		lobby.WithObserver(observe))
	if err != nil {
		return err
	}
	conns := &childConns{gens: make(map[[2]string]uint64)}

	// The wake-ups a server uses to refresh its own sockets.
	wake, err := st.Subscribe(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake.Ready():
			}
			wake.Take()
			for _, id := range conns.served() {
				snap, err := svc.Snapshot(ctx, id)
				if err != nil {
					if ctx.Err() == nil {
						fmt.Fprintf(os.Stderr, "child: snapshot %q: %v\n", id, err)
					}
					continue
				}
				out.send(childMsg{Kind: "snapshot", Lobby: id, Revision: snap.Revision, Host: snap.Host})
			}
		}
	})
	runErr := make(chan error, 1)
	go func() { runErr <- svc.Run(ctx) }()
	select {
	case <-subscribed:
	case err := <-runErr:
		return fmt.Errorf("Run ended before it subscribed: %v", err)
	}
	if cfg.Heartbeat > 0 {
		wg.Go(func() { heartbeatLoop(ctx, svc, conns, cfg.Heartbeat) })
	}
	out.send(childMsg{Kind: "ready"})

	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var c childCmd
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return fmt.Errorf("bad command %q: %v", sc.Text(), err)
		}
		out.send(childDo(ctx, svc, conns, c))
	}
	cancel()
	wg.Wait()
	if err := <-runErr; err != nil {
		return fmt.Errorf("Run: %v", err)
	}
	return sc.Err()
}

// childDo runs one command and returns its reply.
func childDo(ctx context.Context, svc *lobby.Service, conns *childConns, c childCmd) childMsg {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	reply := childMsg{Kind: "result", ID: c.ID, Lobby: c.Lobby, Op: c.Op}
	var (
		res lobby.Result
		err error
	)
	key := [2]string{c.Lobby, c.Player}
	switch c.Op {
	case "join":
		conns.serve(c.Lobby)
		if res, err = svc.Join(cctx, c.Lobby, c.Player, nil); err == nil {
			conns.mu.Lock()
			conns.gens[key] = res.Gen
			conns.mu.Unlock()
		}
	case "disconnect":
		conns.mu.Lock()
		if conns.gens[key] == c.Gen {
			delete(conns.gens, key)
		}
		conns.mu.Unlock()
		res, err = svc.Disconnect(cctx, c.Lobby, c.Player, c.Gen)
	case "heartbeat":
		res, err = svc.Heartbeat(cctx, c.Lobby, c.Player, c.Gen)
	case "leave":
		conns.mu.Lock()
		delete(conns.gens, key)
		conns.mu.Unlock()
		res, err = svc.Leave(cctx, c.Lobby, c.Player)
	case "snapshot":
		var snap lobby.Snapshot
		if snap, err = svc.Snapshot(cctx, c.Lobby); err == nil {
			reply.Revision, reply.Host = snap.Revision, snap.Host
		}
		if err != nil {
			reply.Err = err.Error()
		}
		return reply
	default:
		err = fmt.Errorf("unknown op %q", c.Op)
	}
	if err != nil {
		reply.Err = err.Error()
		return reply
	}
	reply.Outcome, reply.Gen, reply.Events, reply.Revision = res.Outcome.String(), res.Gen, res.Events, res.Revision
	return reply
}

// heartbeatLoop heartbeats every connection the child holds, every interval.
func heartbeatLoop(ctx context.Context, svc *lobby.Service, conns *childConns, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		conns.mu.Lock()
		held := make(map[[2]string]uint64, len(conns.gens))
		for k, g := range conns.gens {
			held[k] = g
		}
		conns.mu.Unlock()
		for k, g := range held {
			res, err := svc.Heartbeat(ctx, k[0], k[1], g)
			if err == nil && res.Outcome == lobby.OutcomeStale {
				conns.mu.Lock()
				if conns.gens[k] == g {
					delete(conns.gens, k)
				}
				conns.mu.Unlock()
			}
		}
	}
}

type observerFunc func(lobby.Observation)

func (f observerFunc) Observe(_ context.Context, o lobby.Observation) { f(o) }

// The harness.

// processWait bounds every wait of the harness. It only guards against a
// hang: the tests wait for conditions, never for time. It is well above
// the Service's claim hold (30s): a process killed while its relay had
// lobbies claimed (ClaimLog) keeps them from the other relays until that
// hold runs out, so publication can legitimately take that long.
const processWait = 90 * time.Second

// group is the child processes of one test. One mutex guards the output of
// all of them, so a test can wait for a condition over several.
type group struct {
	t        *testing.T
	mu       sync.Mutex
	cond     *sync.Cond
	children []*child
}

func newGroup(t *testing.T) *group {
	g := &group{t: t}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// child is a running child process as the test sees it.
type child struct {
	g     *group
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser

	// Guarded by g.mu.
	msgs   []childMsg
	eof    bool
	nextID int
	stderr bytes.Buffer

	exited chan struct{}
	err    error // of Wait, once exited is closed
}

type lockedWriter struct{ c *child }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.c.g.mu.Lock()
	defer w.c.g.mu.Unlock()
	return w.c.stderr.Write(b)
}

// start starts a child process and waits until its Service runs.
func (g *group) start(name string, cfg childConfig) *child {
	t := g.t
	t.Helper()
	env, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &child{g: g, name: name, exited: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0])
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(env))
	c.cmd.Stderr = lockedWriter{c}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting child %s: %v", name, err)
	}
	g.mu.Lock()
	g.children = append(g.children, c)
	g.mu.Unlock()
	go c.read(stdout)
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			c.dump()
		}
	})
	c.waitFor("ready", func(ms []childMsg) bool {
		return slices.ContainsFunc(ms, func(m childMsg) bool { return m.Kind == "ready" })
	})
	return c
}

func (c *child) read(r io.Reader) {
	g := c.g
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // not ours
		}
		var m childMsg
		err := json.Unmarshal(line, &m)
		g.mu.Lock()
		if err != nil {
			fmt.Fprintf(&c.stderr, "harness: undecodable line %q: %v\n", line, err)
		} else {
			c.msgs = append(c.msgs, m)
		}
		g.cond.Broadcast()
		g.mu.Unlock()
	}
	c.err = c.cmd.Wait() // after all output was read
	g.mu.Lock()
	c.eof = true
	g.cond.Broadcast()
	g.mu.Unlock()
	close(c.exited)
}

// waitFor blocks until cond holds (called with g.mu held), failing the test
// after processWait. what names the condition in the failure.
func (g *group) waitFor(what string, cond func() bool) {
	g.t.Helper()
	if !waitCond(&g.mu, g.cond, cond) {
		g.t.Fatalf("no %s within %v", what, processWait)
	}
}

// waitCond waits on c (whose lock is mu) until cond, called with mu held,
// holds; it reports false once processWait has passed without it.
func waitCond(mu *sync.Mutex, c *sync.Cond, cond func() bool) bool {
	timer := time.AfterFunc(processWait, func() {
		mu.Lock()
		c.Broadcast()
		mu.Unlock()
	})
	defer timer.Stop()
	start := time.Now()
	mu.Lock()
	defer mu.Unlock()
	for !cond() {
		if time.Since(start) >= processWait {
			return false
		}
		c.Wait()
	}
	return true
}

// waitFor waits until cond holds for the child's messages so far; the child
// exiting first fails the test.
func (c *child) waitFor(what string, cond func([]childMsg) bool) {
	c.g.t.Helper()
	exited := false
	c.g.waitFor(fmt.Sprintf("%s from child %s", what, c.name), func() bool {
		if cond(c.msgs) {
			return true
		}
		exited = c.eof
		return exited
	})
	if exited {
		c.g.t.Fatalf("child %s exited (%v) while the test waited for %s", c.name, c.err, what)
	}
}

// messages returns the child's messages of the given kind so far.
func (c *child) messages(kind string) []childMsg {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	return filterKind(c.msgs, kind)
}

func filterKind(ms []childMsg, kind string) []childMsg {
	var out []childMsg
	for _, m := range ms {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// do sends a command and returns the child's reply; a reply with an error
// fails the test.
func (c *child) do(cmd childCmd) childMsg {
	c.g.t.Helper()
	reply := c.try(cmd)
	if reply.Err != "" {
		c.g.t.Fatalf("child %s: %s %s/%s: %s", c.name, cmd.Op, cmd.Lobby, cmd.Player, reply.Err)
	}
	return reply
}

// try sends a command and returns the child's reply, error or not.
func (c *child) try(cmd childCmd) childMsg {
	t := c.g.t
	t.Helper()
	c.g.mu.Lock()
	c.nextID++
	cmd.ID = c.nextID
	c.g.mu.Unlock()
	b, err := json.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		t.Fatalf("child %s: sending %s: %v", c.name, b, err)
	}
	var reply childMsg
	c.waitFor(fmt.Sprintf("the reply to %s", b), func(ms []childMsg) bool {
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Kind == "result" && ms[i].ID == cmd.ID {
				reply = ms[i]
				return true
			}
		}
		return false
	})
	return reply
}

// stop ends the child gracefully (end of its input) and fails the test
// unless it exits with status 0, which under -race also means that the
// child saw no data race.
func (c *child) stop() {
	t := c.g.t
	t.Helper()
	_ = c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(processWait):
		t.Fatalf("child %s did not exit within %v of the end of its input", c.name, processWait)
	}
	if c.err != nil {
		t.Errorf("child %s exited with %v", c.name, c.err)
	}
}

// kill sends SIGKILL, so that nothing at all runs in the child any more,
// and waits until it is gone.
func (c *child) kill() {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
}

func (c *child) dump() {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	t := c.g.t
	t.Logf("child %s stderr:\n%s", c.name, c.stderr.String())
	from := max(0, len(c.msgs)-60)
	for _, m := range c.msgs[from:] {
		b, _ := json.Marshal(m)
		t.Logf("child %s: %s", c.name, b)
	}
}

// history merges the events the children published into one sequence per
// lobby, in revision order. Delivery is at least once, so an event may
// arrive twice, even at two processes; the copies must be identical, and
// anything else (two different events at one revision) fails the test.
func (g *group) history() map[string][]lobby.Event {
	t := g.t
	t.Helper()
	byRev := map[string]map[uint64]lobby.Event{}
	g.mu.Lock()
	var published []lobby.Event
	for _, c := range g.children {
		for _, m := range filterKind(c.msgs, "event") {
			published = append(published, m.Events...)
		}
	}
	g.mu.Unlock()
	for _, ev := range published {
		revs := byRev[ev.Lobby]
		if revs == nil {
			revs = map[uint64]lobby.Event{}
			byRev[ev.Lobby] = revs
		}
		if prev, ok := revs[ev.Revision]; ok {
			if d := diffEvents([]lobby.Event{prev}, []lobby.Event{ev}); d != "" {
				t.Errorf("lobby %q revision %d was published with two contents (-first +second):\n%s", ev.Lobby, ev.Revision, d)
			}
			continue
		}
		revs[ev.Revision] = ev
	}
	out := map[string][]lobby.Event{}
	for id, revs := range byRev {
		keys := make([]uint64, 0, len(revs))
		for r := range revs {
			keys = append(keys, r)
		}
		slices.Sort(keys)
		for _, r := range keys {
			out[id] = append(out[id], revs[r])
		}
	}
	return out
}

// waitPublished waits until the children together published every lobby
// in want up to the revision want names.
func (g *group) waitPublished(want map[string]uint64) {
	g.t.Helper()
	g.waitFor(fmt.Sprintf("publication of revisions %v", want), func() bool {
		got := map[string]bool{}
		for _, c := range g.children {
			for _, m := range filterKind(c.msgs, "event") {
				for _, ev := range m.Events {
					if want[ev.Lobby] == ev.Revision {
						got[ev.Lobby] = true
					}
				}
			}
		}
		return len(got) == len(want)
	})
}

// commits returns the events the child committed, by lobby, in its order,
// with the operation that committed them.
func commitsOf(c *child) []childMsg { return c.messages("commit") }
