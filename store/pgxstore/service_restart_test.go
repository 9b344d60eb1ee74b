package pgxstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lobbyhost/lobbyhost/lease"
	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
)

// TestServiceSurvivesDatabaseRestart stops and starts the server under
// lobby traffic through two Services (two processes' worth: own pools, own
// caches, both running Run). While it is down, commands fail promptly with
// errors that name the lobby and the store call and claim no store outcome;
// afterwards traffic resumes by itself. In the end every lobby's published
// history has consecutive revisions, holds every event of every successful
// command, holds nothing that no command could have caused (a failed
// command may have committed, its answer lost), follows transition by
// transition from the events' reasons, and ends in the lobby's current
// state: no committed transition was lost or duplicated.
//
// It takes the server down for everyone, so it runs only when
// LOBBYHOST_POSTGRES_CTL is set; run it on its own:
//
//	LOBBYHOST_POSTGRES_CTL='pg_ctlcluster --skip-systemctl-redirect 15 main' \
//	go test -run 'TestServiceSurvivesDatabaseRestart' ./store/pgxstore/
func TestServiceSurvivesDatabaseRestart(t *testing.T) {
	dsn := testDSN(t)
	skipWithoutCtl(t)
	s := newTestStore(t)
	ctx := ctxT(t)
	pub := &collector{}
	policy := lobby.DefaultPolicy()
	policy.Policy = lease.Policy{Grace: time.Minute, HeartbeatTTL: 2 * time.Minute} // no expiries during the test
	var svcs [2]*lobby.Service
	runCtx, stopRun := context.WithCancel(context.Background())
	var running sync.WaitGroup
	defer func() { stopRun(); running.Wait() }()
	for i := range svcs {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 4
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st, err := New(pool, WithSchema(s.Schema()))
		if err != nil {
			t.Fatal(err)
		}
		svcs[i], err = lobby.NewService(st, lobby.WithPolicy(policy), lobby.WithPublisher(pub), lobby.WithResync(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		running.Go(func() {
			if err := svcs[i].Run(runCtx); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	lobbies := []string{"r0", "r1", "r2", "r3"}
	tr := &lobbyTraffic{clients: make([]*lobbyClient, len(lobbies))}
	tr.cond = sync.NewCond(&tr.mu)
	// Stopping the traffic lets each client finish the command it is in:
	// cancelling it would leave a write that may still commit unaccounted.
	var halt atomic.Bool
	var clients sync.WaitGroup
	for i, id := range lobbies {
		c := &lobbyClient{i: i, id: id, rng: rand.New(rand.NewPCG(seed, uint64(i))), beliefs: map[string]*belief{}}
		tr.clients[i] = c
		clients.Go(func() { c.run(ctx, &halt, tr, svcs) })
	}
	stopped := false
	stopAll := func() {
		if !stopped {
			stopped = true
			halt.Store(true)
			clients.Wait()
		}
	}
	defer stopAll()

	tr.waitFor(t, "10 commands per lobby before the stop", func(c *lobbyClient) bool { return c.ok >= 10 })
	if err := pgctl(t, "stop"); err != nil {
		t.Fatalf("stopping the server: %v", err)
	}
	down := true
	t.Cleanup(func() { // whatever happens, leave it running
		if down {
			_ = pgctl(t, "start")
		}
	})
	downAt := tr.mark()

	// Direct commands while down: prompt, clear errors.
	for i, svc := range svcs {
		for name, call := range map[string]func(context.Context) error{
			"join":     func(ctx context.Context) error { _, err := svc.Join(ctx, "down", "p", nil); return err },
			"snapshot": func(ctx context.Context) error { _, err := svc.Snapshot(ctx, "r0"); return err },
		} {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			start := time.Now()
			err := call(cctx)
			cancel()
			if el := time.Since(start); el > 6*time.Second {
				t.Errorf("service %d: %s while down took %v, want at most its 5s context", i, name, el)
			}
			if err == nil {
				t.Fatalf("service %d: %s while the server is down = nil, want an error", i, name)
			}
			if msg := clearStoreError(err); msg != "" {
				t.Errorf("service %d: %s while down: %s", i, name, msg)
			}
			t.Logf("service %d: %s while down: %v", i, name, err)
		}
	}
	tr.waitFor(t, "a failed command per lobby while down", func(c *lobbyClient) bool { return c.failedSince(downAt) })
	if err := pgctl(t, "start"); err != nil {
		t.Fatalf("starting the server: %v", err)
	}
	down = false
	upAt := tr.mark()
	tr.waitFor(t, "10 successful commands per lobby after the restart", func(c *lobbyClient) bool { return c.okSince(upAt) >= 10 })
	stopAll()

	// Let the relays catch up with everything committed.
	final := map[string]lobby.Snapshot{}
	for _, id := range lobbies {
		var snap lobby.Snapshot
		var err error
		for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
			if snap, err = svcs[0].Snapshot(ctx, id); err == nil {
				break
			}
			if time.Since(start) > processWait {
				t.Fatalf("Snapshot(%q) still failing %v after the restart: %v", id, processWait, err)
			}
		}
		final[id] = snap
	}
	pub.waitFor(t, final)
	stopRun()
	running.Wait()

	total := map[string]int{}
	for _, c := range tr.clients {
		id := c.id
		h, dups := pub.history(t, id)
		total["ok"] += c.ok
		total["failed"] += len(c.fails)
		for _, f := range c.fails {
			if msg := clearStoreError(f.err); msg != "" {
				t.Errorf("lobby %q: %v failed unclearly: %s", id, f.cmd, msg)
			}
		}
		total["redelivered"] += dups
		revs := make([]uint64, len(h))
		for i, ev := range h {
			revs[i] = ev.Revision
		}
		if len(h) == 0 || uint64(len(h)) != final[id].Revision || h[0].Revision != 1 || h[len(h)-1].Revision != final[id].Revision {
			t.Errorf("lobby %q: published revisions %v, want 1..%d each once", id, revs, final[id].Revision)
			continue
		}
		for i, ev := range h {
			if ev.Revision != uint64(i+1) {
				t.Errorf("lobby %q: published revisions %v, want consecutive from 1", id, revs)
				break
			}
		}
		// Successful commands' events are in the history exactly.
		explained := make([]bool, len(h))
		for _, o := range c.log {
			for _, ev := range o.res.Events {
				if d := diffEvents([]lobby.Event{ev}, []lobby.Event{h[ev.Revision-1]}); d != "" {
					t.Errorf("lobby %q: %v succeeded with an event the history does not hold (-command +history):\n%s", id, o.cmd, d)
				}
				explained[ev.Revision-1] = true
			}
		}
		// Every other event was committed by a failed command whose answer
		// was lost, between the successful commands around it.
		ambiguous := c.ambiguousWindows()
		for i, ev := range h {
			if explained[i] {
				continue
			}
			j := slices.IndexFunc(ambiguous, func(w window) bool { return !w.used && w.explains(ev) })
			if j < 0 {
				t.Errorf("lobby %q: revision %d (%s %s) matches no successful command and no failed one that may have committed", id, ev.Revision, ev.Reason, ev.Subject)
				continue
			}
			ambiguous[j].used = true
			total["ambiguous commits"]++
		}
		checkTransitions(t, id, h)
		last := h[len(h)-1]
		got := lobby.Snapshot{Lobby: id, Revision: last.Revision, Host: last.Host, Members: last.Members}
		for i, svc := range svcs {
			snap, err := svc.Snapshot(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if d := diffSnapshots(got, snap); d != "" {
				t.Errorf("lobby %q: service %d's snapshot differs from the last published event (-event +snapshot):\n%s", id, i, d)
			}
		}
	}
	t.Logf("commands: %d succeeded, %d failed; %d events committed by failed commands; %d events delivered more than once",
		total["ok"], total["failed"], total["ambiguous commits"], total["redelivered"])
	if total["failed"] == 0 {
		t.Error("no command failed: the restart did not hit the traffic")
	}
}

// skipWithoutCtl skips the calling test, saying how to enable it, unless
// the server control command is configured.
func skipWithoutCtl(t *testing.T) {
	t.Helper()
	if os.Getenv(ctlEnv) == "" {
		t.Skipf("restart test skipped: it stops the PostgreSQL server; set %s to a command that takes stop|start, "+
			"e.g. %s='pg_ctlcluster --skip-systemctl-redirect 15 main'", ctlEnv, ctlEnv)
	}
}

// clearStoreError returns what is wrong with err as the error of a command
// that failed because the database is down, or "" if nothing is.
func clearStoreError(err error) string {
	for _, sentinel := range []error{store.ErrNotFound, store.ErrConflict, store.ErrInvalid, lobby.ErrContention,
		lobby.ErrCorrupt, lobby.ErrNotMember, lobby.ErrNotHost, lobby.ErrLobbyFull} {
		if errors.Is(err, sentinel) {
			return fmt.Sprintf("%q claims an outcome (%v)", err, sentinel)
		}
	}
	if !strings.Contains(err.Error(), "pgxstore: ") {
		return fmt.Sprintf("%q does not name the store call that failed", err)
	}
	return ""
}

// collector is a Publisher that keeps every delivery.
type collector struct {
	mu     sync.Mutex
	cond   *sync.Cond
	events []lobby.Event
}

func (c *collector) Publish(_ context.Context, events []lobby.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, events...)
	if c.cond != nil {
		c.cond.Broadcast()
	}
	return nil
}

// waitFor waits until every lobby in final has been published up to its
// revision.
func (c *collector) waitFor(t *testing.T, final map[string]lobby.Snapshot) {
	t.Helper()
	c.mu.Lock()
	c.cond = sync.NewCond(&c.mu)
	c.mu.Unlock()
	var done map[string]bool
	published := func() bool {
		done = map[string]bool{}
		for _, ev := range c.events {
			if final[ev.Lobby].Revision == ev.Revision {
				done[ev.Lobby] = true
			}
		}
		return len(done) == len(final)
	}
	if !waitCond(&c.mu, c.cond, published) {
		t.Fatalf("relays did not publish %v within %v (published: %v)", final, processWait, done)
	}
}

// history returns lobby id's published events by revision, each once
// (failing the test for two different events at one revision), and how
// many deliveries were repeats.
func (c *collector) history(t *testing.T, id string) (h []lobby.Event, dups int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	byRev := map[uint64]lobby.Event{}
	for _, ev := range c.events {
		if ev.Lobby != id {
			continue
		}
		if prev, ok := byRev[ev.Revision]; ok {
			dups++
			if d := diffEvents([]lobby.Event{prev}, []lobby.Event{ev}); d != "" {
				t.Errorf("lobby %q revision %d was published with two contents (-first +second):\n%s", id, ev.Revision, d)
			}
			continue
		}
		byRev[ev.Revision] = ev
	}
	for _, ev := range byRev {
		h = append(h, ev)
	}
	slices.SortFunc(h, func(a, b lobby.Event) int { return cmp.Compare(a.Revision, b.Revision) })
	return h, dups
}

// lobbyTraffic is one client per lobby, each issuing commands one after
// the other.
type lobbyTraffic struct {
	mu      sync.Mutex
	cond    *sync.Cond
	clients []*lobbyClient
}

// mark returns a position in every client's log: what happens after it.
func (tr *lobbyTraffic) mark() []int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	m := make([]int, len(tr.clients))
	for i, c := range tr.clients {
		m[i] = len(c.log) + len(c.fails)
	}
	return m
}

// waitFor blocks until cond holds for every client, failing after
// processWait.
func (tr *lobbyTraffic) waitFor(t *testing.T, what string, cond func(*lobbyClient) bool) {
	t.Helper()
	timer := time.AfterFunc(processWait, func() {
		tr.mu.Lock()
		tr.cond.Broadcast()
		tr.mu.Unlock()
	})
	defer timer.Stop()
	start := time.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for {
		all := true
		for _, c := range tr.clients {
			all = all && cond(c)
		}
		if all {
			return
		}
		if time.Since(start) >= processWait {
			t.Fatalf("traffic: no %s within %v", what, processWait)
		}
		tr.cond.Wait()
	}
}

// lobbyClient drives one lobby with three players through joins,
// disconnects, rejoins and leaves, alternating between the Services.
type lobbyClient struct {
	i       int // in lobbyTraffic.clients
	id      string
	rng     *rand.Rand
	beliefs map[string]*belief

	// Guarded by lobbyTraffic.mu (written by the client goroutine only).
	ok    int
	seq   int       // commands issued
	log   []outcome // successful commands
	fails []outcome // failed commands
}

// belief is what the client knows about a player; unknown after a failed
// command (its write may or may not have committed).
type belief struct {
	known, member, online bool
	gen                   uint64
}

type outcome struct {
	seq int
	cmd lobby.Command
	res lobby.Result
	err error
}

func (c *lobbyClient) run(ctx context.Context, halt *atomic.Bool, tr *lobbyTraffic, svcs [2]*lobby.Service) {
	players := []string{"p0", "p1", "p2"}
	for _, p := range players {
		c.beliefs[p] = &belief{known: true}
	}
	for !halt.Load() && ctx.Err() == nil {
		p := players[c.rng.IntN(len(players))]
		b := c.beliefs[p]
		var cmd lobby.Command
		switch {
		case !b.known:
			cmd = lobby.Leave(p) // from any state to a known one
		case !b.member || !b.online:
			cmd = lobby.Join(p, nil)
		case c.rng.IntN(3) > 0:
			cmd = lobby.Disconnect(p, b.gen)
		default:
			cmd = lobby.Leave(p)
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		res, err := svcs[c.rng.IntN(2)].Do(cctx, c.id, cmd)
		cancel()
		tr.mu.Lock()
		c.seq++
		o := outcome{seq: c.seq, cmd: cmd, res: res, err: err}
		if err != nil {
			c.fails = append(c.fails, o)
			*b = belief{}
		} else {
			c.ok++
			c.log = append(c.log, o)
			switch cmd.Op {
			case lobby.OpLeave:
				*b = belief{known: true}
			case lobby.OpJoin:
				*b = belief{known: true, member: true, online: true, gen: res.Gen}
			case lobby.OpDisconnect:
				b.online = false
			}
		}
		tr.cond.Broadcast()
		tr.mu.Unlock()
		if err != nil {
			time.Sleep(20 * time.Millisecond) // pacing while the server is down, not synchronisation
		}
	}
}

// failedSince and okSince count what happened after a mark; called with
// lobbyTraffic.mu held.
func (c *lobbyClient) failedSince(mark []int) bool {
	return len(c.fails) > 0 && c.fails[len(c.fails)-1].seq > c.markOf(mark)
}

func (c *lobbyClient) okSince(mark []int) int {
	n := 0
	for _, o := range c.log {
		if o.seq > c.markOf(mark) {
			n++
		}
	}
	return n
}

func (c *lobbyClient) markOf(mark []int) int { return mark[c.i] }

// window is what a failed command may have committed: one event of one of
// the reasons its operation produces, about its player, at a revision after
// the successful commands before it and at or before those after it.
type window struct {
	player  string
	reasons []lobby.Reason
	lo, hi  uint64 // revision in (lo, hi]
	used    bool
}

func (w window) explains(ev lobby.Event) bool {
	return ev.Subject == w.player && slices.Contains(w.reasons, ev.Reason) && ev.Revision > w.lo && ev.Revision <= w.hi
}

func (c *lobbyClient) ambiguousWindows() []window {
	var out []window
	for _, f := range c.fails {
		w := window{player: f.cmd.Player, hi: ^uint64(0)}
		switch f.cmd.Op {
		case lobby.OpJoin:
			w.reasons = []lobby.Reason{lobby.ReasonJoined, lobby.ReasonReconnected}
		case lobby.OpDisconnect:
			w.reasons = []lobby.Reason{lobby.ReasonDisconnected}
		case lobby.OpLeave:
			w.reasons = []lobby.Reason{lobby.ReasonLeft}
		}
		for _, o := range c.log {
			switch {
			case o.seq < f.seq:
				w.lo = max(w.lo, o.res.Revision)
			case o.seq > f.seq:
				w.hi = min(w.hi, o.res.Revision)
			}
		}
		out = append(out, w)
	}
	return out
}

// checkTransitions checks that each event of a history follows from the
// one before by its reason and subject alone: joined adds the subject with
// the next join sequence, disconnected and reconnected flip its status,
// left removes it; the host stays unless removed, and an empty seat goes
// to the first online member in join order.
func checkTransitions(t *testing.T, id string, h []lobby.Event) {
	t.Helper()
	var members []lobby.MemberView
	host := ""
	nextSeq := uint64(1)
	for _, ev := range h {
		want := slices.Clone(members)
		i := slices.IndexFunc(want, func(m lobby.MemberView) bool { return m.Player == ev.Subject })
		bad := ""
		switch ev.Reason {
		case lobby.ReasonJoined:
			if i >= 0 {
				bad = "joined while a member"
			}
			want = append(want, lobby.MemberView{Player: ev.Subject, JoinSeq: nextSeq, Status: lobby.StatusOnline})
			nextSeq++
		case lobby.ReasonReconnected, lobby.ReasonDisconnected:
			from, to := lobby.StatusReconnecting, lobby.StatusOnline
			if ev.Reason == lobby.ReasonDisconnected {
				from, to = to, from
			}
			if i < 0 || want[i].Status != from {
				bad = fmt.Sprintf("%s while not %v", ev.Reason, from)
				break
			}
			want[i].Status = to
		case lobby.ReasonLeft:
			if i < 0 {
				bad = "left while not a member"
				break
			}
			want = slices.Delete(want, i, i+1)
		default:
			bad = "a reason no command of the test produces"
		}
		wantHost := host
		if !slices.ContainsFunc(want, func(m lobby.MemberView) bool { return m.Player == wantHost }) {
			wantHost = ""
		}
		if wantHost == "" {
			if j := slices.IndexFunc(want, func(m lobby.MemberView) bool { return m.Status == lobby.StatusOnline }); j >= 0 {
				wantHost = want[j].Player
			}
		}
		if bad != "" {
			t.Errorf("lobby %q revision %d: %s %s: %s", id, ev.Revision, ev.Reason, ev.Subject, bad)
			return
		}
		wantEv := ev
		wantEv.Members, wantEv.Host, wantEv.PrevHost = want, wantHost, host
		if d := diffEvents([]lobby.Event{wantEv}, []lobby.Event{ev}); d != "" {
			t.Errorf("lobby %q revision %d does not follow from revision %d (-want +got):\n%s", id, ev.Revision, ev.Revision-1, d)
			return
		}
		members, host = want, wantHost
	}
}

func diffSnapshots(want, got lobby.Snapshot) string {
	return diffEvents(
		[]lobby.Event{{Lobby: want.Lobby, Revision: want.Revision, Host: want.Host, Members: want.Members}},
		[]lobby.Event{{Lobby: got.Lobby, Revision: got.Revision, Host: got.Host, Members: got.Members}})
}
