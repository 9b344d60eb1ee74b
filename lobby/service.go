package lobby

import (
	"context"
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/store"
)

// ErrContention is returned (wrapped, together with store.ErrConflict) when
// a command lost the compare-and-set race on every attempt.
var ErrContention = errors.New("lobby: too much contention")

// ErrRunning is returned by Run when the Service is already running.
var ErrRunning = errors.New("lobby: service already running")

// Service is the entry point for a game server: it applies commands to
// lobbies kept in a store.Store, one atomic compare-and-set per transition,
// and its Run loop fires expiries at their deadlines and relays committed
// events to a Publisher.
//
// Each command:
//
//  1. loads the lobby (or reuses the copy this Service last wrote, see
//     WithoutCache) and reads the clock;
//  2. applies the command with the Machine, catching up on due deadlines
//     first;
//  3. if the lobby changed, writes it with its next deadline and its events
//     in one store.Write that expects the version it read;
//  4. on a version conflict (another process or goroutine wrote first),
//     starts again from 1 with the fresh lobby.
//
// A refused or no-op command writes nothing. A Service is safe for
// concurrent use; commands on one lobby from one Service are serialised in
// memory, and commands from several Services (processes) on one lobby are
// serialised by the store's compare-and-set.
type Service struct {
	st    store.Store
	m     *Machine
	clock clockwork.Clock
	cfg   config
	log   *slog.Logger

	cache sync.Map // lobby ID → *entry

	running    atomic.Bool
	sweepPoke  chan struct{}
	relayPoke  chan struct{}
	nextWakeNs atomic.Int64 // when the sweeper next wakes on its own; MaxInt64 while awake
}

// entry is one lobby as this Service last saw it. mu serialises the
// Service's commands on the lobby.
type entry struct {
	mu      sync.Mutex
	state   *State // nil: load before use
	version uint64
}

// NewService returns a Service over st. Options are validated here; the
// policy error wraps ErrInvalidPolicy.
func NewService(st store.Store, opts ...Option) (*Service, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidPolicy)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	m, err := NewMachine(cfg.policy)
	if err != nil {
		return nil, err
	}
	if cfg.pseudonym == nil {
		cfg.pseudonym = make([]byte, 32)
		if _, err := crand.Read(cfg.pseudonym); err != nil {
			return nil, fmt.Errorf("lobby: pseudonym key: %w", err)
		}
	}
	s := &Service{
		st:        st,
		m:         m,
		clock:     cfg.clock,
		cfg:       cfg,
		log:       cfg.logger,
		sweepPoke: make(chan struct{}, 1),
		relayPoke: make(chan struct{}, 1),
	}
	s.nextWakeNs.Store(math.MaxInt64)
	return s, nil
}

// Policy returns the Service's policy.
func (s *Service) Policy() Policy { return s.m.p }

// Join admits player to lobby id: a new member, a reconnecting member
// coming back, or one more connection (tab) of an online member. The
// result's Gen is the new connection's generation, which every later
// Heartbeat and Disconnect of that connection must name. Non-nil attrs
// replace the member's attributes. A new player joining a full lobby gets
// ErrLobbyFull. Result.Ended lists connections the join superseded
// (MaxConnectionsPerPlayer) or that timed out during the catch-up: close
// their sockets.
func (s *Service) Join(ctx context.Context, id, player string, attrs map[string]string) (Result, error) {
	return s.Do(ctx, id, Join(player, attrs))
}

// Heartbeat keeps generation gen of player alive. A generation that has
// ended (closed, timed out, superseded, or never issued) is reported as
// OutcomeStale: the transport should close that socket and have the client
// join again.
func (s *Service) Heartbeat(ctx context.Context, id, player string, gen uint64) (Result, error) {
	return s.Do(ctx, id, Heartbeat(player, gen))
}

// Disconnect reports that generation gen of player closed. A close for an
// ended generation is a harmless no-op reported as OutcomeStale.
func (s *Service) Disconnect(ctx context.Context, id, player string, gen uint64) (Result, error) {
	return s.Do(ctx, id, Disconnect(player, gen))
}

// ExpireLease applies the deadline named by (player, gen) if it is due,
// for callers that run their own expiry jobs; Run does the same work
// without being asked. The outcome is OutcomeDone if this call applied it,
// OutcomeNotDue if it is still pending, OutcomeStale otherwise. observedAt
// is for diagnostics only. Calling it again is harmless.
func (s *Service) ExpireLease(ctx context.Context, id, player string, gen uint64, observedAt time.Time) (Result, error) {
	return s.Do(ctx, id, ExpireLease(player, gen, observedAt))
}

