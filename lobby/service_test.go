package lobby_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const (
	grace = 8 * time.Second
	ttl   = 15 * time.Second
)

// withoutSessions offers every capability of mem but sessions.
func withoutSessions(mem *memstore.Store) store.Store {
	return store.Compose(mem, mem, mem, mem)
}

// hangGuard bounds how long a test waits for a goroutine; reaching it is a
// failure, never a timing claim.
const hangGuard = 10 * time.Second

// testSessionTTL is the session TTL newService gives unless a test names
// its own: so long that a fake clock moved ahead in big steps never runs
// past a session's deadline before the session loop has renewed it (the
// Service would rightly give the session up, as after a pause). Tests of
// sessions themselves set the TTL they need.
const testSessionTTL = 365 * 24 * time.Hour

func newService(t *testing.T, st store.Store, clock clockwork.Clock, opts ...lobby.Option) *lobby.Service {
	t.Helper()
	s, err := lobby.NewService(st, append([]lobby.Option{lobby.WithClock(clock), lobby.WithSessionTTL(testSessionTTL)}, opts...)...)
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	return s
}

// collector is a Publisher that records what it is given.
type collector struct {
	mu     sync.Mutex
	events []lobby.Event
	fail   int // fail this many Publish calls first
	notify chan struct{}
}

func newCollector() *collector { return &collector{notify: make(chan struct{}, 1000)} }

func (c *collector) Publish(ctx context.Context, evs []lobby.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		return errors.New("broker unavailable")
	}
	c.events = append(c.events, evs...)
	for range evs {
		c.notify <- struct{}{}
	}
	return nil
}

func (c *collector) all() []lobby.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]lobby.Event(nil), c.events...)
}

// waitFor waits until the collector holds an event satisfying ok.
func (c *collector) waitFor(t *testing.T, what string, ok func(lobby.Event) bool) lobby.Event {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		for _, e := range c.all() {
			if ok(e) {
				return e
			}
		}
		select {
		case <-c.notify:
		case <-deadline:
			t.Fatalf("no event: %s; have %+v", what, c.all())
		}
	}
}

