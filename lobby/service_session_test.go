package lobby_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// counted counts the record calls made through it; the session calls and
// change notifications of the store it wraps pass through uncounted.
type counted struct {
	store.Store
	writes, loads atomic.Int64
	// renewFail, while set, makes every renewal and load fail as an
	// unreachable store would.
	renewFail atomic.Bool
	// renewHang, while set, makes every renewal wait for its context, as
	// a store behind a silent network would.
	renewHang atomic.Bool
	hanging   atomic.Int32 // renewals waiting
}

func (c *counted) Write(ctx context.Context, w store.Write) error {
	c.writes.Add(1)
	return c.Store.Write(ctx, w)
}

func (c *counted) Load(ctx context.Context, id string) (store.Record, error) {
	c.loads.Add(1)
	if c.renewFail.Load() {
		return store.Record{}, errors.New("store unreachable")
	}
	return c.Store.Load(ctx, id)
}

// cutSessions is the wrapped store's Sessions, with renewals that fail
// while renewFail is set.
type cutSessions struct {
	store.Sessions
	c *counted
}

func (s cutSessions) RenewSession(ctx context.Context, id string, now, deadline time.Time) error {
	if s.c.renewFail.Load() {
		return errors.New("store unreachable")
	}
	if s.c.renewHang.Load() {
		s.c.hanging.Add(1)
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Sessions.RenewSession(ctx, id, now, deadline)
}

// countedStore wraps mem; writes go through Write (no batching).
func countedStore(mem *memstore.Store) (*counted, store.Store) {
	c := &counted{Store: mem}
	caps := store.Of(mem)
	caps.BatchWriter = nil
	caps.Sessions = cutSessions{Sessions: mem, c: c}
	return c, store.ComposeWith(c, caps)
}

func sessionPolicy() lobby.Policy {
	p := lobby.DefaultPolicy()
	p.Grace, p.HeartbeatTTL = grace, ttl
	return p
}

// running starts svc.Run and waits until it has opened its session; the
// returned stop ends Run and waits for it.
func running(t *testing.T, svc *lobby.Service) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	eventually(t, "the Service to open its session", func() bool { return svc.Session() != "" })
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(hangGuard):
				t.Error("Run did not return")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// step advances clock by d, a second at a time, and after each second
// waits until each of svcs has made the renewal due by then: a fake clock
// must not run ahead of the loops it drives.
func step(t *testing.T, clock *clockwork.FakeClock, ss store.Sessions, d time.Duration, svcs ...*lobby.Service) {
	t.Helper()
	for end := clock.Now().Add(d); clock.Now().Before(end); {
		clock.Advance(min(time.Second, end.Sub(clock.Now())))
		for _, svc := range svcs {
			eventually(t, "a renewal", func() bool {
				ds, err := ss.SessionDeadlines(context.Background(), []string{svc.Session()})
				return err == nil && !ds[0].Before(clock.Now().Add(ttl*2/3))
			})
		}
	}
}

// eventually waits until ok holds; not holding by hangGuard is a failure.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	limit := time.Now().Add(hangGuard)
	for !ok() {
		if time.Now().After(limit) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// logged returns the events in lobby id's effects log, in order.
func logged(t *testing.T, st store.Store, id string) []lobby.Event {
	t.Helper()
	entries, err := st.ReadLog(context.Background(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []lobby.Event
	for _, e := range entries {
		fx, err := rules.DecodeEffects(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fx.Events...)
	}
	return out
}

func waitEvent(t *testing.T, st store.Store, id, what string, ok func(lobby.Event) bool) lobby.Event {
	t.Helper()
	var found lobby.Event
	eventually(t, what, func() bool {
		for _, e := range logged(t, st, id) {
			if ok(e) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// stored decodes lobby id's record.
func stored(t *testing.T, st store.Store, id string) *rules.State {
	t.Helper()
	rec, err := st.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	s, err := rules.DecodeState(rec.Data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHeldHeartbeatsMakeNoStoreCalls: connections joined through a
// Service's session are kept alive in its memory: a minute of heartbeats
// reads and writes nothing, and a connection that stops heartbeating ends
// as of its own deadline, committed by the Service.
func TestHeldHeartbeatsMakeNoStoreCalls(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	c, st := countedStore(mem)
	svc := newService(t, st, clock, lobby.WithPolicy(sessionPolicy()), lobby.WithSessionTTL(ttl))
	running(t, svc)
	g17 := must(t)(svc.Join(ctx, "l", "p-17", nil)).Gen
	g23 := must(t)(svc.Join(ctx, "l", "p-23", nil)).Gen
	rec := stored(t, mem, "l")
	for _, m := range rec.Members {
		if c := m.Conns[0]; c.Session != svc.Session() || !c.Deadline.IsZero() {
			t.Fatalf("%s's connection %+v, want held by %q with no stored deadline", m.Player, c, svc.Session())
		}
	}
	writes, loads := c.writes.Load(), c.loads.Load()
	var last time.Time
	for range 12 {
		step(t, clock, mem, 5*time.Second, svc)
		last = clock.Now()
		for p, g := range map[string]uint64{"p-17": g17, "p-23": g23} {
			res := must(t)(svc.Heartbeat(ctx, "l", p, g))
			if res.Outcome != lobby.OutcomeApplied || res.Slack != 10*time.Second {
				t.Fatalf("heartbeat of %s: %+v, want applied with 10s of slack", p, res)
			}
		}
	}
	if w, l := c.writes.Load()-writes, c.loads.Load()-loads; w != 0 || l != 0 {
		t.Fatalf("a minute of heartbeats made %d writes and %d loads, want none", w, l)
	}
	// p-23 goes silent; p-17 keeps beating.
	for range 4 {
		step(t, clock, mem, 5*time.Second, svc)
		must(t)(svc.Heartbeat(ctx, "l", "p-17", g17))
	}
	e := waitEvent(t, mem, "l", "p-23 to time out", func(e lobby.Event) bool { return e.Reason == lobby.ReasonTimedOut })
	if e.Subject != "p-23" || !e.At.Equal(last.Add(ttl)) {
		t.Fatalf("time-out %+v, want p-23 at its last heartbeat + TTL (%v)", e, last.Add(ttl))
	}
	if res := must(t)(svc.Heartbeat(ctx, "l", "p-23", g23)); res.Outcome != lobby.OutcomeStale {
		t.Fatalf("heartbeat after the time-out: %+v, want stale", res)
	}
}

// TestHeartbeatPastItsDeadlineIsStale: a heartbeat that comes after its
// generation's deadline does not revive it: the end is committed as of the
// deadline and the heartbeat is told the generation is stale.
func TestHeartbeatPastItsDeadlineIsStale(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	// A session that outlives the generation's deadline.
	svc := newService(t, mem, clock, lobby.WithPolicy(sessionPolicy()), lobby.WithSessionTTL(time.Minute))
	stop := running(t, svc)
	g := must(t)(svc.Join(ctx, "l", "p-17", nil)).Gen
	must(t)(svc.Join(ctx, "l", "p-23", nil))
	joined := clock.Now()
	stop() // no expiry loop: the heartbeat itself must find the deadline passed
	clock.Advance(ttl + time.Second)
	if res := must(t)(svc.Heartbeat(ctx, "l", "p-17", g)); res.Outcome != lobby.OutcomeStale {
		t.Fatalf("late heartbeat: %+v, want stale", res)
	}
	e := waitEvent(t, mem, "l", "p-17 to time out", func(e lobby.Event) bool { return e.Reason == lobby.ReasonTimedOut })
	if e.Subject != "p-17" || !e.At.Equal(joined.Add(ttl)) {
		t.Fatalf("time-out %+v, want p-17 at its deadline %v", e, joined.Add(ttl))
	}
}

// TestKilledServicesConnectionsEndAtItsSessionDeadline: a process that
// stops renewing (killed) leaves its connections to the others: they end
// as of its session's deadline, one transition per lobby, and succession
// follows after the grace.
func TestKilledServicesConnectionsEndAtItsSessionDeadline(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	a := newService(t, mem, clock, lobby.WithPolicy(sessionPolicy()), lobby.WithSessionTTL(ttl))
	b := newService(t, mem, clock, lobby.WithPolicy(sessionPolicy()), lobby.WithSessionTTL(ttl))
	stopA := running(t, a)
	running(t, b)
	must(t)(a.Join(ctx, "l", "p-17", nil))
	must(t)(a.Join(ctx, "l", "p-23", nil))
	g41 := must(t)(b.Join(ctx, "l", "p-41", nil)).Gen
	aSession := a.Session()
	stopA()
	ds, err := mem.SessionDeadlines(ctx, []string{aSession})
	if err != nil {
		t.Fatal(err)
	}
	deadline := ds[0]
	for clock.Now().Before(deadline.Add(grace + 5*time.Second)) {
		step(t, clock, mem, time.Second, b)
		must(t)(b.Heartbeat(ctx, "l", "p-41", g41))
	}
	e := waitEvent(t, mem, "l", "p-41 to take over", func(e lobby.Event) bool { return e.Host == "p-41" })
	var timedOut []lobby.Event
	for _, e := range logged(t, mem, "l") {
		if e.Reason == lobby.ReasonTimedOut {
			timedOut = append(timedOut, e)
		}
	}
	if len(timedOut) != 2 || timedOut[0].Subject != "p-17" || timedOut[1].Subject != "p-23" ||
		!timedOut[0].At.Equal(deadline) || !timedOut[1].At.Equal(deadline) {
		t.Fatalf("time-outs %+v, want p-17 then p-23 at the session deadline %v", timedOut, deadline)
	}
	if e.Reason != lobby.ReasonLeaseExpired || e.PrevHost != "p-17" || !e.At.Equal(deadline.Add(grace)) {
		t.Fatalf("succession %+v, want p-17's lease expiring at the deadline + grace", e)
	}
	if got := stored(t, mem, "l").Sessions(); !slices.Equal(got, []string{b.Session()}) {
		t.Fatalf("sessions held after the expiry: %v, want only b's", got)
	}
}

// TestCutOffServiceReportsItsConnectionsEnded: a Service that cannot renew
// its session (the store unreachable for it) gives its connections up at
// the session's deadline: each Attachment is told End, its heartbeats are
// stale, and it opens a new session once the store answers again.
func TestCutOffServiceReportsItsConnectionsEnded(t *testing.T) {
	t.Run("renewals fail", func(t *testing.T) { cutOff(t, false) })
	// A renewal that never returns must not keep the Service serving
	// past its session's deadline.
	t.Run("renewals hang", func(t *testing.T) { cutOff(t, true) })
}

func cutOff(t *testing.T, hang bool) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	c, st := countedStore(mem)
	svc := newService(t, st, clock, lobby.WithPolicy(sessionPolicy()), lobby.WithSessionTTL(ttl))
	running(t, svc)
	rooms, err := lobby.NewRooms(svc)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan lobby.Ended, 4)
	a, _, err := rooms.Join(ctx, "l", "p-17", nil, lobby.SinkFuncs{OnEnd: func(e lobby.Ended) { ended <- e }})
	if err != nil {
		t.Fatal(err)
	}
	first := svc.Session()
	ds, _ := mem.SessionDeadlines(ctx, []string{first})
	if hang {
		c.renewHang.Store(true)
		// Up to the next renewal, which then hangs.
		for c.hanging.Load() == 0 {
			clock.Advance(time.Second)
			eventually(t, "the renewal to start", func() bool {
				return c.hanging.Load() > 0 || clock.Now().Before(ds[0].Add(-ttl*2/3))
			})
		}
	} else {
		c.renewFail.Store(true)
	}
	for clock.Now().Before(ds[0]) {
		select {
		case e := <-ended:
			t.Fatalf("End %+v before the session's deadline %v (now %v)", e, ds[0], clock.Now())
		default:
		}
		clock.Advance(time.Second)
		if hang {
			continue // heartbeats would find the session over themselves
		}
		if _, err := a.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case e := <-ended:
		if e.Player != "p-17" || e.Gen != a.Gen() || e.Cause != lobby.EndTimedOut || !e.At.Equal(ds[0]) {
			t.Fatalf("End %+v, want p-17's generation timed out at %v", e, ds[0])
		}
	case <-time.After(hangGuard):
		t.Fatal("no End after the session's deadline passed")
	}
	if res := must(t)(svc.Heartbeat(ctx, "l", "p-17", a.Gen())); res.Outcome != lobby.OutcomeStale {
		t.Fatalf("heartbeat of a lost session's connection: %+v, want stale", res)
	}
	if hang {
		return // the hung renewal waits out its own time limit, in real time
	}
	c.renewFail.Store(false)
	clock.Advance(time.Second)
	eventually(t, "a new session", func() bool { s := svc.Session(); return s != "" && s != first })
}

// TestRemoteEndMakesHeldHeartbeatStale: a generation held in this
// Service's memory but ended by another process's commit (a newer tab
// there superseded it) is not kept alive: once the commit is heard of, the
// next heartbeat is judged against the store.
func TestRemoteEndMakesHeldHeartbeatStale(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	p := sessionPolicy()
	p.MaxConnectionsPerPlayer = 1
	a := newService(t, mem, clock, lobby.WithPolicy(p), lobby.WithSessionTTL(ttl))
	b := newService(t, mem, clock, lobby.WithPolicy(p), lobby.WithSessionTTL(ttl))
	running(t, a)
	running(t, b)
	g1 := must(t)(a.Join(ctx, "l", "p-17", nil)).Gen
	must(t)(b.Join(ctx, "l", "p-17", nil))
	eventually(t, "a's heartbeat to be stale", func() bool {
		return must(t)(a.Heartbeat(ctx, "l", "p-17", g1)).Outcome == lobby.OutcomeStale
	})
}

// TestDrainMovesNoHost: a draining Service ends its connections at once as
// closes, the host keeping its seat through the grace; the host back
// through another process keeps the term, and the session is over.
func TestDrainMovesNoHost(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	a := newService(t, mem, clock, lobby.WithPolicy(sessionPolicy()), lobby.WithSessionTTL(ttl))
	b := newService(t, mem, clock, lobby.WithPolicy(sessionPolicy()), lobby.WithSessionTTL(ttl))
	stopA := running(t, a)
	running(t, b)
	must(t)(a.Join(ctx, "l", "p-17", nil))
	must(t)(a.Join(ctx, "l", "p-23", nil))
	must(t)(b.Join(ctx, "l", "p-41", nil))
	must(t)(a.Join(ctx, "m", "p-17", nil))
	before := stored(t, mem, "l")
	session := a.Session()
	clock.Advance(time.Second)
	if err := a.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	stopA()
	if a.Session() != "" {
		t.Fatalf("session %q after Drain", a.Session())
	}
	after := stored(t, mem, "l")
	if after.Host != "p-17" || after.Term != before.Term || after.Revision != before.Revision+2 {
		t.Fatalf("after the drain: host %q term %d revision %d; before: %q %d %d", after.Host, after.Term, after.Revision, before.Host, before.Term, before.Revision)
	}
	evs := logged(t, mem, "l")
	for _, e := range evs[len(evs)-2:] {
		if e.Reason != lobby.ReasonDisconnected || !e.At.Equal(clock.Now()) {
			t.Fatalf("drain event %+v, want disconnected now", e)
		}
	}
	if got := stored(t, mem, "m"); got.Members[0].Status() != rules.StatusReconnecting {
		t.Fatalf("lobby m after the drain: %+v", got.Members)
	}
	ds, err := mem.SessionDeadlines(ctx, []string{session})
	if err != nil {
		t.Fatal(err)
	}
	if !ds[0].IsZero() && ds[0].After(clock.Now()) {
		t.Fatalf("drained session's deadline %v, want ended by %v", ds[0], clock.Now())
	}
	clock.Advance(grace / 2)
	res := must(t)(b.Join(ctx, "l", "p-17", nil))
	if len(res.Events) != 1 || res.Events[0].Reason != lobby.ReasonReconnected || res.Events[0].Host != "p-17" || res.Events[0].Term != before.Term {
		t.Fatalf("the host's return through b: %+v", res.Events)
	}
}

// TestBothKindsOfGenerationMeet: a Service without a session (a process
// not yet upgraded, say) stores its connections' heartbeat deadlines in a
// lobby where another holds generations by session; each ends by its own
// rule, and the lobby's record keeps both.
func TestBothKindsOfGenerationMeet(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	a := newService(t, mem, clock, lobby.WithPolicy(sessionPolicy()), lobby.WithSessionTTL(ttl))
	old := newService(t, mem, clock, lobby.WithPolicy(sessionPolicy()), lobby.WithSessionTTL(0))
	running(t, a)
	must(t)(a.Join(ctx, "l", "p-17", nil))
	g := must(t)(old.Join(ctx, "l", "p-23", nil)).Gen
	if old.Session() != "" {
		t.Fatalf("a Service configured without sessions has session %q", old.Session())
	}
	st := stored(t, mem, "l")
	if c := st.Member("p-17").Conns[0]; c.Session != a.Session() || !c.Deadline.IsZero() {
		t.Fatalf("held connection %+v", c)
	}
	if c := st.Member("p-23").Conns[0]; c.Session != "" || !c.Deadline.Equal(t0.Add(ttl)) {
		t.Fatalf("stored connection %+v", c)
	}
	clock.Advance(5 * time.Second)
	must(t)(old.Heartbeat(ctx, "l", "p-23", g))
	if c := stored(t, mem, "l").Member("p-23").Conns[0]; !c.Deadline.Equal(clock.Now().Add(ttl)) {
		t.Fatalf("stored heartbeat did not move the deadline: %+v", c)
	}
}

// TestSessionsAreTheServicesOwn: a command naming a session is refused
// before the store is touched.
func TestSessionsAreTheServicesOwn(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, memstore.New(), clockwork.NewFakeClockAt(t0))
	for _, cmd := range []rules.Command{rules.Join("p-17", nil).WithSession("s-x"), rules.Drain("s-x")} {
		if _, err := svc.Do(ctx, "l", cmd); !errors.Is(err, lobby.ErrInvalidCommand) {
			t.Errorf("Do(%v): %v, want ErrInvalidCommand", cmd.Op, err)
		}
	}
}
