package lobbytest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/revision"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/storetest"
)

// These tests kill a store's server (see Restarter) under traffic through
// lobby.Service, with Run going on the real clock, and start it again.

// Phases of a restart test, as seen by a command when it returns.
const (
	phaseUp      int32 = iota // the first server is running
	phaseDown                 // it was killed
	phaseRestart              // a new one is starting or running
)

// testRestartDurable: on a durable server, every transition reported
// committed before the kill is there afterwards. Commands fail clearly
// while the server is down and work again after; in the end each lobby's
// published history has consecutive revisions, holds every event of every
// successful command exactly once in content (a failed command may have
// committed, its reply lost), holds events committed but not yet published
// at the kill, and ends in the lobby's current state.
func testRestartDurable(t *testing.T, r Restarter) {
	h := startRestartHarness(t, r, r.Restartable)

	probe := h.joinProbe()
	h.waitOK("20 successful commands per lobby before the kill", phaseUp, 20)
	// From here the relay cannot publish, so the events committed until
	// the kill exist only in the effects log when the server dies.
	h.pub.hold.Store(true)
	heldFrom := h.marks()
	h.waitEvents("3 commands with events per lobby after publishing stopped", heldFrom, 3)

	h.killAndCheckDown(probe)
	h.restart()

	// Every write acknowledged by the first server is still there: each
	// lobby's first write on the new one continued from at least the
	// version the last acknowledged write made.
	lastUp := h.rec.lastVersions(phaseUp)
	h.waitOK("10 successful commands per lobby after the restart", phaseRestart, 10)
	firstAfter := h.rec.firstExpected(phaseRestart)
	for _, c := range h.clients {
		v := lastUp[c.id]
		if got, ok := firstAfter[c.id]; !ok || got < v {
			t.Errorf("lobby %q: first write after the restart expected version %d (written: %v), want at least %d, the version of the last write acknowledged before the kill",
				c.id, got, ok, v)
		}
	}

	// The probe lobby is as it was: its connection is live, its members
	// and revision kept.
	res, err := h.svc.Heartbeat(h.ctx, probe.id, "a", probe.gen)
	if err != nil || res.Outcome != lobby.OutcomeApplied {
		t.Errorf("heartbeat of the probe's connection after the restart = %v, %v; want %v", res.Outcome, err, lobby.OutcomeApplied)
	}
	if snap, err := h.svc.Snapshot(h.ctx, probe.id); err != nil || !cmp.Equal(probe.snap, snap, cmpOpts) {
		t.Errorf("probe snapshot after the restart = %+v, %v; want %+v", snap, err, probe.snap)
	}

	// The effects logs came back with the events committed while
	// publishing was stopped, each once. (The harness's store keeps
	// MinRetention, more than the test commits.)
	seen := map[string]bool{}
	for _, c := range h.clients {
		var after uint64
		for {
			entries, err := h.st.ReadLog(h.ctx, c.id, after, 1000)
			if errors.Is(err, store.ErrCompacted) {
				t.Fatalf("ReadLog(%q) after the restart: %v; the harness's stores must keep lobbytest.MinRetention", c.id, err)
			}
			if err != nil {
				t.Fatalf("ReadLog(%q) after the restart: %v", c.id, err)
			}
			if len(entries) == 0 {
				break
			}
			for _, e := range entries {
				after = e.Version
				fx, err := rules.DecodeEffects(e.Data)
				if err != nil {
					t.Fatalf("lobby %q: log entry %d after the restart: %v", c.id, e.Version, err)
				}
				for _, ev := range fx.Events {
					k := ev.Lobby + "/" + strconv.FormatUint(ev.Revision, 10)
					if seen[k] {
						t.Errorf("event %s is in the log twice after the restart", k)
					}
					seen[k] = true
				}
			}
		}
	}
	unpublished := 0
	h.mu.Lock()
	var before []outcome
	for _, c := range h.clients {
		before = append(before, c.okUntil(phaseUp)...)
	}
	h.mu.Unlock()
	{
		for _, o := range before {
			for _, ev := range o.res.Events {
				if h.pub.has(ev.Lobby, ev.Revision) {
					continue
				}
				unpublished++
				if !seen[ev.Lobby+"/"+strconv.FormatUint(ev.Revision, 10)] {
					t.Errorf("lobby %q: revision %d (%s %s) was committed before the kill, never published, and is not in the effects log after the restart",
						ev.Lobby, ev.Revision, ev.Reason, ev.Subject)
				}
			}
		}
	}
	if unpublished == 0 {
		t.Error("no committed event kept in the log was unpublished at the kill; the test did not check that the log survives")
	}
	h.pub.hold.Store(false)

	h.stop()
	final := map[string]lobby.Snapshot{}
	for _, c := range h.clients {
		snap, err := h.svc.Snapshot(h.ctx, c.id)
		if err != nil {
			t.Fatalf("Snapshot(%q) at the end: %v", c.id, err)
		}
		final[c.id] = snap
	}
	for _, c := range h.clients {
		h.checkHistory(c, final[c.id])
	}
	t.Logf("%d events committed before the kill were unpublished at it and came back from the effects log; %s", unpublished, h.summary())
}

