package lobby

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// farFuture asks the store for its earliest deadline of all.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// Run applies expiries at their deadlines and relays committed events to
// the Publisher until ctx is done; then it stops both loops and returns
// nil. Run returns ErrRunning if the Service is already running, and an
// error if the store's change notifications cannot be set up.
//
// The sweeper sleeps on a timer set to the earliest deadline in the store,
// is woken early when this Service commits an earlier one (or, with a
// store.Notifier, when any process commits events), and looks at the store
// at least every resync interval (WithResync) for deadlines it could not
// have heard of. Each pass applies every due deadline,
// lobby by lobby in (deadline, lobby ID) order. Because expiries are applied
// as of their deadlines, a sweeper that was paused or restarted produces
// the same history as one that ran on time.
//
// The relay wakes when this Service commits events (or, with a
// store.Notifier, when any process does), reads the store's outbox, hands
// events to the Publisher in
// revision order per lobby, and acknowledges them once Publish returns nil.
// Failures are retried with backoff; nothing is acknowledged that was not
// published.
//
// Several processes may run Run on one shared store: compare-and-set
// keeps expiries exactly-once, and each event is published at least once
// by some process (see the store's outbox documentation for fan-out).
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer s.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var wg sync.WaitGroup
	if n, ok := s.st.(store.Notifier); ok {
		ch, err := n.Notify(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // shut down while subscribing
			}
			return fmt.Errorf("lobby: store notifications: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ch {
				// Another process committed visible changes, which
				// usually bring new deadlines (a grace started, a member
				// joined): look at the due index too, so that a process
				// that dies before its deadlines does not leave them to
				// the resync.
				poke(s.relayPoke)
				poke(s.sweepPoke)
			}
		}()
	}
	wg.Add(2)
	go func() { defer wg.Done(); s.sweepLoop(ctx) }()
	go func() { defer wg.Done(); s.relayLoop(ctx) }()
	wg.Wait()
	return nil
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// wait sleeps d on the Service's clock, or until woken or ctx is done. It
// reports false when ctx is done.
func (s *Service) wait(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	return s.waitUntil(ctx, s.clock.Now().Add(d), wake)
}

// waitUntil sleeps until the clock reaches target, or until woken or ctx is
// done. It reports false when ctx is done.
func (s *Service) waitUntil(ctx context.Context, target time.Time, wake <-chan struct{}) bool {
	t := s.clock.NewTimer(s.clock.Until(target))
	defer t.Stop()
	// The clock may have moved between reading it and arming the timer
	// (a fake clock advanced by a test, say); a timer armed too late
	// would then sleep past target.
	if !s.clock.Now().Before(target) {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-t.Chan():
	case <-wake:
	}
	return true
}

// backoff doubles from 100 ms up to 10 s.
func backoff(failures int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < failures && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}

func (s *Service) sweepLoop(ctx context.Context) {
	failures := 0
	for {
		// Awake: every commit with a deadline pokes, so that one written
		// while this pass plans its sleep is not missed.
		s.nextWakeNs.Store(math.MaxInt64)
		changed, passAt, err := s.sweep(ctx)
		if ctx.Err() != nil {
			return
		}
		now := s.clock.Now()
		sleep := s.cfg.resync
		if err == nil {
			var next time.Time
			var ok bool
			next, ok, err = s.nextDeadline(ctx)
			if ok {
				sleep = min(sleep, next.Sub(now))
			}
			if err == nil && ok && !next.After(passAt) && changed == 0 {
				// Due when the pass looked, yet the pass changed
				// nothing: a lobby that fails (claimed, corrupt) must
				// not make the loop spin.
				err = errors.New("due lobbies could not be advanced")
			}
		}
		if err != nil {
			failures++
			sleep = backoff(failures)
			s.log.Warn("lobby sweep failed", "err", err, "retry_in", sleep)
		} else {
			failures = 0
		}
		target := now.Add(sleep)
		s.nextWakeNs.Store(target.UnixNano())
		if !s.waitUntil(ctx, target, s.sweepPoke) {
			return
		}
	}
}

