package pgxstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/lobbyhost/lobbyhost/store"
)

// Due returns up to limit lobbies whose deadline is at or before now, in
// (deadline, ID byte order) order, as one indexed query. It returns nil when
// none is due, and store.ErrInvalid for a limit below 1. The slice is the
// caller's.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]store.Due, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("pgxstore: due: limit %d: %w", limit, store.ErrInvalid)
	}
	ns, ok := clampNow(now)
	if !ok {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.due, ns, limit)
	if err != nil {
		return nil, s.fail(ctx, "due", "", err)
	}
	out, err := scanDue(rows)
	if err != nil {
		return nil, s.fail(ctx, "due", "", err)
	}
	return out, nil
}

// Claim is Due that skips lobbies claimed by an earlier Claim whose hold has
// not yet run out at now, and claims what it returns until now+hold (a Write
// or Delete of the lobby releases the claim). Claims are judged by the now
// arguments, not by the database clock. Rows that another transaction holds
// locked at that moment (a concurrent Claim, or a Write in flight) are
// skipped rather than waited for, so concurrent sweepers receive disjoint
// sets and one of them may get fewer than limit lobbies although more are
// due. It returns store.ErrInvalid for a limit below 1 or a hold below 1ns,
// nil when nothing is claimable.
func (s *Store) Claim(ctx context.Context, now time.Time, limit int, hold time.Duration) ([]store.Due, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("pgxstore: claim: limit %d: %w", limit, store.ErrInvalid)
	}
	if hold <= 0 {
		return nil, fmt.Errorf("pgxstore: claim: hold %v: %w", hold, store.ErrInvalid)
	}
	ns, ok := clampNow(now)
	if !ok {
		return nil, nil
	}
	until := ns + int64(hold)
	if until < ns { // saturate instead of wrapping past the end of the range
		until = 1<<63 - 1
	}
	rows, err := s.pool.Query(ctx, s.q.claim, ns, limit, until)
	if err != nil {
		return nil, s.fail(ctx, "claim", "", err)
	}
	out, err := scanDue(rows)
	if err != nil {
		return nil, s.fail(ctx, "claim", "", err)
	}
	// UPDATE ... RETURNING does not keep the CTE's order.
	slices.SortFunc(out, func(a, b store.Due) int {
		if c := a.Deadline.Compare(b.Deadline); c != 0 {
			return c
		}
		return bytes.Compare([]byte(a.ID), []byte(b.ID))
	})
	return out, nil
}

// scanDue reads (id, deadline) rows and closes rows.
func scanDue(rows pgx.Rows) ([]store.Due, error) {
	defer rows.Close()
	var (
		out      []store.Due
		id       []byte
		deadline pgtype.Int8
	)
	for rows.Next() {
		if err := rows.Scan(&id, &deadline); err != nil {
			return nil, err
		}
		out = append(out, store.Due{ID: string(id), Deadline: fromNanos(deadline)})
	}
	return out, rows.Err()
}
