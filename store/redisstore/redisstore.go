// Package redisstore keeps lobbyhost's lobbies in Redis: a [store.Store]
// that several server processes can share, with the optional
// [store.Claimer], [store.Notifier], [store.BatchWriter] and
// [store.Sessions] capabilities. A lobby's place in the session index is
// written by the same script as its record, in the lobby's slot; session
// records live in shard 0 (see docs/redis.md, "Sessions across slots").
//
// It talks to Redis through a [rueidis.Client] the caller creates, owns and
// closes; a standalone server, a Sentinel-managed primary and a Redis
// Cluster all work. Every change (Write, Delete, Claim, TrimLog, ClaimLog,
// CommitLog) is one Lua script per shard run with EVALSHA, so a commit is
// one atomic server-side step and one round trip; Load and ReadLog are one
// read-only script each, LogHeads one pipelined round trip. WriteBatch
// pipelines many write scripts in one round trip, each still its own
// compare-and-set.
//
// # Layout
//
// Every key starts with "{prefix:k}", the hash tag of shard k. A lobby
// belongs to one shard (a hash of its ID modulo the shard count), and a shard
// holds its lobbies' records and effects logs, one deadline index, one age
// index of log entries, its floor and its consumers' cursors and queues, so
// every script touches one Cluster slot. Calls that look at every shard
// (Due, the first step of Claim, TrimLog and ClaimLog, RegisterConsumer)
// pipeline one command per shard and merge. The shard count defaults to 1,
// which puts everything in one slot; a Cluster needs more to spread the load
// (see WithShards). The prefix and the shard count must stay the same for
// the life of the data. docs/redis.md describes every key.
//
// # Guarantees and limits
//
//   - Versions, floors, due order, log positions, retention and consumer
//     cursors follow package store, with deadlines and entry times exact to
//     the nanosecond and positions exact up to the largest uint64.
//   - Retention defaults to DefaultRetentionEntries entries per lobby and
//     DefaultRetentionAge (see WithRetention); the age bound is applied only
//     by TrimLog, which the caller runs.
//   - A folded floor is raised atomically in its own shard and copied to
//     the other shards right after (one more round trip); see Delete.
//   - It needs Redis 7.0 or later.
//   - The data is only as durable as the Redis configuration: a server that
//     restarts without persistence comes back empty, forgetting the floors
//     that keep versions from repeating. See docs/redis.md.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/store"
)

// Compile-time checks that Store offers the contract and the optional
// capabilities.
var (
	_ store.Store       = (*Store)(nil)
	_ store.Claimer     = (*Store)(nil)
	_ store.Notifier    = (*Store)(nil)
	_ store.BatchWriter = (*Store)(nil)
	_ store.Sessions    = (*Store)(nil)
)

// DefaultPrefix is the key prefix of a Store built without WithPrefix.
const DefaultPrefix = "lobbyhost"

// MaxShards is the largest shard count: a Redis Cluster has 16384 slots.
const MaxShards = 16384

// ErrCorrupt reports a key whose contents this package did not write (or
// that another version of it wrote differently). Nothing was written.
var ErrCorrupt = errors.New("redisstore: corrupt data")

// Default retention of a Store built without WithRetention: the newest
// DefaultRetentionEntries entries of each lobby, each for at most
// DefaultRetentionAge (the latter enforced by TrimLog).
const (
	DefaultRetentionEntries = 1024
	DefaultRetentionAge     = 10 * time.Minute
)

// Store is a store.Store on Redis. Build it with New; the zero value is not
// usable. It is safe for concurrent use by any number of goroutines and
// processes that use the same prefix and shard count.
type Store struct {
	c         rueidis.Client
	prefix    string
	shards    []shard
	channel   string
	retention store.Retention

	load, write, del, claim                  *script
	readLog, head, trim, claimLog, commitLog *script
	raiseFloor                               *script

	openSession, renewSession, endSession *script
	sessionDeadlines, dueSessions, held   *script
	forgetSessions, sessionLobbies        *script

	// registered holds the consumer names this Store registered, so that
	// ClaimLog registers a name once per process.
	registered sync.Map
}

// Option configures New.
type Option func(*config)

type config struct {
	prefix    string
	shards    int
	retention store.Retention
}

// WithPrefix sets the key prefix, so that several applications (or tests)
// can share a server: each prefix is a namespace of its own. It must be
// non-empty and must not contain '{' or '}'. The default is DefaultPrefix.
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithShards sets how many shards the lobbies are spread over, between 1
// and MaxShards. The default, 1, keeps all keys in one Cluster slot, which
// is right for a standalone server or a primary with replicas. On a Cluster,
// use enough shards to spread over its primaries (a few per primary).
//
// The count decides where each lobby lives: every process must use the same
// count, and changing it for existing data makes lobbies look absent.
func WithShards(n int) Option {
	return func(c *config) { c.shards = n }
}

