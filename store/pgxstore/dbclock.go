package pgxstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/store"
)

var _ clockwork.Clock = (*DBClock)(nil)

// DefaultClockResync is how often a [DBClock] reads the database clock again
// unless [WithClockResync] says otherwise.
const DefaultClockResync = 10 * time.Second

// clockSamples is how many readings one sync takes; the one with the
// shortest round trip wins, because its midpoint is the least uncertain.
const clockSamples = 3

// ClockOption configures a DBClock in [NewDBClock].
type ClockOption func(*clockConfig)

type clockConfig struct {
	resync time.Duration
	local  clockwork.Clock
}

// WithClockResync sets how often the clock reads the database clock again
// (default [DefaultClockResync]). It must be positive, else NewDBClock
// returns an error wrapping store.ErrInvalid.
func WithClockResync(d time.Duration) ClockOption {
	return func(c *clockConfig) { c.resync = d }
}

// withLocalClock replaces the local clock the DBClock runs on (tests use a
// fake one).
func withLocalClock(local clockwork.Clock) ClockOption {
	return func(c *clockConfig) { c.local = local }
}

// DBClock is a clockwork.Clock that tells the database server's time, for
// deployments where several processes must judge deadlines by one clock
// (pass it to lobby.WithClock in every process).
//
// It reads clock_timestamp() when created and then every resync interval,
// and in between adds the local monotonic time elapsed since the reading,
// so Now costs no round trip. A reading is taken three times per sync and
// the one with the shortest round trip is kept, placed at the midpoint of
// that round trip; the error is at most half of it.
//
// Now never goes backward: when a sync finds the database clock behind the
// current estimate, Now holds its last value until the new estimate passes
// it, instead of stepping back. A sync that finds it ahead moves Now forward
// at once. A failed sync keeps the previous estimate (see [DBClock.LastSync]).
//
// Timers (NewTimer, After, AfterFunc, Sleep) and tickers measure their
// durations in this clock's time: a timer of d fires once Now has advanced by
// d since it was set, re-examined after every sync, so a correction
// shortens or lengthens the wait as it moves Now.
//
// A DBClock is safe for concurrent use. Call Close when done to stop the
// periodic sync; the clock keeps working afterwards on its last estimate.
type DBClock struct {
	local  clockwork.Clock
	sample func(context.Context) (time.Time, error)
	resync time.Duration

	mu     sync.Mutex
	base   time.Time // database time at anchor
	anchor time.Time // local time (with its monotonic reading) at which base held
	last   time.Time // the latest value Now returned
	synced time.Time // local time of the last successful sync
	offset time.Duration
	err    error // of the latest sync
	timers map[*dbTimer]struct{}

	stop context.CancelFunc
	done chan struct{}
}

// NewDBClock reads the database clock through pool and returns a DBClock
// that keeps following it, reading it again every resync interval in the
// background until Close. ctx bounds only the first reading, whose failure
// NewDBClock returns (wrapped, naming the call); a nil pool or an option out
// of range is an error wrapping store.ErrInvalid. The caller keeps
// ownership of pool and must Close the clock before closing the pool.
func NewDBClock(ctx context.Context, pool *pgxpool.Pool, opts ...ClockOption) (*DBClock, error) {
	if pool == nil {
		return nil, fmt.Errorf("pgxstore: db clock: nil pool: %w", store.ErrInvalid)
	}
	sample := func(ctx context.Context) (time.Time, error) {
		var t time.Time
		err := pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t)
		return t, err
	}
	return newDBClock(ctx, sample, opts...)
}

