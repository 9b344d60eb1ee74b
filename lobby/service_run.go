package lobby

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby/rules"

	"github.com/lobbyhost/lobbyhost/store"
)

// sweepLook is how many deadlines a sweep pass looks at first (see
// sweepPass).
const sweepLook = 16

// farFuture asks the store for its earliest deadline of all.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// Run applies expiries at their deadlines, relays committed events to the
// Publisher (if there is one), and hands other processes' commits to this
// Service's Watchers, until ctx is done; then it stops its loops and
// returns nil. Run returns ErrRunning if the Service is already running,
// and an error if the store's change notifications cannot be set up.
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
// The relay is a durable consumer of the store's effects log (see
// WithRelayName). It wakes when this Service commits events (or, with a
// store.Notifier, when any process does), claims lobbies with unpublished
// entries, hands their events to the Publisher in revision order per
// lobby, and moves its cursor once Publish returns nil. Failures are
// retried with backoff; no cursor moves past an event that was not
// published.
//
// With a store.Notifier, Run subscribes to the store's change feed: a
// change names the lobby written, so only this Service's Watchers of that
// lobby read the log. If the feed reports lost changes, the log heads of
// every watched lobby are checked once. Without a Notifier, Run looks at
// those heads every watch-poll interval (WithWatchPoll).
//
// Several processes may run Run on one shared store: compare-and-set
// keeps expiries exactly-once, processes sharing a relay name split the
// lobbies and publish each event at least once, and every process's
// Watchers see every commit.
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer s.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var wg sync.WaitGroup
	if n, ok := s.st.(store.Notifier); ok {
		feed, err := n.Subscribe(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // shut down while subscribing
			}
			return fmt.Errorf("lobby: store notifications: %w", err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.listen(ctx, feed) }()
	} else {
		wg.Add(1)
		go func() { defer wg.Done(); s.pollHeads(ctx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); s.sweepLoop(ctx) }()
	if s.live != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.live.sessionLoop(ctx) }()
		if s.live.own {
			wg.Add(1)
			go func() { defer wg.Done(); s.live.expireLoop(ctx) }()
		}
	}
	if s.cfg.publisher != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.relayLoop(ctx) }()
	}
	wg.Wait()
	return nil
}

