package lobby

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby/rules"

	"github.com/jonboulle/clockwork"
)

// Publisher receives committed events from [Service.Run]'s relay.
//
// Events arrive at least once (a failed or interrupted Publish is retried
// with the same events and possibly more), in revision order per lobby.
// Consumers drop duplicates by revision (see package revision). Publish
// should return promptly; while it fails, events stay unpublished in the
// store's effects log (for as long as the store's retention keeps them) and
// the relay retries with backoff.
type Publisher interface {
	Publish(ctx context.Context, events []Event) error
}

// PublisherFunc adapts a function to a Publisher.
type PublisherFunc func(ctx context.Context, events []Event) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, events []Event) error { return f(ctx, events) }

// Observation describes one command a Service handled, for metrics.
type Observation struct {
	Lobby   string
	Command rules.Command
	// Result is what the command did; zero when Err is set.
	Result Result
	// Err is the command's error (a refusal, a store failure), if any.
	Err error
	// Committed reports whether a new version of the lobby was stored.
	Committed bool
	// Attempts is the number of compare-and-set attempts (1 without
	// contention).
	Attempts int
	// At is the clock reading the final attempt judged the command at
	// (the Machine raises it to the lobby's last transition time if that
	// is later); zero if the command never reached the lobby.
	At time.Time
	// Duration is how long the command took, from its call to its
	// outcome, waiting for the lobby included, on the Service's clock.
	Duration time.Duration
}

// Observer is told about every command a Service handles, after the
// outcome is final. It is called synchronously on the command's goroutine,
// after the lobby is released (so it may call the Service, even about the
// same lobby), and must be fast and safe for concurrent use; [Counters] is a
// ready-made one.
//
// ctx is the command's context, so a tracing Observer can attach its span
// to the caller's trace; it may be done already (a command that failed on
// its context is observed too).
type Observer interface {
	Observe(ctx context.Context, o Observation)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(ctx context.Context, o Observation)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, o Observation) { f(ctx, o) }

// Observers returns an Observer that tells each of obs in turn.
func Observers(obs ...Observer) Observer {
	return ObserverFunc(func(ctx context.Context, o Observation) {
		for _, ob := range obs {
			ob.Observe(ctx, o)
		}
	})
}

// Option configures a Service.
type Option func(*config) error

type config struct {
	policy     Policy
	clock      clockwork.Clock
	publisher  Publisher
	logger     *slog.Logger
	observer   Observer
	pseudonym  []byte
	sweepBatch int
	relayBatch int
	resync     time.Duration
	maxRetries int
	claimHold  time.Duration
	cache      bool
	cacheSize  int
	cacheIdle  time.Duration
	class      func(lobby, player string) string
	relayName  string
	relayHold  time.Duration
	emptyTTL   time.Duration
	watchBuf   int
	watchPoll  time.Duration
	batchSize  int
	inFlight   int
	sweepers   int
	sessionTTL time.Duration
	sessionSet bool
}

func errNilOption(what string) error { return fmt.Errorf("%w: nil %s", ErrInvalidOption, what) }

func defaultConfig() config {
	return config{
		policy:     DefaultPolicy(),
		clock:      clockwork.NewRealClock(),
		logger:     slog.New(slog.DiscardHandler),
		sweepBatch: 256,
		relayBatch: 256,
		resync:     time.Minute,
		maxRetries: 32,
		claimHold:  5 * time.Second,
		cache:      true,
		cacheSize:  65536,
		cacheIdle:  5 * time.Minute,
		relayName:  "lobbyhost-relay",
		relayHold:  5 * time.Second,
		watchBuf:   DefaultWatchBuffer,
		watchPoll:  time.Second,
		batchSize:  128,
		inFlight:   4,
		sweepers:   256,
	}
}

// WithPolicy sets the lobby policy (default [DefaultPolicy]). It is
// validated by NewService.
func WithPolicy(p Policy) Option {
	return func(c *config) error { c.policy = p; return nil }
}