func newDBClock(ctx context.Context, sample func(context.Context) (time.Time, error), opts ...ClockOption) (*DBClock, error) {
	cfg := clockConfig{resync: DefaultClockResync, local: clockwork.NewRealClock()}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.resync <= 0 {
		return nil, fmt.Errorf("pgxstore: db clock: resync interval %v is not positive: %w", cfg.resync, store.ErrInvalid)
	}
	if cfg.local == nil {
		return nil, fmt.Errorf("pgxstore: db clock: nil local clock: %w", store.ErrInvalid)
	}
	c := &DBClock{
		local:  cfg.local,
		sample: sample,
		resync: cfg.resync,
		timers: make(map[*dbTimer]struct{}),
		done:   make(chan struct{}),
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := c.Resync(ctx); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	go c.loop(lctx)
	return c, nil
}

// loop syncs every resync interval until ctx is done.
func (c *DBClock) loop(ctx context.Context) {
	defer close(c.done)
	for {
		t := c.local.NewTimer(c.resync)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		}
		sctx, cancel := context.WithTimeout(ctx, c.resync)
		_ = c.Resync(sctx) // recorded for LastSync; the previous estimate stays
		cancel()
	}
}

// Close stops the periodic sync and waits for it to end. The clock, its
// timers included, keeps working on the last estimate. Close is idempotent.
func (c *DBClock) Close() {
	c.stop()
	<-c.done
}

// Resync reads the database clock now instead of waiting for the next
// periodic sync. On failure it returns the error (wrapped, naming the call)
// and keeps the previous estimate.
func (c *DBClock) Resync(ctx context.Context) error {
	base, anchor, err := c.measure(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			err = fmt.Errorf("pgxstore: db clock: %w (%v)", cerr, err)
		} else {
			err = fmt.Errorf("pgxstore: db clock: %w", err)
		}
		c.err = err
		return err
	}
	c.base, c.anchor, c.synced, c.err = base, anchor, anchor, nil
	c.offset = base.Sub(anchor)
	for t := range c.timers {
		t.armLocked()
	}
	return nil
}

// measure takes clockSamples readings and returns the database time of the
// one with the shortest round trip and the local time of its midpoint.
func (c *DBClock) measure(ctx context.Context) (base, anchor time.Time, err error) {
	best := time.Duration(-1)
	for range clockSamples {
		before := c.local.Now()
		db, err := c.sample(ctx)
		if err != nil {
			return time.Time{}, time.Time{}, err
		}
		rtt := c.local.Since(before)
		if best < 0 || rtt < best {
			best = rtt
			base, anchor = db.UTC(), before.Add(rtt/2)
		}
	}
	return base, anchor, nil
}