// must(t)(svc.Join(...)) fails the test on error and returns the result.
func must(t *testing.T) func(lobby.Result, error) lobby.Result {
	return func(res lobby.Result, err error) lobby.Result {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// joinFour joins p-17, p-23, p-41, p-62 into lobby "l" and returns their
// generations.
func joinFour(t *testing.T, ctx context.Context, svc *lobby.Service) map[string]uint64 {
	t.Helper()
	gens := map[string]uint64{}
	for _, p := range []string{"p-17", "p-23", "p-41", "p-62"} {
		gens[p] = must(t)(svc.Join(ctx, "l", p, nil)).Gen
	}
	return gens
}

// TestRunExpiresHostAtDeadline: the host's socket drops; Run's sweeper
// fires at the reconnect deadline (a timer, not polling) and p-23 takes
// over; the relay publishes every event in revision order.
func TestRunExpiresHostAtDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := clockwork.NewFakeClockAt(t0)
	pub := newCollector()
	p := lobby.DefaultPolicy()
	p.HeartbeatTTL = 0
	// On a store without sessions: the test counts the sleeping loops.
	svc := newService(t, withoutSessions(memstore.New()), clock, lobby.WithPublisher(pub), lobby.WithPolicy(p))
	done := make(chan error)
	go func() { done <- svc.Run(ctx) }()

	gens := joinFour(t, ctx, svc)
	must(t)(svc.Disconnect(ctx, "l", "p-17", gens["p-17"]))
	pub.waitFor(t, "p-17 disconnected", func(e lobby.Event) bool { return e.Reason == lobby.ReasonDisconnected })

	// Sweeper and relay are both asleep on timers.
	if err := clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal(err)
	}
	clock.Advance(grace - time.Millisecond)
	clock.Advance(time.Millisecond)
	e := pub.waitFor(t, "p-17's lease to expire", func(e lobby.Event) bool { return e.Reason == lobby.ReasonLeaseExpired })
	if e.Host != "p-23" || e.PrevHost != "p-17" || e.Revision != 6 || !e.At.Equal(t0.Add(grace)) {
		t.Fatalf("expiry event %+v, want p-17 → p-23 at revision 6, stamped at the deadline", e)
	}
	var revs []uint64
	for _, e := range pub.all() {
		revs = append(revs, e.Revision)
	}
	if diff := cmp.Diff([]uint64{1, 2, 3, 4, 5, 6}, revs); diff != "" {
		t.Errorf("published revisions (-want +got):\n%s", diff)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

func TestRunRefusesSecondRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := clockwork.NewFakeClockAt(t0)
	svc := newService(t, memstore.New(), clock)
	go svc.Run(ctx)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := svc.Run(ctx); !errors.Is(err, lobby.ErrRunning) {
		t.Fatalf("second Run = %v, want ErrRunning", err)
	}
}

// gateStore lets a test hold writes until a number of loads happened, to
// force two transitions to read the same version.
type gateStore struct {
	store.Store
	mu      sync.Mutex
	loads   int
	release chan struct{}
	want    int
}

func newGate(st store.Store, loads int) *gateStore {
	return &gateStore{Store: st, release: make(chan struct{}), want: loads}
}

func (g *gateStore) Load(ctx context.Context, id string) (store.Record, error) {
	rec, err := g.Store.Load(ctx, id)
	g.mu.Lock()
	g.loads++
	if g.loads == g.want {
		close(g.release)
	}
	g.mu.Unlock()
	return rec, err
}

func (g *gateStore) Write(ctx context.Context, w store.Write) error {
	select {
	case <-g.release:
	case <-time.After(hangGuard):
		return errors.New("gate never opened")
	}
	return g.Store.Write(ctx, w)
}

// pendingEvents returns the events in the effects logs of the lobbies ids,
// lobby by lobby, each in log order (the relay's pending work, when no
// relay ran).
func pendingEvents(t *testing.T, st store.Store, ids ...string) []lobby.Event {
	t.Helper()
	var out []lobby.Event
	for _, id := range ids {
		var after uint64
		for {
			entries, err := st.ReadLog(context.Background(), id, after, 100)
			if err != nil {
				t.Fatalf("ReadLog(%q, %d): %v", id, after, err)
			}
			if len(entries) == 0 {
				break
			}
			for _, e := range entries {
				fx, err := rules.DecodeEffects(e.Data)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, fx.Events...)
				after = e.Version
			}
		}
	}
	return out
}

// TestConcurrentExpiryJobsCommitOnce: two processes' expiry jobs load the
// same version and race; exactly one revision commits.
func TestConcurrentExpiryJobsCommitOnce(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	setup := newService(t, mem, clock)
	gens := joinFour(t, ctx, setup)
	must(t)(setup.Disconnect(ctx, "l", "p-17", gens["p-17"]))
	clock.Advance(grace)

	gate := newGate(mem, 2)
	a := newService(t, gate, clock, lobby.WithoutCache())
	b := newService(t, gate, clock, lobby.WithoutCache())
	outcomes := make(chan lobby.Outcome, 2)
	var wg sync.WaitGroup
	for _, svc := range []*lobby.Service{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := svc.ExpireLease(ctx, "l", "p-17", gens["p-17"], clock.Now())
			if err != nil {
				t.Error(err)
			}
			outcomes <- res.Outcome
		}()
	}
	wg.Wait()
	close(outcomes)
	var got []lobby.Outcome
	for o := range outcomes {
		got = append(got, o)
	}
	if !(len(got) == 2 && ((got[0] == lobby.OutcomeDone) != (got[1] == lobby.OutcomeDone))) {
		t.Fatalf("outcomes %v, want exactly one done", got)
	}
	var expiries []lobby.Event
	for _, e := range pendingEvents(t, mem, "l") {
		if e.Reason == lobby.ReasonLeaseExpired {
			expiries = append(expiries, e)
		}
	}
	if len(expiries) != 1 || expiries[0].Host != "p-23" || expiries[0].Revision != 6 {
		t.Fatalf("lease_expired events %+v, want exactly one, revision 6, host p-23", expiries)
	}
}

