package lobby_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// batchStore is a store.BatchWriter over a memory store: WriteBatch applies
// each write with Write, in order, and records the batches it was given.
// Its valve holds the next Write, as valveStore's does.
type batchStore struct {
	valveStore
	mu        sync.Mutex
	batches   []int // sizes, in call order
	conflicts int   // conflicts among batched writes
}

func newBatchStore() *batchStore {
	return &batchStore{valveStore: valveStore{Store: memstore.New()}}
}

func (b *batchStore) WriteBatch(ctx context.Context, ws []store.Write) []error {
	errs := make([]error, len(ws))
	for i, w := range ws {
		errs[i] = b.Store.Write(ctx, w)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batches = append(b.batches, len(ws))
	for _, err := range errs {
		if errors.Is(err, store.ErrConflict) {
			b.conflicts++
		}
	}
	return errs
}

func (b *batchStore) sizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.batches...)
}

// waitBlocked waits until n goroutines running fn (a function name as it
// appears in a stack trace) are blocked. Reaching hangGuard fails the test.
func waitBlocked(t *testing.T, fn string, n int) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	buf := make([]byte, 4<<20)
	for time.Now().Before(deadline) {
		count := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			head, _, _ := strings.Cut(g, "\n")
			if strings.Contains(head, "[select") && strings.Contains(g, fn) {
				count++
			}
		}
		if count >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("fewer than %d goroutines ever blocked in %s", n, fn)
}

// joinAll joins player p to each lobby concurrently and returns the errors.
func joinAll(s *lobby.Service, ctx context.Context, ids []string, p string) []error {
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { _, errs[i] = s.Join(ctx, id, p, nil) })
	}
	wg.Wait()
	return errs
}

const queuedFn = "(*groupCommit).write"

// While the store is busy with a write, the writes of other lobbies queue
// and go together in one batch when it returns.
func TestWritesQueuedBehindABusyStoreGoInOneBatch(t *testing.T) {
	ctx := context.Background()
	st := newBatchStore()
	s := newService(t, st, clockwork.NewFakeClock(), lobby.WithWriteBatch(16, 1))

	entered, open := st.hold("Write")
	first := make(chan error, 1)
	go func() { _, err := s.Join(ctx, "first", "p", nil); first <- err }()
	<-entered
	ids := []string{"a", "b", "c", "d", "e"}
	done := make(chan []error, 1)
	go func() { done <- joinAll(s, ctx, ids, "p") }()
	waitBlocked(t, queuedFn, len(ids))
	close(open)
	if err := <-first; err != nil {
		t.Fatalf("first join: %v", err)
	}
	for i, err := range <-done {
		if err != nil {
			t.Errorf("join %s: %v", ids[i], err)
		}
	}
	if got, want := st.sizes(), []int{len(ids)}; !cmp.Equal(got, want) {
		t.Errorf("batches = %v, want %v", got, want)
	}
	for _, id := range append(ids, "first") {
		snap, err := s.Snapshot(ctx, id)
		if err != nil || snap.Host != "p" || snap.Revision != 1 {
			t.Errorf("%s: host %q revision %d err %v, want p at 1", id, snap.Host, snap.Revision, err)
		}
	}
}

