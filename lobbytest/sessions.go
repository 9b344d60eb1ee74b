package lobbytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/store"
)

// The session checks: Services that keep their connections' liveness in
// memory and only their own in the store (store.Sessions). They run only on
// stores with that capability.
//
// Each Service runs (Run opens its session and renews it) on a fake clock.
// A fake clock must not run ahead of the loops it drives, so the checks
// move it a second at a time and wait, after each second, until every
// live Service has made the renewal due by then.

// sessionPolicy: a session TTL of sessionTTL (the heartbeat TTL), renewed
// every two seconds, and a grace that outlasts it.
func sessionPolicy() lobby.Policy { return policyOf(8*time.Second, sessionTTL) }

const sessionTTL = 6 * time.Second

// sessionWait bounds every wait for a Service's loops: one that has not
// happened by then never will.
const sessionWait = 15 * time.Second

// runSession starts svc.Run and waits until it has opened its session;
// the returned stop ends Run (a process killed: nothing more runs in it)
// and waits for it.
func runSession(t *testing.T, svc *lobby.Service) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	waitFor(t, "the Service to open its session", func() bool { return svc.Session() != "" })
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(sessionWait):
				t.Error("Run did not return")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitFor waits, in real time, until ok holds; not by sessionWait is a
// failure.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	limit := time.Now().Add(sessionWait)
	for !ok() {
		if time.Now().After(limit) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// tick moves clock one second and waits until each of live has renewed
// its session past what that second requires.
func tick(t *testing.T, clock *clockwork.FakeClock, ss store.Sessions, live ...*lobby.Service) {
	t.Helper()
	clock.Advance(time.Second)
	for _, svc := range live {
		waitFor(t, "a session renewal", func() bool {
			id := svc.Session()
			if id == "" {
				return false
			}
			ds, err := ss.SessionDeadlines(context.Background(), []string{id})
			return err == nil && len(ds) == 1 && !ds[0].Before(clock.Now().Add(sessionTTL*2/3))
		})
	}
}

// sessionDeadline returns session id's deadline in the store.
func sessionDeadline(t *testing.T, ss store.Sessions, id string) time.Time {
	t.Helper()
	ds, err := ss.SessionDeadlines(context.Background(), []string{id})
	if err != nil || len(ds) != 1 {
		t.Fatalf("SessionDeadlines(%q) = %v, %v", id, ds, err)
	}
	return ds[0]
}

// logged returns the events in lobby id's effects log, in order.
func logged(t *testing.T, s store.Store, id string) []lobby.Event {
	t.Helper()
	entries, err := s.ReadLog(context.Background(), id, 0, 10000)
	if err != nil {
		t.Fatalf("ReadLog(%q): %v", id, err)
	}
	var out []lobby.Event
	for _, e := range entries {
		fx, err := rules.DecodeEffects(e.Data)
		if err != nil {
			t.Fatalf("lobby %q: log entry %d: %v", id, e.Version, err)
		}
		out = append(out, fx.Events...)
	}
	return out
}

// find returns the first logged event of lobby id that ok accepts.
func find(t *testing.T, s store.Store, id string, ok func(lobby.Event) bool) (lobby.Event, bool) {
	t.Helper()
	for _, e := range logged(t, s, id) {
		if ok(e) {
			return e, true
		}
	}
	return lobby.Event{}, false
}

// testKilledHolder: a Service holding connections by its session dies
// (its Run stops: no callback, no drain). Another Service ends each of
// them as of the dead one's session deadline (timed out), and the host
// seat passes at that deadline + the grace, to the survivor's member.
func testKilledHolder(t *testing.T, h Harness) {
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(t0)
	policy := sessionPolicy()
	base := h.NewStore(t)
	ss := base.(store.Sessions)
	a := newService(t, base, clock, lobby.WithPolicy(policy))
	b := newService(t, h.Connect(t, base), clock, lobby.WithPolicy(policy))
	stopA := runSession(t, a)
	runSession(t, b)
	lobbies := []string{"k0", "k1"}
	gens := map[string]uint64{}
	for _, id := range lobbies {
		for _, p := range []string{"host", "m1"} {
			if _, err := a.Join(ctx, id, p, nil); err != nil {
				t.Fatalf("Join(%q, %q) through a: %v", id, p, err)
			}
		}
		res, err := b.Join(ctx, id, "s", nil)
		if err != nil {
			t.Fatalf("Join(%q, s) through b: %v", id, err)
		}
		gens[id] = res.Gen
	}
	session := a.Session()
	stopA()
	deadline := sessionDeadline(t, ss, session)
	if deadline.IsZero() {
		t.Fatalf("session %q of the killed Service is unknown to the store", session)
	}
	for clock.Now().Before(deadline.Add(policy.Grace + 2*time.Second)) {
		tick(t, clock, ss, b)
		for _, id := range lobbies {
			if res, err := b.Heartbeat(ctx, id, "s", gens[id]); err != nil || res.Outcome != lobby.OutcomeApplied {
				t.Fatalf("heartbeat of the survivor's member in %q: %+v, %v", id, res, err)
			}
		}
	}
	for _, id := range lobbies {
		waitFor(t, "the host seat to pass in "+id, func() bool {
			_, ok := find(t, base, id, func(e lobby.Event) bool { return e.Reason == lobby.ReasonLeaseExpired && e.Subject == "host" })
			return ok
		})
		var timedOut []string
		for _, e := range logged(t, base, id) {
			switch e.Reason {
			case lobby.ReasonTimedOut:
				timedOut = append(timedOut, e.Subject)
				if !e.At.Equal(deadline) {
					t.Errorf("lobby %q: %s timed out at %v, want the killed Service's session deadline %v", id, e.Subject, e.At, deadline)
				}
			case lobby.ReasonLeaseExpired:
				if e.Subject == "host" && (!e.At.Equal(deadline.Add(policy.Grace)) || e.Host != "s" || e.PrevHost != "host") {
					t.Errorf("lobby %q: succession %+v, want host's lease to expire at the deadline + grace (%v) and s to take the seat", id, e, deadline.Add(policy.Grace))
				}
			}
		}
		if !slices.Equal(timedOut, []string{"host", "m1"}) {
			t.Errorf("lobby %q: timed out %v, want host then m1", id, timedOut)
		}
	}
}

// cutSessions is a store handle that a test can cut off from its server:
// while cut is set every call fails as an unreachable server's would. It
// records which sessions each of its committed writes named.
type cutStore struct {
	store.Store
	cut atomic.Bool

	mu     sync.Mutex
	writes [][]string // Write.Sessions of each committed write
}

var errCut = errors.New("lobbytest: cut off from the store")

func (c *cutStore) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.cut.Load() {
		return errCut
	}
	return nil
}