// TestHeartbeatRacingExpiry: whichever commits first, the heartbeat is
// never silently lost.
func TestHeartbeatRacingExpiry(t *testing.T) {
	ctx := context.Background()
	p := lobby.DefaultPolicy()

	t.Run("heartbeat first: the expiry is not due", func(t *testing.T) {
		clock := clockwork.NewFakeClockAt(t0)
		mem := memstore.New()
		svc := newService(t, mem, clock, lobby.WithPolicy(p))
		g := must(t)(svc.Join(ctx, "l", "a", nil)).Gen
		must(t)(svc.Join(ctx, "l", "b", nil))
		clock.Advance(ttl - time.Nanosecond)
		if res := must(t)(svc.Heartbeat(ctx, "l", "a", g)); res.Outcome != lobby.OutcomeApplied {
			t.Fatalf("heartbeat: %v", res.Outcome)
		}
		clock.Advance(time.Nanosecond) // a's old deadline
		res := must(t)(svc.ExpireLease(ctx, "l", "a", g, clock.Now()))
		if res.Outcome != lobby.OutcomeNotDue {
			t.Fatalf("expiry after the heartbeat: %v, want not_due", res.Outcome)
		}
	})

	t.Run("expiry first: the heartbeat is reported stale", func(t *testing.T) {
		clock := clockwork.NewFakeClockAt(t0)
		mem := memstore.New()
		setup := newService(t, mem, clock, lobby.WithPolicy(p))
		g := must(t)(setup.Join(ctx, "l", "a", nil)).Gen
		must(t)(setup.Join(ctx, "l", "b", nil))
		clock.Advance(ttl - time.Nanosecond)

		// The heartbeat reads the lobby and computes its transition just
		// before the deadline; its write is held until the expiry
		// committed.
		hold := &holdStore{Store: mem, entered: make(chan struct{}), release: make(chan struct{})}
		hb := newService(t, hold, clock, lobby.WithPolicy(p), lobby.WithoutCache())
		type out struct {
			res lobby.Result
			err error
		}
		hbDone := make(chan out)
		go func() {
			res, err := hb.Heartbeat(ctx, "l", "a", g)
			hbDone <- out{res, err}
		}()
		<-hold.entered
		clock.Advance(time.Nanosecond)
		exp := newService(t, mem, clock, lobby.WithPolicy(p))
		if res := must(t)(exp.ExpireLease(ctx, "l", "a", g, clock.Now())); res.Outcome != lobby.OutcomeDone {
			t.Fatalf("expiry: %v, want done", res.Outcome)
		}
		close(hold.release)
		o := <-hbDone
		if o.err != nil || o.res.Outcome != lobby.OutcomeStale {
			t.Fatalf("heartbeat after the expiry committed: %v, %v; want stale", o.res.Outcome, o.err)
		}
		snap, err := exp.Snapshot(ctx, "l")
		if err != nil {
			t.Fatal(err)
		}
		if snap.Members[0].Status != lobby.StatusReconnecting {
			t.Fatalf("a is %v after timing out, want reconnecting", snap.Members[0].Status)
		}
	})
}

// holdStore blocks the first Write until released.
type holdStore struct {
	store.Store
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (h *holdStore) Write(ctx context.Context, w store.Write) error {
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.entered)
		<-h.release
	}
	return h.Store.Write(ctx, w)
}

