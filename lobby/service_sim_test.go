package lobby

// A deterministic simulation of several Services over one store.
//
// Every goroutine that runs a Service call is an actor, and only one actor
// runs at a time: it holds the baton until it reaches a yield point (a store
// call, a wait for a lobby's lock, a pause between compare-and-set
// attempts), where it hands the baton back to the scheduler. The scheduler
// then decides, from a seeded random source, what happens next: resume one
// of the parked actors (in any order, which reorders goroutines), start a new
// operation, move the clock, skew or jump one Service's clock, or kill a
// Service and start a new one with an empty cache. A store call that an actor
// resumes into may be failed before it happens, after it happened (the
// ambiguous commit), or with a timeout. So one seed is one schedule, replayed
// exactly by LOBBYHOST_SEED.
//
// The store records every commit with the command and time that made it.
// The checks then replay that history through the pure Machine:
//
//   - every committed record is exactly what the Machine makes of the record
//     before it, with exactly its events (the lobby invariants hold at every
//     version, since the decoder validates them);
//   - the outbox holds each committed revision once, with no gaps;
//   - every command's result (applied, refused or no-op) is what the Machine
//     says on the version it was judged on;
//   - the published events are the committed ones, in order per lobby;
//   - dropping every write made only by a sweeper, a snapshot or an expiry
//     trigger changes no event, no command result and not the final state.
//
// Most schedules run on a store with sessions (store.Sessions). Their
// Services open and renew sessions, commit the time-outs of the
// connections they hold in memory, apply expired sessions and drain, each
// as a step the scheduler starts (what Run's loops would do), so renewals
// can come late, fail, or find their session over after a pause; killed
// Services leave their sessions to expire; and a Service without a
// session (WithSessionTTL(0)) stores its connections' deadlines beside the
// others'. Each commit is then replayed with the session deadlines the
// store gave the attempt that wrote, and the last check replays every
// lobby with the deadlines the sessions' own calls left them with
// (sessionEnds says where a lobby's view of a session may differ), so the
// outcome is the same whichever process applied an expiry, and when.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby/rules"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// simNestedObserver: the Observer sometimes reads the lobby it observes.
// LOBBYHOST_SIM_NESTED=0 turns that off, to hunt other defects on a
// Service that deadlocks there.
var simNestedObserver = os.Getenv("LOBBYHOST_SIM_NESTED") != "0"

// simQuietDrain: drains wait for their Service to be idle (see start).
var simQuietDrain = os.Getenv("LOBBYHOST_SIM_LOUD_DRAIN") != "1"

var simSchedules = flag.Int("lobby.sim", 200, "schedules TestSimulation runs (CI runs many more)")

// errInjected is the failure the simulated store injects.
var errInjected = errors.New("sim: injected store failure")

// simWatchdog bounds how long the scheduler waits for an actor to yield;
// an actor that never yields is stuck (a deadlock), which fails the test.
const simWatchdog = 5 * time.Second

func simSeed() (seed uint64, fixed bool) {
	if s := os.Getenv("LOBBYHOST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err == nil {
			return v, true
		}
	}
	return rand.Uint64(), false
}

// TestSimulation runs -lobby.sim random schedules (or the one named by
// LOBBYHOST_SEED) and checks each as described at the top of this file.
func TestSimulation(t *testing.T) {
	base, fixed := simSeed()
	n := *simSchedules
	if fixed {
		n = 1
	}
	t.Logf("simulation: %d schedules from seed %d (replay one with LOBBYHOST_SEED=<seed> go test -run TestSimulation ./lobby)", n, base)
	for i := range n {
		seed := base + uint64(i)
		if sm, err := runSimForStats(seed); err != nil {
			if os.Getenv("LOBBYHOST_SIM_TRACE") == "1" {
				t.Log(sm.trace())
			}
			t.Fatalf("schedule with seed %d failed (replay: LOBBYHOST_SEED=%d go test -run 'TestSimulation$' ./lobby):\n%v", seed, seed, err)
		}
	}
}

// --- the scheduler ---

type simActor struct {
	id     int
	svc    *simService
	ctx    context.Context
	cancel context.CancelFunc
	resume chan struct{}
	// cmds is the stack of commands whose transactions this actor runs:
	// the operation's own, then any the Observer makes from inside it.
	cmds []simCmd
	op   *simOp
	done bool
	// where it is parked: a store call or a wait for a lobby's lock.
	where string
	// now is the last reading of a Service clock the actor made.
	now time.Time
	// pending are the commits this actor made since the Observer last
	// saw one of its transactions: the next Observation names their
	// command.
	pending []int
	// sd is the answer of the actor's last SessionDeadlines call, and
	// sdLoads the number of Loads since: the session deadlines the
	// attempt in progress judges its lobby with.
	sd      rules.SessionDeadlines
	sdLoads int
}

type simCmd struct {
	cmd rules.Command
	own bool // the operation's own command (not a nested Observer call)
}

type sim struct {
	rng      *rand.Rand
	base     *clockwork.FakeClock
	store    *simStore
	services []*simService
	policy   Policy
	actors   []*simActor // parked, in start order
	current  *simActor
	back     chan *simActor
	nextID   int
	faults   bool
	claims   bool // the store offers Claim
	sessions bool // the store offers Sessions
	healthy  bool // renewals run to their end at once
	// split counts the lobbies left out of the sweeper-independence
	// check (see splitView).
	split int
	ops   []*simOp
	gens  map[[2]string][]uint64 // (lobby, player) → issued generations
	// published events per lobby, in the order Publish got them.
	pubMu     sync.Mutex
	published map[string][]uint64
	pubBad    error
}

// park hands the baton back to the scheduler and waits to be resumed.
func (s *sim) park(a *simActor) {
	s.back <- a
	<-a.resume
}

// yield is the Service's test hook.
func (s *sim) yield(ctx context.Context) error {
	if a := s.current; a != nil {
		a.where = "waiting for a lobby"
		s.park(a)
	}
	return ctx.Err()
}

