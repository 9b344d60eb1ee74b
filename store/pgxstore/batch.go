package pgxstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lobbyhost/lobbyhost/store"
)

// MaxBatch is about the most writes [Store.WriteBatch] sends in one
// pipeline (one round trip, one transaction). A longer batch is cut into
// pieces of MaxBatch writes, never between two writes to the same lobby
// (a piece grows to keep them together), and up to four pieces are in
// flight at once, each on a connection of its own.
const MaxBatch = 256

// batched is one write of a WriteBatch that passed validation.
type batched struct {
	i    int // index in the caller's slice
	sql  string
	args []any
}

// WriteBatch applies each of ws as [Store.Write] would and returns one
// outcome per write, in the order of ws. It implements store.BatchWriter.
//
// Every write is validated first, as Write does: one that Write would refuse
// with store.ErrInvalid gets that error here and is not sent. A lone valid
// write is simply passed to Write. Otherwise the valid writes are
// sorted by lobby ID (keeping the given order among writes to the same ID)
// and sent in one pipelined round trip, which PostgreSQL runs as one
// implicit transaction: one commit, one WAL flush, for the whole batch (per
// piece of about [MaxBatch] writes for a longer one). Each statement is still its own
// compare-and-set on its own lobby's row: a write with a log entry calls the
// schema's write function (which notifies subscribers when the transaction
// commits), and one without tries the heartbeat UPDATE and calls the write
// function in the same statement only when that matches nothing. A version
// conflict is an answer, not an error, so it leaves the other writes alone.
// The sorted order makes every batch lock the rows it writes in the same
// order, so concurrent batches wait for each other instead of deadlocking.
//
// If PostgreSQL rejects the transaction as a whole (a deadlock with a
// Delete, a serialization failure, an error raised by one write), nothing of
// it was committed; WriteBatch then applies its writes again one by one with
// Write, so that each gets an outcome of its own. A lost connection or a
// context that ends while a pipeline is in flight leaves every write of that
// pipeline with an unknown outcome, reported as an error that is neither
// store.ErrConflict nor store.ErrInvalid; writes of pieces not yet sent
// get the context's error and are not written.
//
// WriteBatch does not retain ws or any slice in it.
func (s *Store) WriteBatch(ctx context.Context, ws []store.Write) []error {
	errs := make([]error, len(ws))
	if len(ws) == 0 {
		return errs
	}
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	send := make([]batched, 0, len(ws))
	for i := range ws {
		b, err := s.prepareBatched(&ws[i])
		if err != nil {
			errs[i] = err
			continue
		}
		b.i = i
		send = append(send, b)
	}
	if len(send) == 1 {
		// Nothing to share: the single write's own path is as short.
		errs[send[0].i] = s.Write(ctx, ws[send[0].i])
		return errs
	}
	// One lock order for every batch of every process: by lobby ID, byte
	// order (as PostgreSQL compares bytea), the given order within an ID.
	slices.SortStableFunc(send, func(a, b batched) int {
		return strings.Compare(ws[a.i].ID, ws[b.i].ID)
	})
	pieces := cutPieces(ws, send, MaxBatch)
	if len(pieces) == 1 {
		s.sendBatch(ctx, ws, pieces[0], errs)
		return errs
	}
	// Pieces hold disjoint lobbies, each locked in ID order, so they can
	// run side by side on connections of their own.
	sem := make(chan struct{}, maxParallelPieces)
	var wg sync.WaitGroup
	for _, p := range pieces {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := ctx.Err(); err != nil {
				for _, b := range p {
					errs[b.i] = err
				}
				return
			}
			s.sendBatch(ctx, ws, p, errs)
		})
	}
	wg.Wait()
	return errs
}

// maxParallelPieces bounds how many pipelines one WriteBatch has in flight.
const maxParallelPieces = 4