// Leave removes player from lobby id now, with every connection and no
// grace. Leaving a lobby one is not in is a no-op (OutcomeNoop).
func (s *Service) Leave(ctx context.Context, id, player string) (Result, error) {
	return s.Do(ctx, id, Leave(player))
}

// TransferHost makes to the host of lobby id, judged on the current state:
// ErrNotHost if actor does not host it now, ErrNotMember if to is not a
// member, ErrNotEligible if to may not host now; naming oneself is a no-op.
func (s *Service) TransferHost(ctx context.Context, id, actor, to string) (Result, error) {
	return s.Do(ctx, id, TransferHost(actor, to))
}

// Snapshot is the current view of a lobby, as clients see it.
type Snapshot struct {
	Lobby    string
	Revision uint64
	// Host is "" when nobody hosts.
	Host string
	// Members are in join-sequence order.
	Members []MemberView
}

// Snapshot returns the lobby's current view. Deadlines that are overdue are
// committed first, as a sweep would, so the snapshot never shows a revision
// that is not stored. A lobby never written is an empty lobby at revision 0
// (or at its floor, after Reclaim).
func (s *Service) Snapshot(ctx context.Context, id string) (Snapshot, error) {
	var snap Snapshot
	_, err := s.run(ctx, id, Tick(), func(st *State) {
		snap = Snapshot{Lobby: st.ID, Revision: st.Revision, Host: st.Host, Members: st.View()}
	})
	return snap, err
}

// Reclaim deletes an empty lobby's record from the store, keeping only a
// floor so that a lobby created again under the same ID continues above
// every revision, join sequence and generation issued before. Due deadlines
// are applied (and committed) first. It returns ErrNotEmpty if the lobby
// still has members, and nil for a lobby without a record. Pending outbox
// events are not affected.
func (s *Service) Reclaim(ctx context.Context, id string) error {
	if err := ValidateID(id); err != nil {
		return fmt.Errorf("lobby ID: %w", err)
	}
	e := s.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	defer s.cache.CompareAndDelete(id, e)
	for attempt := 1; attempt <= s.cfg.maxRetries; attempt++ {
		e.state = nil
		if err := ctx.Err(); err != nil {
			return err
		}
		st, version, exists, err := s.load(ctx, id)
		if err != nil || !exists {
			return err
		}
		e.state, e.version = st, version
		res, err := s.m.Apply(st, Tick(), s.clock.Now())
		if err != nil {
			return err
		}
		if len(st.Members) > 0 {
			return fmt.Errorf("%w: lobby %q has %d members", ErrNotEmpty, id, len(st.Members))
		}
		if res.Changed {
			if err := s.write(ctx, id, e, res); err != nil {
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				return fmt.Errorf("lobby %q: write: %w", id, err)
			}
			e.version++
			s.committed(id, st, res)
		}
		// The floor is above the deleted version, so a process that read
		// that version and writes against it conflicts and reloads.
		err = s.st.Delete(ctx, id, e.version, max(e.version+1, st.Floor()))
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		e.state = nil
		if err != nil {
			return fmt.Errorf("lobby %q: delete: %w", id, err)
		}
		return nil
	}
	e.state = nil
	return fmt.Errorf("%w: reclaim lobby %q: %w", ErrContention, id, store.ErrConflict)
}

// Do applies cmd to lobby id; the named methods (Join, Heartbeat, ...) are
// shorthands for it. Input errors (ErrInvalidID, ErrInvalidAttrs,
// ErrInvalidCommand) come back before the store is touched; refusals
// (ErrLobbyFull, ErrNotHost, ErrNotMember, ErrNotEligible) after the lobby
// was read, with nothing written; a record that does not decode gives
// ErrCorrupt; store failures come back wrapped (errors.Is works with the
// store sentinels and context errors).
func (s *Service) Do(ctx context.Context, id string, cmd Command) (Result, error) {
	return s.run(ctx, id, cmd, nil)
}

func (s *Service) entry(id string) *entry {
	if !s.cfg.cache {
		return &entry{}
	}
	if e, ok := s.cache.Load(id); ok {
		return e.(*entry)
	}
	e, _ := s.cache.LoadOrStore(id, &entry{})
	return e.(*entry)
}

// run is the compare-and-set loop. peek, if set, sees the final state
// before the entry is unlocked.
func (s *Service) run(ctx context.Context, id string, cmd Command, peek func(*State)) (Result, error) {
	if err := ValidateID(id); err != nil {
		return Result{}, fmt.Errorf("lobby ID: %w", err)
	}
	if err := checkCommand(cmd); err != nil {
		return Result{}, err
	}
	e := s.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	obs := Observation{Lobby: id, Command: cmd}
	res, err := s.attempt(ctx, id, e, cmd, &obs)
	if err == nil && peek != nil {
		peek(e.state)
	}
	if e.state == nil || len(e.state.Members) == 0 {
		// Do not keep lobbies that are unknown or empty in memory.
		s.cache.CompareAndDelete(id, e)
	}
	obs.Result, obs.Err = res, err
	if s.cfg.observer != nil {
		s.cfg.observer.Observe(obs)
	}
	return res, err
}

