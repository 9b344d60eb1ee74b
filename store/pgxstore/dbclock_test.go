package pgxstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
)

// fakeDB is a database clock for DBClock tests: it runs offset ahead of a
// fake local clock, and each reading takes a scripted round trip.
type fakeDB struct {
	local *clockwork.FakeClock

	mu     sync.Mutex
	offset time.Duration
	// trips, when set, are the (before, after) halves of the next readings'
	// round trips, and skews their error of the reported time; used up in
	// order, then readings are instant and exact.
	trips []trip
	fail  error
	calls int
	read  chan struct{} // receives a value after every reading
}

type trip struct {
	before, after, skew time.Duration
}

func newFakeDB(offset time.Duration) *fakeDB {
	return &fakeDB{
		local:  clockwork.NewFakeClockAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
		offset: offset,
		read:   make(chan struct{}, 64),
	}
}

func (f *fakeDB) sample(ctx context.Context) (time.Time, error) {
	f.mu.Lock()
	var tr trip
	if len(f.trips) > 0 {
		tr, f.trips = f.trips[0], f.trips[1:]
	}
	err := f.fail
	f.calls++
	offset := f.offset
	f.mu.Unlock()
	defer func() { f.read <- struct{}{} }()
	if err != nil {
		return time.Time{}, err
	}
	f.local.Advance(tr.before)
	t := f.local.Now().Add(offset + tr.skew)
	f.local.Advance(tr.after)
	return t, nil
}

func (f *fakeDB) set(offset time.Duration, fail error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset, f.fail = offset, fail
}