// cutPieces cuts send (sorted by ID) into pieces of about size writes,
// never between two writes to the same lobby, so that each lobby's writes
// stay in one transaction, in order (a piece grows past size only to end a
// lobby's writes).
func cutPieces(ws []store.Write, send []batched, size int) [][]batched {
	var pieces [][]batched
	for len(send) > 0 {
		n := min(len(send), size)
		for n < len(send) && ws[send[n].i].ID == ws[send[n-1].i].ID {
			n++
		}
		pieces = append(pieces, send[:n])
		send = send[n:]
	}
	return pieces
}

// prepareBatched validates w as Write does and returns the statement that
// applies it.
func (s *Store) prepareBatched(w *store.Write) (batched, error) {
	if err := w.Validate(); err != nil {
		return batched{}, fmt.Errorf("pgxstore: %w", err)
	}
	if err := validKey("write", "lobby ID", w.ID); err != nil {
		return batched{}, err
	}
	deadline, ok := toNanos(w.Deadline)
	if !ok {
		return batched{}, fmt.Errorf("pgxstore: write %q: deadline %v outside the storable range: %w", w.ID, w.Deadline, store.ErrInvalid)
	}
	id := []byte(w.ID)
	next := w.Expected + 1
	sessions, err := sessionList("write", w.Sessions)
	if err != nil {
		return batched{}, err
	}
	if w.Effects == nil {
		return batched{sql: s.q.updateOrWrite, args: []any{
			id, int64(w.Expected), int64(next), w.Data, deadline,
			toOrdered(w.Expected), toOrdered(next), sessions,
		}}, nil
	}
	return batched{sql: s.q.write, args: []any{
		id, int64(w.Expected), int64(next), toOrdered(w.Expected), toOrdered(next),
		w.Data, deadline, true, w.At.UnixMicro(), w.Effects,
		int64(s.retention.Entries), s.channel, changePayload(w.ID, next), sessions,
	}}, nil
}

// sendBatch runs part (at most MaxBatch writes, sorted) in one pipeline and
// stores each write's outcome in errs.
func (s *Store) sendBatch(ctx context.Context, ws []store.Write, part []batched, errs []error) {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(part))}
	for _, w := range part {
		b.Queue(w.sql, w.args...)
	}
	written := make([]bool, len(part))
	br := s.pool.SendBatch(ctx, b)
	var err error
	for k := range part {
		if err = br.QueryRow().Scan(&written[k]); err != nil {
			break
		}
	}
	// Close reads the outcome of the implicit commit.
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err == nil:
		for k, w := range part {
			if !written[k] {
				errs[w.i] = fmt.Errorf("pgxstore: write %q: version is not %d: %w", ws[w.i].ID, ws[w.i].Expected, store.ErrConflict)
			}
		}
	case isRollback(ctx, err):
		// Nothing of the transaction committed: give every write its own.
		if s.rolledBack != nil {
			s.rolledBack(err)
		}
		for _, w := range part {
			errs[w.i] = s.Write(ctx, ws[w.i])
		}
	default:
		for _, w := range part {
			errs[w.i] = s.fail(ctx, "write batch", ws[w.i].ID, err)
		}
	}
}

// isRollback reports whether err says for sure that the server rolled the
// batch's transaction back: an ERROR (not FATAL or PANIC, which end the
// session and may leave a commit unconfirmed) while the caller's context is
// still alive (a cancelled statement is reported as the context's error).
func isRollback(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	sev := pe.SeverityUnlocalized
	if sev == "" {
		sev = pe.Severity
	}
	return sev == "ERROR"
}

// deadlockRetries bounds how often retryDeadlock runs a statement again.
const deadlockRetries = 3

// retryDeadlock runs f, one statement in its own implicit transaction, and
// runs it again when PostgreSQL aborted it to break a deadlock: the abort
// rolled it back, so running it again is safe. Delete and TrimLog use it.
// A statement that locks a lobby's row and then the store floor can meet a
// WriteBatch that holds the floor shared (after creating a lobby) and waits
// for that row; single writes never hold one while waiting for the other.
func retryDeadlock(ctx context.Context, f func() error) error {
	for i := 0; ; i++ {
		err := f()
		var pe *pgconn.PgError
		if err == nil || i == deadlockRetries || ctx.Err() != nil || !errors.As(err, &pe) || pe.Code != "40P01" {
			return err
		}
	}
}
