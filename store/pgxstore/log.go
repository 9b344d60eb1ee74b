package pgxstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/lobbyhost/lobbyhost/store"
)

// ReadLog returns up to limit entries of the lobby's log after position
// after, in position order, from one snapshot. If retention removed an
// entry after that position it returns a *store.CompactedError instead,
// with Trimmed set to the lobby's trim marker (the highest position
// retention removed), or, for an ID with neither record nor tombstone, to
// the store-wide floor when after is below it. Each Data is a fresh slice.
func (s *Store) ReadLog(ctx context.Context, id string, after uint64, limit int) ([]store.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := validKey("read log", "lobby ID", id); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("pgxstore: read log %q: limit %d: %w", id, limit, store.ErrInvalid)
	}
	rows, err := s.pool.Query(ctx, s.q.readLog, []byte(id), toOrdered(after), limit)
	if err != nil {
		return nil, s.fail(ctx, "read log", id, err)
	}
	defer rows.Close()
	var (
		out              []store.Entry
		header           bool
		trimmed, floor   pgtype.Int8
		version, at      pgtype.Int8
		sawHeader        bool
		markTrim, markFl pgtype.Int8
	)
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&header, &trimmed, &floor, &version, &at, &data); err != nil {
			return nil, s.fail(ctx, "read log", id, err)
		}
		if header {
			sawHeader, markTrim, markFl = true, trimmed, floor
			continue
		}
		if data == nil {
			data = []byte{}
		}
		out = append(out, store.Entry{
			Lobby:   id,
			Version: fromOrdered(version.Int64),
			At:      time.UnixMicro(at.Int64).UTC(),
			Data:    data,
		})
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "read log", id, err)
	}
	if !sawHeader {
		return nil, s.fail(ctx, "read log", id, fmt.Errorf("no header row (is the schema migrated?)"))
	}
	mark := markTrim // the lobby's own marker while it has a row
	if !mark.Valid {
		mark = markFl // else the store-wide floor
	}
	if mark.Valid && after < fromOrdered(mark.Int64) {
		return nil, &store.CompactedError{Lobby: id, After: after, Trimmed: fromOrdered(mark.Int64)}
	}
	slices.SortFunc(out, func(a, b store.Entry) int {
		switch {
		case a.Version < b.Version:
			return -1
		case a.Version > b.Version:
			return 1
		}
		return 0
	})
	return out, nil
}

// LogHeads returns, in the order of ids, the position of the newest entry
// each lobby's log keeps (0 for none), in one statement that looks up each
// ID in the log's primary key. An empty list sends nothing.
func (s *Store) LogHeads(ctx context.Context, ids []string) ([]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]uint64, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([][]byte, len(ids))
	for i, id := range ids {
		if err := validKey("log heads", "lobby ID", id); err != nil {
			return nil, err
		}
		keys[i] = []byte(id)
	}
	rows, err := s.pool.Query(ctx, s.q.logHeads, keys)
	if err != nil {
		return nil, s.fail(ctx, "log heads", "", err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var head pgtype.Int8
		if err := rows.Scan(&head); err != nil {
			return nil, s.fail(ctx, "log heads", "", err)
		}
		if i < len(out) && head.Valid {
			out[i] = fromOrdered(head.Int64)
		}
		i++
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "log heads", "", err)
	}
	if i != len(ids) {
		return nil, s.fail(ctx, "log heads", "", fmt.Errorf("%d rows for %d IDs", i, len(ids)))
	}
	return out, nil
}

// TrimLog removes up to limit log entries whose At is more than the
// retention Age before now, oldest first, and then the tombstones due at
// now: those without entries whose Deletion.Keep is at or before now (Keep
// is a bound of its own, so this happens also without an Age bound). A
// tombstone whose last entry goes is removed with it unless its Keep is
// after now. Removed tombstones fold their floor and At into the store-wide
// floor. It returns the entries removed plus the tombstones removed for
// their Keep alone, at most limit. Rows a concurrent write holds are
// skipped, not waited for. A limit below 1 is store.ErrInvalid.
//
// It is one statement for the entries (if there is an Age bound) and one
// for the Keep times, each through an index, each run again (at most three
// more times) if PostgreSQL aborts it to break a deadlock.
func (s *Store) TrimLog(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, fmt.Errorf("pgxstore: trim log: limit %d: %w", limit, store.ErrInvalid)
	}
	nowUs := now.UnixMicro()
	var n int64
	if s.retention.Age > 0 {
		cutoff := cutoffMicros(now, s.retention.Age)
		err := retryDeadlock(ctx, func() error {
			return s.pool.QueryRow(ctx, s.q.trimLog, cutoff, limit, nowUs).Scan(&n)
		})
		if err != nil {
			return 0, s.fail(ctx, "trim log", "", err)
		}
	}
	if int(n) >= limit {
		return int(n), nil
	}
	var kept int64
	err := retryDeadlock(ctx, func() error {
		return s.pool.QueryRow(ctx, s.q.trimKept, nowUs, limit-int(n)).Scan(&kept)
	})
	if err != nil {
		return int(n), s.fail(ctx, "trim log", "", err)
	}
	return int(n + kept), nil
}

// cutoffMicros is now-age in Unix microseconds, saturating at the ends of
// the int64 range: entries whose At is before it are old enough to go.
func cutoffMicros(now time.Time, age time.Duration) int64 {
	n := now.UnixMicro()
	a := age.Microseconds()
	if n < math.MinInt64+a {
		return math.MinInt64
	}
	return n - a
}
