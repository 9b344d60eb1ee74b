package lobby_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// valveStore blocks the next call of a chosen method until the test opens
// the gate, so a test can hold one transaction inside the store while
// another one queues behind it.
type valveStore struct {
	store.Store
	mu      sync.Mutex
	method  string        // "Load" or "Write": the call to hold
	entered chan struct{} // closed when the held call arrives
	open    chan struct{} // close to let it go on
}

func (g *valveStore) hold(method string) (entered, open chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.method, g.entered, g.open = method, make(chan struct{}), make(chan struct{})
	return g.entered, g.open
}

func (g *valveStore) gate(method string) {
	g.mu.Lock()
	if g.method != method {
		g.mu.Unlock()
		return
	}
	entered, open := g.entered, g.open
	g.method = ""
	g.mu.Unlock()
	close(entered)
	<-open
}

func (g *valveStore) Load(ctx context.Context, id string) (store.Record, error) {
	g.gate("Load")
	return g.Store.Load(ctx, id)
}

func (g *valveStore) Write(ctx context.Context, w store.Write) error {
	g.gate("Write")
	return g.Store.Write(ctx, w)
}

// waitQueued waits until some goroutine running fn (a function name as it
// appears in a stack trace) is blocked waiting, not running. It polls the
// goroutine dump: a scheduling aid, not a timing claim; reaching hangGuard
// fails the test.
func waitQueued(t *testing.T, fn string) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	buf := make([]byte, 1<<20)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			head, _, _ := strings.Cut(g, "\n")
			blocked := strings.Contains(head, "[sync.Mutex.Lock") || strings.Contains(head, "[select") ||
				strings.Contains(head, "[chan send") || strings.Contains(head, "[semacquire")
			if blocked && strings.Contains(g, fn) {
				return
			}
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no goroutine in %s ever queued", fn)
}

// loggedSeqs reads the lobby's effects log and returns the revisions of
// the events it holds, in order.
func loggedSeqs(t *testing.T, st store.Store, id string) []uint64 {
	t.Helper()
	var seqs []uint64
	for _, e := range pendingEvents(t, st, id) {
		seqs = append(seqs, e.Revision)
	}
	return seqs
}

func wantConsecutive(t *testing.T, seqs []uint64, last uint64) {
	t.Helper()
	for i, s := range seqs {
		if s != uint64(i)+1 {
			t.Fatalf("logged revisions %v: revision %d missing or repeated", seqs, i+1)
		}
	}
	if uint64(len(seqs)) != last {
		t.Fatalf("logged revisions %v, want 1..%d", seqs, last)
	}
}

// TestRefusedReclaimLeavesNothingBehind: a Reclaim that finds members after
// catching up commits nothing, and leaves nothing uncommitted behind for the
// Join queued behind it: every revision reaches the outbox exactly once and
// the Join reports a revision the store holds.
func TestRefusedReclaimLeavesNothingBehind(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	gs := &valveStore{Store: mem}
	p := lobby.DefaultPolicy()
	p.Grace, p.HeartbeatTTL = time.Second, time.Second
	svc := newService(t, gs, clock, lobby.WithPolicy(p))
	must(t)(svc.Join(ctx, "L", "a", nil))
	clock.Advance(500 * time.Millisecond)
	must(t)(svc.Join(ctx, "L", "b", nil))
	clock.Advance(700 * time.Millisecond) // a's only connection is overdue

	entered, open := gs.hold("Load")
	reclaimed := make(chan error, 1)
	go func() { reclaimed <- svc.Reclaim(ctx, "L") }()
	<-entered // Reclaim holds the lobby, inside the store
	joined := make(chan lobby.Result, 1)
	joinErr := make(chan error, 1)
	go func() {
		res, err := svc.Join(ctx, "L", "c", nil)
		joined <- res
		joinErr <- err
	}()
	waitQueued(t, "lobby.(*Service).Join")
	close(open)
	if err := <-reclaimed; !errors.Is(err, lobby.ErrNotEmpty) {
		t.Fatalf("Reclaim: %v, want ErrNotEmpty", err)
	}
	res := <-joined
	if err := <-joinErr; err != nil {
		t.Fatalf("Join: %v", err)
	}
	rec, err := mem.Load(ctx, "L")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := rules.DecodeState(rec.Data)
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != stored.Revision {
		t.Fatalf("Join reported revision %d, the store holds %d", res.Revision, stored.Revision)
	}
	// joined a, joined b, a timed_out (the catch-up), joined c.
	wantConsecutive(t, loggedSeqs(t, mem, "L"), 4)
}

