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
	"sync/atomic"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby/rules"

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
// Every entry point (the commands, Snapshot, Reclaim, the sweeper) runs the
// same transaction:
//
//  1. take the lobby's lock in this Service, waiting no longer than the
//     context allows;
//  2. use the copy of the lobby this Service last committed, or load it
//     (see WithCache), and read the clock;
//  3. apply the command with the Machine, catching up on due deadlines
//     first;
//  4. if the lobby changed, write it with its next deadline and its events
//     in one store.Write that expects the version it read; a judgement that
//     writes nothing (a refusal, a no-op) made on a remembered copy is
//     first checked against the stored version;
//  5. on a version conflict (another process or goroutine wrote first),
//     start again from 2 with the fresh lobby;
//  6. release the lock, then log the decision, wake the sweeper and relay,
//     and tell the Observer.
//
// A refused or no-op command writes nothing, and leaves nothing behind in
// memory either. A Service is safe for concurrent use; commands on one
// lobby from one Service are serialised in memory, and commands from
// several Services (processes) on one lobby are serialised by the store's
// compare-and-set.
type Service struct {
	st      store.Store
	m       *rules.Machine
	clock   clockwork.Clock
	cfg     config
	log     *slog.Logger
	lobbies *lobbyTable

	running    atomic.Bool
	sweepPoke  chan struct{}
	relayPoke  chan struct{}
	nextWakeNs atomic.Int64 // when the sweeper next wakes on its own; MaxInt64 while awake
	// awakeMinNs is the earliest deadline committed while the sweeper was
	// awake (MaxInt64: none); it plans its next sleep with it.
	awakeMinNs atomic.Int64

	// hub hands commits to this process's Watchers.
	hub *watchHub
	// batch groups concurrent writes on a store.BatchWriter; nil without
	// one (or with batching off).
	batch *groupCommit
	// registered: the relay's consumer is registered in the store; a
	// store error bumps regEpoch, and a registration that one overtook
	// does not count. lastRegNs is when the relay last asked for a fresh
	// registration.
	registered atomic.Bool
	regEpoch   atomic.Uint64
	lastRegNs  atomic.Int64
	// lastTrimNs is when a sweep last trimmed the effects log (Unix ns).
	lastTrimNs atomic.Int64

	// live keeps this Service's session and the heartbeat deadlines of
	// the connections it holds; nil on a store without sessions.
	live *liveness

	// advice measures returns and heartbeat gaps per client class
	// (WithClientClass); nil without it.
	advice *adviceBook

	// hooks are set only by this package's tests.
	hooks *testHooks
}

// testHooks let a deterministic simulation schedule the Service's
// goroutines: where a goroutine would block on a lobby's lock or pause
// between retries, it calls yield instead, and the simulation decides when
// it runs again.
type testHooks struct {
	yield func(ctx context.Context) error
}