func (c *cutStore) Load(ctx context.Context, id string) (store.Record, error) {
	if err := c.check(ctx); err != nil {
		return store.Record{}, err
	}
	return c.Store.Load(ctx, id)
}

func (c *cutStore) Write(ctx context.Context, w store.Write) error {
	if err := c.check(ctx); err != nil {
		return err
	}
	if err := c.Store.Write(ctx, w); err != nil {
		return err
	}
	c.mu.Lock()
	c.writes = append(c.writes, slices.Clone(w.Sessions))
	c.mu.Unlock()
	return nil
}

func (c *cutStore) Delete(ctx context.Context, d store.Deletion) error {
	if err := c.check(ctx); err != nil {
		return err
	}
	return c.Store.Delete(ctx, d)
}

func (c *cutStore) Due(ctx context.Context, now time.Time, limit int) ([]store.Due, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	return c.Store.Due(ctx, now, limit)
}

func (c *cutStore) ReadLog(ctx context.Context, id string, after uint64, limit int) ([]store.Entry, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	return c.Store.ReadLog(ctx, id, after, limit)
}

func (c *cutStore) LogHeads(ctx context.Context, ids []string) ([]uint64, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	return c.Store.LogHeads(ctx, ids)
}

// written returns the sessions named by the writes committed since the
// n-th.
func (c *cutStore) written(n int) [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.writes[n:])
}