// listen turns the store's change notifications into work: Watchers of the
// lobbies named read their logs, the relay looks for entries to publish,
// and the sweeper looks at the due index, since other processes' commits
// usually bring new deadlines (a grace started, a member joined) and a
// process that dies before its deadlines must not leave them to the resync.
// A feed that lost changes makes the Watchers' lobbies be checked once.
func (s *Service) listen(ctx context.Context, feed *store.Feed) {
	// Watchers that started before the subscription may have missed
	// commits in between.
	lost := true
	for {
		changes, l := feed.Take()
		lost = lost || l
		for _, c := range changes {
			s.hub.remote(c.Lobby, c.Version)
			if s.live != nil {
				s.live.heard(c.Lobby, c.Version)
			}
		}
		if l && s.live != nil {
			s.live.heardAll()
		}
		if lost {
			if err := s.hub.lost(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Warn("lobby watch resync failed", "err", err)
			} else {
				lost = false
			}
		}
		if len(changes) > 0 || l {
			poke(s.relayPoke)
			poke(s.sweepPoke)
		}
		if lost {
			// Retry the heads after a pause rather than at once.
			if !s.wait(ctx, s.cfg.watchPoll, nil) {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-feed.Ready():
		}
	}
}

// pollHeads is listen for stores without change notifications: it looks at
// the log heads of the watched lobbies every watch-poll interval.
func (s *Service) pollHeads(ctx context.Context) {
	for {
		if err := s.hub.lost(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("lobby watch poll failed", "err", err)
		}
		if s.live != nil {
			if err := s.live.pollHeads(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("lobby watch poll failed", "err", err)
			}
		}
		if !s.wait(ctx, s.cfg.watchPoll, nil) {
			return
		}
	}
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
	var t clockwork.Timer
	for {
		start := s.clock.Now()
		if !start.Before(target) {
			return ctx.Err() == nil
		}
		t = s.clock.NewTimer(target.Sub(start))
		// The clock may have moved between reading it and arming the
		// timer (a fake clock advanced by a test, say): a timer armed
		// that much too late would sleep past target, so arm it again.
		if s.clock.Since(start) < time.Millisecond {
			break
		}
		t.Stop()
	}
	defer t.Stop()
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
	failures, idleWork := 0, 0
	for {
		// Awake: commits keep their deadlines in awakeMinNs for the sleep
		// this pass plans (noteDeadline).
		s.nextWakeNs.Store(math.MaxInt64)
		p, err := s.sweepPass(ctx)
		if ctx.Err() != nil {
			return
		}
		now := s.clock.Now()
		var sleep time.Duration
		switch {
		case err != nil:
			failures++
			sleep = backoff(failures)
			s.log.Warn("lobby sweep failed", "err", err, "retry_in", sleep)
		case p.shutOut:
			// Every due lobby is claimed by another process, which is
			// advancing it: a lost race, not a failure. Should that
			// process die, its claims lapse after the hold.
			failures = 0
			sleep = min(s.cfg.resync, s.cfg.claimHold)
			s.log.Debug("lobby sweep: due lobbies claimed elsewhere", "retry_in", sleep)
		case p.worked && p.changed == 0:
			// The store showed lobbies due that the transition found
			// nothing to do in (another process advanced them between
			// the look and the transition, usually). Look again soon, and
			// say so only when it keeps happening: a lobby that never
			// advances must not make the loop spin or go unnoticed.
			failures = 0
			idleWork++
			sleep = backoff(idleWork)
			if idleWork >= 3 {
				s.log.Warn("lobby sweep failed", "err", errors.New("due lobbies could not be advanced"), "retry_in", sleep)
			}
		default:
			// An idle pass, or one that advanced what was due: sleep
			// until the next deadline the look showed (those of the
			// lobbies just advanced come from their commits, below). A
			// burst larger than the look leaves it unknown: look again.
			failures, idleWork = 0, 0
			sleep = s.cfg.resync
			switch {
			case p.hasNext:
				sleep = min(sleep, p.next.Sub(now))
			case p.more:
				sleep = 0
			}
			if p.othersHold {
				// Should the process holding the rest die, its claims
				// lapse after the hold.
				sleep = min(sleep, s.cfg.claimHold)
			}
		}
		target := now.Add(sleep)
		s.nextWakeNs.Store(target.UnixNano())
		if m := s.awakeMinNs.Swap(math.MaxInt64); m < target.UnixNano() {
			// Committed while this pass ran, after it looked.
			target = time.Unix(0, m)
			s.nextWakeNs.Store(m)
		}
		if !s.waitUntil(ctx, target, s.sweepPoke) {
			return
		}
	}
}

// Sweep applies every deadline due now and returns how many lobbies it
// changed. It takes due lobbies from the store in (deadline, lobby ID)
// order and advances up to WithSweepConcurrency of them at once; lobbies
// are independent, so the order does not change any lobby's outcome. Run calls it; call it
// yourself to drive expiries from your own scheduler instead. Lobbies whose
// transition fails (a corrupt record, say) are skipped for this pass and
// reported in the error, joined; the others are still swept. Lobbies that
// another process has claimed (store.Claimer) are left to it.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	changed := 0
	for {
		p, err := s.sweepPass(ctx)
		changed += p.changed
		if err != nil || !p.worked || p.shutOut || p.changed == 0 {
			return changed, err
		}
	}
}

// pass is what one sweeper pass found and did.
type pass struct {
	// worked: lobbies were due, and the pass took them in hand.
	worked bool
	// changed counts the lobbies whose transition committed a change.
	changed int
	// shutOut: lobbies were due, but every one of them was claimed by
	// another process; othersHold: some of them were.
	shutOut, othersHold bool
	// next is the earliest deadline among the lobbies the pass did not
	// advance (hasNext false: the store holds none, or see more). The
	// deadlines of the lobbies it advanced reach the loop through their
	// commits.
	next    time.Time
	hasNext bool
	// more: every deadline the look showed was due, so what comes after
	// them is unknown until the next look.
	more bool
}

