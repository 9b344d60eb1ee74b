package pgxstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lobbyhost/lobbyhost/store"
)

// Compile-time checks of the capabilities the Store offers.
var (
	_ store.Store       = (*Store)(nil)
	_ store.Claimer     = (*Store)(nil)
	_ store.Notifier    = (*Store)(nil)
	_ store.BatchWriter = (*Store)(nil)
	_ store.Sessions    = (*Store)(nil)
)

// DefaultSchema is the schema a Store uses unless [WithSchema] says otherwise.
const DefaultSchema = "lobbyhost"

// maxSchemaLen keeps the schema name, and the notification channel derived
// from it (schema + channelSuffix), within PostgreSQL's 63-byte identifiers.
const (
	channelSuffix = ".wake"
	maxSchemaLen  = 63 - len(channelSuffix)
)

// Option configures a Store in [New].
type Option func(*config)

type config struct {
	schema    string
	retention store.Retention
}

// Default retention of the effects log (see [WithRetention]).
const (
	DefaultRetentionEntries = 1024
	DefaultRetentionAge     = 10 * time.Minute
)

// maxKeyLen bounds lobby IDs and consumer names (in bytes): the ID travels
// base64-encoded in a notification payload, which PostgreSQL limits to 8000
// bytes. Longer keys are store.ErrInvalid.
const maxKeyLen = 4096

// WithSchema makes the Store keep its tables in the named PostgreSQL schema
// instead of [DefaultSchema], so several applications (or tests) can share a
// database without seeing each other's lobbies. The name is used verbatim as
// a quoted identifier (case and punctuation are kept); it must be 1 to 58
// bytes without NUL characters, else New returns an error wrapping
// store.ErrInvalid. The notification channel is the schema name followed by
// ".wake".
func WithSchema(name string) Option {
	return func(c *config) { c.schema = name }
}

// WithRetention sets how long the effects log keeps entries: at most
// r.Entries per lobby (older ones are removed by the Write that appends
// the newer) and none older than r.Age (removed by [Store.TrimLog]). A zero
// field removes that bound. Without this option the Store keeps
// [DefaultRetentionEntries] entries per lobby for [DefaultRetentionAge].
// Negative fields make New return an error wrapping store.ErrInvalid. All
// processes sharing a schema should use the same retention.
func WithRetention(r store.Retention) Option {
	return func(c *config) { c.retention = r }
}

// Store is a store.Store on PostgreSQL. It is safe for concurrent use by many
// goroutines and many processes sharing the same schema. Create it with
// [New] and the schema with [Store.Migrate].
type Store struct {
	pool      *pgxpool.Pool
	schema    string // as given
	channel   string // LISTEN/NOTIFY channel
	retention store.Retention
	regLock   int64 // see registerLockKey
	q         queries
	notify    notifier

	// rolledBack, if set (by tests), hears every error that made
	// WriteBatch fall back to single writes.
	rolledBack func(error)
}

// New returns a Store that runs its statements on pool. The caller keeps
// ownership of pool: New does not connect, and closing the pool is the
// caller's job (after the last call on the Store, and after the contexts of
// every [Store.Subscribe] are done). New returns an error wrapping
// store.ErrInvalid if pool is nil or an option is out of range.
func New(pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("pgxstore: nil pool: %w", store.ErrInvalid)
	}
	c := config{
		schema:    DefaultSchema,
		retention: store.Retention{Entries: DefaultRetentionEntries, Age: DefaultRetentionAge},
	}
	for _, o := range opts {
		o(&c)
	}
	if err := validSchema(c.schema); err != nil {
		return nil, err
	}
	if c.retention.Entries < 0 || c.retention.Age < 0 {
		return nil, fmt.Errorf("pgxstore: negative retention %+v: %w", c.retention, store.ErrInvalid)
	}
	s := &Store{
		pool:      pool,
		schema:    c.schema,
		channel:   c.schema + channelSuffix,
		retention: c.retention,
		regLock:   registerLockKey(c.schema),
		q:         buildQueries(c.schema),
	}
	s.notify.init(s)
	return s, nil
}

func validSchema(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("pgxstore: empty schema name: %w", store.ErrInvalid)
	case len(name) > maxSchemaLen:
		return fmt.Errorf("pgxstore: schema name %q is longer than %d bytes: %w", name, maxSchemaLen, store.ErrInvalid)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return fmt.Errorf("pgxstore: schema name %q contains NUL: %w", name, store.ErrInvalid)
		}
	}
	return nil
}

