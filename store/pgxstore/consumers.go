package pgxstore

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/lobbyhost/lobbyhost/store"
)

// RegisterConsumer registers the durable consumer name if it is not
// registered yet. A registered name costs one SELECT.
//
// Registering is exact about "the present": it inserts the name while
// holding the schema's registration lock exclusively, and every Write with
// a log entry holds that lock shared from before it reads the consumers
// until it commits. So a write that read the consumers without the new name
// commits before the registration does (before RegisterConsumer returns),
// and a write that commits after RegisterConsumer returned read them with
// the new name and marked its entry pending for it. Registration therefore
// waits for the writes in flight, and holds new ones back until it commits.
func (s *Store) RegisterConsumer(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validKey("register consumer", "consumer name", name); err != nil {
		return err
	}
	var known bool
	if err := s.pool.QueryRow(ctx, s.q.isConsumer, []byte(name)).Scan(&known); err != nil {
		return s.fail(ctx, "register consumer", name, err)
	}
	if known {
		return nil
	}
	return s.register(ctx, name)
}

func (s *Store) register(ctx context.Context, name string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue("SELECT pg_advisory_xact_lock($1)", s.regLock)
		b.Queue(s.q.register, []byte(name))
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return s.fail(ctx, "register consumer", name, err)
	}
	return nil
}

// ClaimLog returns min(limit, n) of the n lobbies with entries after name's
// cursor and no hold running at now, oldest pending work first (by the At
// of the first entry the consumer has not committed, then by lobby ID), and
// claims them for name until now+hold, in one round trip. It walks an index
// holding only the cursors with work.
//
// The ClaimLog and CommitLog calls of one name take turns: each runs in a
// pipelined implicit transaction that first takes the name's advisory lock,
// so a claim reads one consistent state of the name's cursors and
// concurrent claimers get disjoint sets. A cursor a write holds locked at
// that moment is waited for, not skipped (the write only raises its head),
// which keeps the answer exact. Different names never wait for each other
// (unless their lock keys collide, which costs only time).
//
// An unregistered name is registered (see RegisterConsumer) and gets no
// work. Holds are judged by the now arguments, never the database clock.
func (s *Store) ClaimLog(ctx context.Context, name string, now time.Time, limit int, hold time.Duration) ([]store.Cursor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := validKey("claim log", "consumer name", name); err != nil {
		return nil, err
	}
	if limit <= 0 || hold <= 0 {
		return nil, fmt.Errorf("pgxstore: claim log %q: limit %d, hold %v: %w", name, limit, hold, store.ErrInvalid)
	}
	ns := saturatedNanos(now)
	until := ns + int64(hold)
	if until < ns {
		until = math.MaxInt64
	}
	type claimed struct {
		c     store.Cursor
		since int64
	}
	var (
		got        []claimed
		registered = true
	)
	b := &pgx.Batch{}
	b.Queue(s.q.consumerLock, consumerLockKey(s.schema, name))
	b.Queue(s.q.claimLog, []byte(name), ns, limit, until).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				ok           bool
				lobby        []byte
				after, since pgtype.Int8
			)
			if err := rows.Scan(&ok, &lobby, &after, &since); err != nil {
				return err
			}
			if !ok {
				registered = false
				continue
			}
			got = append(got, claimed{store.Cursor{Lobby: string(lobby), After: fromOrdered(after.Int64)}, since.Int64})
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, s.fail(ctx, "claim log", name, err)
	}
	if !registered {
		return nil, s.register(ctx, name)
	}
	// UPDATE ... RETURNING does not keep the CTE's order.
	slices.SortFunc(got, func(a, b claimed) int {
		if a.since != b.since {
			if a.since < b.since {
				return -1
			}
			return 1
		}
		return bytes.Compare([]byte(a.c.Lobby), []byte(b.c.Lobby))
	})
	var out []store.Cursor
	for _, c := range got {
		out = append(out, c.c)
	}
	return out, nil
}

// CommitLog moves name's cursor for lobby id up to after (never down) and
// releases name's claim on it, in one round trip (a pipelined implicit
// transaction that takes the name's lock, as ClaimLog does). A
// write that commits meanwhile has raised the cursor's head above after,
// so the lobby stays pending. The cursor stays when nothing is left to do
// (a later write continues from it); it goes when the lobby's tombstone
// folds into the store-wide floor, and a write after that starts a new
// cursor just below its entry. An unregistered name is store.ErrInvalid.
func (s *Store) CommitLog(ctx context.Context, name, id string, after uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validKey("commit log", "consumer name", name); err != nil {
		return err
	}
	if err := validKey("commit log", "lobby ID", id); err != nil {
		return err
	}
	b := &pgx.Batch{}
	var known bool
	b.Queue(s.q.isConsumer, []byte(name)).QueryRow(func(row pgx.Row) error { return row.Scan(&known) })
	b.Queue(s.q.consumerLock, consumerLockKey(s.schema, name))
	b.Queue(s.q.commitLog, []byte(name), []byte(id), toOrdered(after))
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return s.fail(ctx, "commit log", id, err)
	}
	if !known {
		return fmt.Errorf("pgxstore: commit log: consumer %q is not registered: %w", name, store.ErrInvalid)
	}
	return nil
}

// saturatedNanos is t in Unix nanoseconds, clamped to the int64 range.
func saturatedNanos(t time.Time) int64 {
	v := t.UnixNano()
	if time.Unix(0, v).Equal(t) {
		return v
	}
	if t.After(time.Unix(0, 0)) {
		return math.MaxInt64
	}
	return math.MinInt64
}