// NewService returns a Service over st. Options are validated here: a nil
// store or a bad option gives an error wrapping ErrInvalidOption, a policy
// out of range one wrapping ErrInvalidPolicy.
func NewService(st store.Store, opts ...Option) (*Service, error) {
	if st == nil {
		return nil, errNilOption("store")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, errNilOption("option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	m, err := rules.NewMachine(cfg.policy)
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
		lobbies:   newLobbyTable(cfg.cache, cfg.cacheSize, cfg.cacheIdle),
		sweepPoke: make(chan struct{}, 1),
		relayPoke: make(chan struct{}, 1),
	}
	s.hub = newWatchHub(s, cfg.watchBuf)
	s.live = newLiveness(s)
	s.batch = newGroupCommit(st, cfg.batchSize, cfg.inFlight)
	if cfg.class != nil {
		s.advice = newAdviceBook(cfg.class, m.Policy().HeartbeatTTL)
	}
	s.nextWakeNs.Store(math.MaxInt64)
	s.awakeMinNs.Store(math.MaxInt64)
	return s, nil
}

// Policy returns the Service's policy.
func (s *Service) Policy() Policy { return s.m.Policy() }

// Join admits player to lobby id: a new member, a reconnecting member
// coming back, or one more connection (tab) of an online member. The
// result's Gen is the new connection's generation, which every later
// Heartbeat and Disconnect of that connection must name. Non-nil attrs
// replace the member's attributes (a tab with other attributes is an
// updated revision; with the same ones, or nil, a further tab makes no
// revision). Result.Ended lists connections the join superseded
// (MaxConnectionsPerPlayer) or that timed out during the catch-up: close
// their sockets. For a socket, Rooms.Join does this and the fan-out.
//
// Bad input comes back before the store is touched: ErrInvalidID (lobby or
// player), ErrInvalidAttrs. The rules refuse a join, committing nothing,
// with ErrLobbyFull (a new player beyond the member cap), ErrLocked (a new
// player while the lobby is locked) or ErrBlocked (a player kicked with a
// block still in force), each in a RefusalError; reconnecting members and
// further tabs of members are never refused for the cap or the lock. Store
// failures are as for Do.
func (s *Service) Join(ctx context.Context, id, player string, attrs map[string]string) (Result, error) {
	return s.Do(ctx, id, rules.Join(player, attrs))
}

// Disconnect reports that generation gen of player closed. A close for an
// ended generation is a harmless no-op reported as OutcomeStale.
func (s *Service) Disconnect(ctx context.Context, id, player string, gen uint64) (Result, error) {
	return s.Do(ctx, id, rules.Disconnect(player, gen))
}

// ExpireLease applies the deadline named by (player, gen) if it is due,
// for callers that run their own expiry jobs; Run does the same work
// without being asked. The outcome is OutcomeDone if this call applied it,
// OutcomeNotDue if it is still pending, OutcomeStale otherwise. observedAt
// is for diagnostics only. Calling it again is harmless.
func (s *Service) ExpireLease(ctx context.Context, id, player string, gen uint64, observedAt time.Time) (Result, error) {
	return s.Do(ctx, id, rules.ExpireLease(player, gen, observedAt))
}

// Leave removes player from lobby id now, with every connection and no
// grace. Leaving a lobby one is not in is a no-op (OutcomeNoop).
func (s *Service) Leave(ctx context.Context, id, player string) (Result, error) {
	return s.Do(ctx, id, rules.Leave(player))
}

// TransferHost makes to the host of lobby id, judged on the current state:
// ErrNotHost if actor does not host it now, ErrNotMember if to is not a
// member, ErrNotEligible if to may not host now; naming oneself is a no-op.
func (s *Service) TransferHost(ctx context.Context, id, actor, to string) (Result, error) {
	return s.Do(ctx, id, rules.TransferHost(actor, to))
}

// Update replaces player's attributes in lobby id (nil or empty clears
// them) without touching its connections or its reconnect deadline: a
// server-side change such as a role or a ready flag. Storing the set
// already stored is a no-op; otherwise it is a visible change (reason
// updated) and eligibility is judged again (a current host keeps the role,
// an empty host seat is filled). A player that is not a member gets
// ErrNotMember.
func (s *Service) Update(ctx context.Context, id, player string, attrs map[string]string) (Result, error) {
	return s.Do(ctx, id, rules.Update(player, attrs))
}

// Kick removes target from lobby id now, with every connection and no
// grace (reason kicked). actor is the player asking, who must be the
// current host (ErrNotHost otherwise; a host in its grace may kick), or ""
// for the server itself. A target that is not a member gets ErrNotMember,
// so a replayed kick is refused. A positive block refuses the target's
// joins until the kick's time plus block (ErrBlocked), even if the lobby
// empties or is reclaimed; 0 blocks nothing and a later kick replaces the
// block. A kick that would add a block to a lobby already holding the
// policy's MaxBlocks blocks in force gets ErrTooManyBlocks (checked after
// the actor and the target). A host kicking itself leaves (reason left, no
// block).
func (s *Service) Kick(ctx context.Context, id, actor, target string, block time.Duration) (Result, error) {
	return s.Do(ctx, id, rules.Kick(actor, target, block))
}

// Lock closes lobby id to new players: a new player gets ErrLocked, while
// reconnecting members and further tabs of members are still admitted.
// actor must be the current host (ErrNotHost otherwise; a host in its grace
// may lock) or [ServerActor]. Locking a locked lobby is a no-op. A host's
// lock ends with the transition that removes the last member; the server's
// stays until it is unlocked.
func (s *Service) Lock(ctx context.Context, id, actor string) (Result, error) {
	return s.Do(ctx, id, rules.Lock(actor))
}

// Unlock opens lobby id to new players again. actor is as for Lock;
// unlocking an unlocked lobby is a no-op.
func (s *Service) Unlock(ctx context.Context, id, actor string) (Result, error) {
	return s.Do(ctx, id, rules.Unlock(actor))
}

// Configure replaces lobby id's overrides of the Service's policy (grace,
// heartbeat TTL, member cap, tab cap, bound on blocks; the zero Overrides
// goes back to the policy), stored with the lobby so every process applies
// them. They apply to deadlines set afterwards; a lower cap evicts nobody
// and a lower bound on blocks lifts no block. Overrides that
// make an invalid policy get ErrInvalidPolicy.
func (s *Service) Configure(ctx context.Context, id string, o Overrides) (Result, error) {
	return s.Do(ctx, id, rules.Configure(o))
}

// Snapshot is the current view of a lobby, as clients see it. Its JSON form
// uses the field names in the tags, with members as MemberView encodes
// them (see docs/rules.md).
type Snapshot struct {
	Lobby    string `json:"lobby"`
	Revision uint64 `json:"revision"`
	// Term is the host term (see State.Term): fence host-only actions in
	// other systems with it.
	Term uint64 `json:"term"`
	// Host is "" when nobody hosts.
	Host string `json:"host"`
	// Locked: new players are refused (see Lock).
	Locked bool `json:"locked"`
	// Overrides are the lobby's own settings over the Service's policy.
	Overrides Overrides `json:"overrides,omitzero"`
	// Members are in join-sequence order, each with its reconnect
	// deadline while it is reconnecting.
	Members []MemberView `json:"members"`
}

// Snapshot returns the lobby's current view. Deadlines that are overdue are
// committed first, as a sweep would, so the snapshot never shows a revision
// that is not stored. A lobby never written is an empty lobby at revision 0
// (or at its floor, after Reclaim).
func (s *Service) Snapshot(ctx context.Context, id string) (Snapshot, error) {
	var snap Snapshot
	_, err := s.transact(ctx, id, txn{cmd: rules.Tick(), view: func(st *rules.State, _ uint64) {
		snap = snapshotOf(st)
	}})
	return snap, err
}

func snapshotOf(st *rules.State) Snapshot {
	members := st.View()
	if members == nil {
		members = []MemberView{}
	}
	return Snapshot{Lobby: st.ID, Revision: st.Revision, Term: st.Term, Host: st.Host, Locked: st.Locked, Overrides: st.Overrides, Members: members}
}

// Reclaim deletes an empty lobby's record from the store, keeping only a
// floor and the store's tombstone of the empty lobby, so that a lobby
// created again under the same ID continues above every revision, join
// sequence and generation issued before, never runs at an earlier time
// than the last transition before it, and starts with every kick's block
// that has not ended by then (the tombstone is kept until the latest block
// ends). It starts unlocked and without overrides. Due deadlines are
// applied first and, if they leave the lobby empty, committed before the
// delete. It returns ErrNotEmpty if the lobby still has members after
// them, and then commits nothing at all, not even the catch-up; blocks in
// force do not hold it back. A lobby without a record is already
// reclaimed: nil. The lobby's effects log is not affected: its entries
// stay readable for the store's retention.
func (s *Service) Reclaim(ctx context.Context, id string) error {
	_, err := s.transact(ctx, id, txn{cmd: rules.Tick(), reclaim: true})
	return err
}

// Do applies cmd to lobby id; the named methods (Join, Heartbeat, ...) are
// shorthands for it. Input errors (ErrInvalidID, ErrInvalidAttrs,
// ErrInvalidCommand) come back before the store is touched; overrides that
// make an invalid policy get ErrInvalidPolicy; refusals (ErrLobbyFull,
// ErrBlocked, ErrLocked, ErrNotHost, ErrNotMember, ErrNotEligible,
// ErrTooManyBlocks), each in a RefusalError (see IsRefusal), after the lobby
// was read, with nothing written; a record that does not decode gives
// ErrCorrupt; losing the compare-and-set on every attempt gives
// ErrContention; store failures come back wrapped (errors.Is works with the
// store sentinels and context errors). While another command of this
// Service holds the lobby, Do waits for it, no longer than ctx allows.
func (s *Service) Do(ctx context.Context, id string, cmd rules.Command) (Result, error) {
	return s.transact(ctx, id, txn{cmd: cmd})
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