// validKey checks a lobby ID or consumer name.
func validKey(op, what, key string) error {
	switch {
	case key == "":
		return fmt.Errorf("pgxstore: %s: empty %s: %w", op, what, store.ErrInvalid)
	case len(key) > maxKeyLen:
		return fmt.Errorf("pgxstore: %s: %s of %d bytes, more than %d: %w", op, what, len(key), maxKeyLen, store.ErrInvalid)
	}
	return nil
}

// Schema returns the name of the PostgreSQL schema the Store uses.
func (s *Store) Schema() string { return s.schema }

// Retention returns the log retention the Store applies.
func (s *Store) Retention() store.Retention { return s.retention }

// Load returns the lobby's record. If there is none, it returns
// store.ErrNotFound with a Record holding the ID, the floor and At: the
// tombstone's version, Deletion.At and the deleted record's data while the
// tombstone lasts, else the store-wide floor and the latest At folded into
// it. At is kept to the microsecond; a live record's At is the zero time.
// It is one statement. An empty id is store.ErrInvalid. Data is a fresh
// slice owned by the caller; nil when the record was written with nil Data.
func (s *Store) Load(ctx context.Context, id string) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	if err := validKey("load", "lobby ID", id); err != nil {
		return store.Record{}, err
	}
	var (
		version  pgtype.Int8
		deleted  pgtype.Bool
		data     []byte
		deadline pgtype.Int8
		tombAt   pgtype.Int8
		floor    int64
		floorAt  pgtype.Int8
	)
	err := s.pool.QueryRow(ctx, s.q.load, []byte(id)).Scan(&version, &deleted, &data, &deadline, &tombAt, &floor, &floorAt)
	switch {
	case err != nil:
		return store.Record{}, s.fail(ctx, "load", id, err)
	case !version.Valid:
		return store.Record{ID: id, Version: fromOrdered(floor), At: fromMicros(floorAt)}, store.ErrNotFound
	case deleted.Bool:
		return store.Record{ID: id, Version: uint64(version.Int64), Data: data, At: fromMicros(tombAt)}, store.ErrNotFound
	}
	return store.Record{
		ID:       id,
		Version:  uint64(version.Int64),
		Data:     data,
		Deadline: fromNanos(deadline),
	}, nil
}

// fromMicros decodes a column of Unix microseconds: the zero time for NULL,
// else the instant in UTC.
func fromMicros(v pgtype.Int8) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// keepMicros encodes Deletion.Keep: NULL for none, else Unix microseconds
// rounded up, so that no TrimLog before Keep finds it due.
func keepMicros(t time.Time) pgtype.Int8 {
	if t.IsZero() {
		return pgtype.Int8{}
	}
	us := t.UnixMicro()
	if time.UnixMicro(us).Before(t) {
		us++
	}
	return pgtype.Int8{Int64: us, Valid: true}
}

