package lobby

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby/rules"

	"github.com/lobbyhost/lobbyhost/store"
)

// txn is one transaction on one lobby: the single path by which every
// Service entry point reads, judges and writes a lobby.
type txn struct {
	cmd rules.Command
	// reclaim: after the command, a lobby that still has members is
	// refused with ErrNotEmpty (committing nothing); an empty one is
	// committed and then deleted from the store, keeping its floor, its
	// last transition time and its blocks in the tombstone.
	reclaim bool
	// idle: a sweep; an empty lobby past the empty-lobby TTL is reclaimed
	// after the command.
	idle bool
	// view, if set, sees the committed state the transaction ended on and
	// its store version, under the lobby's lock. It must not keep the
	// state.
	view func(st *rules.State, version uint64)
	// at, if set, is the command's time instead of the clock's (a
	// time-out is stamped with its deadline).
	at time.Time
	// internal: a command of the Service itself, which may name a
	// session.
	internal bool
	// hold: a join through this Service's session, chosen at each
	// attempt's time (none once it has ended or while draining).
	hold bool
}

// outcome is what a transaction leaves for the work done after the lobby's
// lock is released.
type outcome struct {
	res       Result
	err       error
	attempts  int
	committed bool
	events    []Event   // the events of every commit the transaction made
	deadline  time.Time // the last committed lobby's next deadline
	at        time.Time // the clock reading of the last attempt
	// cmd is the command as the last attempt ran it: a join names the
	// session it went through.
	cmd rules.Command
}

// transact runs t on lobby id: validation, the lock, the compare-and-set
// attempts, and then, with the lock released, the decision log, the wake-ups
// and the Observer.
func (s *Service) transact(ctx context.Context, id string, t txn) (Result, error) {
	if err := rules.CheckID("lobby ID", id); err != nil {
		return Result{}, err
	}
	if err := t.cmd.Validate(); err != nil {
		return Result{}, err
	}
	if !t.internal && (t.cmd.Session != "" || t.cmd.Op == rules.OpDrain) {
		return Result{}, fmt.Errorf("%w: sessions are the Service's own (see Service.Drain)", ErrInvalidCommand)
	}
	start := s.clock.Now()
	t.hold = t.cmd.Op == rules.OpJoin && s.live != nil
	var o outcome
	sl, err := s.lobbies.acquire(ctx, id, s.yieldHook())
	if err != nil {
		o.err = err
	} else {
		o = s.attempts(ctx, id, sl, t)
		if t.hold && errors.Is(o.err, rules.ErrSessionEnded) {
			// The lobby judged this Service's own session over (it has
			// moved past the session's deadline: a clock ahead of
			// ours, or a renewal that came late). The join does not
			// depend on it: it gets a stored heartbeat deadline.
			t.hold = false
			o = s.attempts(ctx, id, sl, t)
		}
		// Keep a committed lobby that has members; unknown, empty and
		// reclaimed lobbies are not worth memory.
		s.lobbies.release(sl, !t.reclaim && sl.state != nil && len(sl.state.Members) > 0, o.at)
	}
	if o.committed {
		s.committed(id, o)
	}
	if s.advice != nil && o.err == nil {
		s.advice.record(id, t.cmd, o.res)
	}
	if s.cfg.observer != nil {
		ran := t.cmd
		if o.cmd.Op != 0 {
			ran = o.cmd
		}
		s.cfg.observer.Observe(ctx, Observation{
			Lobby:     id,
			Command:   ran,
			Result:    o.res,
			Err:       o.err,
			Committed: o.committed,
			Attempts:  o.attempts,
			At:        o.at,
			Duration:  s.clock.Since(start),
		})
	}
	return o.res, o.err
}

func (s *Service) yieldHook() func(context.Context) error {
	if s.hooks == nil {
		return nil
	}
	return s.hooks.yield
}