// TestPausedSweeperReplaysSameHistory: leases in several lobbies fall due
// while no sweeper runs; a sweeper started afterwards commits the same
// events as one that swept at every deadline, in deterministic order: each
// lobby's in its own order always, and all lobbies' in one order when the
// sweep advances one lobby at a time.
func TestPausedSweeperReplaysSameHistory(t *testing.T) {
	ctx := context.Background()
	type scenario struct {
		history map[string][]lobby.Event
		order   []string
	}
	run := func(paused bool, sweepers int) scenario {
		clock := clockwork.NewFakeClockAt(t0)
		// The log keeps everything: the test reads it an hour later.
		mem := memstore.New(memstore.WithRetention(store.Retention{}))
		// The Observer sees the commits in the order they were made.
		var mu sync.Mutex
		var order []string
		svc := newService(t, mem, clock, lobby.WithSweepConcurrency(sweepers), lobby.WithObserver(lobby.ObserverFunc(func(_ context.Context, o lobby.Observation) {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range o.Result.Events {
				order = append(order, fmt.Sprintf("%s@%d", e.Lobby, e.Revision))
			}
		})))
		gens := map[string]uint64{}
		for i, id := range []string{"l-3", "l-1", "l-2"} {
			for _, p := range []string{"p-17", "p-23", "p-41"} {
				gens[id+p] = must(t)(svc.Join(ctx, id, p, nil)).Gen
			}
			clock.Advance(time.Duration(i+1) * time.Second)
			must(t)(svc.Disconnect(ctx, id, "p-17", gens[id+"p-17"]))
		}
		// Heartbeats keep p-23 and p-41 alive for a minute; p-17 expires.
		for step := 0; step < 12; step++ {
			clock.Advance(5 * time.Second)
			for _, id := range []string{"l-3", "l-1", "l-2"} {
				for _, p := range []string{"p-23", "p-41"} {
					must(t)(svc.Heartbeat(ctx, id, p, gens[id+p]))
				}
			}
			if !paused {
				if _, err := svc.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Then everyone vanishes.
		clock.Advance(time.Hour)
		if _, err := svc.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		sc := scenario{history: map[string][]lobby.Event{}, order: order}
		for _, e := range pendingEvents(t, mem, "l-1", "l-2", "l-3") {
			sc.history[e.Lobby] = append(sc.history[e.Lobby], e)
		}
		return sc
	}
	onTime, paused, pausedAgain := run(false, 16), run(true, 16), run(true, 16)
	if diff := cmp.Diff(onTime.history, paused.history); diff != "" {
		t.Fatalf("paused sweeper changed the history (-on time +paused):\n%s", diff)
	}
	byLobby := func(order []string) map[string][]string {
		m := map[string][]string{}
		for _, o := range order {
			id, _, _ := strings.Cut(o, "@")
			m[id] = append(m[id], o)
		}
		return m
	}
	if diff := cmp.Diff(byLobby(paused.order), byLobby(pausedAgain.order)); diff != "" {
		t.Fatalf("a lobby's backlog order is not deterministic:\n%s", diff)
	}
	oneByOne, oneByOneAgain := run(true, 1), run(true, 1)
	if diff := cmp.Diff(onTime.history, oneByOne.history); diff != "" {
		t.Fatalf("a sweep of one lobby at a time changed the history (-concurrent +one by one):\n%s", diff)
	}
	if diff := cmp.Diff(oneByOne.order, oneByOneAgain.order); diff != "" {
		t.Fatalf("backlog order of a one-lobby-at-a-time sweep is not deterministic:\n%s", diff)
	}
	if n := len(onTime.history["l-1"]); n != 3+1+1+2+2 {
		t.Fatalf("l-1 has %d events, want 9 (3 joins, disconnect, expiry, 2 timeouts, 2 expiries)", n)
	}
}

// TestRestartedProcessFinishesOverdueTransitions: a process dies with
// overdue leases in a shared store; a new one completes them from the
// stored deadlines.
func TestRestartedProcessFinishesOverdueTransitions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	crashed := newService(t, mem, clock)
	gens := joinFour(t, ctx, crashed)
	must(t)(crashed.Disconnect(ctx, "l", "p-17", gens["p-17"]))
	// The process dies here: no callbacks, no timers. Time passes.
	clock.Advance(time.Minute)

	pub := newCollector()
	restarted := newService(t, mem, clock, lobby.WithPublisher(pub))
	go restarted.Run(ctx)
	last := pub.waitFor(t, "the backlog", func(e lobby.Event) bool { return e.Revision == 12 })
	if last.Host != "" || len(last.Members) != 0 {
		t.Fatalf("after the backlog: %+v, want an empty lobby", last)
	}
	var reasons []string
	for _, e := range pub.all() {
		if e.Revision > 5 {
			reasons = append(reasons, string(e.Reason)+":"+e.Subject)
		}
	}
	want := []string{
		"lease_expired:p-17",                                 // t0+8s
		"timed_out:p-23", "timed_out:p-41", "timed_out:p-62", // t0+15s
		"lease_expired:p-23", "lease_expired:p-41", "lease_expired:p-62", // t0+23s
	}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Fatalf("overdue transitions (-want +got):\n%s", diff)
	}
}