// run gives the baton to a and waits until it parks or finishes.
func (s *sim) run(a *simActor) error {
	s.current = a
	a.resume <- struct{}{}
	select {
	case got := <-s.back:
		if got != a {
			return fmt.Errorf("actor %d yielded while actor %d ran", got.id, a.id)
		}
	case <-time.After(simWatchdog):
		return fmt.Errorf("actor %d (%v) never yielded: a goroutine is stuck (deadlock?)", a.id, a.op.cmd.Op)
	}
	s.current = nil
	if a.done {
		s.actors = slices.DeleteFunc(s.actors, func(x *simActor) bool { return x == a })
		if op := a.op; op.kind == "cmd" && op.cmd.Op == rules.OpJoin && op.err == nil {
			k := [2]string{op.lobby, op.cmd.Player}
			s.gens[k] = append(s.gens[k], op.res.Gen)
		}
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// --- the store ---

// simCommit is one committed write or delete, as the store saw it.
type simCommit struct {
	lobby   string
	version uint64 // the version after it
	del     bool
	floor   uint64
	data    []byte
	effects []byte // the log entry written with it; nil if none
	at      time.Time
	dl      time.Time
	// judgedAt is the writing actor's last clock reading before Write:
	// the time the attempt that wrote judged its command at (a Service
	// reads its clock once per attempt). Zero if no actor wrote.
	judgedAt time.Time
	op       *simOp // the operation whose actor made it
	cmd      rules.Command
	own      bool
	// sessions is the write's Write.Sessions; sd the session deadlines
	// the attempt that wrote was judged with (as the store gave them);
	// stamped, for a command the Service stamps with its own time (a
	// time-out at its deadline), that time.
	sessions []string
	sd       rules.SessionDeadlines
	stamped  time.Time
	// prior is the lobby's last transition time before it (set by the
	// checks): where a session the store no longer knows ends; held the
	// sessions the lobby held before it.
	prior time.Time
	held  []string
}

type simStore struct {
	inner   *memstore.Store
	sim     *sim
	commits []simCommit
	// sessLog is every session call that changed the store, in order.
	sessLog []simSessOp
}

// simSessOp is one session call that took effect, with the session's
// deadline after it.
type simSessOp struct {
	kind     string // "open", "renew", "end"
	id       string
	now      time.Time // the renewer's now; the drain's time for "end"
	deadline time.Time // after the call
	before   time.Time // before the call
	commits  int       // len(commits) when it happened
}

// enter is the yield point at the start of every store call. It returns
// the fault to inject: 0 none, 1 fail before, 2 fail after (ambiguous),
// 3 time out before.
func (st *simStore) enter(ctx context.Context) (int, error) {
	s := st.sim
	a := s.current
	if a == nil {
		return 0, ctx.Err()
	}
	a.where = "in a store call"
	s.park(a)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if !s.faults {
		return 0, nil
	}
	switch r := s.rng.IntN(100); {
	case r < 4:
		return 1, nil
	case r < 7:
		return 2, nil
	case r < 9:
		return 3, nil
	}
	return 0, nil
}

func faultErr(f int) error {
	if f == 3 {
		return context.DeadlineExceeded
	}
	return errInjected
}

func (st *simStore) top() (*simOp, simCmd) {
	a := st.sim.current
	if a == nil || len(a.cmds) == 0 {
		return nil, simCmd{cmd: rules.Tick()}
	}
	return a.op, a.cmds[len(a.cmds)-1]
}

func (st *simStore) Load(ctx context.Context, id string) (store.Record, error) {
	f, err := st.enter(ctx)
	if err != nil {
		return store.Record{}, err
	}
	if f == 1 || f == 3 {
		return store.Record{}, faultErr(f)
	}
	rec, err := st.inner.Load(ctx, id)
	if a := st.sim.current; a != nil {
		a.sdLoads++
	}
	if op, c := st.top(); op != nil && c.own && (err == nil || errors.Is(err, store.ErrNotFound)) {
		op.judged = simJudged{ok: true, version: rec.Version, data: rec.Data, at: rec.At, found: err == nil}
		op.wroteLast = false
	}
	if f == 2 {
		return store.Record{}, errInjected
	}
	return rec, err
}

func (st *simStore) Write(ctx context.Context, w store.Write) error {
	var judgedAt time.Time
	if a := st.sim.current; a != nil {
		judgedAt = a.now // before enter lets other actors run
	}
	f, err := st.enter(ctx)
	if err != nil {
		return err
	}
	if f == 1 || f == 3 {
		return faultErr(f)
	}
	if err := st.inner.Write(ctx, w); err != nil {
		return err
	}
	op, c := st.top()
	cm := simCommit{lobby: w.ID, version: w.Expected + 1, data: slices.Clone(w.Data), effects: slices.Clone(w.Effects), at: w.At, dl: w.Deadline, judgedAt: judgedAt, op: op, cmd: c.cmd, own: c.own, sessions: slices.Clone(w.Sessions)}
	if a := st.sim.current; a != nil {
		if a.sdLoads == 0 {
			cm.sd = a.sd
		}
		a.pending = append(a.pending, len(st.commits))
	}
	st.commits = append(st.commits, cm)
	if op != nil && c.own {
		op.writes = append(op.writes, len(st.commits)-1)
		op.wroteLast = true
	}
	if f == 2 {
		return errInjected
	}
	return nil
}

func (st *simStore) Delete(ctx context.Context, d store.Deletion) error {
	f, err := st.enter(ctx)
	if err != nil {
		return err
	}
	if f == 1 || f == 3 {
		return faultErr(f)
	}
	if err := st.inner.Delete(ctx, d); err != nil {
		return err
	}
	op, c := st.top()
	if a := st.sim.current; a != nil {
		a.pending = append(a.pending, len(st.commits))
	}
	st.commits = append(st.commits, simCommit{lobby: d.ID, version: d.Expected, del: true, floor: d.Floor, op: op, cmd: c.cmd})
	if f == 2 {
		return errInjected
	}
	return nil
}

func (st *simStore) Due(ctx context.Context, now time.Time, limit int) ([]store.Due, error) {
	f, err := st.enter(ctx)
	if err != nil {
		return nil, err
	}
	if f != 0 {
		return nil, faultErr(f)
	}
	return st.inner.Due(ctx, now, limit)
}

// Claim is offered to the Services only in schedules with claims, so that
// sweepers divide due lobbies among themselves.
func (st *simStore) Claim(ctx context.Context, now time.Time, limit int, hold time.Duration) ([]store.Due, error) {
	f, err := st.enter(ctx)
	if err != nil {
		return nil, err
	}
	if f == 1 || f == 3 {
		return nil, faultErr(f)
	}
	due, err := st.inner.Claim(ctx, now, limit, hold)
	if f == 2 {
		return nil, errInjected
	}
	return due, err
}

// read runs a read-only store call with the simulation's faults: one that
// fails before or after it touched the store changes nothing either way.
func simRead[T any](st *simStore, ctx context.Context, call func() (T, error)) (T, error) {
	var zero T
	f, err := st.enter(ctx)
	if err != nil {
		return zero, err
	}
	if f != 0 {
		return zero, faultErr(f)
	}
	return call()
}

// change runs a store call that writes, with the simulation's faults: 2
// (ambiguous) makes the call and then reports a failure.
func simChange(st *simStore, ctx context.Context, call func() error) error {
	f, err := st.enter(ctx)
	if err != nil {
		return err
	}
	if f == 1 || f == 3 {
		return faultErr(f)
	}
	err = call()
	if f == 2 {
		return errInjected
	}
	return err
}

func (st *simStore) ReadLog(ctx context.Context, id string, after uint64, limit int) ([]store.Entry, error) {
	return simRead(st, ctx, func() ([]store.Entry, error) { return st.inner.ReadLog(ctx, id, after, limit) })
}

func (st *simStore) LogHeads(ctx context.Context, ids []string) ([]uint64, error) {
	return simRead(st, ctx, func() ([]uint64, error) { return st.inner.LogHeads(ctx, ids) })
}

func (st *simStore) TrimLog(ctx context.Context, now time.Time, limit int) (int, error) {
	var n int
	err := simChange(st, ctx, func() (err error) { n, err = st.inner.TrimLog(ctx, now, limit); return err })
	return n, err
}

func (st *simStore) ClaimLog(ctx context.Context, name string, now time.Time, limit int, hold time.Duration) ([]store.Cursor, error) {
	var cs []store.Cursor
	err := simChange(st, ctx, func() (err error) { cs, err = st.inner.ClaimLog(ctx, name, now, limit, hold); return err })
	if err != nil {
		return nil, err
	}
	return cs, nil
}

func (st *simStore) RegisterConsumer(ctx context.Context, name string) error {
	return simChange(st, ctx, func() error { return st.inner.RegisterConsumer(ctx, name) })
}

func (st *simStore) CommitLog(ctx context.Context, name, id string, after uint64) error {
	return simChange(st, ctx, func() error { return st.inner.CommitLog(ctx, name, id, after) })
}

// The session calls, with the simulation's faults. Every one that took
// effect is logged with the session's deadline before and after it: the
// checks replay lobbies with the deadlines the sessions' renewals made.

// sessDeadline is the inner store's deadline of session id, read without
// a yield (zero if it does not know it).
func (st *simStore) sessDeadline(id string) time.Time {
	ds, err := st.inner.SessionDeadlines(context.Background(), []string{id})
	if err != nil || len(ds) != 1 {
		panic(fmt.Sprintf("sim: session deadline of %q: %v", id, err))
	}
	return ds[0]
}

func (st *simStore) logSession(kind, id string, now time.Time, call func() error) error {
	before := st.sessDeadline(id)
	if err := call(); err != nil {
		return err
	}
	st.sessLog = append(st.sessLog, simSessOp{kind: kind, id: id, now: now, before: before, deadline: st.sessDeadline(id), commits: len(st.commits)})
	return nil
}

func (st *simStore) OpenSession(ctx context.Context, id string, deadline time.Time) error {
	return simChange(st, ctx, func() error {
		return st.logSession("open", id, time.Time{}, func() error { return st.inner.OpenSession(ctx, id, deadline) })
	})
}

func (st *simStore) RenewSession(ctx context.Context, id string, now, deadline time.Time) error {
	return simChange(st, ctx, func() error {
		return st.logSession("renew", id, now, func() error { return st.inner.RenewSession(ctx, id, now, deadline) })
	})
}

func (st *simStore) EndSession(ctx context.Context, id string, at time.Time) error {
	return simChange(st, ctx, func() error {
		return st.logSession("end", id, at, func() error { return st.inner.EndSession(ctx, id, at) })
	})
}

func (st *simStore) SessionDeadlines(ctx context.Context, ids []string) ([]time.Time, error) {
	ds, err := simRead(st, ctx, func() ([]time.Time, error) { return st.inner.SessionDeadlines(ctx, ids) })
	if a := st.sim.current; a != nil && err == nil && len(ds) == len(ids) {
		a.sd, a.sdLoads = make(rules.SessionDeadlines, len(ids)), 0
		for i, id := range ids {
			a.sd[id] = ds[i]
		}
	}
	return ds, err
}

func (st *simStore) ExpiredSessions(ctx context.Context, now time.Time, limit int) ([]store.SessionDeadline, error) {
	// It may forget sessions: a change, though one a failure after it
	// leaves harmless.
	var out []store.SessionDeadline
	err := simChange(st, ctx, func() (err error) { out, err = st.inner.ExpiredSessions(ctx, now, limit); return err })
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (st *simStore) SessionLobbies(ctx context.Context, id, after string, limit int) ([]string, error) {
	return simRead(st, ctx, func() ([]string, error) { return st.inner.SessionLobbies(ctx, id, after, limit) })
}

// --- Services, clocks, observers ---

// skewClock is the base clock shifted by an offset that the scheduler may
// change at any time (a skewed or jumping system clock). It notes each
// reading on the actor that made it: the baton makes that safe, since only
// the running actor (or the scheduler, with none running) reads a clock.
type skewClock struct {
	clockwork.Clock
	offset atomic.Int64
	sim    *sim
}

func (c *skewClock) Now() time.Time {
	t := c.Clock.Now().Add(time.Duration(c.offset.Load()))
	if a := c.sim.current; a != nil {
		a.now = t
	}
	return t
}

func (c *skewClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *skewClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

type simService struct {
	// loops: the session steps in flight, by the Run loop that makes
	// them (each loop is one goroutine, so never two steps at once).
	loops map[string]bool
	idx   int
	svc   *Service
	clock *skewClock
	dead  bool
	kill  context.CancelFunc
	ctx   context.Context
}

type simObserver struct{ s *sim }

func (o simObserver) Observe(_ context.Context, obs Observation) {
	s := o.s
	a := s.current
	if a == nil || len(a.cmds) == 0 {
		return
	}
	// The commits since the last Observation were this transaction's:
	// it names their command as the Service ran it (a join with the
	// session it went through, the Service's own time-outs, drains and
	// expiries).
	cmd := obs.Command.WithSessionDeadlines(nil)
	for _, ci := range a.pending {
		c := &s.store.commits[ci]
		c.cmd = cmd
		if cmd.Op == rules.OpTimeOut {
			c.stamped = obs.At
		}
	}
	a.pending = nil
	sd := a.sd
	if a.sdLoads > 1 {
		sd = nil
	}
	a.sd, a.sdLoads = nil, 0
	top := a.cmds[len(a.cmds)-1]
	// Only the operation's own command, judged against the store (a
	// held heartbeat answered from memory makes no attempt; a heartbeat
	// that commits a time-out instead is another command).
	if top.own && obs.Attempts > 0 && obs.Command.Op == a.op.cmd.Op {
		a.op.obs = obs
		a.op.obs.Command = cmd
		a.op.obsSD = sd
		a.op.observed = true
		a.op.judgedAtObserve = a.op.judged
	}
	// Sometimes read the same lobby from inside the Observer, as a metrics
	// exporter might: it must not deadlock.
	if top.own && simNestedObserver && s.rng.IntN(8) == 0 && !a.svc.dead {
		a.cmds = append(a.cmds, simCmd{cmd: rules.Tick()})
		_, _ = a.svc.svc.Snapshot(a.ctx, obs.Lobby)
		a.cmds = a.cmds[:len(a.cmds)-1]
	}
}

type simPublisher struct{ s *sim }

func (p simPublisher) Publish(ctx context.Context, events []Event) error {
	s := p.s
	if s.faults && s.rng.IntN(10) == 0 {
		return errors.New("sim: publisher down")
	}
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	last := map[string]uint64{}
	for _, e := range events {
		if r, ok := last[e.Lobby]; ok && e.Revision <= r && s.pubBad == nil {
			s.pubBad = fmt.Errorf("one Publish call has lobby %s revision %d after %d", e.Lobby, e.Revision, r)
		}
		last[e.Lobby] = e.Revision
		s.published[e.Lobby] = append(s.published[e.Lobby], e.Revision)
	}
	return nil
}

func (s *sim) newService(idx int) *simService {
	ss := &simService{idx: idx, clock: &skewClock{Clock: s.base, sim: s}, loops: map[string]bool{}}
	ss.ctx, ss.kill = context.WithCancel(context.Background())
	opts := []Option{WithClock(ss.clock), WithPolicy(s.policy), WithObserver(simObserver{s}), WithPublisher(simPublisher{s})}
	switch s.rng.IntN(3) {
	case 1:
		opts = append(opts, WithoutCache())
	case 2:
		opts = append(opts, WithCache(2, time.Second))
	}
	var caps store.Capabilities
	if s.claims {
		caps.Claimer = s.store
	}
	if s.sessions {
		caps.Sessions = s.store
		// Both kinds of generation meet: a Service without a session
		// (WithSessionTTL(0)) stores its connections' heartbeat
		// deadlines beside those held by the others' sessions.
		switch s.rng.IntN(4) {
		case 0:
			opts = append(opts, WithSessionTTL(0))
		case 1:
			opts = append(opts, WithSessionTTL(3*time.Second))
		case 2:
			opts = append(opts, WithSessionTTL(8*time.Second))
		} // else the policy's heartbeat TTL, or the default
	}
	svc, err := NewService(store.ComposeWith(s.store, caps), opts...)
	if err != nil {
		panic(err)
	}
	svc.hooks = &testHooks{yield: s.yield}
	ss.svc = svc
	return ss
}

// --- operations ---

type simJudged struct {
	ok      bool
	version uint64
	found   bool
	data    []byte
	at      time.Time // Record.At of a lobby without a record
}

type simOp struct {
	kind   string // "cmd", "snapshot", "reclaim", "sweep", "relay", or a session step (see drawOp)
	lobby  string
	cmd    rules.Command
	svc    int
	res    Result
	err    error
	writes []int // own commits, by index
	// wroteLast: no own Load came after the last own write, so the
	// transaction's final attempt is the one that wrote. (A write followed
	// by a conflicting delete is retried on a fresh load, and that attempt
	// may write nothing.)
	wroteLast bool
	judged    simJudged
	// What the Observer saw of the operation's own transaction, and the
	// session deadlines its last attempt was judged with.
	observed        bool
	obs             Observation
	obsSD           rules.SessionDeadlines
	judgedAtObserve simJudged
}

var simLobbies = []string{"room1", "room12"}
var simPlayers = []string{"p0", "p1", "p2", "p3"}

func (s *sim) drawOp() *simOp {
	ss := s.services[s.rng.IntN(len(s.services))]
	op := &simOp{svc: ss.idx, lobby: simLobbies[s.rng.IntN(len(simLobbies))], kind: "cmd"}
	p := simPlayers[s.rng.IntN(len(simPlayers))]
	gen := func() uint64 {
		gs := s.gens[[2]string{op.lobby, p}]
		if len(gs) == 0 || s.rng.IntN(8) == 0 {
			return uint64(1000 + s.rng.IntN(5))
		}
		return gs[s.rng.IntN(len(gs))]
	}
	actor := func() string {
		if s.rng.IntN(2) == 0 {
			return "" // the server
		}
		return simPlayers[s.rng.IntN(len(simPlayers))]
	}
	if s.sessions && s.rng.IntN(3) == 0 {
		// A step of a Service's session machinery, driven here instead of
		// by Run's loops so that the schedule decides when it runs.
		op.cmd = rules.Tick()
		switch r := s.rng.IntN(20); {
		case r < 6:
			op.kind = "renew" // open or renew (or find it over)
		case r < 10:
			op.kind = "expired" // apply expired sessions
		case r < 16:
			op.kind = "timeouts" // commit the held deadlines that passed
		case r < 18:
			op.kind = "poll" // learn of other processes' commits
		default:
			op.kind = "drain"
		}
		return op
	}
	switch r := s.rng.IntN(125); {
	case r >= 108:
		// Mostly a player that joined this lobby at some point.
		for _, q := range s.rng.Perm(len(simPlayers)) {
			if len(s.gens[[2]string{op.lobby, simPlayers[q]}]) > 0 {
				p = simPlayers[q]
				break
			}
		}
		op.cmd = rules.Kick(actor(), p, []time.Duration{0, time.Second, time.Minute, time.Hour}[s.rng.IntN(4)])
	case r >= 100:
		a := actor()
		op.cmd = rules.Unlock(a)
		if s.rng.IntN(2) == 0 {
			op.cmd = rules.Lock(a)
		}
	case r < 22:
		var attrs map[string]string
		if s.rng.IntN(4) == 0 {
			attrs = map[string]string{"role": []string{"player", "spectator"}[s.rng.IntN(2)]}
		}
		op.cmd = rules.Join(p, attrs)
	case r < 36:
		op.cmd = rules.Heartbeat(p, gen())
	case r < 50:
		op.cmd = rules.Disconnect(p, gen())
	case r < 55:
		op.cmd = rules.ExpireLease(p, gen(), s.base.Now())
	case r < 60:
		op.cmd = rules.Leave(p)
	case r < 67:
		op.cmd = rules.TransferHost(p, simPlayers[s.rng.IntN(len(simPlayers))])
	case r < 74:
		op.kind, op.cmd = "snapshot", rules.Tick()
	case r < 80:
		op.kind, op.cmd = "reclaim", rules.Tick()
	case r < 92:
		op.kind, op.cmd = "sweep", rules.Tick()
	default:
		op.kind, op.cmd = "relay", rules.Tick()
	}
	return op
}

// simLoops names the Run loop that makes each session step.
var simLoops = map[string]string{"renew": "session", "expired": "session", "timeouts": "expiry", "poll": "poll"}

func (s *sim) start(op *simOp) error {
	ss := s.services[op.svc]
	// A drain runs on a quiet Service: none of its operations in flight,
	// and none starts until it is done. A join in flight while the drain
	// ends its session can still commit held by it, ended at once (its
	// process is closing its sockets anyway); LOBBYHOST_SIM_LOUD_DRAIN=1
	// lets drains run beside everything, and those lobbies then show a
	// split view of the session (see splitView).
	if simQuietDrain && ss.loops["drain"] {
		return nil
	}
	if simQuietDrain && op.kind == "drain" {
		for _, a := range s.actors {
			if a.svc == ss {
				return nil
			}
		}
	}
	loop := simLoops[op.kind]
	if op.kind == "drain" {
		loop = "drain"
	}
	if loop != "" {
		if ss.loops[loop] {
			return nil // that loop is busy: it makes this step later
		}
		ss.loops[loop] = true
	}
	a := &simActor{id: s.nextID, svc: ss, resume: make(chan struct{}), op: op}
	s.nextID++
	a.ctx, a.cancel = context.WithCancel(ss.ctx)
	a.cmds = []simCmd{{cmd: op.cmd, own: op.kind == "cmd"}}
	if op.kind == "snapshot" || op.kind == "reclaim" {
		a.cmds[0].own = true
	}
	s.ops = append(s.ops, op)
	s.actors = append(s.actors, a)
	go func() {
		<-a.resume
		svc := ss.svc
		l := svc.live
		switch op.kind {
		case "cmd":
			if op.cmd.Op == rules.OpHeartbeat {
				op.res, op.err = svc.Heartbeat(a.ctx, op.lobby, op.cmd.Player, op.cmd.Gen)
			} else {
				op.res, op.err = svc.Do(a.ctx, op.lobby, op.cmd)
			}
		case "renew":
			if l != nil && l.own {
				l.renewOnce(a.ctx, svc.clock.Now())
			}
		case "expired":
			if l != nil {
				op.err = l.applyExpired(a.ctx)
			}
		case "timeouts":
			if l != nil {
				l.expireDue(a.ctx, svc.clock.Now(), 1)
			}
		case "poll":
			if l != nil {
				op.err = l.pollHeads(a.ctx)
			}
		case "drain":
			op.err = svc.Drain(a.ctx)
		case "snapshot":
			_, op.err = svc.Snapshot(a.ctx, op.lobby)
		case "reclaim":
			op.err = svc.Reclaim(a.ctx, op.lobby)
		case "sweep":
			_, op.err = svc.Sweep(a.ctx)
		case "relay":
			_, op.err = svc.Relay(a.ctx)
		}
		a.cancel()
		a.done = true
		if loop != "" {
			ss.loops[loop] = false // under the baton
		}
		s.back <- a
	}()
	if err := s.run(a); err != nil {
		return err
	}
	// A healthy process's session loop finishes its renewal before
	// anything else happens to it; in the other schedules renewals
	// interleave with everything (and a parked one is a paused process).
	for s.healthy && op.kind == "renew" && !a.done {
		if err := s.run(a); err != nil {
			return err
		}
	}
	return nil
}

// --- one schedule ---

func runSimForStats(seed uint64) (*sim, error) {
	s := &sim{
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		base:      clockwork.NewFakeClockAt(t0),
		back:      make(chan *simActor),
		gens:      map[[2]string][]uint64{},
		published: map[string][]uint64{},
	}
	s.store = &simStore{inner: memstore.New(), sim: s}
	p := DefaultPolicy()
	p.Grace = []time.Duration{time.Second, 3 * time.Second}[s.rng.IntN(2)]
	p.HeartbeatTTL = []time.Duration{0, 2 * time.Second, 5 * time.Second}[s.rng.IntN(3)]
	p.MaxMembers = []int{0, 0, 3}[s.rng.IntN(3)]
	p.MaxConnectionsPerPlayer = []int{0, 0, 1, 2}[s.rng.IntN(4)]
	p.MaxBlocks = []int{0, 1}[s.rng.IntN(2)]
	s.policy = p
	s.claims = s.rng.IntN(2) == 0
	s.sessions = s.rng.IntN(4) != 0
	s.healthy = s.rng.IntN(2) == 0
	for i := range 1 + s.rng.IntN(3) {
		s.services = append(s.services, s.newService(i))
	}
	s.faults = s.rng.IntN(4) != 0
	for _, ss := range s.services {
		if err := s.opening(ss); err != nil {
			return s, err
		}
	}
	steps := 20 + s.rng.IntN(60)
	for range steps {
		if err := s.step(); err != nil {
			return s, err
		}
	}
	// Then the Services live on a few seconds with no commands: their
	// session loops renew, and the held connections nobody heartbeats
	// time out, committed by their Services.
	if s.sessions {
		for range 6 {
			s.base.Advance(time.Second)
			for _, ss := range s.services {
				for _, kind := range []string{"renew", "timeouts"} {
					if err := s.start(&simOp{svc: ss.idx, lobby: simLobbies[0], kind: kind, cmd: rules.Tick()}); err != nil {
						return s, err
					}
				}
			}
			if err := s.finish(); err != nil {
				return s, err
			}
		}
		// Some shut down on purpose.
		for _, ss := range s.services {
			if s.rng.IntN(3) == 0 {
				if err := s.start(&simOp{svc: ss.idx, lobby: simLobbies[0], kind: "drain", cmd: rules.Tick()}); err != nil {
					return s, err
				}
			}
		}
	}
	if err := s.finish(); err != nil {
		return s, err
	}
	s.faults = false
	return s, s.check()
}

// finish lets every parked actor finish, without new operations.
func (s *sim) finish() error {
	for n := 0; len(s.actors) > 0; n++ {
		if n > 20000 {
			var stuck []string
			for _, a := range s.actors {
				stuck = append(stuck, fmt.Sprintf("actor %d (%s %v on %s) %s", a.id, a.op.kind, a.op.cmd.Op, a.op.lobby, a.where))
			}
			return fmt.Errorf("deadlock: after 20000 turns these actors still have not finished: %v", stuck)
		}
		if err := s.run(s.actors[s.rng.IntN(len(s.actors))]); err != nil {
			return err
		}
	}
	return nil
}

func (s *sim) step() error {
	switch r := s.rng.IntN(100); {
	case r < 35 && len(s.actors) > 0:
		return s.run(s.actors[s.rng.IntN(len(s.actors))])
	case r < 70 || len(s.actors) == 0:
		if len(s.actors) >= 4 {
			return s.run(s.actors[s.rng.IntN(len(s.actors))])
		}
		op := s.drawOp()
		if err := s.start(op); err != nil {
			return err
		}
		return nil
	case r < 90:
		s.base.Advance([]time.Duration{time.Millisecond, 300 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}[s.rng.IntN(5)])
		// Mostly, each session loop wakes and renews as the time moved
		// (or finds its session over, if the clock went past it).
		for _, ss := range s.services {
			if s.rng.IntN(6) != 0 {
				if err := s.opening(ss); err != nil {
					return err
				}
			}
		}
	case r < 96:
		// A Service's clock is skewed or jumps, forward or back.
		ss := s.services[s.rng.IntN(len(s.services))]
		ss.clock.offset.Store(int64(time.Duration(s.rng.IntN(5)-2) * 700 * time.Millisecond))
	default:
		// A Service dies (its operations in flight fail at their next
		// step) and a new one takes its place with an empty cache.
		i := s.rng.IntN(len(s.services))
		s.services[i].dead = true
		s.services[i].kill()
		s.services[i] = s.newService(i)
		return s.opening(s.services[i])
	}
	return nil
}

// opening starts a new Service's first renewal, which opens its session,
// as Run does first (it may park, and fail, like any other step).
func (s *sim) opening(ss *simService) error {
	if !s.sessions {
		return nil
	}
	return s.start(&simOp{svc: ss.idx, lobby: simLobbies[0], kind: "renew", cmd: rules.Tick()})
}

// --- the checks ---

var simCmp = cmp.Options{cmpopts.EquateEmpty()}

func (s *sim) check() error {
	if s.pubBad != nil {
		return s.pubBad
	}
	m, err := rules.NewMachine(s.policy)
	if err != nil {
		return err
	}
	// Replay each lobby's commits through the Machine.
	finals := map[string]*simReplayed{}
	for _, id := range simLobbies {
		r := &simReplayed{state: rules.NewState(id, 0)}
		finals[id] = r
		var lastSeq uint64
		for ci := range s.store.commits {
			c := &s.store.commits[ci]
			if c.lobby != id {
				continue
			}
			if c.del {
				if len(r.state.Members) > 0 {
					return fmt.Errorf("lobby %s: record deleted at version %d with members %v", id, c.version, r.state.View())
				}
				if c.floor < r.state.Floor() || c.floor <= c.version {
					return fmt.Errorf("lobby %s: delete floor %d below the lobby's floor %d or version %d", id, c.floor, r.state.Floor(), c.version)
				}
				r.steps = append(r.steps, simStep{commit: c, at: r.state.Updated})
				// The tombstone keeps the time and the blocks.
				r.state = simReborn(id, c.floor, r.state.Updated, r.state)
				continue
			}
			next, err := rules.DecodeState(c.data)
			if err != nil {
				return fmt.Errorf("lobby %s version %d: %v", id, c.version, err)
			}
			at := next.Updated
			if !c.judgedAt.IsZero() {
				at = c.judgedAt
			}
			if !c.stamped.IsZero() {
				at = c.stamped
			}
			c.prior, c.held = r.state.Updated, r.state.Sessions()
			// Judged with the session deadlines the store gave the
			// attempt that wrote (none asked: every session it holds
			// was known to be alive then).
			cmd := c.cmd.WithSessionDeadlines(c.sd)
			want := r.state.Clone()
			res, err := m.Apply(want, cmd, at)
			if err != nil || !res.Changed || !c.madeBy(want, next, res) {
				// A session the store had forgotten (zero) is judged
				// with its deadline as the Service last knew it: one of
				// the deadlines the session had.
				for _, sd := range s.forgottenAs(c.sd) {
					w := r.state.Clone()
					if rs, rerr := m.Apply(w, c.cmd.WithSessionDeadlines(sd), at); rerr == nil && rs.Changed && c.madeBy(w, next, rs) {
						c.sd, cmd, want, res, err = sd, c.cmd.WithSessionDeadlines(sd), w, rs, nil
						break
					}
				}
			}
			if err != nil || !res.Changed {
				return fmt.Errorf("lobby %s version %d: replaying %v at %v: %v, changed %v; but it was committed", id, c.version, c.cmd.Op, at, err, res.Changed)
			}
			if diff := cmp.Diff(want, next, simCmp); diff != "" {
				return fmt.Errorf("lobby %s version %d (%v at %v): committed record differs from the Machine's (-machine +stored):\n%s", id, c.version, c.cmd.Op, at, diff)
			}
			if err := m.CheckTransition(r.state, next, cmd, res, at); err != nil {
				return fmt.Errorf("lobby %s version %d: %w", id, c.version, err)
			}
			if want := next.Sessions(); !s.sessions {
				want = nil
			} else if !slices.Equal(c.sessions, want) {
				return fmt.Errorf("lobby %s version %d: written with sessions %v, the record holds %v", id, c.version, c.sessions, want)
			}
			if !c.dl.Equal(next.NextDeadline()) {
				return fmt.Errorf("lobby %s version %d: stored deadline %v, the record's next deadline %v", id, c.version, c.dl, next.NextDeadline())
			}
			var fx rules.Effects
			if c.effects != nil {
				if fx, err = rules.DecodeEffects(c.effects); err != nil {
					return fmt.Errorf("lobby %s version %d: log entry: %w", id, c.version, err)
				}
				if fx.Empty() {
					return fmt.Errorf("lobby %s version %d: an empty log entry", id, c.version)
				}
			}
			if !c.at.Equal(next.Updated) {
				return fmt.Errorf("lobby %s version %d: written at %v, the record's transition time is %v", id, c.version, c.at, next.Updated)
			}
			got := fx.Events
			for _, ev := range got {
				if ev.Revision <= lastSeq || (lastSeq != 0 && ev.Revision != lastSeq+1 && ev.Revision <= r.state.Revision) {
					return fmt.Errorf("lobby %s: logged revision %d after %d", id, ev.Revision, lastSeq)
				}
				lastSeq = ev.Revision
			}
			if diff := cmp.Diff(res.Events, got, simCmp); diff != "" {
				return fmt.Errorf("lobby %s version %d (%v at %v): logged events differ from the Machine's (-machine +log):\n%s", id, c.version, c.cmd.Op, at, diff)
			}
			if diff := cmp.Diff(res.Ended, fx.Ended, simCmp); diff != "" {
				return fmt.Errorf("lobby %s version %d (%v at %v): logged ended connections differ from the Machine's (-machine +log):\n%s", id, c.version, c.cmd.Op, at, diff)
			}
			if c.own && c.op != nil && c.op.err == nil && c.op.kind == "cmd" && c.cmd.Op == c.op.cmd.Op && c.op.wroteLast && c.op.writes[len(c.op.writes)-1] == ci {
				if diff := cmp.Diff(res, c.op.res, simCmp); diff != "" {
					return fmt.Errorf("lobby %s: %v's result differs from the Machine's on the version it wrote (-machine +service):\n%s", id, c.cmd.Op, diff)
				}
			}
			r.events = append(r.events, got...)
			r.steps = append(r.steps, simStep{commit: c, at: later(at, r.state.Updated), res: res})
			r.state = next
		}
	}
	// Every revision in the log appears once per incarnation (checked
	// above); results of commands that wrote nothing agree with the Machine
	// on the version they were judged on.
	for _, op := range s.ops {
		if op.kind != "cmd" || (len(op.writes) > 0 && op.wroteLast) || !op.observed {
			continue
		}
		if op.err != nil && !IsRefusal(op.err) {
			continue
		}
		j := op.judgedAtObserve
		if !j.ok {
			return fmt.Errorf("%v on %s returned %v without reading the lobby", op.cmd.Op, op.lobby, op.err)
		}
		st, err := s.stateAt(op.lobby, j)
		if err != nil {
			return err
		}
		// Judged with the session deadlines the store gave (or, for one
		// it had forgotten, one of the deadlines that session had).
		var first error
		for i, sd := range append([]rules.SessionDeadlines{op.obsSD}, s.forgottenAs(op.obsSD)...) {
			err := s.judgedLike(m, st.Clone(), op, sd, j)
			if err == nil {
				first = nil
				break
			}
			if i == 0 {
				first = err
			}
		}
		if first != nil {
			return first
		}
	}
	// Everything committed was published, nothing else.
	for _, id := range simLobbies {
		if err := s.drainRelay(); err != nil {
			return err
		}
		var want []uint64
		for _, e := range finals[id].events {
			want = append(want, e.Revision)
		}
		got := slices.Clone(s.published[id])
		slices.Sort(got)
		got = slices.Compact(got)
		if !slices.Equal(want, got) {
			return fmt.Errorf("lobby %s: committed revisions %v, published %v", id, want, got)
		}
	}
	return s.checkSweeperIndependence(m, finals)
}

func sameRefusal(a, b error) bool {
	for _, r := range []error{ErrLobbyFull, ErrBlocked, ErrLocked, ErrNotHost, ErrNotMember, ErrNotEligible, ErrNotEmpty} {
		if errors.Is(a, r) && errors.Is(b, r) {
			return true
		}
	}
	return false
}

// stateAt rebuilds the lobby as stored at a version a command read.
func (s *sim) stateAt(id string, j simJudged) (*rules.State, error) {
	if !j.found {
		var tomb *rules.State
		if j.data != nil {
			var err error
			if tomb, err = rules.DecodeState(j.data); err != nil {
				return nil, err
			}
		}
		return simReborn(id, j.version, j.at, tomb), nil
	}
	return rules.DecodeState(j.data)
}

// simReborn is the lobby created again over a floor, the time the store
// reports for it and, while it lasts, the tombstone (the deleted lobby):
// its counters above the floor, its time the later of the two, the
// tombstone's blocks that have not ended by then, nothing else.
func simReborn(id string, floor uint64, at time.Time, tomb *rules.State) *rules.State {
	st := rules.NewState(id, floor)
	st.Updated = at
	if tomb == nil {
		return st
	}
	st.Updated = later(at, tomb.Updated)
	var kept []rules.Block
	for b := range tomb.Blocks.All() {
		if b.Until.After(st.Updated) {
			kept = append(kept, b)
		}
	}
	st.Blocks = rules.NewBlocks(kept...)
	return st
}

func (s *sim) drainRelay() error {
	// Relays that failed half way left claims; they lapse after the hold.
	s.base.Advance(s.services[0].svc.cfg.relayHold + time.Hour) // beyond any skew
	ss := s.newService(len(s.services))
	idle := 0
	for range 1000 {
		n, err := ss.svc.Relay(context.Background())
		if err != nil {
			return fmt.Errorf("final relay: %w", err)
		}
		// A pass may publish nothing yet commit entries that hold only
		// ended connections: stop after two empty passes.
		if idle = idle + 1; n > 0 {
			idle = 0
		}
		if idle == 2 {
			return nil
		}
	}
	return errors.New("final relay never drained the log")
}

// simReplayed is one lobby's committed history, replayed.
type simReplayed struct {
	events []Event
	state  *rules.State
	steps  []simStep
}

type simStep struct {
	commit *simCommit
	at     time.Time // the effective time of the transition
	res    Result
}

// checkSweeperIndependence replays every lobby's history without the
// writes that only a sweeper, a snapshot or an expiry trigger made, each
// command at the time it took effect: the events, the commands' results and
// the final state must not change.
//
// The session deadlines of that replay come from the sessions' own history
// alone: each session ends at the deadline its opening, renewals and end
// left it with, whoever applied its expiry and whenever.
func (s *sim) checkSweeperIndependence(m *rules.Machine, finals map[string]*simReplayed) error {
	for id, r := range finals {
		if s.splitView(id) {
			// Its history is not a function of the sessions' renewals
			// (see splitView); its commits were checked one by one.
			s.split++
			continue
		}
		sessions := s.sessionEnds(id)
		end := t0.Add(24 * time.Hour)
		actual := r.state.Clone()
		tail, err := m.Apply(actual, rules.Tick().WithSessionDeadlines(sessions), end)
		if err != nil {
			return err
		}
		wantEvents := append(slices.Clone(r.events), tail.Events...)

		st := rules.NewState(id, 0)
		var events []Event
		for _, step := range r.steps {
			c := step.commit
			switch {
			case c.del:
				res, err := m.Apply(st, rules.Tick().WithSessionDeadlines(sessions), step.at)
				if err != nil {
					return err
				}
				events = append(events, res.Events...)
				if len(st.Members) > 0 {
					return fmt.Errorf("lobby %s without sweeper writes: members %v at the delete", id, st.View())
				}
				st = simReborn(id, c.floor, step.at, st)
			case c.cmd.Op == rules.OpTick || c.cmd.Op == rules.OpExpireLease:
				// A sweeper's, a snapshot's or a trigger's write: dropped.
			default:
				res, err := m.Apply(st, c.cmd.WithSessionDeadlines(sessions), step.at)
				if err != nil {
					return fmt.Errorf("lobby %s without sweeper writes: %v at %v: %v", id, c.cmd.Op, step.at, err)
				}
				events = append(events, res.Events...)
				type key struct {
					Outcome      Outcome
					Gen, JoinSeq uint64
					Revision     uint64
				}
				if a, b := (key{res.Outcome, res.Gen, res.JoinSeq, res.Revision}), (key{step.res.Outcome, step.res.Gen, step.res.JoinSeq, step.res.Revision}); a != b {
					return fmt.Errorf("lobby %s: %v at %v: result %+v without sweeper writes, %+v with them", id, c.cmd.Op, step.at, a, b)
				}
			}
		}
		tail, err = m.Apply(st, rules.Tick().WithSessionDeadlines(sessions), end)
		if err != nil {
			return err
		}
		events = append(events, tail.Events...)
		if diff := cmp.Diff(wantEvents, events, simCmp); diff != "" {
			return fmt.Errorf("lobby %s: events depend on sweeper timing (-as committed +without sweeper writes):\n%s", id, diff)
		}
		if diff := cmp.Diff(actual, st, simCmp); diff != "" {
			return fmt.Errorf("lobby %s: final state depends on sweeper timing (-as committed +without sweeper writes):\n%s", id, diff)
		}
	}
	return nil
}

// sessionEnds returns the deadline each session was left with by its
// opening, renewals and end, as the store took them, for replaying lobby
// id.
//
// Exceptions, where a lobby ended a session at another deadline than the
// one its renewals and end finally left it with:
//   - a renewal judged at a now its process read before another process
//     found the session over, but that reached the store after (a slow or
//     delayed call, or a clock behind the other's), moves the deadline
//     past the one a lobby's transition already ended the session at. The
//     store takes the renewer's now as a value, so nothing refuses it;
//   - a write judged while its session was alive that reaches the store
//     after the session's deadline, once the store has forgotten the
//     session (it held no lobby then): the lobby's next transition finds
//     no deadline and ends the session's connections at the lobby's last
//     transition time;
//   - a drain whose clock is behind another process's ends its session
//     at its own now, earlier than a time at which the other judged the
//     session alive in some lobby (a drain's end may move the deadline
//     back).
//
// Each lobby then keeps the deadline it ended the session at: the replay
// of a lobby uses the earliest deadline at which one of its transitions
// found the session over, and a session it never found over ends, for it,
// no earlier than just after the last time it judged it alive. revived
// counts the sessions of the first kind.
func (s *sim) sessionEnds(id string) rules.SessionDeadlines {
	out := rules.SessionDeadlines{}
	for _, o := range s.store.sessLog {
		switch {
		case o.kind == "end" && o.deadline.Equal(o.now):
			// A drain ends its session at its own now, at which its
			// transitions (and its joins) judged the session alive:
			// the end comes just after them.
			out[o.id] = o.deadline.Add(time.Nanosecond)
		case !o.deadline.IsZero():
			out[o.id] = o.deadline
		}
	}
	for ses, alive := range s.judgedAlive(id) {
		if !alive.Before(out[ses]) {
			out[ses] = alive.Add(time.Nanosecond)
		}
	}
	for ses, d := range s.verdicts(id) {
		out[ses] = d
	}
	return out
}

// judgedAlive returns, per session, the latest time at which a committed
// transition of lobby id judged it alive (see simCommit.alive).
func (s *sim) judgedAlive(id string) map[string]time.Time {
	out := map[string]time.Time{}
	for _, c := range s.store.commits {
		if c.del || c.lobby != id {
			continue
		}
		at, alive := c.alive()
		for _, ses := range alive {
			if at.After(out[ses]) {
				out[ses] = at
			}
		}
	}
	return out
}

// alive returns the time c's transition was judged at and the sessions it
// judged alive then: those the lobby held that it did not find over, and
// the one its join went through.
func (c *simCommit) alive() (time.Time, []string) {
	at := later(later(c.judgedAt, c.stamped), c.prior)
	var alive []string
	for _, ses := range c.held {
		if d, asked := c.sd[ses]; asked && (d.IsZero() || !d.After(at)) {
			continue // found over
		}
		alive = append(alive, ses)
	}
	if c.cmd.Op == rules.OpJoin && c.cmd.Session != "" {
		alive = append(alive, c.cmd.Session)
	}
	return at, alive
}

// verdicts returns, per session, the earliest deadline at which a
// committed transition of lobby id (or of any lobby, for id "") found it
// over.
func (s *sim) verdicts(id string) map[string]time.Time {
	out := map[string]time.Time{}
	for _, c := range s.store.commits {
		if c.del || (id != "" && c.lobby != id) {
			continue
		}
		at := later(later(c.judgedAt, c.stamped), c.prior)
		for ses, d := range c.sd {
			if !slices.Contains(c.held, ses) {
				continue // asked about for a join: the lobby ended nothing of it
			}
			if d.IsZero() {
				d = c.prior // forgotten: ended as of the lobby's last time
			}
			if d.After(at) {
				continue
			}
			if e, ok := out[ses]; !ok || d.Before(e) {
				out[ses] = d
			}
		}
	}
	return out
}

// revived returns how many sessions a late renewal moved past a deadline
// a lobby had ended them at (see sessionEnds).
func (s *sim) revived() int {
	final := map[string]time.Time{}
	for _, o := range s.store.sessLog {
		if !o.deadline.IsZero() {
			final[o.id] = o.deadline
		}
	}
	n := 0
	for ses, d := range s.verdicts("") {
		if final[ses].After(d) {
			n++
		}
	}
	return n
}

// trace describes the schedule's commits and session calls, for a failure
// replayed with LOBBYHOST_SIM_TRACE=1.
func (s *sim) trace() string {
	var b []byte
	si := 0
	for ci, c := range s.store.commits {
		for ; si < len(s.store.sessLog) && s.store.sessLog[si].commits <= ci; si++ {
			o := s.store.sessLog[si]
			b = fmt.Appendf(b, "  session %s %s now %v: %v -> %v\n", o.kind, o.id, o.now.Format("05.000"), o.before.Format("05.000"), o.deadline.Format("05.000"))
		}
		svc := -1
		if c.op != nil {
			svc = c.op.svc
		}
		b = fmt.Appendf(b, "%s v%d svc %d %v %s gen %d session %q judged %v stamped %v sd %v sessions %v del %v\n", c.lobby, c.version, svc, c.cmd.Op, c.cmd.Player, c.cmd.Gen, c.cmd.Session, c.judgedAt.Format("05.000"), c.stamped.Format("05.000"), c.sd, c.sessions, c.del)
	}
	for ; si < len(s.store.sessLog); si++ {
		o := s.store.sessLog[si]
		b = fmt.Appendf(b, "  session %s %s now %v: %v -> %v\n", o.kind, o.id, o.now.Format("05.000"), o.before.Format("05.000"), o.deadline.Format("05.000"))
	}
	return string(b)
}

// TestSimulationCoversSessions: the schedules reach what the session steps
// are there for. Over a fixed set of seeds, some commits are joins held by
// a session, ends of held connections committed by their Service,
// expiries of sessions applied (ticks judged with an ended session's
// deadline), drains and renewals that found their session over; and both
// kinds of generation sit in one lobby at once.
func TestSimulationCoversSessions(t *testing.T) {
	counts := map[string]int{}
	revived, split := 0, 0
	for seed := uint64(1); seed <= 150; seed++ {
		s, err := runSimForStats(seed)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		given := map[string]bool{}
		for _, o := range s.store.sessLog {
			if o.kind == "open" {
				counts["sessions opened"]++
			}
			if o.kind == "end" {
				counts["sessions ended by a drain"]++
			}
		}
		for _, ss := range s.services {
			if ss.svc.live != nil {
				for id := range ss.svc.live.given {
					given[id] = true
				}
			}
		}
		counts["sessions given up"] += len(given)
		revived += s.revived()
		split += s.split
		for _, c := range s.store.commits {
			if c.del {
				continue
			}
			switch {
			case c.cmd.Op == rules.OpJoin && c.cmd.Session != "":
				counts["held joins"]++
			case c.cmd.Op == rules.OpTimeOut:
				counts["held time-outs"]++
			case c.cmd.Op == rules.OpDrain:
				counts["drains"]++
			case c.cmd.Op == rules.OpTick && len(c.sd) > 0:
				counts["ticks with an ended session"]++
			}
			st, err := rules.DecodeState(c.data)
			if err != nil {
				t.Fatal(err)
			}
			held, stored := false, false
			for _, m := range st.Members {
				for _, cn := range m.Conns {
					held = held || cn.Session != ""
					stored = stored || !cn.Deadline.IsZero()
				}
			}
			if held && stored {
				counts["lobbies with both kinds"]++
			}
		}
	}
	t.Logf("over 150 schedules: %v; sessions a late renewal revived: %d; lobbies left out of the property for a split view of a session: %d", counts, revived, split)
	// Left out of the property only where the sessions' own history
	// cannot decide it, which must stay rare.
	if total := 150 * len(simLobbies); split*20 > total {
		t.Errorf("%d of %d lobbies left out of the sweeper-independence check", split, total)
	}
	for _, k := range []string{"sessions opened", "sessions ended by a drain", "sessions given up", "held joins", "held time-outs", "drains", "ticks with an ended session", "lobbies with both kinds"} {
		if counts[k] == 0 {
			t.Errorf("no %s in 150 schedules", k)
		}
	}
}

// forgottenAs returns sd with the sessions it gives as forgotten (zero)
// given instead, in turn, each deadline they had in the store: what a
// Service that knew one of them judges with.
func (s *sim) forgottenAs(sd rules.SessionDeadlines) []rules.SessionDeadlines {
	out := []rules.SessionDeadlines{maps.Clone(sd)}
	for id, d := range sd {
		if !d.IsZero() {
			continue
		}
		var seen []time.Time
		for _, o := range s.store.sessLog {
			for _, t := range []time.Time{o.before, o.deadline} {
				if o.id == id && !t.IsZero() && !slices.ContainsFunc(seen, t.Equal) {
					seen = append(seen, t)
				}
			}
		}
		var next []rules.SessionDeadlines
		for _, base := range out {
			for _, t := range seen {
				m := maps.Clone(base)
				m[id] = t
				next = append(next, m)
			}
		}
		out = append(out, next...)
	}
	return out[1:]
}

// splitView reports whether lobby id judged a session alive at a time at
// or after a deadline at which it also found it over. No single deadline
// reproduces both, so the lobby's history is then no function of the
// renewals. It happens when a session's deadline as the store gives it
// goes back on what a transition already judged:
//   - a join's write judged while its session was alive reaches the store
//     after the session's deadline, once an expiry pass has forgotten it
//     (it held no lobby yet), and the next transition, by a process that
//     never knew the session's deadline, ends the join's connection at the
//     lobby's last transition time: the join's own;
//   - a drain ends its session at its own now, which is not after a time
//     at which another process (a clock ahead, or just the same instant)
//     judged the session alive in a lobby the drain could not reach;
//   - a late renewal (see sessionEnds) revives a session a lobby ended,
//     and a join goes through it there again.
func (s *sim) splitView(id string) bool {
	verdicts := s.verdicts(id)
	for _, c := range s.store.commits {
		if c.del || c.lobby != id {
			continue
		}
		at, alive := c.alive()
		for _, ses := range alive {
			if d, ok := verdicts[ses]; ok && !at.Before(d) {
				return true
			}
		}
	}
	return false
}

// madeBy reports whether the Machine's transition (its state want and
// result res) is what c committed: the record next and its log entry.
func (c *simCommit) madeBy(want, next *rules.State, res Result) bool {
	var fx rules.Effects
	if c.effects != nil {
		var err error
		if fx, err = rules.DecodeEffects(c.effects); err != nil {
			return false
		}
	}
	return cmp.Equal(want, next, simCmp) && cmp.Equal(res.Events, fx.Events, simCmp) && cmp.Equal(res.Ended, fx.Ended, simCmp)
}

// judgedLike checks that op's result (a command that wrote nothing) is the
// Machine's on st, the version it was judged on, with session deadlines
// sd.
func (s *sim) judgedLike(m *rules.Machine, st *rules.State, op *simOp, sd rules.SessionDeadlines, j simJudged) error {
	res, err := m.Apply(st, op.obs.Command.WithSessionDeadlines(sd), op.obs.At)
	if (err == nil) != (op.err == nil) || (err != nil && !errors.Is(op.err, errors.Unwrap(err))) && !sameRefusal(err, op.err) {
		return fmt.Errorf("%v on %s at version %d: Machine says %v, Service said %v", op.cmd.Op, op.lobby, j.version, err, op.err)
	}
	if err == nil {
		if res.Changed {
			return fmt.Errorf("%v on %s at version %d changes the lobby, but the Service wrote nothing (result %+v)", op.cmd.Op, op.lobby, j.version, op.res)
		}
		if diff := cmp.Diff(res, op.res, simCmp); diff != "" {
			return fmt.Errorf("%v on %s at version %d: result differs from the Machine's (-machine +service):\n%s", op.cmd.Op, op.lobby, j.version, diff)
		}
	}
	return nil
}