func (s *Service) attempt(ctx context.Context, id string, e *entry, cmd Command, obs *Observation) (Result, error) {
	for attempt := 1; attempt <= s.cfg.maxRetries; attempt++ {
		obs.Attempts = attempt
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		fresh := false
		if e.state == nil {
			st, version, _, err := s.load(ctx, id)
			if err != nil {
				return Result{}, err
			}
			e.state, e.version, fresh = st, version, true
		}
		res, err := s.m.Apply(e.state, cmd, s.clock.Now())
		if err != nil || !res.Changed {
			// Nothing to write. The judgement holds only if it was made on
			// the stored version; a remembered copy must be checked.
			if !fresh {
				current, verr := s.current(ctx, id, e.version)
				if verr != nil {
					e.state = nil
					return Result{}, verr
				}
				if !current {
					e.state = nil
					continue
				}
			}
			return res, err
		}
		werr := s.write(ctx, id, e, res)
		if werr == nil {
			e.version++
			obs.Committed = true
			s.committed(id, e.state, res)
			return res, nil
		}
		// e.state was changed in place but not stored: forget it.
		e.state = nil
		if !errors.Is(werr, store.ErrConflict) {
			s.log.Warn("lobby write failed", "lobby", id, "op", cmd.Op.String(), "err", werr)
			return Result{}, fmt.Errorf("lobby %q: write: %w", id, werr)
		}
		if attempt > 1 {
			// Another process keeps winning this lobby: step aside for
			// a random moment so that its writes and ours interleave
			// instead of ours always arriving one round trip late.
			if err := contentionPause(ctx, attempt); err != nil {
				return Result{}, err
			}
		}
	}
	return Result{}, fmt.Errorf("%w: lobby %q after %d attempts: %w", ErrContention, id, s.cfg.maxRetries, store.ErrConflict)
}

// load reads and decodes a lobby; a lobby without a record is a new empty
// lobby above the store's floor (exists is false).
func (s *Service) load(ctx context.Context, id string) (st *State, version uint64, exists bool, err error) {
	rec, err := s.st.Load(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return NewState(id, rec.Version), rec.Version, false, nil
	case err != nil:
		return nil, 0, false, fmt.Errorf("lobby %q: load: %w", id, err)
	}
	st, err = DecodeState(rec.Data)
	if err != nil {
		return nil, 0, false, fmt.Errorf("lobby %q: %w", id, err)
	}
	if st.ID != id {
		return nil, 0, false, fmt.Errorf("%w: record of lobby %q holds lobby %q", ErrCorrupt, id, st.ID)
	}
	return st, rec.Version, true, nil
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

func (s *Service) write(ctx context.Context, id string, e *entry, res Result) error {
	bp := bufPool.Get().(*[]byte)
	data := AppendState((*bp)[:0], e.state)
	w := store.Write{ID: id, Expected: e.version, Data: data, Deadline: e.state.NextDeadline()}
	if len(res.Events) > 0 {
		w.Events = make([]store.Event, len(res.Events))
		for i := range res.Events {
			w.Events[i] = store.Event{Lobby: id, Seq: res.Events[i].Revision, Data: AppendEvent(nil, &res.Events[i])}
		}
	}
	err := s.st.Write(ctx, w)
	*bp = data
	bufPool.Put(bp)
	return err
}

// committed runs after a successful write: logs, and wakes the relay and
// the sweeper when they have new work.
func (s *Service) committed(id string, st *State, res Result) {
	if len(res.Events) > 0 {
		select {
		case s.relayPoke <- struct{}{}:
		default:
		}
		if s.log.Enabled(context.Background(), slog.LevelInfo) {
			for _, ev := range res.Events {
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
	if d := st.NextDeadline(); !d.IsZero() && d.UnixNano() < s.nextWakeNs.Load() {
		select {
		case s.sweepPoke <- struct{}{}:
		default:
		}
	}
}

// Pseudonym returns the stable pseudonym this Service uses for player in
// logs: a keyed hash, short and not reversible without the key. It returns
// "" for "".
func (s *Service) Pseudonym(player string) string {
	if player == "" {
		return ""
	}
	mac := hmac.New(sha256.New, s.cfg.pseudonym)
	mac.Write([]byte(player))
	return hex.EncodeToString(mac.Sum(nil)[:8])
}