func TestSnapshotCommitsCatchUpFirst(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	svc := newService(t, mem, clock)
	g := must(t)(svc.Join(ctx, "l", "a", nil)).Gen
	must(t)(svc.Join(ctx, "l", "b", nil))
	must(t)(svc.Disconnect(ctx, "l", "a", g))
	clock.Advance(grace)
	snap, err := svc.Snapshot(ctx, "l")
	if err != nil {
		t.Fatal(err)
	}
	want := lobby.Snapshot{Lobby: "l", Revision: 4, Term: 2, Host: "b", Members: []lobby.MemberView{{Player: "b", JoinSeq: 2, Status: lobby.StatusOnline}}}
	if diff := cmp.Diff(want, snap); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}
	// The revision the snapshot shows is stored, with its event.
	evs := pendingEvents(t, mem, "l")
	if last := evs[len(evs)-1]; last.Revision != 4 || last.Reason != lobby.ReasonLeaseExpired {
		t.Fatalf("last stored event %+v, want the expiry at revision 4", last)
	}
	// A lobby never seen is empty at revision 0, and reading it writes
	// nothing.
	empty, err := svc.Snapshot(ctx, "never")
	if err != nil || empty.Revision != 0 || len(empty.Members) != 0 {
		t.Fatalf("unknown lobby: %+v, %v", empty, err)
	}
	if _, err := mem.Load(ctx, "never"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("reading an unknown lobby wrote it: %v", err)
	}
}

// TestCachedCopyIsCheckedAgainstStore: another process writes between two
// commands of this one; this one must not judge on its stale copy.
func TestCachedCopyIsCheckedAgainstStore(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	a := newService(t, mem, clock)
	b := newService(t, mem, clock)
	must(t)(a.Join(ctx, "l", "p-1", nil))
	// b adds a connection a has never seen.
	g := must(t)(b.Join(ctx, "l", "p-2", nil)).Gen
	// a's copy does not know g; it must not call the heartbeat stale.
	if res := must(t)(a.Heartbeat(ctx, "l", "p-2", g)); res.Outcome != lobby.OutcomeApplied {
		t.Fatalf("heartbeat via a stale copy: %v, want applied", res.Outcome)
	}
	// Nor may a refusal be judged on a stale copy.
	must(t)(b.TransferHost(ctx, "l", "p-1", "p-2"))
	if res, err := a.TransferHost(ctx, "l", "p-2", "p-1"); err != nil || res.Outcome != lobby.OutcomeApplied {
		t.Fatalf("transfer back via a stale copy: %v, %v", res.Outcome, err)
	}
	// And a write from a stale copy is retried on the fresh one.
	must(t)(b.Join(ctx, "l", "p-3", nil))
	res := must(t)(a.Leave(ctx, "l", "p-1"))
	if res.Revision != 6 {
		t.Fatalf("leave committed revision %d, want 6 (after b's join)", res.Revision)
	}
}