// attempts is the compare-and-set loop. It runs with sl's lock held, and
// keeps one rule: sl.state is either nil or the lobby exactly as stored at
// sl.version. Whatever a failed attempt did to a copy is dropped.
func (s *Service) attempts(ctx context.Context, id string, sl *slot, t txn) (o outcome) {
	fail := func(err error) outcome {
		sl.state = nil
		o.res, o.err = Result{}, err
		return o
	}
	for o.attempts = 1; o.attempts <= s.cfg.maxRetries; o.attempts++ {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		fresh := false
		if sl.state == nil {
			st, version, err := s.load(ctx, id)
			if err != nil {
				return fail(err)
			}
			sl.state, sl.version, fresh = st, version, true
		}
		work := sl.state
		if t.reclaim {
			// Reclaim refuses after the machine has run; judge a copy so
			// that a refusal leaves the committed state untouched.
			work = work.Clone()
		}
		o.at = s.clock.Now()
		if !t.at.IsZero() {
			o.at = t.at
		}
		cmd := t.cmd
		if t.hold {
			cmd.Session = s.live.session(o.at)
		}
		if s.live != nil {
			d, err := s.live.deadlines(ctx, work, o.at)
			if err != nil {
				return fail(err)
			}
			cmd = cmd.WithSessionDeadlines(d)
		}
		o.cmd = cmd.WithSessionDeadlines(nil)
		res, err := s.m.ApplyValidated(work, cmd, o.at)
		if err == nil && t.reclaim && len(work.Members) > 0 {
			err = &RefusalError{Err: ErrNotEmpty, Lobby: id, Detail: fmt.Sprintf("%d members", len(work.Members))}
		}
		if err != nil || !res.Changed {
			// Nothing to write, and work is unchanged (a refusal leaves
			// it exactly as it was). The judgement holds only if it was
			// made on the stored version; a remembered copy is checked.
			if !fresh {
				current, cerr := s.current(ctx, id, sl.version)
				if cerr != nil {
					return fail(cerr)
				}
				if !current {
					sl.state = nil
					o.attempts-- // not a lost race: a stale cache
					continue
				}
			}
			if err != nil {
				o.res, o.err = Result{}, err
				return o
			}
		} else {
			lw := s.hub.writing(id, sl.version+1)
			if s.live != nil {
				s.live.writing(id, sl.version+1)
			}
			werr := s.write(ctx, id, sl.version, work, res)
			if s.live != nil {
				s.live.wrote(id, werr == nil)
			}
			if werr != nil {
				s.hub.wrote(lw, false, 0, nil)
				sl.state = nil
				if !errors.Is(werr, store.ErrConflict) {
					s.log.Warn("lobby write failed", "lobby", id, "op", t.cmd.Op.String(), "err", werr)
					return fail(fmt.Errorf("lobby %q: write: %w", id, werr))
				}
				if err := s.contended(ctx, o.attempts); err != nil {
					return fail(err)
				}
				continue
			}
			sl.state, sl.version = work, sl.version+1
			s.hub.wrote(lw, true, sl.version, &rules.Effects{Events: res.Events, Ended: res.Ended})
			o.committed = true
			o.events = append(o.events, res.Events...)
			o.deadline = s.deadline(work)
		}
		if t.reclaim || (t.idle && s.idleOver(work, o.at)) {
			if err := s.delete(ctx, id, sl); err != nil {
				if errors.Is(err, store.ErrConflict) {
					// Another writer came between: judge the fresh lobby.
					// A catch-up this transaction committed stands.
					continue
				}
				return fail(err)
			}
		}
		if s.live != nil {
			s.live.committed(id, work, sl.version, cmd, res, s.clock.Now())
		}
		if t.view != nil {
			t.view(work, sl.version)
		}
		o.res = res
		return o
	}
	o.attempts = s.cfg.maxRetries
	return fail(fmt.Errorf("%w: lobby %q after %d attempts: %w", ErrContention, id, s.cfg.maxRetries, store.ErrConflict))
}