// Write stores w if the lobby's version (its floor when it has no record)
// equals w.Expected: record, deadline and log entry in one transaction. It
// returns store.ErrConflict if the version differs, and store.ErrInvalid if
// w.ID is empty or longer than 4096 bytes, w.Expected is the largest uint64
// (no next version exists) or w.Deadline lies outside the years 1678-2261;
// in all these cases nothing is written. Write releases a claim made by
// [Store.Claim]. It does not retain w's slices.
//
// A write with a log entry is one call of the schema's write function (one
// round trip), which also trims the lobby's log to the retention count,
// marks the entry as pending for every registered consumer and notifies
// subscribers. A write without one (a heartbeat) is one UPDATE of the
// lobby's row; only when that matches nothing (a conflict, or a lobby to
// create) does a second round trip call the write function to decide.
func (s *Store) Write(ctx context.Context, w store.Write) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("pgxstore: %w", err)
	}
	if err := validKey("write", "lobby ID", w.ID); err != nil {
		return err
	}
	deadline, ok := toNanos(w.Deadline)
	if !ok {
		return fmt.Errorf("pgxstore: write %q: deadline %v outside the storable range: %w", w.ID, w.Deadline, store.ErrInvalid)
	}
	id := []byte(w.ID)
	next := w.Expected + 1
	sessions, err := sessionList("write", w.Sessions)
	if err != nil {
		return err
	}
	if w.Effects == nil {
		tag, err := s.pool.Exec(ctx, s.q.update, id, int64(w.Expected), int64(next), w.Data, deadline, sessions)
		if err != nil {
			return s.fail(ctx, "write", w.ID, err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
	}
	entry := w.Effects
	if entry == nil {
		entry = []byte{} // unused: the function appends nothing without effects
	}
	var written bool
	err = s.pool.QueryRow(ctx, s.q.write,
		id, int64(w.Expected), int64(next), toOrdered(w.Expected), toOrdered(next),
		w.Data, deadline, w.Effects != nil, w.At.UnixMicro(), entry,
		int64(s.retention.Entries), s.channel, changePayload(w.ID, next), sessions,
	).Scan(&written)
	if err != nil {
		return s.fail(ctx, "write", w.ID, err)
	}
	if !written {
		return fmt.Errorf("pgxstore: write %q: version is not %d: %w", w.ID, w.Expected, store.ErrConflict)
	}
	return nil
}

// Delete removes the lobby's record if its version equals d.Expected.
// While the lobby has log entries, or d.Keep is set, it keeps a tombstone:
// the floor max(d.Expected, d.Floor), d.At, d.Keep (rounded up to the
// microsecond) and the record's data. Otherwise it removes the row and
// raises the store-wide floor and At to the tombstone's. It returns
// store.ErrNotFound if the lobby has no record, store.ErrConflict if its
// version differs, store.ErrInvalid for an empty id; in all three cases it
// changes nothing. It is one round trip, run again (at most three more
// times) if PostgreSQL aborts it to break a deadlock with a
// [Store.WriteBatch], which rolls it back.
func (s *Store) Delete(ctx context.Context, d store.Deletion) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validKey("delete", "lobby ID", d.ID); err != nil {
		return err
	}
	tomb := max(d.Expected, d.Floor)
	var outcome string
	err := retryDeadlock(ctx, func() error {
		return s.pool.QueryRow(ctx, s.q.delete, []byte(d.ID), int64(d.Expected), int64(tomb), toOrdered(tomb),
			d.At.UnixMicro(), keepMicros(d.Keep)).Scan(&outcome)
	})
	if err != nil {
		return s.fail(ctx, "delete", d.ID, err)
	}
	switch outcome {
	case "d", "f":
		return nil
	case "n":
		return fmt.Errorf("pgxstore: delete %q: %w", d.ID, store.ErrNotFound)
	default:
		return fmt.Errorf("pgxstore: delete %q: version is not %d: %w", d.ID, d.Expected, store.ErrConflict)
	}
}

// toOrdered encodes a version or log position for the columns that compare
// them (see the schema): the top bit flipped, so signed order is unsigned
// order.
func toOrdered(v uint64) int64 { return int64(v ^ 1<<63) }

// fromOrdered decodes toOrdered.
func fromOrdered(v int64) uint64 { return uint64(v) ^ 1<<63 }

// fail wraps a database error with the operation and lobby, and makes sure a
// failure caused by the caller's context matches the context's error with
// errors.Is.
func (s *Store) fail(ctx context.Context, op, id string, err error) error {
	if id != "" {
		op = fmt.Sprintf("%s %q", op, id)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("pgxstore: %s: %w (%v)", op, cerr, err)
	}
	return fmt.Errorf("pgxstore: %s: %w", op, err)
}

// toNanos encodes a deadline for the bigint column: NULL for the zero time,
// else Unix nanoseconds. ok is false when t cannot be represented exactly.
func toNanos(t time.Time) (v pgtype.Int8, ok bool) {
	if t.IsZero() {
		return pgtype.Int8{}, true
	}
	ns := t.UnixNano()
	if !time.Unix(0, ns).Equal(t) {
		return pgtype.Int8{}, false
	}
	return pgtype.Int8{Int64: ns, Valid: true}, true
}

// fromNanos decodes a deadline column: the zero time for NULL, else the
// instant in UTC.
func fromNanos(v pgtype.Int8) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.Unix(0, v.Int64).UTC()
}

// clampNow encodes the "now" of Due and Claim. An instant after the storable
// range compares after every stored deadline, so it becomes math.MaxInt64;
// before the range nothing can be due, which ok=false reports.
func clampNow(now time.Time) (ns int64, ok bool) {
	v := now.UnixNano()
	if time.Unix(0, v).Equal(now) {
		return v, true
	}
	if now.After(time.Unix(0, 0)) {
		return math.MaxInt64, true
	}
	return 0, false
}