func TestCorruptRecordIsRefusedWithoutWriting(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	if err := mem.Write(ctx, store.Write{ID: "l", Expected: 0, Data: []byte("not a lobby")}); err != nil {
		t.Fatal(err)
	}
	// A record that decodes but breaks an invariant: host not a member.
	bad := rules.NewState("m", 0)
	bad.Host = "ghost"
	if err := mem.Write(ctx, store.Write{ID: "m", Expected: 0, Data: rules.EncodeState(bad)}); err != nil {
		t.Fatal(err)
	}
	svc := newService(t, mem, clock)
	for _, id := range []string{"l", "m"} {
		for _, cmd := range []rules.Command{rules.Join("a", nil), rules.Leave("a"), rules.Heartbeat("a", 1), rules.Tick()} {
			if _, err := svc.Do(ctx, id, cmd); !errors.Is(err, lobby.ErrCorrupt) {
				t.Errorf("lobby %s: %v on a corrupt record: %v, want ErrCorrupt", id, cmd.Op, err)
			}
		}
		rec, err := mem.Load(ctx, id)
		if err != nil || rec.Version != 1 {
			t.Errorf("lobby %s: corrupt record rewritten: version %d, %v", id, rec.Version, err)
		}
	}
	if _, err := svc.Sweep(ctx); err != nil {
		t.Fatalf("sweep with corrupt records that have no deadline: %v", err)
	}
}

func TestReclaimKeepsCountersAbove(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	svc := newService(t, mem, clock)
	g := must(t)(svc.Join(ctx, "l", "a", nil)).Gen
	must(t)(svc.Join(ctx, "l", "b", nil))
	if err := svc.Reclaim(ctx, "l"); !errors.Is(err, lobby.ErrNotEmpty) {
		t.Fatalf("Reclaim of a busy lobby: %v, want ErrNotEmpty", err)
	}
	must(t)(svc.Leave(ctx, "l", "b"))
	must(t)(svc.Disconnect(ctx, "l", "a", g))
	clock.Advance(grace) // a's grace runs out inside Reclaim's catch-up
	if err := svc.Reclaim(ctx, "l"); err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if _, err := mem.Load(ctx, "l"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record still there after Reclaim: %v", err)
	}
	res := must(t)(svc.Join(ctx, "l", "a", nil))
	if res.Revision <= 5 || res.Gen <= 2 || res.JoinSeq <= 2 {
		t.Fatalf("after reclaim: revision %d, gen %d, join seq %d; want above 5, 2, 2", res.Revision, res.Gen, res.JoinSeq)
	}
	if err := svc.Reclaim(ctx, "nothing-here"); err != nil {
		t.Fatalf("Reclaim of an unknown lobby: %v", err)
	}
}

func TestRelayRetriesFailedPublish(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	pub := newCollector()
	pub.fail = 2
	svc := newService(t, mem, clock, lobby.WithPublisher(pub))
	joinFour(t, ctx, svc)
	for i := 0; i < 2; i++ {
		if _, err := svc.Relay(ctx); err == nil {
			t.Fatal("Relay succeeded while the publisher fails")
		}
	}
	if n, err := svc.Relay(ctx); err != nil || n != 4 {
		t.Fatalf("Relay = %d, %v; want 4 events", n, err)
	}
	var revs []uint64
	for _, e := range pub.all() {
		revs = append(revs, e.Revision)
	}
	if diff := cmp.Diff([]uint64{1, 2, 3, 4}, revs); diff != "" {
		t.Fatalf("delivered (-want +got):\n%s", diff)
	}
	if n, _ := svc.Relay(ctx); n != 0 {
		t.Fatalf("acknowledged events delivered again: %d", n)
	}
}

// countingStore counts calls, to prove bad input never reaches the store.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	calls int
}

func (c *countingStore) Load(ctx context.Context, id string) (store.Record, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.Store.Load(ctx, id)
}

func (c *countingStore) Write(ctx context.Context, w store.Write) error {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.Store.Write(ctx, w)
}