// newFakeClock returns a DBClock on f whose periodic sync is an hour apart
// (tests call Resync), closed when the test ends.
func newFakeClock(t *testing.T, f *fakeDB) *DBClock {
	t.Helper()
	c, err := newDBClock(context.Background(), f.sample, withLocalClock(f.local), WithClockResync(time.Hour))
	if err != nil {
		t.Fatalf("newDBClock = %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func wantNow(t *testing.T, c *DBClock, want time.Time, what string) {
	t.Helper()
	if got := c.Now(); !got.Equal(want) {
		t.Fatalf("%s: Now() = %v, want %v (off by %v)", what, got, want, got.Sub(want))
	}
}

func TestDBClockFollowsTheDatabase(t *testing.T) {
	f := newFakeDB(time.Hour)
	// The first sync takes three readings; the one with the shortest round
	// trip is exact, the slower ones were answered off-centre.
	f.trips = []trip{
		{before: 9 * time.Millisecond, after: time.Millisecond, skew: 50 * time.Millisecond},
		{before: time.Millisecond, after: time.Millisecond},
		{before: time.Millisecond, after: 5 * time.Millisecond, skew: -20 * time.Millisecond},
	}
	c := newFakeClock(t, f)
	if got := c.Offset(); got != time.Hour {
		t.Errorf("Offset() = %v, want 1h (the shortest round trip's reading)", got)
	}
	wantNow(t, c, f.local.Now().Add(time.Hour), "after the first sync")
	f.local.Advance(1500 * time.Millisecond)
	wantNow(t, c, f.local.Now().Add(time.Hour), "1.5s later")
	if got := c.Since(f.local.Now()); got != time.Hour {
		t.Errorf("Since(local now) = %v, want 1h", got)
	}
	if got := c.Until(f.local.Now().Add(2 * time.Hour)); got != time.Hour {
		t.Errorf("Until(local now + 2h) = %v, want 1h", got)
	}
	synced, err := c.LastSync()
	if err != nil || synced.IsZero() {
		t.Errorf("LastSync() = %v, %v; want a time and no error", synced, err)
	}
	if loc := c.Now().Location(); loc != time.UTC {
		t.Errorf("Now() is in %v, want UTC", loc)
	}
}

// TestDBClockNeverRunsBackward: a sync that finds the database behind the
// estimate holds Now still until the new estimate catches up; one that finds
// it ahead moves Now forward at once.
func TestDBClockNeverRunsBackward(t *testing.T) {
	f := newFakeDB(time.Hour)
	c := newFakeClock(t, f)
	ctx := context.Background()
	f.local.Advance(time.Second)
	held := c.Now()

	f.set(time.Hour-500*time.Millisecond, nil)
	if err := c.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.Offset(); got != time.Hour-500*time.Millisecond {
		t.Errorf("Offset() after the step back = %v, want 59m59.5s", got)
	}
	wantNow(t, c, held, "right after a sync 500ms back")
	f.local.Advance(300 * time.Millisecond)
	wantNow(t, c, held, "300ms later, still behind the held value")
	f.local.Advance(300 * time.Millisecond)
	wantNow(t, c, held.Add(100*time.Millisecond), "600ms later, 100ms past it")

	f.set(time.Hour+2*time.Second, nil)
	if err := c.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	wantNow(t, c, f.local.Now().Add(time.Hour+2*time.Second), "after a sync 2.5s forward")
}

func TestDBClockKeepsItsEstimateWhenASyncFails(t *testing.T) {
	f := newFakeDB(time.Minute)
	c := newFakeClock(t, f)
	synced, _ := c.LastSync()
	down := errors.New("connection refused")
	f.set(time.Hour, down)
	err := c.Resync(context.Background())
	if !errors.Is(err, down) {
		t.Fatalf("Resync while down = %v, want it to wrap %v", err, down)
	}
	f.local.Advance(time.Second)
	wantNow(t, c, f.local.Now().Add(time.Minute), "after a failed sync")
	if got, err2 := c.LastSync(); !got.Equal(synced) || !errors.Is(err2, down) {
		t.Errorf("LastSync() = %v, %v; want the first sync's %v and the failure", got, err2, synced)
	}
	if got := c.Offset(); got != time.Minute {
		t.Errorf("Offset() = %v, want the old 1m", got)
	}
}

// TestDBClockResyncsPeriodically: the background loop reads the database
// every resync interval of the local clock, and stops on Close.
func TestDBClockResyncsPeriodically(t *testing.T) {
	f := newFakeDB(time.Minute)
	c, err := newDBClock(context.Background(), f.sample, withLocalClock(f.local), WithClockResync(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	drainReads(t, f, clockSamples)
	ctx := ctxT(t)
	if err := f.local.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.set(2*time.Minute, nil)
	f.local.Advance(10 * time.Second)
	drainReads(t, f, clockSamples)
	if err := f.local.BlockUntilContext(ctx, 1); err != nil { // the loop waits again
		t.Fatal(err)
	}
	if got := c.Offset(); got != 2*time.Minute {
		t.Errorf("Offset() after the periodic sync = %v, want 2m", got)
	}
	c.Close()
	c.Close() // idempotent
	f.local.Advance(time.Minute)
	f.mu.Lock()
	calls := f.calls
	f.mu.Unlock()
	if calls != 2*clockSamples {
		t.Errorf("%d readings, want %d (one sync at start, one after 10s, none after Close)", calls, 2*clockSamples)
	}
}

func drainReads(t *testing.T, f *fakeDB, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-f.read:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d readings within 10s", i, n)
		}
	}
}

// receiveTick waits (bounded) for a value on ch.
func receiveTick(t *testing.T, ch <-chan time.Time, what string) time.Time {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing within 10s", what)
		return time.Time{}
	}
}

func noTick(t *testing.T, ch <-chan time.Time, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s: got a value (%v), want none yet", what, v)
	default:
	}
}

// settle waits until the fake local clock has n waiters: the loop's sync
// timer plus the armed timers, after a timer's callback re-armed it.
func settle(t *testing.T, f *fakeDB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.local.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("the local clock did not get %d waiters within 10s (a timer that fired early was not armed again?): %v", n, err)
	}
}