// blockingObserver calls back into the Service from Observe, as a metrics
// exporter that reads the lobby might.
type blockingObserver struct {
	svc  *lobby.Service
	once sync.Once
	got  chan error
}

func (o *blockingObserver) Observe(_ context.Context, obs lobby.Observation) {
	if obs.Command.Op != rules.OpJoin {
		return
	}
	o.once.Do(func() {
		_, err := o.svc.Snapshot(context.Background(), obs.Lobby)
		o.got <- err
	})
}

// TestObserverMayCallBack: the Observer runs after the lobby's lock is
// released, so it may read the same lobby.
func TestObserverMayCallBack(t *testing.T) {
	ctx := context.Background()
	obs := &blockingObserver{got: make(chan error, 1)}
	svc := newService(t, memstore.New(), clockwork.NewFakeClockAt(t0), lobby.WithObserver(obs))
	obs.svc = svc
	done := make(chan error, 1)
	go func() { _, err := svc.Join(ctx, "l", "a", nil); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Join never returned: its Observer's Snapshot of the same lobby deadlocked")
	}
	if err := <-obs.got; err != nil {
		t.Fatalf("Snapshot from the Observer: %v", err)
	}
}

// TestWaitingForALobbyHonoursContext: a command queued behind another one
// that is stuck in the store gives up when its context ends, while the
// other one is still stuck.
func TestWaitingForALobbyHonoursContext(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	gs := &valveStore{Store: memstore.New()}
	svc := newService(t, gs, clock)
	must(t)(svc.Join(ctx, "l", "a", nil))
	entered, open := gs.hold("Write")
	defer close(open)
	go func() { _, _ = svc.Join(ctx, "l", "b", nil) }()
	<-entered
	waiting, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { _, err := svc.Snapshot(waiting, "l"); got <- err }()
	waitQueued(t, "lobby.(*Service).Snapshot")
	cancel()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Snapshot queued behind a stuck write: %v, want context.Canceled", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Snapshot ignored its context while queued for the lobby")
	}
}

// TestReclaimKeepsLastTransitionTime: a lobby created again after Reclaim
// never runs at a time before the last transition of the one reclaimed,
// even from a process whose clock is behind.
func TestReclaimKeepsLastTransitionTime(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	ahead := clockwork.NewFakeClockAt(t0.Add(10 * time.Second))
	behind := clockwork.NewFakeClockAt(t0.Add(5 * time.Second))
	a := newService(t, mem, ahead)
	b := newService(t, mem, behind)
	must(t)(a.Join(ctx, "l", "p", nil))
	must(t)(a.Leave(ctx, "l", "p"))
	if err := a.Reclaim(ctx, "l"); err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if _, err := mem.Load(ctx, "l"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record still there after Reclaim: %v", err)
	}
	res := must(t)(b.Join(ctx, "l", "q", nil))
	if len(res.Events) != 1 || !res.Events[0].At.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("join after reclaim from a clock 5 s behind: events %+v, want one at the reclaimed lobby's last transition time %v", res.Events, t0.Add(10*time.Second))
	}
	if res.Revision <= 2 {
		t.Fatalf("revision %d after reclaim, want above 2", res.Revision)
	}
}