func TestServiceBadInput(t *testing.T) {
	ctx := context.Background()
	cs := &countingStore{Store: memstore.New()}
	svc := newService(t, cs, clockwork.NewFakeClockAt(t0))
	long := string(make([]byte, lobby.MaxIDLen+1))
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"empty lobby", func() error { _, err := svc.Join(ctx, "", "a", nil); return err }, lobby.ErrInvalidID},
		{"oversized lobby", func() error { _, err := svc.Join(ctx, long, "a", nil); return err }, lobby.ErrInvalidID},
		{"invalid UTF-8 player", func() error { _, err := svc.Heartbeat(ctx, "l", "\xc3\x28", 1); return err }, lobby.ErrInvalidID},
		{"empty target", func() error { _, err := svc.TransferHost(ctx, "l", "a", ""); return err }, lobby.ErrInvalidID},
		{"bad op", func() error { _, err := svc.Do(ctx, "l", rules.Command{Op: 42, Player: "a"}); return err }, lobby.ErrInvalidCommand},
		{"reclaim bad ID", func() error { return svc.Reclaim(ctx, "") }, lobby.ErrInvalidID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	if cs.calls != 0 {
		t.Fatalf("bad input reached the store %d times", cs.calls)
	}
	options := []struct {
		name string
		st   store.Store
		opts []lobby.Option
		want error
	}{
		{"nil store", nil, nil, lobby.ErrInvalidOption},
		{"nil clock", cs, []lobby.Option{lobby.WithClock(nil)}, lobby.ErrInvalidOption},
		{"nil publisher", cs, []lobby.Option{lobby.WithPublisher(nil)}, lobby.ErrInvalidOption},
		{"nil logger", cs, []lobby.Option{lobby.WithLogger(nil)}, lobby.ErrInvalidOption},
		{"nil observer", cs, []lobby.Option{lobby.WithObserver(nil)}, lobby.ErrInvalidOption},
		{"nil option", cs, []lobby.Option{nil}, lobby.ErrInvalidOption},
		{"short pseudonym key", cs, []lobby.Option{lobby.WithPseudonymKey([]byte("short"))}, lobby.ErrInvalidOption},
		{"zero resync", cs, []lobby.Option{lobby.WithResync(0)}, lobby.ErrInvalidOption},
		{"zero cache bound", cs, []lobby.Option{lobby.WithCache(0, time.Minute)}, lobby.ErrInvalidOption},
		{"nil client class", cs, []lobby.Option{lobby.WithClientClass(nil)}, lobby.ErrInvalidOption},
		{"zero policy", cs, []lobby.Option{lobby.WithPolicy(lobby.Policy{})}, lobby.ErrInvalidPolicy},
	}
	for _, tt := range options {
		_, err := lobby.NewService(tt.st, tt.opts...)
		if !errors.Is(err, tt.want) {
			t.Errorf("NewService(%s) = %v, want %v", tt.name, err, tt.want)
		}
		if tt.want == lobby.ErrInvalidOption && errors.Is(err, lobby.ErrInvalidPolicy) {
			t.Errorf("NewService(%s) = %v: not a policy error", tt.name, err)
		}
	}
}

func TestCancelledContextWritesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	mem := memstore.New()
	svc := newService(t, mem, clockwork.NewFakeClockAt(t0))
	if _, err := svc.Join(ctx, "l", "a", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Join with a cancelled context: %v", err)
	}
	if _, err := mem.Load(context.Background(), "l"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancelled Join wrote: %v", err)
	}
}

var errDown = errors.New("connection refused")

func TestStoreFailureIsReportedAndRecovers(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	clock := clockwork.NewFakeClockAt(t0)
	toggle := &toggleStore{Store: mem}
	svc := newService(t, toggle, clock)
	g := must(t)(svc.Join(ctx, "l", "a", nil)).Gen
	toggle.setDown(true)
	if _, err := svc.Heartbeat(ctx, "l", "a", g); !errors.Is(err, errDown) {
		t.Fatalf("heartbeat while the store is down: %v, want the store's error", err)
	}
	toggle.setDown(false)
	if res := must(t)(svc.Heartbeat(ctx, "l", "a", g)); res.Outcome != lobby.OutcomeApplied {
		t.Fatalf("heartbeat after recovery: %v", res.Outcome)
	}
}

