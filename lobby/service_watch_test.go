package lobby_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// next returns the watcher's next update, failing the test if none comes
// within the hang guard.
func next(t *testing.T, w *lobby.Watcher) lobby.Change {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for {
		u, err := w.Next(ctx)
		if errors.Is(err, lobby.ErrNotRunning) {
			// Run may not have started yet: its start wakes the watcher.
			select {
			case <-w.Ready():
				continue
			case <-ctx.Done():
			}
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		return u
	}
}

// nothingQueued fails if the watcher has an update ready without waiting.
func nothingQueued(t *testing.T, w *lobby.Watcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if u, err := w.Next(ctx); err == nil {
		t.Fatalf("unexpected update %+v", u)
	}
}

func reasons(u lobby.Change) []string {
	var out []string
	for _, e := range u.Events {
		out = append(out, fmt.Sprintf("%d:%s:%s", e.Revision, e.Reason, e.Subject))
	}
	return out
}

func watch(t *testing.T, svc *lobby.Service, id string, after uint64) *lobby.Watcher {
	t.Helper()
	w, err := svc.Watch(context.Background(), id, after)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(w.Close)
	return w
}

func TestWatchOwnCommits(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	p := lobby.DefaultPolicy()
	p.MaxConnectionsPerPlayer = 1
	svc := newService(t, memstore.New(), clock, lobby.WithPolicy(p))
	a1 := must(t)(svc.Join(ctx, "l", "a", nil)).Gen

	w := watch(t, svc, "l", 0)
	u := next(t, w)
	if u.Snapshot == nil || u.Snapshot.Revision != 1 || u.Snapshot.Host != "a" {
		t.Fatalf("first update %+v, want a snapshot at revision 1 hosted by a", u)
	}
	must(t)(svc.Join(ctx, "l", "b", nil))
	if got := reasons(next(t, w)); !slices.Equal(got, []string{"2:joined:b"}) {
		t.Fatalf("after b joins: %v", got)
	}
	// A second tab of a supersedes the first: no revision, but the
	// ended connection reaches the watcher.
	a2 := must(t)(svc.Join(ctx, "l", "a", nil)).Gen
	u = next(t, w)
	if len(u.Events) != 0 || len(u.Ended) != 1 || u.Ended[0].Gen != a1 || u.Ended[0].Cause != lobby.EndSuperseded {
		t.Fatalf("second tab: %+v, want only generation %d ended as superseded", u, a1)
	}
	// Heartbeats commit (they move deadlines) but have no effects.
	clock.Advance(time.Second)
	must(t)(svc.Heartbeat(ctx, "l", "a", a2))
	must(t)(svc.Leave(ctx, "l", "b"))
	if got := reasons(next(t, w)); !slices.Equal(got, []string{"3:left:b"}) {
		t.Fatalf("after b leaves: %v", got)
	}
	nothingQueued(t, w)

	// A watcher that already shows the current revision gets no snapshot.
	w2 := watch(t, svc, "l", 3)
	nothingQueued(t, w2)
	must(t)(svc.Join(ctx, "l", "c", nil))
	if got := reasons(next(t, w2)); !slices.Equal(got, []string{"4:joined:c"}) {
		t.Fatalf("second watcher: %v", got)
	}
	w2.Close()
	if _, err := w2.Next(ctx); err != lobby.ErrWatchClosed {
		t.Fatalf("Next after Close: %v", err)
	}
	if got := reasons(next(t, w)); !slices.Equal(got, []string{"4:joined:c"}) {
		t.Fatalf("first watcher after the second closed: %v", got)
	}
}

// runService runs svc until the test ends.
func runService(t *testing.T, svc *lobby.Service) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := svc.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func TestWatchCommitsOfOtherProcesses(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	p := lobby.DefaultPolicy()
	p.MaxConnectionsPerPlayer = 1
	a := newService(t, mem, clock, lobby.WithPolicy(p))
	b := newService(t, mem, clock, lobby.WithPolicy(p))
	runService(t, a)

	// A lobby never written is at revision 0: a reader at 0 is current.
	w := watch(t, a, "l", 0)
	nothingQueued(t, w)
	// Joins alternate between the processes; the watcher in a sees
	// them all, in order.
	gens := map[string]uint64{}
	for i, player := range []string{"p1", "p2", "p3", "p4"} {
		svc := a
		if i%2 == 0 {
			svc = b
		}
		gens[player] = must(t)(svc.Join(ctx, "l", player, nil)).Gen
		want := fmt.Sprintf("%d:joined:%s", i+1, player)
		if got := reasons(next(t, w)); !slices.Equal(got, []string{want}) {
			t.Fatalf("join %d: %v, want %s", i+1, got, want)
		}
	}
	// A tab of p2 (socket held by a) is superseded by a join on b: a's
	// watcher learns at once which generation ended.
	must(t)(b.Join(ctx, "l", "p2", nil))
	u := next(t, w)
	if len(u.Ended) != 1 || u.Ended[0].Player != "p2" || u.Ended[0].Gen != gens["p2"] || u.Ended[0].Cause != lobby.EndSuperseded {
		t.Fatalf("supersession from the other process: %+v", u)
	}
	// b's heartbeats (no effects) come between a's commits: a's own
	// commit is still delivered after everything b did, without a gap.
	clock.Advance(time.Second)
	must(t)(b.Heartbeat(ctx, "l", "p1", gens["p1"]))
	must(t)(a.Leave(ctx, "l", "p4"))
	if got := reasons(next(t, w)); !slices.Equal(got, []string{"5:left:p4"}) {
		t.Fatalf("own commit after the other's heartbeat: %v", got)
	}
	must(t)(b.Leave(ctx, "l", "p3"))
	must(t)(a.Leave(ctx, "l", "p1"))
	got := append(reasons(next(t, w)), reasons(next(t, w))...)
	if !slices.Equal(got, []string{"6:left:p3", "7:left:p1"}) {
		t.Fatalf("interleaved leaves: %v", got)
	}
}

func TestWatchCompactedLogGivesSnapshot(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New(memstore.WithRetention(store.Retention{Entries: 2}))
	a := newService(t, mem, clock)
	b := newService(t, mem, clock)
	w := watch(t, a, "l", 0)
	// a does not run, so it hears nothing of b's commits, which push the
	// entries it has not read out of the log.
	for _, p := range []string{"p1", "p2", "p3", "p4"} {
		must(t)(b.Join(ctx, "l", p, nil))
	}
	// a's own commit exposes the gap; the log no longer covers it.
	must(t)(a.Join(ctx, "l", "p5", nil))
	u := next(t, w)
	if u.Snapshot == nil || u.Snapshot.Revision != 5 || len(u.Snapshot.Members) != 5 {
		t.Fatalf("after compaction: %+v, want a snapshot at revision 5 with 5 members", u)
	}
	must(t)(a.Leave(ctx, "l", "p1"))
	if got := reasons(next(t, w)); !slices.Equal(got, []string{"6:left:p1"}) {
		t.Fatalf("after the snapshot: %v", got)
	}
}

func TestWatchSlowReaderGetsSnapshot(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	svc := newService(t, memstore.New(), clock, lobby.WithWatchBuffer(2))
	w := watch(t, svc, "l", 0)
	for _, p := range []string{"p1", "p2", "p3", "p4"} {
		must(t)(svc.Join(ctx, "l", p, nil))
	}
	u := next(t, w)
	if u.Snapshot == nil || u.Snapshot.Revision != 4 {
		t.Fatalf("reader past its buffer: %+v, want a snapshot at revision 4", u)
	}
	nothingQueued(t, w)
	must(t)(svc.Leave(ctx, "l", "p1"))
	if got := reasons(next(t, w)); !slices.Equal(got, []string{"5:left:p1"}) {
		t.Fatalf("after the snapshot: %v", got)
	}
}

// TestWatchRandomSchedules: three processes commit random commands to a
// few lobbies while each watches all of them; every watcher sees every
// revision of every lobby exactly once, in order (or a snapshot, which
// moves it forward), and ends at the lobby's final revision.
func TestWatchRandomSchedules(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { watchSchedule(t, seed) })
	}
}