// TestReclaimKeepsBlocksInForce: a lobby reclaimed while a kick's block is
// still in force by its own time comes back with that block. The lobby
// below empties at +2 s (its last member's grace ends) and is reclaimed at
// +3 s; a block until +2.438 s must still refuse a join from a process
// whose clock is 1.723 s behind, which runs at +2 s, and so must a lobby
// that such a process recreates with a Configure. At its end it refuses
// nobody.
func TestReclaimKeepsBlocksInForce(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	p := lobby.DefaultPolicy()
	p.Grace, p.HeartbeatTTL, p.MaxMembers, p.MaxConnectionsPerPlayer = time.Second, time.Second, 2, 1
	clock := clockwork.NewFakeClockAt(t0)
	a := newService(t, mem, clock, lobby.WithPolicy(p))
	must(t)(a.Join(ctx, "l", "p-80", nil))
	must(t)(a.Join(ctx, "l", "p-41", nil))
	clock.Advance(800 * time.Millisecond)
	must(t)(a.Kick(ctx, "l", "", "p-41", 1638*time.Millisecond))
	clock.Advance(2200 * time.Millisecond)
	if err := a.Reclaim(ctx, "l"); err != nil {
		t.Fatalf("Reclaim with a block in force: %v", err)
	}
	if _, err := mem.Load(ctx, "l"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record after Reclaim: %v, want none", err)
	}
	behind := clockwork.NewFakeClockAt(t0.Add(3*time.Second - 1723*time.Millisecond))
	b := newService(t, mem, behind, lobby.WithPolicy(p))
	if _, err := b.Join(ctx, "l", "p-41", nil); !errors.Is(err, lobby.ErrBlocked) {
		t.Fatalf("join of the kicked player from a clock behind, after reclaim: %v, want ErrBlocked", err)
	}
	res := must(t)(b.Configure(ctx, "l", lobby.Overrides{}.WithMaxMembers(3)))
	if len(res.Events) != 1 || !res.Events[0].At.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("configure after reclaim: %+v, want one event at the reclaimed lobby's last transition (+2s)", res.Events)
	}
	behind.Advance(1160 * time.Millisecond) // +2.437 s
	if _, err := b.Join(ctx, "l", "p-41", nil); !errors.Is(err, lobby.ErrBlocked) {
		t.Fatalf("join of the kicked player into the recreated lobby, 1 ms before its block ends: %v, want ErrBlocked", err)
	}
	if snap := snapshot(t, b, "l"); snap.Locked || snap.Overrides.MaxMembers != 3 || len(snap.Members) != 0 {
		t.Fatalf("recreated lobby %+v", snap)
	}
	behind.Advance(time.Millisecond)
	if res := must(t)(b.Join(ctx, "l", "p-41", nil)); res.JoinSeq <= 2 {
		t.Fatalf("join at the block's end: join sequence %d, want above the reclaimed lobby's", res.JoinSeq)
	}
}

// TestFoldedFloorKeepsLastTransitionTime: once a reclaimed lobby's
// tombstone is trimmed and folds into the store-wide floor, a lobby created
// under the ID still never runs before the reclaimed lobby's last
// transition, even from a process whose clock is behind.
func TestFoldedFloorKeepsLastTransitionTime(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(memstore.WithRetention(store.Retention{Entries: 1, Age: time.Second}))
	ahead := clockwork.NewFakeClockAt(t0.Add(10 * time.Second))
	a := newService(t, mem, ahead)
	must(t)(a.Join(ctx, "l", "p", nil))
	must(t)(a.Leave(ctx, "l", "p"))
	if err := a.Reclaim(ctx, "l"); err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if _, err := mem.TrimLog(ctx, t0.Add(time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	if rec, err := mem.Load(ctx, "l"); !errors.Is(err, store.ErrNotFound) || rec.Data != nil || !rec.At.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("after the trim: %+v, %v; want the folded floor at +10s without a tombstone", rec, err)
	}
	behind := clockwork.NewFakeClockAt(t0.Add(5 * time.Second))
	b := newService(t, mem, behind)
	res := must(t)(b.Join(ctx, "l", "q", nil))
	if len(res.Events) != 1 || !res.Events[0].At.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("join over the folded floor from a clock 5 s behind: events %+v, want one at +10s", res.Events)
	}
}