type toggleStore struct {
	store.Store
	mu   sync.Mutex
	down bool
}

func (s *toggleStore) setDown(d bool) { s.mu.Lock(); s.down = d; s.mu.Unlock() }
func (s *toggleStore) isDown() bool   { s.mu.Lock(); defer s.mu.Unlock(); return s.down }
func (s *toggleStore) Load(ctx context.Context, id string) (store.Record, error) {
	if s.isDown() {
		return store.Record{}, errDown
	}
	return s.Store.Load(ctx, id)
}
func (s *toggleStore) Write(ctx context.Context, w store.Write) error {
	if s.isDown() {
		return errDown
	}
	return s.Store.Write(ctx, w)
}

func TestCountersObserve(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	var c lobby.Counters
	svc := newService(t, memstore.New(), clock, lobby.WithObserver(&c))
	gens := joinFour(t, ctx, svc)
	must(t)(svc.Disconnect(ctx, "l", "p-17", gens["p-17"]))
	must(t)(svc.Disconnect(ctx, "l", "p-17", gens["p-17"])) // stale
	clock.Advance(grace)
	if _, err := svc.Snapshot(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(ttl)
	if _, err := svc.Snapshot(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.TransferHost(ctx, "l", "p-41", "p-62"); err == nil {
		t.Fatal("transfer by a non-host accepted")
	}
	got := c.Snapshot()
	want := lobby.CounterSnapshot{
		// p-17's grace ends at 8s; the others time out at 15s and their
		// graces end at 23s, the host's first, leaving the seat empty.
		TimedOut: 3, GraceStarted: 4, LeaseExpired: 4, Stale: 1, Refused: 1,
		HostChanges: map[lobby.Reason]uint64{lobby.ReasonJoined: 1, lobby.ReasonLeaseExpired: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("counters (-want +got):\n%s", diff)
	}
}

// TestRunDoesNotSpinOnAStuckLobby: a corrupt record whose deadline has
// passed cannot be advanced; the sweeper must back off on a timer instead
// of looping.
func TestRunDoesNotSpinOnAStuckLobby(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	if err := mem.Write(ctx, store.Write{ID: "stuck", Data: []byte("garbage"), Deadline: t0.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	svc := newService(t, withoutSessions(mem), clock, lobby.WithClaimHold(30*time.Second)) // the failed pass keeps its claim past the first backoff
	go svc.Run(ctx)
	// The sweeper asleep on the fake clock's timer (no publisher, no
	// relay); a spinning sweeper
	// never sleeps.
	wait, cancelWait := context.WithTimeout(ctx, hangGuard)
	defer cancelWait()
	if err := clock.BlockUntilContext(wait, 1); err != nil {
		t.Fatalf("sweeper never slept with a stuck lobby due: %v", err)
	}
	// Past the first backoff, while the stuck lobby is still claimed by
	// the failed pass, the sweeper must sleep again.
	clock.Advance(time.Second)
	if err := clock.BlockUntilContext(wait, 1); err != nil {
		t.Fatalf("sweeper spun instead of sleeping: %v", err)
	}
	// The other lobbies are still swept.
	g := must(t)(svc.Join(ctx, "ok", "a", nil)).Gen
	must(t)(svc.Join(ctx, "ok", "b", nil))
	must(t)(svc.Disconnect(ctx, "ok", "a", g))
	clock.Advance(time.Minute)
	deadline := time.After(hangGuard)
	for {
		// Read the store directly: a Snapshot would do the catch-up itself.
		rec, err := mem.Load(ctx, "ok")
		if err != nil {
			t.Fatal(err)
		}
		st, err := rules.DecodeState(rec.Data)
		if err != nil {
			t.Fatal(err)
		}
		if st.Revision >= 4 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("lobby next to a stuck one was not swept: revision %d", st.Revision)
		case <-time.After(time.Millisecond):
		}
	}
}
