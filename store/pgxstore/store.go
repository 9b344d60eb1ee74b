package pgxstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lobbyhost/lobbyhost/store"
)

// Compile-time checks of the capabilities the Store offers.
var (
	_ store.Store    = (*Store)(nil)
	_ store.Claimer  = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
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
	schema string
}

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

// Store is a store.Store on PostgreSQL. It is safe for concurrent use by many
// goroutines and many processes sharing the same schema. Create it with
// [New] and the schema with [Store.Migrate].
type Store struct {
	pool    *pgxpool.Pool
	schema  string // as given
	channel string // LISTEN/NOTIFY channel
	q       queries
	notify  notifier
}

// New returns a Store that runs its statements on pool. The caller keeps
// ownership of pool: New does not connect, and closing the pool is the
// caller's job (after the last call on the Store, and after the contexts of
// every [Store.Notify] subscription are done). New returns an error wrapping
// store.ErrInvalid if pool is nil or an option is out of range.
func New(pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("pgxstore: nil pool: %w", store.ErrInvalid)
	}
	c := config{schema: DefaultSchema}
	for _, o := range opts {
		o(&c)
	}
	if err := validSchema(c.schema); err != nil {
		return nil, err
	}
	s := &Store{
		pool:    pool,
		schema:  c.schema,
		channel: c.schema + channelSuffix,
		q:       buildQueries(c.schema),
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

// Schema returns the name of the PostgreSQL schema the Store uses.
func (s *Store) Schema() string { return s.schema }

// Load returns the lobby's record. If there is none, it returns
// store.ErrNotFound with a Record holding the ID, the floor (0 for an ID
// never written, the tombstone's version after Delete) and, after Delete,
// the deleted record's data. An empty id is
// store.ErrInvalid. Data is a fresh slice owned by the caller; nil when the
// record was written with nil Data.
func (s *Store) Load(ctx context.Context, id string) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	if id == "" {
		return store.Record{}, fmt.Errorf("pgxstore: load: empty lobby ID: %w", store.ErrInvalid)
	}
	var (
		version  int64
		deleted  bool
		data     []byte
		deadline pgtype.Int8
	)
	err := s.pool.QueryRow(ctx, s.q.load, []byte(id)).Scan(&version, &deleted, &data, &deadline)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Record{ID: id}, store.ErrNotFound
	case err != nil:
		return store.Record{}, s.fail(ctx, "load", id, err)
	case deleted:
		return store.Record{ID: id, Version: uint64(version), Data: data}, store.ErrNotFound
	}
	return store.Record{
		ID:       id,
		Version:  uint64(version),
		Data:     data,
		Deadline: fromNanos(deadline),
	}, nil
}

// Write stores w if the lobby's version (its floor when it has no record)
// equals w.Expected: record, deadline and events in one statement. It
// returns store.ErrConflict if the version differs, and store.ErrInvalid if
// w.ID is empty, an event names another lobby, w.Expected is the largest
// uint64 (no next version exists) or w.Deadline lies outside the years
// 1678-2261; in all these cases nothing is written. Write releases a claim
// made by [Store.Claim]. It does not retain w's slices.
func (s *Store) Write(ctx context.Context, w store.Write) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("pgxstore: %w", err)
	}
	deadline, ok := toNanos(w.Deadline)
	if !ok {
		return fmt.Errorf("pgxstore: write %q: deadline %v outside the storable range: %w", w.ID, w.Deadline, store.ErrInvalid)
	}

	id := []byte(w.ID)
	data := w.Data // nil is stored as NULL, which Load turns back into nil
	next := int64(w.Expected + 1)
	var (
		sql  string
		args []any
	)
	switch {
	case w.Expected == 0 && len(w.Events) == 0:
		sql, args = s.q.create, []any{id, next, data, deadline}
	case w.Expected == 0:
		seqs, datas := eventColumns(w.Events)
		sql, args = s.q.createEvents, []any{id, next, data, deadline, seqs, datas, s.channel}
	case len(w.Events) == 0:
		sql, args = s.q.update, []any{id, int64(w.Expected), next, data, deadline}
	default:
		seqs, datas := eventColumns(w.Events)
		sql, args = s.q.updateEvents, []any{id, int64(w.Expected), next, data, deadline, seqs, datas, s.channel}
	}
	var written int64
	if len(w.Events) == 0 {
		tag, err := s.pool.Exec(ctx, sql, args...)
		if err != nil {
			return s.fail(ctx, "write", w.ID, err)
		}
		written = tag.RowsAffected()
	} else if err := s.pool.QueryRow(ctx, sql, args...).Scan(&written, nil); err != nil {
		return s.fail(ctx, "write", w.ID, err)
	}
	if written == 0 {
		return fmt.Errorf("pgxstore: write %q: version is not %d: %w", w.ID, w.Expected, store.ErrConflict)
	}
	return nil
}

// eventColumns turns events into the two arrays the outbox insert unnests.
func eventColumns(events []store.Event) ([]int64, [][]byte) {
	seqs := make([]int64, len(events))
	datas := make([][]byte, len(events))
	for i, e := range events {
		seqs[i] = int64(e.Seq)
		datas[i] = e.Data
	}
	return seqs, datas
}

// Delete turns the lobby's record into a tombstone whose version, the floor,
// is max(expected, floor), keeping its data, if the record's version equals
// expected. Pending
// events stay in the outbox. It returns store.ErrNotFound if the lobby has no
// record, store.ErrConflict if its version differs, store.ErrInvalid for an
// empty id; in all three cases it changes nothing.
func (s *Store) Delete(ctx context.Context, id string, expected, floor uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("pgxstore: delete: empty lobby ID: %w", store.ErrInvalid)
	}
	tomb := max(expected, floor)
	key := []byte(id)
	for {
		tag, err := s.pool.Exec(ctx, s.q.delete, key, int64(expected), int64(tomb))
		if err != nil {
			return s.fail(ctx, "delete", id, err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		// Nothing matched: tell a missing record from a different version
		// by looking again with a fresh snapshot. The answer describes a
		// moment after the failed UPDATE, so it is a linearisable reason
		// for failing; if the record has meanwhile reached the expected
		// version (it was recreated), try again.
		var (
			version int64
			deleted bool
		)
		err = s.pool.QueryRow(ctx, s.q.probe, key).Scan(&version, &deleted)
		switch {
		case errors.Is(err, pgx.ErrNoRows), err == nil && deleted:
			return fmt.Errorf("pgxstore: delete %q: %w", id, store.ErrNotFound)
		case err != nil:
			return s.fail(ctx, "delete", id, err)
		case uint64(version) != expected:
			return fmt.Errorf("pgxstore: delete %q: version is %d, not %d: %w", id, uint64(version), expected, store.ErrConflict)
		}
	}
}

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