// TestDBClockTimersRunOnItsTime: a timer fires when the clock's Now has
// advanced by its duration, also when a sync moves Now while it waits.
func TestDBClockTimersRunOnItsTime(t *testing.T) {
	t.Run("steady", func(t *testing.T) {
		f := newFakeDB(time.Hour)
		c := newFakeClock(t, f)
		start := c.Now()
		tm := c.NewTimer(time.Second)
		f.local.Advance(999 * time.Millisecond)
		noTick(t, tm.Chan(), "999ms into a 1s timer")
		f.local.Advance(time.Millisecond)
		if v := receiveTick(t, tm.Chan(), "1s timer"); v.Before(start.Add(time.Second)) {
			t.Errorf("timer sent %v, before start+1s = %v", v, start.Add(time.Second))
		}
		if tm.Stop() {
			t.Error("Stop after firing = true, want false")
		}
	})
	t.Run("sync steps back", func(t *testing.T) {
		f := newFakeDB(time.Hour)
		c := newFakeClock(t, f)
		start := c.Now()
		tm := c.NewTimer(time.Second)
		f.local.Advance(500 * time.Millisecond)
		held := c.Now() // start+500ms, observed: Now must not go below it
		f.set(time.Hour-300*time.Millisecond, nil)
		if err := c.Resync(context.Background()); err != nil {
			t.Fatal(err)
		}
		wantNow(t, c, held, "right after the step back")
		// Now is held at start+500ms until local start+800ms; the timer
		// needs 1000ms of the clock's time, so 1300ms of local time. Its
		// local timer, armed for the 500ms left as Now stood at the sync,
		// fires early and must wait again.
		f.local.Advance(500 * time.Millisecond)
		settle(t, f, 2) // the early firing found Now short and re-armed
		noTick(t, tm.Chan(), "local +1000ms, clock +700ms")
		f.local.Advance(300 * time.Millisecond)
		if v := receiveTick(t, tm.Chan(), "timer after a step back"); !v.Equal(start.Add(time.Second)) {
			t.Errorf("timer sent %v, want start+1s = %v", v, start.Add(time.Second))
		}
	})
	t.Run("sync steps forward", func(t *testing.T) {
		f := newFakeDB(time.Hour)
		c := newFakeClock(t, f)
		start := c.Now()
		tm := c.NewTimer(time.Second)
		f.local.Advance(200 * time.Millisecond)
		f.set(time.Hour+500*time.Millisecond, nil)
		if err := c.Resync(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.local.Advance(299 * time.Millisecond)
		noTick(t, tm.Chan(), "local +499ms, clock +999ms")
		f.local.Advance(time.Millisecond)
		if v := receiveTick(t, tm.Chan(), "timer after a step forward"); !v.Equal(start.Add(time.Second)) {
			t.Errorf("timer sent %v, want start+1s = %v", v, start.Add(time.Second))
		}
	})
}

func TestDBClockAfterFuncSleepAndStop(t *testing.T) {
	f := newFakeDB(time.Hour)
	c := newFakeClock(t, f)

	called := make(chan struct{}, 2)
	fn := c.AfterFunc(100*time.Millisecond, func() { called <- struct{}{} })
	if fn.Chan() != nil {
		t.Error("AfterFunc timer has a channel, want nil")
	}
	stopped := c.AfterFunc(100*time.Millisecond, func() { t.Error("a stopped AfterFunc ran") })
	if !stopped.Stop() {
		t.Error("Stop of a pending AfterFunc = false, want true")
	}
	f.local.Advance(100 * time.Millisecond)
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("AfterFunc did not run within 10s")
	}

	// Reset of a pending timer moves its target; Stop drops a value not
	// yet received.
	tm := c.NewTimer(time.Second)
	if !tm.Reset(2 * time.Second) {
		t.Error("Reset of a pending timer = false, want true")
	}
	f.local.Advance(time.Second)
	settle(t, f, 2)
	noTick(t, tm.Chan(), "1s into a timer reset to 2s")
	f.local.Advance(time.Second)
	receiveTick(t, tm.Chan(), "timer reset to 2s")
	if tm.Reset(time.Millisecond) {
		t.Error("Reset of a fired timer = true, want false")
	}
	f.local.Advance(time.Millisecond)
	settle(t, f, 1)
	for deadline := time.Now().Add(10 * time.Second); len(tm.Chan()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("reset timer did not fire within 10s")
		}
	}
	tm.Stop()
	noTick(t, tm.Chan(), "after Stop")

	slept := make(chan struct{})
	go func() { c.Sleep(time.Second); close(slept) }()
	settle(t, f, 2)
	f.local.Advance(time.Second)
	select {
	case <-slept:
	case <-time.After(10 * time.Second):
		t.Fatal("Sleep(1s) did not return within 10s of advancing 1s")
	}
	after := c.After(0)
	receiveTick(t, after, "After(0)")
}