// testRestartVolatile: a server without persistence comes back empty.
// Commands fail clearly while it is down and work again after, on lobbies
// that start over: the checks below are what that means for an application
// (see docs/redis.md).
func testRestartVolatile(t *testing.T, r VolatileRestarter) {
	h := startRestartHarness(t, r, r.RestartableVolatile)

	probe := h.joinProbe()
	h.waitOK("20 successful commands per lobby before the kill", phaseUp, 20)
	// The relay publishes after the commit, on its own time: make sure
	// clients saw revision 1 of every lobby before the server forgets it,
	// so that its reissue after the restart is visible below.
	h.waitPublished("revision 1 of every lobby published before the kill", func(byRev map[uint64][]lobby.Event) bool { return len(byRev[1]) > 0 })
	h.killAndCheckDown(probe)
	h.restart()
	h.waitOK("10 successful commands per lobby after the restart", phaseRestart, 10)

	// Every lobby started over: the first write after the restart created
	// the lobby at version 1, although it had many versions before.
	firstAfter := h.rec.firstExpected(phaseRestart)
	for _, c := range h.clients {
		if v, ok := firstAfter[c.id]; !ok || v != 0 {
			t.Errorf("lobby %q: first write after the restart expected version %d (written: %v), want 0: the server forgot the lobby", c.id, v, ok)
		}
	}

	// The probe lobby is gone. Its connection's heartbeat is stale (the
	// transport tells the client to join again), its snapshot is empty at
	// revision 0.
	res, err := h.svc.Heartbeat(h.ctx, probe.id, "a", probe.gen)
	if err != nil || res.Outcome != lobby.OutcomeStale {
		t.Errorf("heartbeat of the probe's connection after the restart = %v, %v; want %v", res.Outcome, err, lobby.OutcomeStale)
	}
	if snap, err := h.svc.Snapshot(h.ctx, probe.id); err != nil || snap.Revision != 0 || len(snap.Members) != 0 {
		t.Errorf("probe snapshot after the restart = %+v, %v; want revision 0 and no members", snap, err)
	}
	// Joining again reissues numbers from before: revision 1, which a
	// client that saw revision 2 drops as old, and generation 1, the old
	// connection's, so a late close of that old socket ends the new one.
	var tr revision.Tracker
	tr.Observe(probe.snap.Revision)
	res, err = h.svc.Join(h.ctx, probe.id, "a", nil)
	if err != nil || res.Revision != 1 || res.Gen != probe.gen {
		t.Fatalf("join of the probe after the restart = revision %d, generation %d, %v; want revision 1 and generation %d again",
			res.Revision, res.Gen, err, probe.gen)
	}
	if v := tr.Observe(res.Revision); v.Accepted() {
		t.Errorf("a client that saw revision %d judged revision %d %v, want it dropped", probe.snap.Revision, res.Revision, v)
	}
	res, err = h.svc.Disconnect(h.ctx, probe.id, "a", probe.gen) // the old socket's late close
	if err != nil || res.Outcome != lobby.OutcomeApplied {
		t.Errorf("late close of the old connection = %v, %v; want it applied to the new connection with the same generation", res.Outcome, err)
	}
	h.stop()
	// Clients saw the lobbies' revisions start over: some revision number
	// was published twice, with different contents. (Not necessarily in
	// every lobby: a relay commit that was in flight when the server died
	// can land on the new, empty server once it is back and move the
	// relay's fresh cursor of a lobby past that lobby's first new entries,
	// whose positions repeat the old ones. A server that keeps nothing
	// loses events around a restart; docs/redis.md says so.)
	reusedIn := 0
	for _, c := range h.clients {
		for _, evs := range h.pub.contents(c.id) {
			if len(evs) > 1 {
				reusedIn++
				break
			}
		}
	}
	if reusedIn == 0 {
		t.Errorf("no lobby had a revision published with two contents, want the numbers from before the restart reissued")
	}
	t.Log(h.summary())
}