// WithRetention sets how long the effects log keeps entries, replacing the
// default (DefaultRetentionEntries entries per lobby, DefaultRetentionAge). A
// zero field imposes no bound of its own, as in package store; negative
// fields are refused. The entry bound is applied by every Write, the age
// bound by TrimLog, which the caller runs (lobbyhost's Service does). All
// processes sharing data should use the same retention; a process with a
// smaller Entries trims the logs it writes to its own bound.
func WithRetention(r store.Retention) Option {
	return func(c *config) { c.retention = r }
}

// New returns a Store that keeps its data in the Redis that c talks to. The
// Store does not close c. New does not contact the server; scripts are
// loaded on first use. It returns an error wrapping store.ErrInvalid if an
// option is out of range.
func New(c rueidis.Client, opts ...Option) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("redisstore: %w: nil client", store.ErrInvalid)
	}
	cfg := config{
		prefix:    DefaultPrefix,
		shards:    1,
		retention: store.Retention{Entries: DefaultRetentionEntries, Age: DefaultRetentionAge},
	}
	for _, o := range opts {
		o(&cfg)
	}
	if !validPrefix(cfg.prefix) {
		return nil, fmt.Errorf("redisstore: %w: prefix %q must be non-empty without braces", store.ErrInvalid, cfg.prefix)
	}
	if cfg.shards < 1 || cfg.shards > MaxShards {
		return nil, fmt.Errorf("redisstore: %w: %d shards, want 1 to %d", store.ErrInvalid, cfg.shards, MaxShards)
	}
	if cfg.retention.Entries < 0 || cfg.retention.Age < 0 {
		return nil, fmt.Errorf("redisstore: %w: retention %+v has a negative bound", store.ErrInvalid, cfg.retention)
	}
	s := &Store{
		c:          c,
		prefix:     cfg.prefix,
		shards:     make([]shard, cfg.shards),
		channel:    "{" + cfg.prefix + "}:notify",
		retention:  cfg.retention,
		load:       newReadScript(loadScript),
		write:      newScript(writeScript),
		del:        newScript(deleteScript),
		claim:      newScript(claimScript),
		readLog:    newReadScript(readLogScript),
		head:       newReadScript(headScript),
		trim:       newScript(trimScript),
		claimLog:   newScript(claimLogScript),
		commitLog:  newScript(commitLogScript),
		raiseFloor: newScript(raiseFloorScript),

		openSession:      newScript(openSessionScript),
		renewSession:     newScript(renewSessionScript),
		endSession:       newScript(endSessionScript),
		sessionDeadlines: newReadScript(sessionDeadlinesScript),
		dueSessions:      newReadScript(dueSessionsScript),
		held:             newReadScript(heldScript),
		forgetSessions:   newScript(forgetSessionsScript),
		sessionLobbies:   newReadScript(sessionLobbiesScript),
	}
	for k := range s.shards {
		s.shards[k] = newShard(cfg.prefix, k)
	}
	return s, nil
}

func (s *Store) shardOf(id string) *shard {
	return &s.shards[shardIndex(id, len(s.shards))]
}

var errEmptyID = fmt.Errorf("redisstore: %w: empty lobby ID", store.ErrInvalid)

// Load returns the lobby's record; its Data is a new slice the caller owns,
// nil when the stored data is empty, and its Deadline is in UTC. If the
// lobby has no record it returns store.ErrNotFound with a Record holding
// the ID, its floor and At (the tombstone's, else the shard's: 0 and the
// zero time if no lobby of the shard was ever folded) and, while a
// tombstone lasts, the deleted data. At is exact to the nanosecond, in UTC;
// a live record's At is the zero time. An
// empty ID is store.ErrInvalid. Server and network failures are returned
// wrapped. It is one read-only script (EVALSHA_RO).
func (s *Store) Load(ctx context.Context, id string) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	if id == "" {
		return store.Record{}, errEmptyID
	}
	sh := s.shardOf(id)
	vals, err := s.load.exec(ctx, s.c, []string{sh.rec + id, sh.floor, sh.floorAt}, nil).ToArray()
	if err != nil {
		return store.Record{}, fmt.Errorf("redisstore: load %q: %w", id, err)
	}
	if len(vals) != 5 {
		return store.Record{}, fmt.Errorf("%w: load %q: %d values", ErrCorrupt, id, len(vals))
	}
	v, _ := vals[0].ToString()
	version, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return store.Record{}, fmt.Errorf("%w: lobby %q has version %q", ErrCorrupt, id, v)
	}
	if vals[1].IsNil() {
		rec := store.Record{ID: id, Version: version}
		if f, _ := vals[3].ToString(); f != "" {
			rec.Data = []byte(f)
		}
		if !vals[4].IsNil() {
			k, _ := vals[4].ToString()
			t, ok := parseDeadlineKey(k)
			if !ok {
				return store.Record{}, fmt.Errorf("%w: lobby %q has At %q", ErrCorrupt, id, k)
			}
			rec.At = t
		}
		return rec, store.ErrNotFound
	}
	rec := store.Record{ID: id, Version: version}
	if d, _ := vals[1].ToString(); d != "" {
		rec.Data = []byte(d)
	}
	if !vals[2].IsNil() {
		k, _ := vals[2].ToString()
		t, ok := parseDeadlineKey(k)
		if !ok {
			return store.Record{}, fmt.Errorf("%w: lobby %q has deadline %q", ErrCorrupt, id, k)
		}
		rec.Deadline = t
	}
	return rec, nil
}