func (c *cutStore) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}

type cutClaimer struct {
	store.Claimer
	c *cutStore
}

func (cc cutClaimer) Claim(ctx context.Context, now time.Time, limit int, hold time.Duration) ([]store.Due, error) {
	if err := cc.c.check(ctx); err != nil {
		return nil, err
	}
	return cc.Claimer.Claim(ctx, now, limit, hold)
}

type cutSessionCalls struct {
	store.Sessions
	c *cutStore
}

func (cs cutSessionCalls) OpenSession(ctx context.Context, id string, deadline time.Time) error {
	if err := cs.c.check(ctx); err != nil {
		return err
	}
	return cs.Sessions.OpenSession(ctx, id, deadline)
}

func (cs cutSessionCalls) RenewSession(ctx context.Context, id string, now, deadline time.Time) error {
	if err := cs.c.check(ctx); err != nil {
		return err
	}
	return cs.Sessions.RenewSession(ctx, id, now, deadline)
}

func (cs cutSessionCalls) EndSession(ctx context.Context, id string, at time.Time) error {
	if err := cs.c.check(ctx); err != nil {
		return err
	}
	return cs.Sessions.EndSession(ctx, id, at)
}

func (cs cutSessionCalls) SessionDeadlines(ctx context.Context, ids []string) ([]time.Time, error) {
	if err := cs.c.check(ctx); err != nil {
		return nil, err
	}
	return cs.Sessions.SessionDeadlines(ctx, ids)
}

func (cs cutSessionCalls) ExpiredSessions(ctx context.Context, now time.Time, limit int) ([]store.SessionDeadline, error) {
	if err := cs.c.check(ctx); err != nil {
		return nil, err
	}
	return cs.Sessions.ExpiredSessions(ctx, now, limit)
}

func (cs cutSessionCalls) SessionLobbies(ctx context.Context, id, after string, limit int) ([]string, error) {
	if err := cs.c.check(ctx); err != nil {
		return nil, err
	}
	return cs.Sessions.SessionLobbies(ctx, id, after, limit)
}

// cuttable wraps s: its writes go one by one through Write (no batches),
// and it offers no change notifications, so that the Service behind it
// learns of other processes' commits only by asking (which a cut, or a
// stopped clock, prevents).
func cuttable(s store.Store) (*cutStore, store.Store) {
	c := &cutStore{Store: s}
	caps := store.Of(s)
	caps.BatchWriter, caps.Notifier = nil, nil
	if caps.Claimer != nil {
		caps.Claimer = cutClaimer{caps.Claimer, c}
	}
	caps.Sessions = cutSessionCalls{caps.Sessions, c}
	return c, store.ComposeWith(c, caps)
}