// restartHarness is one lobby.Service with Run going, over a store on a
// server the test started, and one traffic client per lobby.
type restartHarness struct {
	t       *testing.T
	ctx     context.Context
	srv     Server
	st      store.Store // the store under test, unwrapped
	rec     recorder    // the Service's successful writes
	named   string      // what every store error names, if the harness says
	svc     *lobby.Service
	pub     *collector
	phase   atomic.Int32
	clients []*trafficClient

	mu   sync.Mutex // guards the clients' logs
	cond *sync.Cond

	halt    atomic.Bool
	traffic sync.WaitGroup
	stopRun context.CancelFunc
	running sync.WaitGroup
	stopped bool
}

// restartWait bounds every wait of the restart tests.
const restartWait = 30 * time.Second

// relayHold is the relay claim hold of the restart tests' Service.
const relayHold = 200 * time.Millisecond

func startRestartHarness(t *testing.T, r Harness, open func(*testing.T) (store.Store, Server)) *restartHarness {
	st, srv := open(t)
	h := &restartHarness{t: t, ctx: t.Context(), srv: srv, st: st, pub: &collector{}}
	if n, ok := r.(ErrorNamer); ok {
		h.named = n.StoreName() + ": "
	}
	h.cond = sync.NewCond(&h.mu)
	h.rec.phase = h.phase.Load
	policy := policyOf(time.Minute, 2*time.Minute) // nothing expires during the test
	var err error
	h.svc, err = lobby.NewService(h.rec.wrap(st, true, true), lobby.WithPolicy(policy), lobby.WithPublisher(h.pub),
		lobby.WithClock(clockwork.NewRealClock()),
		// A pass cut off by the kill leaves its claims to lapse; keep
		// that short so the final drain finds them free.
		lobby.WithRelayHold(relayHold),
		// Heartbeats that reach the store: the checks judge what a
		// restart does to stored state. (A session across a restart is
		// the Sessions checks' and the fault campaign's to judge.)
		lobby.WithSessionTTL(0))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	h.stopRun = cancel
	h.running.Add(1)
	go func() {
		defer h.running.Done()
		if err := h.svc.Run(runCtx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(h.stop)

	seed := storetest.Seed(t)
	for i := range 4 {
		c := &trafficClient{id: "r" + strconv.Itoa(i), rng: rand.New(rand.NewPCG(seed, uint64(i)))}
		h.clients = append(h.clients, c)
		h.traffic.Add(1)
		go func() {
			defer h.traffic.Done()
			c.run(h)
		}()
	}
	return h
}

// stop ends the traffic (letting each client finish the command it is in),
// stops Run, and publishes whatever is still pending.
func (h *restartHarness) stop() {
	if h.stopped {
		return
	}
	h.stopped = true
	h.halt.Store(true)
	h.mu.Lock()
	h.cond.Broadcast()
	h.mu.Unlock()
	h.traffic.Wait()
	h.stopRun()
	h.running.Wait()
	if h.t.Failed() || h.phase.Load() == phaseDown {
		return
	}
	for start, idle := time.Now(), 0; ; {
		n, err := h.svc.Relay(h.ctx)
		// Nothing published: done, once a second look after the relay
		// hold (claims of a pass the kill cut off lapse by then) finds
		// nothing either.
		if err == nil && n == 0 {
			if idle++; idle == 2 {
				return
			}
			time.Sleep(2 * relayHold)
			continue
		}
		idle = 0
		if time.Since(start) > restartWait {
			h.t.Fatalf("the relay did not drain the effects log within %v: last Relay = %d, %v", restartWait, n, err)
		}
	}
}

// probeLobby is a lobby joined before the kill and left alone.
type probeLobby struct {
	id   string
	gen  uint64 // player a's connection
	snap lobby.Snapshot
}

func (h *restartHarness) joinProbe() probeLobby {
	h.t.Helper()
	p := probeLobby{id: "probe"}
	res, err := h.svc.Join(h.ctx, p.id, "a", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	p.gen = res.Gen
	if _, err := h.svc.Join(h.ctx, p.id, "b", nil); err != nil {
		h.t.Fatal(err)
	}
	if p.snap, err = h.svc.Snapshot(h.ctx, p.id); err != nil || p.snap.Revision != 2 {
		h.t.Fatalf("probe snapshot = %+v, %v; want revision 2", p.snap, err)
	}
	return p
}

// killAndCheckDown kills the server and checks that commands fail clearly
// and promptly while it is down: the traffic's, and a few direct ones.
func (h *restartHarness) killAndCheckDown(probe probeLobby) {
	h.t.Helper()
	downFrom := h.marks()
	h.srv.Kill(h.t)
	h.phase.Store(phaseDown)

	// Direct calls: a heartbeat on the probe lobby, which the Service has
	// in its cache (so it goes straight to the write script), then, at
	// once, two calls that must load a lobby first, which rueidis retries
	// until the context ends.
	type call struct {
		name string
		do   func(ctx context.Context) error
	}
	calls := []call{
		{"Heartbeat on a lobby in the Service's cache (a write)", func(ctx context.Context) error {
			_, err := h.svc.Heartbeat(ctx, probe.id, "a", probe.gen)
			return err
		}},
		{"Join of a lobby never seen (a load, then a write)", func(ctx context.Context) error {
			_, err := h.svc.Join(ctx, "elsewhere", "z", nil)
			return err
		}},
		{"Snapshot (a load)", func(ctx context.Context) error {
			_, err := h.svc.Snapshot(ctx, probe.id)
			return err
		}},
	}
	var wg sync.WaitGroup
	// Wait for the calls even if waitFor below fails the test: they report
	// through h.t, which must outlive them.
	defer wg.Wait()
	for i, c := range calls {
		wg.Add(1)
		f := func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(h.ctx, time.Second)
			defer cancel()
			start := time.Now()
			err := c.do(ctx)
			took := time.Since(start)
			switch {
			case err == nil:
				h.t.Errorf("%s with the server down succeeded, want an error", c.name)
			case took > 2*time.Second:
				h.t.Errorf("%s with the server down took %v, want at most its 1s context", c.name, took)
			default:
				if msg := h.unclear(err); msg != "" {
					h.t.Errorf("%s with the server down: %s", c.name, msg)
				}
				h.t.Logf("%s with the server down, after %v: %v", c.name, took.Round(time.Millisecond), err)
			}
		}
		if i == 0 {
			f()
		} else {
			go f()
		}
	}
	h.waitFor("a failed command per lobby while the server is down", func(c *trafficClient, i int) bool {
		return c.failedSince(downFrom[i])
	})
}

func (h *restartHarness) restart() {
	h.t.Helper()
	h.phase.Store(phaseRestart)
	h.srv.Start(h.t)
}

// unclear returns what is wrong with err as the error of a command that
// failed because the server was down, or "" if nothing is: it must not
// claim an outcome (a conflict, a missing lobby, a refusal) and must name
// the store call that failed.
func (h *restartHarness) unclear(err error) string {
	for _, sentinel := range []error{store.ErrConflict, store.ErrNotFound, store.ErrInvalid,
		lobby.ErrContention, lobby.ErrCorrupt, lobby.ErrNotMember, lobby.ErrNotHost, lobby.ErrNotEligible, lobby.ErrLobbyFull} {
		if errors.Is(err, sentinel) {
			return fmt.Sprintf("%q claims an outcome (%v)", err, sentinel)
		}
	}
	if !strings.Contains(err.Error(), h.named) {
		return fmt.Sprintf("%q does not name the store call that failed (%q)", err, h.named)
	}
	return ""
}

// marks returns each client's log length: what happens after it is new.
func (h *restartHarness) marks() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := make([]int, len(h.clients))
	for i, c := range h.clients {
		m[i] = len(c.log)
	}
	return m
}

// waitFor blocks until cond holds for every client, failing the test after
// restartWait.
func (h *restartHarness) waitFor(what string, cond func(c *trafficClient, i int) bool) {
	h.t.Helper()
	timer := time.AfterFunc(restartWait, func() {
		h.mu.Lock()
		h.cond.Broadcast()
		h.mu.Unlock()
	})
	defer timer.Stop()
	start := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		all := true
		for i, c := range h.clients {
			all = all && cond(c, i)
		}
		if all {
			return
		}
		if time.Since(start) >= restartWait || h.halt.Load() {
			h.t.Fatalf("traffic: no %s within %v", what, restartWait)
		}
		h.cond.Wait()
	}
}