// A stale write in a batch conflicts alone: the other lobbies in the batch
// commit, and the Service reloads the stale lobby and commits it again.
func TestAConflictInABatchIsItsWriteAlone(t *testing.T) {
	ctx := context.Background()
	st := newBatchStore()
	clock := clockwork.NewFakeClock()
	s1 := newService(t, st, clock, lobby.WithWriteBatch(16, 1))
	s2 := newService(t, st, clock)
	if _, err := s1.Join(ctx, "x", "p1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Join(ctx, "x", "p2", nil); err != nil { // s1's copy of x is stale now
		t.Fatal(err)
	}
	entered, open := st.hold("Write")
	first := make(chan error, 1)
	go func() { _, err := s1.Join(ctx, "busy", "p", nil); first <- err }()
	<-entered
	done := make(chan []error, 1)
	go func() { done <- joinAll(s1, ctx, []string{"x", "y"}, "p3") }()
	waitBlocked(t, queuedFn, 2)
	close(open)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for _, err := range <-done {
		if err != nil {
			t.Fatalf("join: %v", err)
		}
	}
	if sizes := st.sizes(); len(sizes) == 0 || sizes[0] != 2 || st.conflicts != 1 {
		t.Fatalf("batches %v with %d conflicts, want a first batch of 2 with 1 conflict", sizes, st.conflicts)
	}
	x, err := s2.Snapshot(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range x.Members {
		got = append(got, m.Player)
	}
	if want := []string{"p1", "p2", "p3"}; !cmp.Equal(got, want) || x.Revision != 3 {
		t.Errorf("x: members %v at revision %d, want %v at 3", got, x.Revision, want)
	}
	if y, err := s2.Snapshot(ctx, "y"); err != nil || y.Host != "p3" {
		t.Errorf("y: host %q, %v; want p3", y.Host, err)
	}
}

// A caller that stops waiting for its batch gets its context's error, and
// its write's outcome is unknown to it: the batch may still commit it. The
// Service then judges that lobby afresh from the store.
func TestACallerMayStopWaitingForItsBatch(t *testing.T) {
	ctx := context.Background()
	st := newBatchStore()
	s := newService(t, st, clockwork.NewFakeClock(), lobby.WithWriteBatch(16, 1))
	entered, open := st.hold("Write")
	first := make(chan error, 1)
	go func() { _, err := s.Join(ctx, "busy", "p", nil); first <- err }()
	<-entered
	cctx, cancel := context.WithCancel(ctx)
	queued := make(chan error, 1)
	go func() { _, err := s.Join(cctx, "z", "z1", nil); queued <- err }()
	waitBlocked(t, queuedFn, 1)
	cancel()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled join = %v, want context.Canceled", err)
	}
	close(open)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// The batch went without its caller and committed z1.
	var snap lobby.Snapshot
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(time.Millisecond) {
		if len(st.sizes()) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the queued write was never sent")
		}
	}
	if _, err := s.Join(ctx, "z", "z2", nil); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, "z")
	if err != nil || len(snap.Members) != 2 || snap.Revision != 2 {
		t.Errorf("z = %+v, %v; want z1 and z2 at revision 2", snap, err)
	}
}

