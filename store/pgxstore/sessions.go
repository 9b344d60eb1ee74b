package pgxstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/lobbyhost/lobbyhost/store"
)

// sessionList is Write.Sessions as the bytea[] the write statements take:
// nil (SQL NULL) for none, so that the lobby row's sessions column is NULL
// for a lobby without sessions whichever way the caller said "none".
func sessionList(op string, ids []string) ([][]byte, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out := make([][]byte, len(ids))
	for i, id := range ids {
		if err := validKey(op, "session ID", id); err != nil {
			return nil, err
		}
		out[i] = []byte(id)
	}
	return out, nil
}

// sessionNanos is a session deadline as Unix nanoseconds, or ErrInvalid
// for the zero time or one outside the storable range (years 1678 to 2262).
func sessionNanos(op, id string, t time.Time) (int64, error) {
	v, ok := toNanos(t)
	if t.IsZero() || !ok {
		return 0, fmt.Errorf("pgxstore: %s %q: time %v is zero or outside the storable range: %w", op, id, t, store.ErrInvalid)
	}
	return v.Int64, nil
}

// OpenSession records a new session alive until deadline (one INSERT):
// store.ErrConflict if the ID is known, store.ErrInvalid for an empty or
// too long ID, or a deadline that is zero or outside years 1678 to 2262.
func (s *Store) OpenSession(ctx context.Context, id string, deadline time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validKey("open session", "session ID", id); err != nil {
		return err
	}
	d, err := sessionNanos("open session", id, deadline)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, s.q.openSession, []byte(id), d)
	if err != nil {
		return s.fail(ctx, "open session", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgxstore: open session %q: %w", id, store.ErrConflict)
	}
	return nil
}

// RenewSession moves a live session's deadline forward in one conditional
// UPDATE; store.ErrSessionEnded if it matches no row.
func (s *Store) RenewSession(ctx context.Context, id string, now, deadline time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validKey("renew session", "session ID", id); err != nil {
		return err
	}
	d, err := sessionNanos("renew session", id, deadline)
	if err != nil {
		return err
	}
	n, ok := clampNow(now)
	if !ok {
		n = minNanos // before every storable deadline: every session is alive
	}
	tag, err := s.pool.Exec(ctx, s.q.renewSession, []byte(id), n, d)
	if err != nil {
		return s.fail(ctx, "renew session", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgxstore: renew session %q: %w", id, store.ErrSessionEnded)
	}
	return nil
}

// minNanos is below every storable Unix-nanosecond time.
const minNanos = -1 << 63

// EndSession sets a known session's deadline to min(current, at) and ends
// its renewals.
func (s *Store) EndSession(ctx context.Context, id string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validKey("end session", "session ID", id); err != nil {
		return err
	}
	if at.IsZero() {
		return fmt.Errorf("pgxstore: end session %q: zero time: %w", id, store.ErrInvalid)
	}
	a, ok := clampNow(at)
	if !ok {
		a = minNanos
	}
	if _, err := s.pool.Exec(ctx, s.q.endSession, []byte(id), a); err != nil {
		return s.fail(ctx, "end session", id, err)
	}
	return nil
}

// SessionDeadlines returns each session's deadline in one query, the zero
// time for an ID without a row.
func (s *Store) SessionDeadlines(ctx context.Context, ids []string) ([]time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	keys := make([][]byte, len(ids))
	for i, id := range ids {
		keys[i] = []byte(id)
	}
	rows, err := s.pool.Query(ctx, s.q.sessionDeadlines, keys)
	if err != nil {
		return nil, s.fail(ctx, "session deadlines", "", err)
	}
	out := make([]time.Time, 0, len(ids))
	var d pgtype.Int8
	if _, err := pgx.ForEachRow(rows, []any{&d}, func() error {
		out = append(out, fromNanos(d))
		return nil
	}); err != nil {
		return nil, s.fail(ctx, "session deadlines", "", err)
	}
	if len(out) != len(ids) {
		return nil, fmt.Errorf("pgxstore: session deadlines: %d rows for %d IDs", len(out), len(ids))
	}
	return out, nil
}

// ExpiredSessions lists the due sessions holding a lobby and forgets the
// due ones before them holding none, in one statement over the deadline
// index.
func (s *Store) ExpiredSessions(ctx context.Context, now time.Time, limit int) ([]store.SessionDeadline, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("pgxstore: expired sessions: limit %d: %w", limit, store.ErrInvalid)
	}
	n, ok := clampNow(now)
	if !ok {
		return nil, nil // before every storable deadline
	}
	rows, err := s.pool.Query(ctx, s.q.expiredSessions, n, int64(limit))
	if err != nil {
		return nil, s.fail(ctx, "expired sessions", "", err)
	}
	var (
		out []store.SessionDeadline
		id  []byte
		d   int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &d}, func() error {
		out = append(out, store.SessionDeadline{ID: string(id), Deadline: time.Unix(0, d).UTC()})
		return nil
	}); err != nil {
		return nil, s.fail(ctx, "expired sessions", "", err)
	}
	return out, nil
}

// SessionLobbies pages through the session's index rows in byte order.
func (s *Store) SessionLobbies(ctx context.Context, id, after string, limit int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("pgxstore: session lobbies %q: limit %d: %w", id, limit, store.ErrInvalid)
	}
	rows, err := s.pool.Query(ctx, s.q.sessionLobbies, []byte(id), []byte(after), int64(limit))
	if err != nil {
		return nil, s.fail(ctx, "session lobbies", id, err)
	}
	var (
		out   []string
		lobby []byte
	)
	if _, err := pgx.ForEachRow(rows, []any{&lobby}, func() error {
		out = append(out, string(lobby))
		return nil
	}); err != nil {
		return nil, s.fail(ctx, "session lobbies", id, err)
	}
	return out, nil
}