func watchSchedule(t *testing.T, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 1))
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	p := lobby.DefaultPolicy()
	p.MaxConnectionsPerPlayer = 2
	lobbies := []string{"x", "y", "z"}
	players := []string{"a", "b", "c", "d"}
	var svcs []*lobby.Service
	type follow struct {
		w    *lobby.Watcher
		id   string
		rev  uint64
		svc  int
		seen []uint64
	}
	var follows []*follow
	for i := range 3 {
		opts := []lobby.Option{lobby.WithPolicy(p)}
		if i == 2 {
			opts = append(opts, lobby.WithoutCache())
		}
		svc := newService(t, mem, clock, opts...)
		runService(t, svc)
		svcs = append(svcs, svc)
		for _, id := range lobbies {
			follows = append(follows, &follow{w: watch(t, svc, id, 0), id: id, svc: i})
		}
	}
	gens := map[string]uint64{}
	apply := func(u lobby.Change, f *follow) {
		if u.Snapshot != nil {
			if u.Snapshot.Revision < f.rev {
				t.Fatalf("seed %d: %s watcher in %d: snapshot at %d after revision %d", seed, f.id, f.svc, u.Snapshot.Revision, f.rev)
			}
			f.rev = u.Snapshot.Revision
			return
		}
		for _, e := range u.Events {
			if e.Revision != f.rev+1 {
				t.Fatalf("seed %d: %s watcher in %d: revision %d after %d (seen %v)", seed, f.id, f.svc, e.Revision, f.rev, f.seen)
			}
			f.rev = e.Revision
			f.seen = append(f.seen, e.Revision)
		}
	}
	for range 150 {
		svc := svcs[rng.IntN(len(svcs))]
		id := lobbies[rng.IntN(len(lobbies))]
		pl := players[rng.IntN(len(players))]
		var err error
		switch r := rng.IntN(10); {
		case r < 4:
			var res lobby.Result
			res, err = svc.Join(ctx, id, pl, nil)
			gens[id+pl] = res.Gen
		case r < 6:
			_, err = svc.Disconnect(ctx, id, pl, max(gens[id+pl], 1))
		case r < 7:
			_, err = svc.Leave(ctx, id, pl)
		case r < 8:
			_, err = svc.Heartbeat(ctx, id, pl, max(gens[id+pl], 1))
		default:
			clock.Advance(time.Duration(rng.IntN(6)) * time.Second)
			_, err = svc.Sweep(ctx)
		}
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		// Readers drain at random moments.
		for _, f := range follows {
			if rng.IntN(3) == 0 {
				c, cancel := context.WithCancel(ctx)
				cancel()
				for {
					u, err := f.w.Next(c)
					if err != nil {
						break
					}
					apply(u, f)
				}
			}
		}
	}
	final := map[string]uint64{}
	for _, id := range lobbies {
		snap, err := svcs[0].Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		final[id] = snap.Revision
	}
	var wg sync.WaitGroup
	for _, f := range follows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, cancel := context.WithTimeout(ctx, hangGuard)
			defer cancel()
			for f.rev < final[f.id] {
				u, err := f.w.Next(c)
				if err != nil {
					t.Errorf("seed %d: %s watcher in %d stuck at revision %d of %d: %v", seed, f.id, f.svc, f.rev, final[f.id], err)
					return
				}
				apply(u, f)
			}
		}()
	}
	wg.Wait()
	for _, f := range follows {
		if f.rev != final[f.id] {
			t.Errorf("seed %d: %s watcher in %d ends at %d, want %d", seed, f.id, f.svc, f.rev, final[f.id])
		}
	}
}