// Write stores w if the lobby's version (or floor) equals w.Expected: the
// record, its deadline and its log entry in one script, so all or nothing,
// in one round trip. The caller keeps ownership of w. A successful Write
// releases the lobby's due claim; one with an entry also trims the lobby's
// log to the retained entry count, queues the lobby for every registered
// consumer that has not got it queued, and publishes a notification.
//
// It returns store.ErrInvalid if w.ID is empty or w.Expected is the largest
// uint64 (no version follows it), and store.ErrConflict if the version
// differs; in these cases nothing is written. A server or network failure
// is returned wrapped; the write may then have happened or not, and a Load
// tells which.
func (s *Store) Write(ctx context.Context, w store.Write) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	keys, args := s.writeCall(&w)
	msg, err := s.write.exec(ctx, s.c, keys, args).ToMessage()
	if err != nil {
		return fmt.Errorf("redisstore: write %q: %w", w.ID, err)
	}
	return casResult(&msg, "write", w.ID, w.Expected)
}

// writeCall returns the keys and arguments of the write script for w.
func (s *Store) writeCall(w *store.Write) (keys, args []string) {
	sh := s.shardOf(w.ID)
	var dl string
	if !w.Deadline.IsZero() {
		dl = deadlineKey(w.Deadline)
	}
	args = []string{
		strconv.FormatUint(w.Expected, 10),
		strconv.FormatUint(w.Expected+1, 10),
		string(w.Data),
		dl,
		w.ID,
		s.channel,
		"", "", "",
		strconv.Itoa(s.retention.Entries),
		sh.tag,
		encodeList(w.Sessions),
	}
	if w.Effects != nil {
		args[6], args[7], args[8] = "1", string(w.Effects), deadlineKey(w.At)
	}
	keys = []string{sh.rec + w.ID, sh.due, sh.log + w.ID, sh.age, sh.floor, sh.names, sh.keep}
	return keys, args
}

// Delete removes the lobby's record and deadline if its version equals
// d.Expected. While the lobby's log still has entries, or d.Keep is set, it
// leaves a tombstone with the floor max(d.Expected, d.Floor), d.At, d.Keep
// and the record's data (both times exact to the nanosecond); otherwise it
// removes every key of the lobby and raises the shard's floor and floor
// time to the lobby's instead, then (one more round trip) every other
// shard's. An error in that second step says so: the delete itself has
// happened. It returns store.ErrNotFound if there is no record and
// store.ErrConflict if the version differs, changing nothing in both cases;
// an empty ID is store.ErrInvalid.
func (s *Store) Delete(ctx context.Context, d store.Deletion) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.Validate(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	id := d.ID
	sh := s.shardOf(id)
	floor := max(d.Expected, d.Floor)
	at := deadlineKey(d.At)
	var keep string
	if !d.Keep.IsZero() {
		keep = deadlineKey(d.Keep)
	}
	args := []string{
		strconv.FormatUint(d.Expected, 10),
		strconv.FormatUint(floor, 10),
		id,
		sh.tag,
		at,
		keep,
	}
	keys := []string{sh.rec + id, sh.due, sh.log + id, sh.floor, sh.names, sh.floorAt, sh.keep}
	msg, err := s.del.exec(ctx, s.c, keys, args).ToMessage()
	if err != nil {
		return fmt.Errorf("redisstore: delete %q: %w", id, err)
	}
	if n, err := msg.ToInt64(); err == nil {
		switch n {
		case -1:
			return fmt.Errorf("redisstore: delete %q: %w", id, store.ErrNotFound)
		case 2:
			// Deleted, and the floor folded into the shard's: copy it to
			// the other shards. The delete has happened either way.
			if err := s.raiseFloors(ctx, floor, at, shardIndex(id, len(s.shards))); err != nil {
				return fmt.Errorf("redisstore: delete %q: deleted, but %w", id, err)
			}
			return nil
		}
	}
	return casResult(&msg, "delete", id, d.Expected)
}

// casResult reads the reply of the write and delete scripts: 1 for done, or
// the stored version as a string for a conflict.
func casResult(msg *rueidis.RedisMessage, op, id string, expected uint64) error {
	// ToInt64 succeeds only for an integer reply; a version comes as a
	// string, even when it looks like a number.
	if n, err := msg.ToInt64(); err == nil {
		if n == 1 {
			return nil
		}
		return fmt.Errorf("%w: %s %q: script returned %d", ErrCorrupt, op, id, n)
	}
	v, err := msg.ToString()
	if err != nil {
		return fmt.Errorf("%w: %s %q: unexpected reply: %v", ErrCorrupt, op, id, err)
	}
	return fmt.Errorf("redisstore: %s %q: %w: stored version %s, expected %d", op, id, store.ErrConflict, v, expected)
}