// sweepPass is one pass of the sweeper, in as few store calls as the work
// allows: an idle pass is one call (the look: the earliest deadlines of
// all, which also give the next wake-up); a pass with work is one more on a
// store with claims (the claim of the due lobbies), and one more per
// further batch in a burst larger than a batch. The next wake-up after work
// comes from the look and from the commits of the pass itself, without
// another call.
func (s *Service) sweepPass(ctx context.Context) (p pass, err error) {
	now := s.clock.Now()
	s.lobbies.trim(now)
	var errs []error
	if err := s.trimLog(ctx, now); err != nil {
		errs = append(errs, err)
	}
	// The look: the earliest few deadlines of all, so that it shows
	// whether lobbies are due now and, after them, the next deadline of
	// the lobbies this pass does not touch. It is kept small: it is read
	// on every pass, and a store's search grows with what it returns.
	look, err := s.st.Due(ctx, farFuture, min(sweepLook, s.cfg.sweepBatch)+1)
	if err != nil {
		return p, errors.Join(append(errs, fmt.Errorf("lobby: due lobbies: %w", err))...)
	}
	n := 0 // look[:n] are due now
	for n < len(look) && !look[n].Deadline.After(now) {
		n++
	}
	if n < len(look) {
		p.next, p.hasNext = look[n].Deadline, true
	}
	p.more = n > 0 && n == len(look) // every deadline it showed is due: what follows is unknown
	if n == 0 {
		return p, errors.Join(errs...)
	}
	p.worked = true
	claimer, claims := s.st.(store.Claimer)
	seen := map[string]bool{} // one transition per lobby and pass applies all it has due
	for {
		var due []store.Due
		switch {
		case claims:
			due, err = claimer.Claim(ctx, now, s.cfg.sweepBatch, s.cfg.claimHold)
		case len(seen) == 0 && !p.more:
			due = look[:n] // the look already lists them all
		default:
			due, err = s.st.Due(ctx, now, s.cfg.sweepBatch)
		}
		if err != nil {
			return p, errors.Join(append(errs, fmt.Errorf("lobby: due lobbies: %w", err))...)
		}
		if claims && len(seen) == 0 && len(due) < min(n, s.cfg.sweepBatch) {
			// Some of the lobbies the look showed due are claimed by
			// another process, which is advancing them.
			p.shutOut = len(due) == 0
			p.othersHold = true
		}
		if p.shutOut {
			return p, errors.Join(errs...)
		}
		progress := false
		var mu sync.Mutex // guards p.changed, errs and progress
		advance := func(id string) {
			res, err := s.transact(ctx, id, txn{cmd: rules.Tick(), idle: true})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && ctx.Err() == nil:
				errs = append(errs, fmt.Errorf("lobby %q: %w", id, err))
			case err == nil:
				progress = true
				if res.Changed {
					p.changed++
				}
			}
		}
		todo := due[:0:0]
		for _, d := range due {
			if !seen[d.ID] {
				seen[d.ID] = true
				todo = append(todo, d)
			}
		}
		s.inParallel(len(todo), func(i int) {
			if ctx.Err() == nil {
				advance(todo[i].ID)
			}
		})
		if err := ctx.Err(); err != nil {
			return p, err
		}
		if len(due) < s.cfg.sweepBatch || !progress {
			return p, errors.Join(errs...)
		}
	}
}

// inParallel calls f(i) for every i in [0, n), on up to WithSweepConcurrency
// goroutines at once that take the indexes in turn (on the caller's alone
// under a simulation, which schedules goroutines itself), and returns once
// every call has.
func (s *Service) inParallel(n int, f func(i int)) {
	workers := min(s.cfg.sweepers, n)
	if s.hooks != nil || workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				f(int(i))
			}
		})
	}
	wg.Wait()
}

// errPublish marks a relay failure of the Publisher, not of the store.
var errPublish = errors.New("lobby: publish")

// relayPassLimit bounds a relay pass that Run's end does not interrupt.
const relayPassLimit = 10 * time.Second

func (s *Service) relayLoop(ctx context.Context) {
	failures := 0
	for {
		// A pass that has begun finishes (within a bound) even when Run
		// is stopping: cut off between claiming lobbies and committing
		// them, it would leave claims that hold those lobbies back from
		// every relay for the claim hold.
		pass, cancel := context.WithTimeout(context.WithoutCancel(ctx), relayPassLimit)
		_, more, err := s.relay(pass)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			s.unregistered()
			failures++
			d := backoff(failures)
			s.log.Warn("lobby relay failed", "err", err, "retry_in", d)
			if !s.wait(ctx, d, nil) {
				return
			}
		case more:
			failures = 0
		default:
			failures = 0
			if !s.wait(ctx, s.cfg.resync, s.relayPoke) {
				return
			}
		}
	}
}

// Relay publishes one batch of the effects log to the Publisher: it claims
// up to the relay batch of lobbies with unpublished entries for this
// process (see WithRelayName), publishes each lobby's events in revision
// order, and commits the consumer's cursor once Publish returns nil. It
// returns how many events it published. Run calls it; call it yourself to
// drive delivery from your own loop. An entry whose bytes do not decode,
// or a stretch of the log compacted before it was published, is logged and
// passed over, so that it cannot block the lobby.
func (s *Service) Relay(ctx context.Context) (int, error) {
	n, _, err := s.relay(ctx)
	return n, err
}