func TestRelayConsumersShareAndSplit(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	one, two, other := newCollector(), newCollector(), newCollector()
	a := newService(t, mem, clock, lobby.WithPublisher(one))
	b := newService(t, mem, clock, lobby.WithPublisher(two))
	c := newService(t, mem, clock, lobby.WithPublisher(other), lobby.WithRelayName("audit"))
	// Register every consumer before the first write.
	for _, s := range []*lobby.Service{a, b, c} {
		if _, err := s.Relay(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		svc := []*lobby.Service{a, b, c}[i%3]
		must(t)(svc.Join(ctx, fmt.Sprintf("l%d", i%5), fmt.Sprintf("p%d", i), nil))
	}
	for {
		n1, err1 := a.Relay(ctx)
		n2, err2 := b.Relay(ctx)
		n3, err3 := c.Relay(ctx)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatal(err1, err2, err3)
		}
		if n1+n2+n3 == 0 {
			break
		}
	}
	count := func(evs []lobby.Event) map[string]int {
		m := map[string]int{}
		for _, e := range evs {
			m[fmt.Sprintf("%s@%d", e.Lobby, e.Revision)]++
		}
		return m
	}
	shared := count(append(one.all(), two.all()...))
	audit := count(other.all())
	if len(shared) != 20 || len(audit) != 20 {
		t.Fatalf("shared relay published %d events, audit %d; want 20 each", len(shared), len(audit))
	}
	for k, n := range shared {
		if n != 1 || audit[k] != 1 {
			t.Fatalf("event %s published %d times by the shared relay, %d by the audit relay", k, n, audit[k])
		}
	}
}