// Offset returns how far the database clock was ahead of the local wall
// clock at the last successful sync (negative when it was behind). Compare
// it with the skew you tolerate to alert on badly set clocks.
func (c *DBClock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// LastSync returns the local time of the last successful sync and the error
// of the latest attempt (nil if it succeeded).
func (c *DBClock) LastSync() (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced, c.err
}

// Now returns the current database time as estimated: the last reading
// plus the local time elapsed since, never earlier than a value Now
// returned before. The result is in UTC and carries no monotonic reading.
func (c *DBClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

func (c *DBClock) nowLocked() time.Time {
	t := c.base.Add(c.local.Since(c.anchor))
	if t.Before(c.last) {
		return c.last
	}
	c.last = t
	return t
}

// Since returns Now().Sub(t).
func (c *DBClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns t.Sub(Now()).
func (c *DBClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// Sleep blocks until Now has advanced by d.
func (c *DBClock) Sleep(d time.Duration) { <-c.After(d) }

// After returns a channel that receives the clock's time once Now has
// advanced by d.
func (c *DBClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).Chan() }

// NewTimer returns a timer that sends the clock's time on its channel once
// Now has advanced by d (at once for d <= 0). Stop and Reset discard a value
// not yet received, as time.Timer does since Go 1.23.
func (c *DBClock) NewTimer(d time.Duration) clockwork.Timer {
	t := &dbTimer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc calls f in its own goroutine once Now has advanced by d. The
// returned timer's Chan is nil.
func (c *DBClock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	t := &dbTimer{c: c, fn: f}
	t.Reset(d)
	return t
}

// NewTicker returns a ticker that sends the clock's time every d of this
// clock's time, dropping ticks a slow receiver misses, as time.Ticker does.
// A ticker with a non-positive d never ticks (until Reset with a positive
// one), where time.NewTicker would panic.
func (c *DBClock) NewTicker(d time.Duration) clockwork.Ticker {
	t := &dbTimer{c: c, ch: make(chan time.Time, 1)}
	t.resetTicker(d)
	return &dbTicker{t}
}

// dbTimer fires when the DBClock's Now reaches target. It waits on a timer
// of the local clock for the remaining duration and, when that fires early
// (the estimate stepped back) or a sync moves Now, arms it again.
type dbTimer struct {
	c  *DBClock
	ch chan time.Time // nil for AfterFunc
	fn func()

	// Guarded by c.mu.
	period time.Duration // > 0 for a ticker
	target time.Time
	active bool
	local  clockwork.Timer
	gen    uint64 // identifies the current arming; stale firings are ignored
}

// armLocked (re)starts the local timer for the time left until target.
func (t *dbTimer) armLocked() {
	if t.local != nil {
		t.local.Stop()
	}
	t.gen++
	gen := t.gen
	d := max(t.target.Sub(t.c.nowLocked()), 0)
	t.local = t.c.local.AfterFunc(d, func() { t.fire(gen) })
}

func (t *dbTimer) fire(gen uint64) {
	c := t.c
	c.mu.Lock()
	if !t.active || gen != t.gen {
		c.mu.Unlock()
		return
	}
	now := c.nowLocked()
	if now.Before(t.target) {
		t.armLocked()
		c.mu.Unlock()
		return
	}
	if t.period > 0 {
		// The next tick after now; ticks a jump skipped are dropped.
		missed := now.Sub(t.target) / t.period
		t.target = t.target.Add((missed + 1) * t.period)
		t.armLocked()
	} else {
		t.deactivateLocked()
	}
	if t.ch != nil {
		// Sent under the lock, so that Stop and Reset, which drain the
		// channel under it too, never leave a stale value behind.
		select {
		case t.ch <- now:
		default:
		}
	}
	c.mu.Unlock()
	if t.fn != nil {
		t.fn() // already on the local timer's own goroutine
	}
}

func (t *dbTimer) deactivateLocked() {
	t.active = false
	t.gen++
	if t.local != nil {
		t.local.Stop()
		t.local = nil
	}
	delete(t.c.timers, t)
}

func (t *dbTimer) drainLocked() {
	if t.ch == nil {
		return
	}
	select {
	case <-t.ch:
	default:
	}
}

// Chan returns the channel the timer sends on (nil for AfterFunc).
func (t *dbTimer) Chan() <-chan time.Time { return t.ch }

// Stop prevents the timer from firing. It reports whether the timer was
// still pending.
func (t *dbTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.deactivateLocked()
	t.drainLocked()
	return was
}

// Reset makes the timer fire once Now has advanced by d from now. It
// reports whether the timer was still pending.
func (t *dbTimer) Reset(d time.Duration) bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	was := t.active
	t.drainLocked()
	t.period = 0
	t.target = c.nowLocked().Add(d)
	t.active = true
	c.timers[t] = struct{}{}
	t.armLocked()
	return was
}

func (t *dbTimer) resetTicker(d time.Duration) {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	t.drainLocked()
	if d <= 0 {
		t.deactivateLocked()
		return
	}
	t.period = d
	t.target = c.nowLocked().Add(d)
	t.active = true
	c.timers[t] = struct{}{}
	t.armLocked()
}

// dbTicker adapts a periodic dbTimer to clockwork.Ticker.
type dbTicker struct{ t *dbTimer }

func (k *dbTicker) Chan() <-chan time.Time { return k.t.ch }

// Reset stops the ticker and starts it again with period d.
func (k *dbTicker) Reset(d time.Duration) { k.t.resetTicker(d) }

// Stop turns the ticker off; no more ticks are sent.
func (k *dbTicker) Stop() { k.t.Stop() }