// testLostSession: a Service whose session ends before it could renew it
// gives its connections up. paused: the process stood still (its clock
// stopped, as under SIGSTOP) while the others' time ran past its session's
// deadline, and then jumps ahead; else it stays up but cut off from the
// store until past the deadline. Either way the other Service ends its
// connections as of the deadline, its Attachment is told End (timed out at
// the deadline; while still cut off, for a Service that is), a heartbeat
// on the old generation is stale, no write it
// makes afterwards names the old session, and the next join through it
// goes through a new session.
func testLostSession(t *testing.T, h Harness, paused bool) {
	ctx := t.Context()
	world := clockwork.NewFakeClockAt(t0)
	clockA := world
	if paused {
		clockA = clockwork.NewFakeClockAt(t0)
	}
	policy := sessionPolicy()
	base := h.NewStore(t)
	ss := base.(store.Sessions)
	cut, viaCut := cuttable(h.Connect(t, base))
	a := newService(t, viaCut, clockA, lobby.WithPolicy(policy))
	b := newService(t, h.Connect(t, base), world, lobby.WithPolicy(policy))
	runSession(t, a)
	runSession(t, b)
	rooms, err := lobby.NewRooms(a)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan lobby.Ended, 8)
	att, _, err := rooms.Join(ctx, "p0", "host", nil, lobby.SinkFuncs{OnEnd: func(e lobby.Ended) { ended <- e }})
	if err != nil {
		t.Fatalf("Rooms.Join through a: %v", err)
	}
	gB := must(t, "Join through b")(b.Join(ctx, "p0", "m1", nil)).Gen
	old := a.Session()
	deadline := sessionDeadline(t, ss, old)
	if !paused {
		cut.cut.Store(true)
	}
	// The others' time runs past the deadline and the grace.
	for world.Now().Before(deadline.Add(policy.Grace + 2*time.Second)) {
		if paused {
			tick(t, world, ss, b)
		} else {
			world.Advance(time.Second)
			waitFor(t, "b's renewal", func() bool {
				return !sessionDeadline(t, ss, b.Session()).Before(world.Now().Add(sessionTTL * 2 / 3))
			})
		}
		must(t, "heartbeat through b")(b.Heartbeat(ctx, "p0", "m1", gB))
		if paused {
			select {
			case e := <-ended:
				t.Fatalf("the paused Service's Attachment ended (%+v) while it stood still", e)
			default:
			}
		}
	}
	if !paused {
		// Cut off past its session's deadline, it gives its connections
		// up by itself: it hears nothing from the store.
		checkEnd(t, ended, att, deadline)
	}
	waitFor(t, "the host seat to pass", func() bool {
		_, ok := find(t, base, "p0", func(e lobby.Event) bool { return e.Reason == lobby.ReasonLeaseExpired && e.Subject == "host" })
		return ok
	})
	if e, _ := find(t, base, "p0", func(e lobby.Event) bool { return e.Reason == lobby.ReasonTimedOut }); e.Subject != "host" || !e.At.Equal(deadline) {
		t.Errorf("time-out %+v, want host at the session deadline %v", e, deadline)
	}
	// The Service comes back: its clock jumps to the others' time, or its
	// store answers again.
	n := cut.count()
	if paused {
		clockA.Advance(world.Now().Sub(clockA.Now()))
	} else {
		cut.cut.Store(false)
	}
	if paused {
		checkEnd(t, ended, att, deadline)
	}
	if res, err := a.Heartbeat(ctx, "p0", "host", att.Gen()); err != nil || res.Outcome != lobby.OutcomeStale {
		t.Errorf("heartbeat of the lost session's connection: %+v, %v; want stale", res, err)
	}
	// Its session loop opens a new one at its next try (after a back-off,
	// for one that was cut off).
	for i := 0; ; i++ {
		if s := a.Session(); s != "" && s != old {
			break
		}
		if i == 20 {
			t.Fatal("no new session 20s after the Service came back")
		}
		tick(t, world, ss, b)
		must(t, "heartbeat through b")(b.Heartbeat(ctx, "p0", "m1", gB))
		time.Sleep(5 * time.Millisecond) // let a's loop take the time
	}
	res, err := a.Join(ctx, "p0", "host", nil)
	if err != nil {
		t.Fatalf("Join again through a: %v", err)
	}
	snap, err := b.Snapshot(ctx, "p0")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Host != "m1" || res.Gen == att.Gen() {
		t.Errorf("after the rejoin: host %q, generation %d (old %d); want m1 hosting and a new generation", snap.Host, res.Gen, att.Gen())
	}
	for i, sessions := range cut.written(n) {
		if slices.Contains(sessions, old) {
			t.Errorf("write %d after the Service came back names its lost session %q (%v)", n+i, old, sessions)
		}
	}
}