// deadline is when the stored lobby next needs the sweeper: its next
// heartbeat or reconnect deadline, or, for an empty lobby under an
// empty-lobby TTL, the moment it may be reclaimed (blocks do not hold it
// back: the tombstone keeps them).
func (s *Service) deadline(st *rules.State) time.Time {
	if s.cfg.emptyTTL > 0 && len(st.Members) == 0 {
		return st.Updated.Add(s.cfg.emptyTTL)
	}
	return st.NextDeadline()
}

// idleOver reports whether st is an empty lobby whose empty-lobby TTL is
// over at now.
func (s *Service) idleOver(st *rules.State, now time.Time) bool {
	return s.cfg.emptyTTL > 0 && len(st.Members) == 0 && !now.Before(s.deadline(st))
}

// delete removes an empty lobby's record, keeping a floor above every value
// it issued. The floor is also above the deleted version, so a process that
// read that version and writes against it conflicts and reloads. The
// tombstone keeps the lobby's last transition time, and its data (the
// record, blocks included) is kept at least until the latest block ends, so
// a lobby created again never runs earlier and refuses whom the deleted one
// still refused.
func (s *Service) delete(ctx context.Context, id string, sl *slot) error {
	st, version := sl.state, sl.version
	sl.state = nil
	err := s.st.Delete(ctx, store.Deletion{ID: id, Expected: version, Floor: max(version+1, st.Floor()), At: st.Updated, Keep: st.BlockedUntil()})
	if errors.Is(err, store.ErrNotFound) {
		return nil // no record: nothing to reclaim
	}
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("lobby %q: delete: %w", id, err)
	}
	return err
}

// contended is the pause between compare-and-set attempts: none after the
// first conflict, then a random moment so that the writes of two processes
// racing for one lobby interleave instead of one always arriving a round
// trip late.
func (s *Service) contended(ctx context.Context, attempt int) error {
	if attempt < 2 {
		return nil
	}
	if s.hooks != nil {
		return s.hooks.yield(ctx)
	}
	return contentionPause(ctx, attempt)
}

// load reads and decodes a lobby; a lobby without a record is a new empty
// lobby over what the store reports for the ID (see reborn).
func (s *Service) load(ctx context.Context, id string) (*rules.State, uint64, error) {
	rec, err := s.st.Load(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		st, err := reborn(id, rec)
		if err != nil {
			return nil, 0, err
		}
		return st, rec.Version, nil
	case err != nil:
		return nil, 0, fmt.Errorf("lobby %q: load: %w", id, err)
	}
	st, err := rules.DecodeState(rec.Data)
	if err != nil {
		return nil, 0, fmt.Errorf("lobby %q: %w", id, err)
	}
	if st.ID != id {
		return nil, 0, fmt.Errorf("%w: record of lobby %q holds lobby %q", ErrCorrupt, id, st.ID)
	}
	return st, rec.Version, nil
}

// reborn is the new empty lobby over rec, what Load reported with
// ErrNotFound: its counters start above the floor rec.Version, and its last
// transition time is the latest of rec.At and the tombstone's own, so time
// never runs backward for an ID. Over a tombstone (rec.Data, the deleted
// record) it starts with every block of the deleted lobby that has not
// ended by then; over the store-wide floor (no data) with none, since the
// store keeps a tombstone until its latest block has ended. Either way it
// starts unlocked and without overrides.
func reborn(id string, rec store.Record) (*rules.State, error) {
	var tomb *rules.State
	if rec.Data != nil {
		var err error
		if tomb, err = rules.DecodeState(rec.Data); err != nil {
			return nil, fmt.Errorf("lobby %q: tombstone: %w", id, err)
		}
	}
	return rules.Reborn(id, rec.Version, rec.At, tomb), nil
}

// current reports whether the store still holds version of lobby id.
func (s *Service) current(ctx context.Context, id string, version uint64) (bool, error) {
	rec, err := s.st.Load(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, fmt.Errorf("lobby %q: load: %w", id, err)
	}
	return rec.Version == version, nil
}