// WithClock sets the clock every transition reads (default: the real
// clock). Tests pass a clockwork.FakeClock. Every process sharing a store
// should read the same clock source; see the package documentation on time.
func WithClock(clock clockwork.Clock) Option {
	return func(c *config) error {
		if clock == nil {
			return errNilOption("clock")
		}
		c.clock = clock
		return nil
	}
}

// WithPublisher sets where Run's relay delivers committed events. The relay
// is a durable consumer of the store's effects log (see WithRelayName): it
// publishes every event at least once, in revision order per lobby, from
// whichever process committed it. The Service registers the consumer before
// its first write, so events committed from then on are delivered even if
// Run starts later. Without a publisher there is no relay.
func WithPublisher(p Publisher) Option {
	return func(c *config) error {
		if p == nil {
			return errNilOption("publisher")
		}
		c.publisher = p
		return nil
	}
}

// WithLogger sets the structured decision log (default: discard). Every
// committed visible change is logged at Info with the lobby, the old and
// new revision, the reason and the player's pseudonym; store failures and
// retries at Warn. Player IDs are never logged in clear: see
// WithPseudonymKey.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errNilOption("logger")
		}
		c.logger = l
		return nil
	}
}

// WithPseudonymKey sets the key of the keyed hash that turns player IDs
// into pseudonyms in logs. With the same key, a player has the same
// pseudonym across processes and restarts; without one, a random key is
// drawn per Service. The key must be at least 16 bytes.
func WithPseudonymKey(key []byte) Option {
	return func(c *config) error {
		if len(key) < 16 {
			return fmt.Errorf("%w: pseudonym key shorter than 16 bytes", ErrInvalidOption)
		}
		c.pseudonym = append([]byte(nil), key...)
		return nil
	}
}

// WithObserver registers an observer of every command (for metrics).
func WithObserver(o Observer) Option {
	return func(c *config) error {
		if o == nil {
			return errNilOption("observer")
		}
		c.observer = o
		return nil
	}
}

// WithResync sets the longest time Run's sweeper sleeps without looking at
// the store's due index (default one minute). The sweeper normally wakes at
// the next deadline it knows of; the resync catches deadlines written by
// other processes into a store without change notifications. It is a safety
// net, not a polling interval.
func WithResync(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: resync must be positive", ErrInvalidOption)
		}
		c.resync = d
		return nil
	}
}

// WithoutCache makes every command load the lobby from the store. By
// default a Service keeps the lobbies it last wrote decoded in memory and
// writes against their known version, falling back to a load when another
// process wrote in between (the compare-and-set detects it). The cache never
// changes an outcome, only how many store reads a command costs; disable it
// to trade speed for memory.
func WithoutCache() Option {
	return func(c *config) error { c.cache = false; return nil }
}

// WithCache bounds the cache of decoded lobbies (default: 65,536 lobbies,
// dropped after 5 minutes unused). The least recently used lobby goes first
// when the bound is reached; the bound is approximate (kept per shard of
// the table). Unknown and empty lobbies are never cached. maxLobbies and
// idle must be positive.
func WithCache(maxLobbies int, idle time.Duration) Option {
	return func(c *config) error {
		if maxLobbies <= 0 || idle <= 0 {
			return fmt.Errorf("%w: cache bound %d lobbies, idle %v: both must be positive", ErrInvalidOption, maxLobbies, idle)
		}
		c.cache, c.cacheSize, c.cacheIdle = true, maxLobbies, idle
		return nil
	}
}

// WithRelayName sets the name of the relay's durable consumer in the store
// (default "lobbyhost-relay"). Processes that share a name share the work:
// each lobby's events are published by one of them at a time. Give two
// publishers that must each see every event different names.
func WithRelayName(name string) Option {
	return func(c *config) error {
		if err := ValidateID(name); err != nil {
			return fmt.Errorf("%w: relay name: %w", ErrInvalidOption, err)
		}
		c.relayName = name
		return nil
	}
}

// WithWatchBuffer sets how many updates a Watcher holds for a reader that
// falls behind before it drops them and offers a snapshot instead (default
// DefaultWatchBuffer). It must be positive.
func WithWatchBuffer(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("%w: watch buffer %d must be positive", ErrInvalidOption, n)
		}
		c.watchBuf = n
		return nil
	}
}