// checkEnd waits for the End of att's generation: timed out at the
// session deadline.
func checkEnd(t *testing.T, ended <-chan lobby.Ended, att *lobby.Attachment, deadline time.Time) {
	t.Helper()
	select {
	case e := <-ended:
		if e.Player != "host" || e.Gen != att.Gen() || e.Cause != lobby.EndTimedOut || !e.At.Equal(deadline) {
			t.Errorf("End %+v, want host's generation %d timed out at the session deadline %v", e, att.Gen(), deadline)
		}
	case <-time.After(sessionWait):
		t.Fatal("the Attachment of a lost session's connection was not told End")
	}
}

// testDrain: a Service shutting down on purpose ends its connections at
// once, as closes (disconnected, the grace starting now), moves no host
// and no term, and ends its session; the host back through another
// Service within the grace keeps its seat.
func testDrain(t *testing.T, h Harness) {
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(t0)
	policy := sessionPolicy()
	base := h.NewStore(t)
	ss := base.(store.Sessions)
	a := newService(t, base, clock, lobby.WithPolicy(policy))
	b := newService(t, h.Connect(t, base), clock, lobby.WithPolicy(policy))
	stopA := runSession(t, a)
	runSession(t, b)
	lobbies := []string{"d0", "d1", "d2"}
	before := map[string]lobby.Snapshot{}
	for _, id := range lobbies {
		must(t, "Join host through a")(a.Join(ctx, id, "host", nil))
		must(t, "Join m1 through b")(b.Join(ctx, id, "m1", nil))
		must(t, "Join m2 through a")(a.Join(ctx, id, "m2", nil))
		snap, err := b.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = snap
	}
	session := a.Session()
	tick(t, clock, ss, a, b)
	drainedAt := clock.Now()
	if err := a.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	stopA()
	if s := a.Session(); s != "" {
		t.Errorf("session %q after Drain", s)
	}
	if d := sessionDeadline(t, ss, session); !d.IsZero() && d.After(drainedAt) {
		t.Errorf("drained session's deadline %v, want ended by %v", d, drainedAt)
	}
	for _, id := range lobbies {
		snap, err := b.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Host != "host" || snap.Term != before[id].Term || snap.Revision != before[id].Revision+2 {
			t.Errorf("lobby %q after the drain: host %q term %d revision %d; before: %q %d %d",
				id, snap.Host, snap.Term, snap.Revision, before[id].Host, before[id].Term, before[id].Revision)
		}
		evs := logged(t, base, id)
		var drained []string
		for _, e := range evs[len(evs)-2:] {
			drained = append(drained, e.Subject)
			if e.Reason != lobby.ReasonDisconnected || !e.At.Equal(drainedAt) || e.Host != "host" {
				t.Errorf("lobby %q: drain event %+v, want disconnected at %v with the host unchanged", id, e, drainedAt)
			}
		}
		if !slices.Equal(drained, []string{"host", "m2"}) {
			t.Errorf("lobby %q: drained %v, want host and m2", id, drained)
		}
	}
	// Back through b inside the grace: the same seat and term.
	clock.Advance(policy.Grace / 2)
	for _, id := range lobbies {
		res := must(t, "Join host through b")(b.Join(ctx, id, "host", nil))
		if len(res.Events) != 1 || res.Events[0].Reason != lobby.ReasonReconnected || res.Events[0].Host != "host" || res.Events[0].Term != before[id].Term {
			t.Errorf("lobby %q: the host's return through b: %+v", id, res.Events)
		}
	}
}

// must returns the result of a Service call, failing the test on an error.
func must(t *testing.T, what string) func(lobby.Result, error) lobby.Result {
	return func(res lobby.Result, err error) lobby.Result {
		t.Helper()
		if err != nil {
			t.Fatal(fmt.Errorf("%s: %w", what, err))
		}
		return res
	}
}
