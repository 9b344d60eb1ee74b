package pgxstore

import (
	"context"
	"fmt"

	"github.com/lobbyhost/lobbyhost/store"
)

// Pending returns up to limit unacknowledged events, oldest write first and,
// inside a write, in the order given; events of one lobby therefore come in
// the order they were written. It hides nothing: the same events come back
// until acknowledged. It returns nil when the outbox is empty and
// store.ErrInvalid for a limit below 1. The slice and every Data are the
// caller's; Data is nil for an event written with nil Data.
//
// Events of writes committed concurrently may become visible out of
// position order: a write that took an earlier position can commit after a
// Pending call that already returned a later one. This never reorders the
// events of one lobby, whose writes are serialised by their compare-and-set.
func (s *Store) Pending(ctx context.Context, limit int) ([]store.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("pgxstore: pending: limit %d: %w", limit, store.ErrInvalid)
	}
	rows, err := s.pool.Query(ctx, s.q.pending, limit)
	if err != nil {
		return nil, s.fail(ctx, "pending", "", err)
	}
	defer rows.Close()
	var (
		out   []store.Event
		lobby []byte
		seq   int64
	)
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&lobby, &seq, &data); err != nil {
			return nil, s.fail(ctx, "pending", "", err)
		}
		out = append(out, store.Event{Lobby: string(lobby), Seq: uint64(seq), Data: data})
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "pending", "", err)
	}
	return out, nil
}

// Ack deletes the events named by (Lobby, Seq) from the outbox in one
// statement. Data is ignored; unknown or already acknowledged events are
// skipped, and an empty list sends nothing to the database.
func (s *Store) Ack(ctx context.Context, events []store.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	lobbies := make([][]byte, len(events))
	seqs := make([]int64, len(events))
	for i, e := range events {
		lobbies[i] = []byte(e.Lobby)
		seqs[i] = int64(e.Seq)
	}
	if _, err := s.pool.Exec(ctx, s.q.ack, lobbies, seqs); err != nil {
		return s.fail(ctx, "ack", "", err)
	}
	return nil
}