// relay is Relay; more reports that more work may be waiting.
func (s *Service) relay(ctx context.Context) (published int, more bool, err error) {
	if s.cfg.publisher == nil {
		return 0, false, nil
	}
	// A store that lost its data without an error this Service saw (a
	// volatile server restarted between two calls) lost the registration
	// too: register again once per resync interval.
	if now := s.clock.Now().UnixNano(); now-s.lastRegNs.Load() >= int64(s.cfg.resync) || now < s.lastRegNs.Load() {
		s.lastRegNs.Store(now)
		s.registered.Store(false)
	}
	if err := s.ensureConsumer(ctx); err != nil {
		return 0, false, err
	}
	cursors, err := s.st.ClaimLog(ctx, s.cfg.relayName, s.clock.Now(), s.cfg.relayBatch, s.cfg.relayHold)
	if err != nil {
		return 0, false, fmt.Errorf("lobby: claim effects: %w", err)
	}
	for i, c := range cursors {
		n, err := s.relayLobby(ctx, c)
		published += n
		if err != nil {
			// The Publisher failed: release the claims not worked on,
			// so that the retry (or another process) takes them at
			// once. After a store error the claims lapse after the hold
			// instead: the store may be another incarnation by now (a
			// volatile server restarted), where a commit naming a
			// position of the old one would skip the new one's entries.
			if errors.Is(err, errPublish) {
				for _, r := range cursors[i:] {
					_ = s.st.CommitLog(ctx, s.cfg.relayName, r.Lobby, r.After)
				}
			}
			return published, false, err
		}
	}
	return published, len(cursors) == s.cfg.relayBatch, nil
}

// relayLobby publishes one lobby's unpublished events and commits them. A
// lobby with more than a batch of entries is committed part way and comes
// back from the next ClaimLog.
func (s *Service) relayLobby(ctx context.Context, c store.Cursor) (int, error) {
	entries, err := s.st.ReadLog(ctx, c.Lobby, c.After, s.cfg.relayBatch)
	var ce *store.CompactedError
	if errors.As(err, &ce) {
		s.log.Error("lobby effects compacted before they were published", "lobby", c.Lobby, "cursor", c.After, "trimmed", ce.Trimmed)
		return 0, s.commitRelay(ctx, c.Lobby, ce.Trimmed)
	}
	if err != nil {
		return 0, fmt.Errorf("lobby %q: read effects: %w", c.Lobby, err)
	}
	if len(entries) == 0 {
		return 0, s.commitRelay(ctx, c.Lobby, c.After)
	}
	var events []Event
	for _, e := range entries {
		fx, err := rules.DecodeEffects(e.Data)
		if err != nil {
			s.log.Error("lobby effects entry dropped", "lobby", c.Lobby, "version", e.Version, "err", err)
			continue
		}
		events = append(events, fx.Events...)
	}
	if len(events) > 0 {
		if err := s.cfg.publisher.Publish(ctx, events); err != nil {
			return 0, fmt.Errorf("%w: %w", errPublish, err)
		}
	}
	return len(events), s.commitRelay(ctx, c.Lobby, entries[len(entries)-1].Version)
}

func (s *Service) commitRelay(ctx context.Context, id string, after uint64) error {
	if err := s.st.CommitLog(ctx, s.cfg.relayName, id, after); err != nil {
		return fmt.Errorf("lobby %q: commit relay cursor: %w", id, err)
	}
	return nil
}

// ensureConsumer registers the relay's consumer before the first write of
// a Service with a Publisher, so that no event committed by it is missed,
// and again after any store error (see unregistered). A registration that
// a store error overtook does not count: it may have reached a server that
// then lost it.
func (s *Service) ensureConsumer(ctx context.Context) error {
	if s.cfg.publisher == nil || s.registered.Load() {
		return nil
	}
	epoch := s.regEpoch.Load()
	if err := s.st.RegisterConsumer(ctx, s.cfg.relayName); err != nil {
		s.unregistered()
		return fmt.Errorf("lobby: register relay %q: %w", s.cfg.relayName, err)
	}
	if s.regEpoch.Load() == epoch {
		s.registered.Store(true)
	}
	return nil
}

// unregistered is called after a store error: a store that lost its data
// (a Redis without persistence that restarted, say) lost the relay's
// registration with it, so the next write registers again before it
// commits, and what the relay misses is no more than what the store lost.
func (s *Service) unregistered() {
	if s.cfg.publisher != nil {
		s.regEpoch.Add(1)
		s.registered.Store(false)
	}
}

// trimLog removes effects older than the store's retention, at most once a
// minute, in batches.
func (s *Service) trimLog(ctx context.Context, now time.Time) error {
	last := s.lastTrimNs.Load()
	if last != 0 && now.UnixNano()-last < int64(time.Minute) && now.UnixNano() >= last {
		return nil
	}
	const batch = 1024
	for {
		n, err := s.st.TrimLog(ctx, now, batch)
		if err != nil {
			return fmt.Errorf("lobby: trim effects log: %w", err)
		}
		if n < batch {
			s.lastTrimNs.Store(now.UnixNano())
			return nil
		}
	}
}