// WithWatchPoll sets how often Run looks at the log heads of watched lobbies
// when the store has no change notifications (no store.Notifier); with
// notifications it never polls. Default one second; it must be positive.
func WithWatchPoll(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: watch poll must be positive", ErrInvalidOption)
		}
		c.watchPoll = d
		return nil
	}
}

// WithEmptyLobbyTTL makes the sweeper reclaim a lobby once it has been
// empty for d (as Reclaim does: its record goes, its floor stays, so a lobby
// created again under the ID continues above every number issued before,
// and the blocks still in force stay in the tombstone until they end).
// Without this option (the default) empty lobbies stay until
// Reclaim is called. Only lobbies written while the option is set carry the
// deadline that wakes the sweeper. d must be positive.
func WithEmptyLobbyTTL(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: empty-lobby TTL must be positive", ErrInvalidOption)
		}
		c.emptyTTL = d
		return nil
	}
}

// WithRelayHold sets how long the relay's claim on a lobby's unpublished
// effects lasts (default 5 s): while it lasts, processes sharing the relay
// name leave the lobby to the claimer; if the claimer dies, another takes
// the lobby over after it. A Publish slower than the hold may see the same
// events published twice (delivery is at least once). It must be positive.
func WithRelayHold(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: relay hold must be positive", ErrInvalidOption)
		}
		c.relayHold = d
		return nil
	}
}

// WithClaimHold sets how long a sweeper's claim on due lobbies lasts in a
// store with claims (store.Claimer; default 5 s): other processes' sweepers
// leave those lobbies to it meanwhile, and take them over when it lapses if
// the claimer died before applying them. A shorter hold lets a survivor
// apply a dead process's due expiries sooner; a pass that takes longer than
// the hold may see two sweepers race for a lobby, which compare-and-set
// keeps correct. It must be positive.
func WithClaimHold(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: claim hold must be positive", ErrInvalidOption)
		}
		c.claimHold = d
		return nil
	}
}

// WithWriteBatch sets how a Service on a store that can batch writes
// (store.BatchWriter) groups them: up to inFlight writes travel to the
// store at once, each alone; a write that finds them all travelling waits
// for the next free one and goes with every write queued by then, at most
// size per batch. Each write in a batch is still its own compare-and-set.
// Defaults: size 128, inFlight 4. A size of 1 turns batching off (every
// write goes alone, as on a store that cannot batch). Both must be
// positive.
func WithWriteBatch(size, inFlight int) Option {
	return func(c *config) error {
		if size < 1 || inFlight < 1 {
			return fmt.Errorf("%w: write batch size and writes in flight must be positive", ErrInvalidOption)
		}
		c.batchSize, c.inFlight = size, inFlight
		return nil
	}
}

// WithSweepConcurrency sets how many due lobbies a sweep advances at once
// (default 256: every lobby of a page of due lobbies). Lobbies are
// independent, so the outcome of a sweep does not depend on it; on a store
// a round trip away it is what lets a burst of expiries commit in a few
// round trips (with store.BatchWriter, a few batches) instead of one after
// another. 1 advances them one by one, in (deadline, lobby ID) order. It
// must be positive.
func WithSweepConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: sweep concurrency must be positive", ErrInvalidOption)
		}
		c.sweepers = n
		return nil
	}
}

// WithSessionTTL sets the TTL of the session this Service opens on a store
// with sessions (store.Sessions): Run renews it about every third of d,
// and if the process dies or cannot reach the store, its connections end
// as of its last renewal plus d. The default is the policy's heartbeat TTL
// (DefaultSessionTTL if that is zero). 0 opens no session: every
// connection of this Service then stores its heartbeat deadline, one
// store write per heartbeat, as on a store without sessions; the Service
// still judges other processes' session-held connections. Negative
// durations are invalid.
func WithSessionTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: negative session TTL %v", ErrInvalidOption, d)
		}
		c.sessionTTL, c.sessionSet = d, true
		return nil
	}
}