// waitPublished polls what the clients were published until ok holds for
// every lobby's revisions (by revision, each distinct content once),
// failing the test after restartWait.
func (h *restartHarness) waitPublished(what string, ok func(byRev map[uint64][]lobby.Event) bool) {
	h.t.Helper()
	deadline := time.Now().Add(restartWait)
	for {
		all := true
		for _, c := range h.clients {
			all = all && ok(h.pub.contents(c.id))
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no %s within %v", what, restartWait)
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *restartHarness) waitOK(what string, phase int32, n int) {
	h.t.Helper()
	h.waitFor(what, func(c *trafficClient, _ int) bool { return c.okIn(phase) >= n })
}

func (h *restartHarness) waitEvents(what string, from []int, n int) {
	h.t.Helper()
	h.waitFor(what, func(c *trafficClient, i int) bool {
		k := 0
		for _, o := range c.log[from[i]:] {
			if o.err == nil && len(o.res.Events) > 0 {
				k++
			}
		}
		return k >= n
	})
}

// checkHistory checks one lobby's published history against what its
// client saw and the lobby's final state.
func (h *restartHarness) checkHistory(c *trafficClient, final lobby.Snapshot) {
	t := h.t
	hist := h.pub.history(t, c.id)
	revs := make([]uint64, len(hist))
	for i, ev := range hist {
		revs[i] = ev.Revision
	}
	if uint64(len(hist)) != final.Revision {
		t.Errorf("lobby %q: published revisions %v, want 1 to %d", c.id, revs, final.Revision)
		return
	}
	for i, ev := range hist {
		if ev.Revision != uint64(i+1) {
			t.Errorf("lobby %q: published revisions %v, want 1 to %d", c.id, revs, final.Revision)
			return
		}
	}
	// The events of successful commands are in the history as they were
	// reported.
	explained := make([]bool, len(hist))
	for _, o := range c.log {
		if o.err != nil {
			continue
		}
		for _, ev := range o.res.Events {
			if ev.Revision == 0 || ev.Revision > uint64(len(hist)) {
				t.Errorf("lobby %q: %v succeeded with revision %d, beyond the history", c.id, o.cmd.Op, ev.Revision)
				continue
			}
			if d := cmp.Diff(ev, hist[ev.Revision-1], cmpOpts); d != "" {
				t.Errorf("lobby %q: %v succeeded with an event the history holds otherwise (-command +history):\n%s", c.id, o.cmd.Op, d)
			}
			explained[ev.Revision-1] = true
		}
	}
	// Any other event was committed by a failed command whose reply was
	// lost, between the successful commands around it.
	used := make([]bool, len(c.log))
	for i, ev := range hist {
		if explained[i] {
			continue
		}
		j := slices.IndexFunc(c.log, func(f outcome) bool { return f.err != nil && !used[f.seq] && c.mayHaveCommitted(f, ev) })
		if j < 0 {
			t.Errorf("lobby %q: revision %d (%s %s) comes from no successful command and no failed one that may have committed",
				c.id, ev.Revision, ev.Reason, ev.Subject)
			continue
		}
		used[j] = true
	}
	if len(hist) > 0 {
		last := hist[len(hist)-1]
		got := lobby.Snapshot{Lobby: c.id, Revision: last.Revision, Term: last.Term, Host: last.Host, Members: last.Members}
		if d := cmp.Diff(final, got, cmpOpts); d != "" {
			t.Errorf("lobby %q: current state differs from the last published event (-state +event):\n%s", c.id, d)
		}
	}
}

func (h *restartHarness) summary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ok, failed [3]int
	for _, c := range h.clients {
		for _, o := range c.log {
			if o.err == nil {
				ok[o.phase]++
			} else {
				failed[o.phase]++
			}
		}
	}
	return fmt.Sprintf("commands succeeded/failed: %d/%d until the kill completed, %d/%d while down, %d/%d after the restart; %d events delivered more than once",
		ok[0], failed[0], ok[1], failed[1], ok[2], failed[2], h.pub.repeats())
}

// trafficClient drives one lobby with three players through joins,
// heartbeats, disconnects and leaves, one command after the other.
type trafficClient struct {
	id  string
	rng *rand.Rand
	// log is guarded by restartHarness.mu (appended by this client only).
	log []outcome
}

type outcome struct {
	seq   int // index in log
	cmd   rules.Command
	res   lobby.Result
	err   error
	phase int32 // when the command returned
}

// player is what a client believes about one player; unknown after a
// failed or stale command.
type player struct {
	known, member, online bool
	gen                   uint64
}

func (c *trafficClient) run(h *restartHarness) {
	names := []string{"p0", "p1", "p2"}
	players := map[string]*player{}
	for _, n := range names {
		players[n] = &player{known: true}
	}
	for !h.halt.Load() {
		name := names[c.rng.IntN(len(names))]
		p := players[name]
		var cmd rules.Command
		switch r := c.rng.IntN(6); {
		case !p.known:
			cmd = rules.Leave(name) // from any state to a known one
		case !p.online:
			cmd = rules.Join(name, nil)
		case r < 3:
			cmd = rules.Heartbeat(name, p.gen)
		case r < 5:
			cmd = rules.Disconnect(name, p.gen)
		default:
			cmd = rules.Leave(name)
		}
		ctx, cancel := context.WithTimeout(h.ctx, 2*time.Second)
		start := time.Now()
		res, err := h.svc.Do(ctx, c.id, cmd)
		took := time.Since(start)
		cancel()
		switch {
		case err != nil, res.Outcome == lobby.OutcomeStale:
			*p = player{}
		case cmd.Op == rules.OpJoin:
			*p = player{known: true, member: true, online: true, gen: res.Gen}
		case cmd.Op == rules.OpDisconnect:
			p.online = false
		case cmd.Op == rules.OpLeave:
			*p = player{known: true}
		}
		h.mu.Lock()
		c.log = append(c.log, outcome{seq: len(c.log), cmd: cmd, res: res, err: err, phase: h.phase.Load()})
		h.cond.Broadcast()
		h.mu.Unlock()
		if err != nil {
			if msg := h.unclear(err); msg != "" {
				h.t.Errorf("lobby %q: %v of %s failed unclearly: %s", c.id, cmd.Op, name, msg)
			}
			if took > 3*time.Second {
				h.t.Errorf("lobby %q: %v of %s failed after %v, want within its 2s context", c.id, cmd.Op, name, took)
			}
			time.Sleep(10 * time.Millisecond) // pacing while the server is down, not synchronisation
		}
	}
}

// okIn counts the successful commands that returned in phase; failedSince
// reports a failure at or after log index from. Called with the harness's
// mu held.
func (c *trafficClient) okIn(phase int32) int {
	n := 0
	for _, o := range c.log {
		if o.err == nil && o.phase == phase {
			n++
		}
	}
	return n
}

func (c *trafficClient) failedSince(from int) bool {
	return slices.ContainsFunc(c.log[from:], func(o outcome) bool { return o.err != nil })
}

// okUntil returns the successful commands that returned in phase or
// before. Called with the harness's mu held.
func (c *trafficClient) okUntil(phase int32) []outcome {
	var out []outcome
	for _, o := range c.log {
		if o.err == nil && o.phase <= phase {
			out = append(out, o)
		}
	}
	return out
}

// mayHaveCommitted reports whether failed command f may have committed ev:
// an event of f's player, of a reason f's operation produces, at a revision
// after every successful command before f and not after any after it.
func (c *trafficClient) mayHaveCommitted(f outcome, ev lobby.Event) bool {
	var reasons []lobby.Reason
	switch f.cmd.Op {
	case rules.OpJoin:
		reasons = []lobby.Reason{lobby.ReasonJoined, lobby.ReasonReconnected}
	case rules.OpDisconnect:
		reasons = []lobby.Reason{lobby.ReasonDisconnected}
	case rules.OpLeave:
		reasons = []lobby.Reason{lobby.ReasonLeft}
	}
	if ev.Subject != f.cmd.Player || !slices.Contains(reasons, ev.Reason) {
		return false
	}
	for _, o := range c.log {
		if o.err != nil {
			continue
		}
		if (o.seq < f.seq && ev.Revision <= o.res.Revision) || (o.seq > f.seq && ev.Revision > o.res.Revision) {
			return false
		}
	}
	return true
}