func TestDBClockTicker(t *testing.T) {
	f := newFakeDB(time.Hour)
	c := newFakeClock(t, f)
	start := c.Now()
	tk := c.NewTicker(100 * time.Millisecond)
	for i := 1; i <= 3; i++ {
		settle(t, f, 2)
		f.local.Advance(100 * time.Millisecond)
		if v := receiveTick(t, tk.Chan(), "tick"); !v.Equal(start.Add(time.Duration(i) * 100 * time.Millisecond)) {
			t.Errorf("tick %d = %v, want start+%dms", i, v, i*100)
		}
	}
	tk.Stop()
	f.local.Advance(time.Second)
	settle(t, f, 1)
	noTick(t, tk.Chan(), "after Stop")

	never := c.NewTicker(0)
	f.local.Advance(time.Second)
	noTick(t, never.Chan(), "a ticker with period 0")
	never.Reset(time.Second)
	settle(t, f, 2)
	f.local.Advance(time.Second)
	receiveTick(t, never.Chan(), "the period-0 ticker after Reset(1s)")
	never.Stop()
}

func TestNewDBClockRejectsBadArguments(t *testing.T) {
	ctx := context.Background()
	if c, err := NewDBClock(ctx, nil); !errors.Is(err, store.ErrInvalid) || c != nil {
		t.Errorf("NewDBClock(nil pool) = %v, %v; want nil, an error wrapping %v", c, err, store.ErrInvalid)
	}
	f := newFakeDB(0)
	for _, d := range []time.Duration{0, -time.Second} {
		if c, err := newDBClock(ctx, f.sample, WithClockResync(d)); !errors.Is(err, store.ErrInvalid) || c != nil {
			t.Errorf("WithClockResync(%v) = %v, %v; want nil, an error wrapping %v", d, c, err, store.ErrInvalid)
		}
	}
	down := errors.New("connection refused")
	f.set(0, down)
	if c, err := newDBClock(ctx, f.sample, withLocalClock(f.local)); !errors.Is(err, down) || c != nil {
		t.Errorf("newDBClock with the database down = %v, %v; want nil, an error wrapping %v", c, err, down)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if c, err := NewDBClock(cctx, lazyPool(t, exampleDSN)); !errors.Is(err, context.Canceled) || c != nil {
		t.Errorf("NewDBClock(cancelled ctx) = %v, %v; want nil, %v", c, err, context.Canceled)
	}
}

// TestDBClockReadsTheServer runs a DBClock on a local clock set to the year
// 2000: Now must tell the server's time, and a Service using it stamps its
// events with that time.
func TestDBClockReadsTheServer(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	local := clockwork.NewFakeClockAt(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	before, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewDBClock(ctx, s.pool, withLocalClock(local))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	after, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The local clock stands still, so Now is the reading itself.
	now := c.Now()
	if now.Before(before) || now.After(after) {
		t.Fatalf("Now() = %v, want the server's time, within [%v, %v]", now, before, after)
	}
	if off := c.Offset(); off < before.Sub(local.Now()) || off > after.Sub(local.Now()) {
		t.Errorf("Offset() = %v, want the server's lead over the year 2000", off)
	}

	svc, err := lobby.NewService(s, lobby.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	local.Advance(1500 * time.Millisecond)
	res, err := svc.Join(ctx, "l", "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	if at, want := res.Events[0].At, now.Add(1500*time.Millisecond); !at.Equal(want) {
		t.Errorf("joined event At = %v, want the clock's %v", at, want)
	}

	// With the real local clock the two readings bracket Now, give or take
	// the sampling error (half a round trip) and the microsecond rounding.
	rc, err := NewDBClock(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	const slack = 50 * time.Millisecond
	for range 3 {
		lo := rc.Now()
		db, err := s.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hi := rc.Now()
		if db.Before(lo.Add(-slack)) || db.After(hi.Add(slack)) {
			t.Errorf("server time %v outside the DBClock's [%v, %v] ± %v", db, lo, hi, slack)
		}
	}
	if off := rc.Offset(); off < -time.Second || off > time.Second {
		t.Errorf("Offset() = %v against a server on this machine, want within ±1s", off)
	}
}