// The context given to Watch bounds the Watcher: once it is done, Next
// reports the Watcher closed, as after Close.
func TestWatchContextBoundsWatcher(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0)
	svc := newService(t, memstore.New(), clock)
	runService(t, svc)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := svc.Watch(ctx, "l", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	must(t)(svc.Join(context.Background(), "l", "a", nil))
	if got := reasons(next(t, w)); !slices.Equal(got, []string{"1:joined:a"}) {
		t.Fatalf("before the context ends: %v", got)
	}
	cancel()
	guard, stop := context.WithTimeout(context.Background(), hangGuard)
	defer stop()
	for {
		_, err := w.Next(guard)
		if errors.Is(err, lobby.ErrWatchClosed) {
			break
		}
		if errors.Is(err, lobby.ErrNotRunning) {
			<-w.Ready() // Run has not started yet; Close wakes the reader too
			continue
		}
		if err != nil {
			t.Fatalf("Next after the Watch context ended: %v, want ErrWatchClosed", err)
		}
	}
	if _, err := svc.Watch(ctx, "l", 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch with a done context: %v", err)
	}
}

// Change.Revision is the revision clients count, beside the store
// version: a commit that only ends a connection keeps the revision.
func TestWatchChangeRevision(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	p := lobby.DefaultPolicy()
	p.MaxConnectionsPerPlayer = 1
	svc := newService(t, memstore.New(), clock, lobby.WithPolicy(p))
	w := watch(t, svc, "l", 0)
	a1 := must(t)(svc.Join(ctx, "l", "a", nil)).Gen
	clock.Advance(time.Second)
	must(t)(svc.Heartbeat(ctx, "l", "a", a1)) // a version, no revision, nothing logged
	must(t)(svc.Join(ctx, "l", "a", nil))     // supersedes a1: no revision
	must(t)(svc.Join(ctx, "l", "b", nil))
	type vr struct{ version, revision uint64 }
	var got []vr
	for range 3 {
		c := next(t, w)
		got = append(got, vr{c.Version, c.Revision})
	}
	want := []vr{{1, 1}, {3, 1}, {4, 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("(version, revision) of the changes: %v, want %v", got, want)
	}
	late := watch(t, svc, "l", 1)
	if c := next(t, late); c.Snapshot == nil || c.Revision != 2 || c.Version != 4 {
		t.Fatalf("a reader at revision 1 first gets %+v, want a snapshot at revision 2, version 4", c)
	}
}

// Without Run no other process's commit can arrive: Next says so instead
// of waiting, still hands out this Service's own commits, and continues in
// order once Run starts (whose start wakes the Watcher).
func TestWatchWithoutRun(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	a := newService(t, mem, clock)
	b := newService(t, mem, clock)
	runService(t, b)
	w := watch(t, a, "l", 0)
	if _, err := w.Next(ctx); !errors.Is(err, lobby.ErrNotRunning) {
		t.Fatalf("Next without Run: %v, want ErrNotRunning", err)
	}
	must(t)(a.Join(ctx, "l", "a", nil))
	if got := reasons(next(t, w)); !slices.Equal(got, []string{"1:joined:a"}) {
		t.Fatalf("own commit without Run: %v", got)
	}
	must(t)(b.Join(ctx, "l", "b", nil)) // unseen by a until it runs
	if _, err := w.Next(ctx); !errors.Is(err, lobby.ErrNotRunning) {
		t.Fatalf("Next without Run after another process's commit: %v, want ErrNotRunning", err)
	}
	runService(t, a)
	select {
	case <-w.Ready():
	case <-time.After(hangGuard):
		t.Fatal("Run's start did not wake the watcher")
	}
	if got := reasons(next(t, w)); !slices.Equal(got, []string{"2:joined:b"}) {
		t.Fatalf("after Run started: %v", got)
	}
}