// TestReclaimedLobbyStartsUnlocked: a lobby the server locked and
// configured is reclaimed once empty; created again, it has neither the
// lock nor the overrides.
func TestReclaimedLobbyStartsUnlocked(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	clock := clockwork.NewFakeClockAt(t0)
	a := newService(t, mem, clock)
	must(t)(a.Join(ctx, "l", "p", nil))
	must(t)(a.Lock(ctx, "l", ""))
	must(t)(a.Configure(ctx, "l", lobby.Overrides{}.WithMaxMembers(1)))
	must(t)(a.Kick(ctx, "l", "", "p", time.Hour))
	if err := a.Reclaim(ctx, "l"); err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	must(t)(a.Join(ctx, "l", "q", nil))
	must(t)(a.Join(ctx, "l", "r", nil))
	if snap := snapshot(t, a, "l"); snap.Locked || !snap.Overrides.IsZero() || len(snap.Members) != 2 {
		t.Fatalf("recreated lobby %+v, want unlocked, no overrides, two members", snap)
	}
	if _, err := a.Join(ctx, "l", "p", nil); !errors.Is(err, lobby.ErrBlocked) {
		t.Fatalf("the kicked player: %v, want ErrBlocked", err)
	}
}

// TestErrorsNameNoPlayer: error strings reach logs, so refusals and corrupt
// records name the lobby and the rule, never a player; the players are
// fields of the RefusalError.
func TestErrorsNameNoPlayer(t *testing.T) {
	ctx := context.Background()
	const secret, other = "alice@example.org", "bob@example.org"
	clock := clockwork.NewFakeClockAt(t0)
	p := lobby.DefaultPolicy()
	p.MaxMembers = 2
	svc := newService(t, memstore.New(), clock, lobby.WithPolicy(p))
	must(t)(svc.Join(ctx, "l", secret, nil))
	g := must(t)(svc.Join(ctx, "l", other, nil)).Gen
	must(t)(svc.Disconnect(ctx, "l", other, g))
	checks := []struct {
		name           string
		err            error
		want           error
		player, target string
	}{
		{"full", func() error { _, err := svc.Join(ctx, "l", "carol@example.org", nil); return err }(), lobby.ErrLobbyFull, "carol@example.org", ""},
		{"not host", func() error { _, err := svc.TransferHost(ctx, "l", other, secret); return err }(), lobby.ErrNotHost, other, secret},
		{"not member", func() error { _, err := svc.TransferHost(ctx, "l", secret, "dave@example.org"); return err }(), lobby.ErrNotMember, secret, "dave@example.org"},
		{"not eligible", func() error { _, err := svc.TransferHost(ctx, "l", secret, other); return err }(), lobby.ErrNotEligible, secret, other},
		{"not empty", svc.Reclaim(ctx, "l"), lobby.ErrNotEmpty, "", ""},
	}
	for _, c := range checks {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
			continue
		}
		for _, id := range []string{secret, other, "carol@example.org", "dave@example.org"} {
			if strings.Contains(c.err.Error(), id) {
				t.Errorf("%s: error %q names player %q", c.name, c.err, id)
			}
		}
		var re *lobby.RefusalError
		if !errors.As(c.err, &re) || re.Lobby != "l" || re.Player != c.player || re.Target != c.target {
			t.Errorf("%s: RefusalError %+v, want lobby l, player %q, target %q", c.name, re, c.player, c.target)
		}
		if !lobby.IsRefusal(c.err) {
			t.Errorf("%s: IsRefusal false", c.name)
		}
	}
	// A corrupt record: a player listed twice.
	st := rules.NewState("m", 0)
	st.NextJoinSeq, st.NextGen, st.Revision, st.Updated = 3, 3, 2, t0
	st.Members = []rules.Member{
		{Player: secret, JoinSeq: 1, LastGen: 1, Conns: []rules.Conn{{Gen: 1}}},
		{Player: secret, JoinSeq: 2, LastGen: 2, Conns: []rules.Conn{{Gen: 2}}},
	}
	if err := st.Validate(); !errors.Is(err, lobby.ErrCorrupt) || strings.Contains(err.Error(), secret) {
		t.Errorf("corrupt record: %v, want ErrCorrupt naming no player", err)
	}
}