// contentionPause sleeps a random duration, growing with the attempt, up
// to 5 ms. It is real time, not lobby time: it only spreads out retries.
func contentionPause(ctx context.Context, attempt int) error {
	limit := min(time.Duration(1<<min(attempt, 10))*10*time.Microsecond, 5*time.Millisecond)
	t := time.NewTimer(rand.N(limit) + time.Microsecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// write stores st as the version after expected, with its next deadline
// and, in the lobby's effects log, the events and ended connections of res.
func (s *Service) write(ctx context.Context, id string, expected uint64, st *rules.State, res Result) error {
	if err := s.ensureConsumer(ctx); err != nil {
		return err
	}
	bp := bufPool.Get().(*[]byte)
	buf := rules.AppendState((*bp)[:0], st)
	n := len(buf)
	w := store.Write{ID: id, Expected: expected, Deadline: s.deadline(st), At: st.Updated}
	if s.live != nil {
		w.Sessions = st.Sessions()
	}
	if len(res.Events) > 0 || len(res.Ended) > 0 {
		buf = rules.AppendEffects(buf, &rules.Effects{Events: res.Events, Ended: res.Ended})
		w.Effects = buf[n:len(buf):len(buf)]
	}
	w.Data = buf[:n:n]
	var err error
	if s.batch != nil && s.hooks == nil {
		// (A simulation schedules goroutines itself; a write waiting
		// for another's batch would block outside its control.)
		err = s.batch.write(ctx, w)
	} else {
		err = s.st.Write(ctx, w)
	}
	if err != nil && !errors.Is(err, store.ErrConflict) {
		s.unregistered()
	}
	// Reuse the buffer only when the store is known to be done with it: a
	// store that gave up early (a cancelled context, a lost connection) may
	// still have the write queued in a pipelined client.
	if err == nil || errors.Is(err, store.ErrConflict) {
		*bp = buf
		bufPool.Put(bp)
	}
	return err
}

// committed runs after a commit, with the lobby's lock released: it logs
// the decisions and wakes the relay and the sweeper when they have new work.
func (s *Service) committed(id string, o outcome) {
	if len(o.events) > 0 {
		poke(s.relayPoke)
		if s.log.Enabled(context.Background(), slog.LevelInfo) {
			for _, ev := range o.events {
				s.log.Info("lobby transition",
					"lobby", id,
					"old_revision", ev.Revision-1,
					"revision", ev.Revision,
					"reason", string(ev.Reason),
					"player", s.Pseudonym(ev.Subject),
					"host", s.Pseudonym(ev.Host),
					"previous_host", s.Pseudonym(ev.PrevHost),
					"at", ev.At)
			}
		}
	}
	if d := o.deadline; !d.IsZero() {
		s.noteDeadline(d.UnixNano())
	}
}

// noteDeadline tells the sweeper of a committed deadline (Unix ns). A
// sleeping sweeper that would wake after it is woken now. An awake one is
// left to finish its pass: the deadline is kept for the sleep it plans next
// (waking it for every commit of a busy Service would make it sweep
// without pause, reading the store each time for nothing).
func (s *Service) noteDeadline(d int64) {
	wake := s.nextWakeNs.Load()
	if d >= wake {
		return
	}
	if wake != math.MaxInt64 {
		poke(s.sweepPoke)
		return
	}
	for {
		m := s.awakeMinNs.Load()
		if d >= m || s.awakeMinNs.CompareAndSwap(m, d) {
			break
		}
	}
	// The sweeper may have planned its sleep in the meantime without
	// seeing d; it stores its wake-up before it collects awakeMinNs, so
	// one of the two sees the other.
	if wake := s.nextWakeNs.Load(); wake != math.MaxInt64 && d < wake {
		poke(s.sweepPoke)
	}
}