func (s *Service) nextDeadline(ctx context.Context) (time.Time, bool, error) {
	due, err := s.st.Due(ctx, farFuture, 1)
	if err != nil || len(due) == 0 {
		return time.Time{}, false, err
	}
	return due[0].Deadline, true, nil
}

// Sweep applies every deadline due now, lobby by lobby in (deadline, lobby
// ID) order, and returns how many lobbies it changed. Run calls it; call it
// yourself to drive expiries from your own scheduler instead. Lobbies whose
// transition fails (a corrupt record, say) are skipped for this pass and
// reported in the error, joined; the others are still swept.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	n, _, err := s.sweep(ctx)
	return n, err
}

// sweep is Sweep; it also returns the time the pass swept up to.
func (s *Service) sweep(ctx context.Context) (changed int, now time.Time, err error) {
	now = s.clock.Now()
	s.lobbies.trim(now)
	claimer, claims := s.st.(store.Claimer)
	seen := map[string]bool{} // one transition per lobby and pass applies all it has due
	var errs []error
	for {
		// Due is a read; with a Claimer, look before claiming (a write in
		// shared stores), since most wake-ups find nothing due.
		due, err := s.st.Due(ctx, now, s.cfg.sweepBatch)
		if err == nil && claims && len(due) > 0 {
			due, err = claimer.Claim(ctx, now, s.cfg.sweepBatch, s.cfg.claimHold)
		}
		if err != nil {
			return changed, now, errors.Join(append(errs, fmt.Errorf("lobby: due lobbies: %w", err))...)
		}
		progress := false
		for _, d := range due {
			if seen[d.ID] {
				continue
			}
			seen[d.ID] = true
			res, err := s.Do(ctx, d.ID, Tick())
			if err != nil {
				if ctx.Err() != nil {
					return changed, now, ctx.Err()
				}
				errs = append(errs, fmt.Errorf("lobby %q: %w", d.ID, err))
				continue
			}
			progress = true
			if res.Changed {
				changed++
			}
		}
		if len(due) < s.cfg.sweepBatch || !progress {
			return changed, now, errors.Join(errs...)
		}
	}
}

func (s *Service) relayLoop(ctx context.Context) {
	failures := 0
	for {
		n, err := s.relay(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			failures++
			d := backoff(failures)
			s.log.Warn("lobby relay failed", "err", err, "retry_in", d)
			if !s.wait(ctx, d, nil) {
				return
			}
		case n == s.cfg.relayBatch:
			failures = 0 // more may be waiting
		default:
			failures = 0
			if !s.wait(ctx, s.cfg.resync, s.relayPoke) {
				return
			}
		}
	}
}

// Relay publishes one batch of pending outbox events and acknowledges it,
// returning how many events it acknowledged. Run calls it; call it yourself
// to drive delivery from your own loop. An event whose bytes do not decode
// is logged and acknowledged, so that it cannot block the outbox.
func (s *Service) Relay(ctx context.Context) (int, error) {
	return s.relay(ctx)
}

func (s *Service) relay(ctx context.Context) (int, error) {
	pending, err := s.st.Pending(ctx, s.cfg.relayBatch)
	if err != nil || len(pending) == 0 {
		if err != nil {
			err = fmt.Errorf("lobby: outbox: %w", err)
		}
		return 0, err
	}
	events := make([]Event, 0, len(pending))
	for _, p := range pending {
		ev, err := DecodeEvent(p.Data)
		if err != nil {
			s.log.Error("lobby outbox entry dropped", "lobby", p.Lobby, "seq", p.Seq, "err", err)
			continue
		}
		events = append(events, ev)
	}
	if len(events) > 0 {
		if err := s.cfg.publisher.Publish(ctx, events); err != nil {
			return 0, fmt.Errorf("lobby: publish: %w", err)
		}
	}
	if err := s.st.Ack(ctx, pending); err != nil {
		return 0, fmt.Errorf("lobby: outbox ack: %w", err)
	}
	return len(pending), nil
}