// hostDrop joins host h and then o to each lobby and closes h's connection.
func hostDrop(t *testing.T, s *lobby.Service, ids []string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		r, err := s.Join(ctx, id, "h", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Join(ctx, id, "o", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Disconnect(ctx, id, "h", r.Gen); err != nil {
			t.Fatal(err)
		}
	}
}

// barrierStore holds every Write until n writes are inside Write at once,
// so a sweep that wrote one lobby at a time would never finish.
type barrierStore struct {
	store.Store
	n       int
	mu      sync.Mutex
	waiting int
	release chan struct{}
}

func (b *barrierStore) Write(ctx context.Context, w store.Write) error {
	b.mu.Lock()
	b.waiting++
	if b.waiting == b.n {
		close(b.release)
		b.release, b.waiting = make(chan struct{}), 0
		b.mu.Unlock()
	} else {
		release := b.release
		b.mu.Unlock()
		select {
		case <-release:
		case <-time.After(hangGuard):
			return errors.New("barrier: writes came one at a time")
		}
	}
	return b.Store.Write(ctx, w)
}

// A sweep advances several due lobbies at once.
func TestSweepAdvancesLobbiesConcurrently(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	mem := memstore.New()
	ids := []string{"l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7"}
	hostDrop(t, newService(t, mem, clock), ids)
	clock.Advance(lobby.DefaultPolicy().Grace + time.Second)

	st := &barrierStore{Store: mem, n: 4, release: make(chan struct{})}
	s := newService(t, st, clock, lobby.WithSweepConcurrency(4))
	n, err := s.Sweep(ctx)
	if err != nil || n != len(ids) {
		t.Fatalf("Sweep = %d, %v; want %d lobbies changed", n, err, len(ids))
	}
	for _, id := range ids {
		if snap, err := s.Snapshot(ctx, id); err != nil || snap.Host != "o" {
			t.Errorf("%s: host %q, %v; want o", id, snap.Host, err)
		}
	}
}

// A burst of expiries on a store that batches commits in batches, and ends
// exactly where a sweep of one lobby at a time ends: same states, same
// logged events.
func TestExpiryBurstInBatchesMatchesOneByOne(t *testing.T) {
	ctx := context.Background()
	var ids []string
	for i := range 64 {
		ids = append(ids, fmt.Sprintf("room-%02d", i))
	}
	run := func(concurrent bool) ([]lobby.Snapshot, [][]uint64, []int) {
		clock := clockwork.NewFakeClock()
		st := newBatchStore()
		hostDrop(t, newService(t, st.Store, clock), ids)
		clock.Advance(lobby.DefaultPolicy().Grace + time.Second)
		opts := []lobby.Option{lobby.WithSweepConcurrency(1), lobby.WithWriteBatch(1, 1)}
		if concurrent {
			opts = []lobby.Option{lobby.WithSweepConcurrency(16), lobby.WithWriteBatch(32, 1)}
		}
		s := newService(t, st, clock, opts...)
		var swept chan int
		if concurrent {
			// Hold the first write until others queue behind it.
			entered, open := st.hold("Write")
			swept = make(chan int, 1)
			go func() { n, _ := s.Sweep(ctx); swept <- n }()
			<-entered
			waitBlocked(t, queuedFn, 4)
			close(open)
		} else {
			swept = make(chan int, 1)
			n, err := s.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			swept <- n
		}
		if n := <-swept; n != len(ids) {
			t.Fatalf("concurrent=%v: swept %d lobbies, want %d", concurrent, n, len(ids))
		}
		var snaps []lobby.Snapshot
		var logs [][]uint64
		for _, id := range ids {
			snap, err := s.Snapshot(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			snaps = append(snaps, snap)
			logs = append(logs, loggedSeqs(t, st, id))
		}
		return snaps, logs, st.sizes()
	}
	oneSnaps, oneLogs, oneBatches := run(false)
	snaps, logs, batches := run(true)
	if len(oneBatches) != 0 {
		t.Errorf("batching off, yet batches %v", oneBatches)
	}
	if len(batches) == 0 || batches[0] < 4 {
		t.Errorf("batches %v: want a first batch of at least the 4 writes queued", batches)
	}
	if diff := cmp.Diff(oneSnaps, snaps); diff != "" {
		t.Errorf("states differ, one by one vs concurrent in batches (-+):\n%s", diff)
	}
	if diff := cmp.Diff(oneLogs, logs); diff != "" {
		t.Errorf("logged revisions differ (-+):\n%s", diff)
	}
	for _, snap := range snaps {
		if snap.Host != "o" {
			t.Errorf("%s: host %q, want o", snap.Lobby, snap.Host)
		}
	}
}

// Options are checked.
func TestBatchOptionsAreChecked(t *testing.T) {
	for _, o := range []lobby.Option{lobby.WithWriteBatch(0, 1), lobby.WithWriteBatch(8, 0), lobby.WithSweepConcurrency(0)} {
		if _, err := lobby.NewService(memstore.New(), o); !errors.Is(err, lobby.ErrInvalidOption) {
			t.Errorf("NewService = %v, want ErrInvalidOption", err)
		}
	}
}

// dueGate counts Due calls and can hold the next one.
type dueGate struct {
	store.Store
	calls   atomic.Int64
	mu      sync.Mutex
	entered chan struct{}
	open    chan struct{}
}

func (g *dueGate) Due(ctx context.Context, now time.Time, limit int) ([]store.Due, error) {
	g.calls.Add(1)
	g.mu.Lock()
	entered, open := g.entered, g.open
	g.entered, g.open = nil, nil
	g.mu.Unlock()
	if entered != nil {
		close(entered)
		<-open
	}
	return g.Store.Due(ctx, now, limit)
}

// Commits made while a sweep pass runs do not make the sweeper pass again
// at once when none of them is due before its next wake-up: a busy Service
// would otherwise sweep without pause, reading the store for nothing.
func TestCommitsDuringAPassDoNotRepeatIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := clockwork.NewFakeClock()
	g := &dueGate{Store: memstore.New()}
	s := newService(t, g, clock)
	// Hold the first pass's first look at the due lobbies.
	g.entered, g.open = make(chan struct{}), make(chan struct{})
	entered, open := g.entered, g.open
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-entered
	for i := range 20 {
		if _, err := s.Join(ctx, fmt.Sprintf("l%d", i), "p", nil); err != nil {
			t.Fatal(err)
		}
	}
	close(open)
	// The sweeper goes to sleep until the earliest heartbeat deadline. (A
	// pending wake-up would make it pass again right after it blocks: give
	// it the moment to, then wait for it to block again.)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	settled := g.calls.Load()
	if settled > 3 {
		t.Errorf("%d Due calls before the sweeper slept; want the pass's and its planning's only", settled)
	}
	// It wakes at that deadline and expires the connections.
	clock.Advance(lobby.DefaultPolicy().HeartbeatTTL)
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(time.Millisecond) {
		snap, err := s.Snapshot(ctx, "l19")
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Members) == 1 && snap.Members[0].Status == lobby.StatusReconnecting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the heartbeat deadline never expired: %+v", snap)
		}
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// shortBatchStore answers every batch with one result too few (against
// the contract), after applying none of it.
// shortBatchStore's first batch returns one result too few (each of them a
// conflict); later batches are written as memstore writes them, so that a
// retry's outcome does not depend on whether it travels alone.
type shortBatchStore struct {
	valveStore
	shorted atomic.Bool
}

func (s *shortBatchStore) WriteBatch(ctx context.Context, ws []store.Write) []error {
	if s.shorted.Swap(true) {
		return s.valveStore.Store.(store.BatchWriter).WriteBatch(ctx, ws)
	}
	errs := make([]error, len(ws)-1)
	for i := range errs {
		errs[i] = store.ErrConflict
	}
	return errs
}

// A write a store's batch returned no result for is never taken for a
// commit: its caller gets an error. (The other write of the batch got a
// conflict, so the Service wrote it again, alone.)
func TestAWriteWithoutAResultIsNotACommit(t *testing.T) {
	ctx := context.Background()
	st := &shortBatchStore{valveStore: valveStore{Store: memstore.New()}}
	s := newService(t, st, clockwork.NewFakeClock(), lobby.WithWriteBatch(16, 1))
	entered, open := st.hold("Write")
	first := make(chan error, 1)
	go func() { _, err := s.Join(ctx, "busy", "p", nil); first <- err }()
	<-entered
	ids := []string{"a", "b"}
	done := make(chan []error, 1)
	go func() { done <- joinAll(s, ctx, ids, "p") }()
	waitBlocked(t, queuedFn, 2)
	close(open)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	var failed []string
	for i, err := range <-done {
		if err != nil {
			failed = append(failed, ids[i])
		}
	}
	if len(failed) != 1 {
		t.Fatalf("joins failed in %v; want exactly the one without a result", failed)
	}
	for _, id := range ids {
		snap, err := s.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 0, false: 1}[id == failed[0]]; len(snap.Members) != want {
			t.Errorf("%s has %d members, want %d", id, len(snap.Members), want)
		}
	}
}
