package pgxstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lobbyhost/lobbyhost/internal/adaptertest"
	"github.com/lobbyhost/lobbyhost/store"
)

var batchBase = time.Unix(1_700_000_000, 0)

// mustWrite writes w or fails the test.
func mustWrite(t *testing.T, s *Store, w store.Write) {
	t.Helper()
	if err := s.Write(ctxT(t), w); err != nil {
		t.Fatalf("Write(%q, expected %d): %v", w.ID, w.Expected, err)
	}
}

// versionOf returns the lobby's version as Load reports it.
func versionOf(t *testing.T, s *Store, id string) uint64 {
	t.Helper()
	rec, err := s.Load(ctxT(t), id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load(%q): %v", id, err)
	}
	return rec.Version
}

// TestWriteBatchConflictIsolation: one stale write in a batch conflicts
// alone; the others, given out of ID order, commit, and each outcome lands
// at its write's index (not at its place in the sorted pipeline).
func TestWriteBatchConflictIsolation(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	for _, id := range []string{"a", "b", "c"} {
		mustWrite(t, s, store.Write{ID: id, Data: []byte(id + "1")})
	}
	ws := []store.Write{
		{ID: "c", Expected: 1, Data: []byte("c2"), Effects: []byte("e"), At: batchBase},
		{ID: "a", Expected: 0, Data: []byte("stale")},                   // conflict: a is at 1
		{ID: "b", Expected: 1, Data: []byte("b2"), Deadline: batchBase}, // heartbeat
		{ID: "new", Expected: 0, Data: []byte("n1")},                    // creation without an entry
		{ID: "0new", Expected: 0, Data: []byte("m1"), Effects: []byte("e"), At: batchBase},
		{ID: "b", Expected: 1, Data: []byte("stale")}, // conflict: the b above made it 2
	}
	adaptertest.CheckOutcomes(t, s.WriteBatch(ctx, ws), []string{"ok", "conflict", "ok", "ok", "ok", "conflict"})
	for id, want := range map[string]string{"a": "a1", "b": "b2", "c": "c2", "new": "n1", "0new": "m1"} {
		rec, err := s.Load(ctx, id)
		if err != nil || string(rec.Data) != want {
			t.Errorf("Load(%q) = %q, %v; want %q", id, rec.Data, err, want)
		}
	}
	if rec, _ := s.Load(ctx, "b"); !rec.Deadline.Equal(batchBase) || rec.Version != 2 {
		t.Errorf("b = version %d, deadline %v; want 2, %v", rec.Version, rec.Deadline, batchBase)
	}
	if es, err := s.ReadLog(ctx, "c", 0, 10); err != nil || len(es) != 1 || es[0].Version != 2 {
		t.Errorf("ReadLog(c) = %+v, %v; want the entry at 2", es, err)
	}
}

// TestWriteBatchInvalidRefusedAlone: writes Write would refuse get
// ErrInvalid, are not sent, and the valid writes around them commit.
func TestWriteBatchInvalidRefusedAlone(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	ws := []store.Write{
		{ID: "ok1", Data: []byte("x")},
		{ID: "", Data: []byte("x")},
		{ID: "max", Expected: math.MaxUint64},
		{ID: "far", Deadline: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{ID: strings.Repeat("k", maxKeyLen+1)},
		{ID: "ok2", Effects: []byte("e")},
	}
	adaptertest.CheckOutcomes(t, s.WriteBatch(ctx, ws), []string{"ok", "invalid", "invalid", "invalid", "invalid", "ok"})
	for id, want := range map[string]uint64{"ok1": 1, "ok2": 1, "max": 0, "far": 0} {
		if got := versionOf(t, s, id); got != want {
			t.Errorf("version of %q = %d, want %d", id, got, want)
		}
	}
}

// TestWriteBatchSameIDInOrder: writes to one lobby apply in the given
// order, interleaved with other lobbies, whichever SQL each takes.
func TestWriteBatchSameIDInOrder(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	ws := []store.Write{
		{ID: "x", Expected: 0, Data: []byte("x1")}, // creation, no entry
		{ID: "y", Expected: 0, Data: []byte("y1")},
		{ID: "x", Expected: 1, Data: []byte("x2"), Effects: []byte("e2"), At: batchBase},
		{ID: "a", Expected: 0, Data: []byte("a1")},
		{ID: "x", Expected: 2, Data: []byte("x3")}, // heartbeat after an entry
		{ID: "x", Expected: 2, Data: []byte("late")},
		{ID: "x", Expected: 3, Data: []byte("x4"), Effects: []byte("e4"), At: batchBase},
	}
	adaptertest.CheckOutcomes(t, s.WriteBatch(ctx, ws), []string{"ok", "ok", "ok", "ok", "ok", "conflict", "ok"})
	rec, err := s.Load(ctx, "x")
	if err != nil || rec.Version != 4 || string(rec.Data) != "x4" {
		t.Fatalf("Load(x) = %+v, %v; want version 4 with x4", rec, err)
	}
	es, err := s.ReadLog(ctx, "x", 0, 10)
	if err != nil || len(es) != 2 || es[0].Version != 2 || string(es[0].Data) != "e2" || es[1].Version != 4 || string(es[1].Data) != "e4" {
		t.Errorf("ReadLog(x) = %+v, %v; want e2 at 2 and e4 at 4", es, err)
	}
}

// TestWriteBatchOneRoundTrip: once the statements are prepared on the
// connection, a batch of 16 writes, with and without entries, to lobbies
// that exist and that do not, is one socket write.
func TestWriteBatchOneRoundTrip(t *testing.T) {
	ctx := ctxT(t)
	pool, err := pgxpool.NewWithConfig(ctx, countingConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := newTestStoreOn(t, pool)
	batch := func(expected uint64) []store.Write {
		ws := make([]store.Write, 16)
		for i := range ws {
			ws[i] = store.Write{ID: fmt.Sprintf("l%02d", 15-i), Expected: expected, Data: []byte("d")}
			if i%2 == 0 {
				ws[i].Effects = []byte("e")
			}
		}
		return ws
	}
	for i, err := range s.WriteBatch(ctx, batch(0)) { // prepares the statements
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cc := conn.Conn().PgConn().Conn().(*countingConn)
	conn.Release()
	before := cc.writes.Load()
	for i, err := range s.WriteBatch(ctx, batch(1)) {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if got := cc.writes.Load() - before; got != 1 {
		t.Errorf("a batch of 16 writes took %d socket writes, want 1", got)
	}
}

// TestWriteBatchContext: a context done before the call writes nothing and
// reports the context's error for every write; one cancelled while the
// pipeline waits for a row lock reports, for every write, an error that is
// neither a conflict nor invalid and matches the context's error.
func TestWriteBatchContext(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	mustWrite(t, s, store.Write{ID: "held", Data: []byte("1")})

	done, cancel := context.WithCancel(ctx)
	cancel()
	ws := []store.Write{{ID: "a"}, {ID: "held", Expected: 1}}
	for i, err := range s.WriteBatch(done, ws) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("done context: outcome %d = %v, want context.Canceled", i, err)
		}
	}
	if v := versionOf(t, s, "a"); v != 0 {
		t.Errorf("done context: a is at version %d, want 0 (nothing written)", v)
	}

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, s.sql(`SELECT FROM _S_.lobbies WHERE id = 'held' FOR UPDATE`)); err != nil {
		t.Fatal(err)
	}
	mid, cancelMid := context.WithCancel(ctx)
	defer cancelMid()
	res := make(chan []error, 1)
	go func() { res <- s.WriteBatch(mid, ws) }()
	waitForLockWaiters(t, s, 1)
	cancelMid()
	errs := <-res
	adaptertest.CheckOutcomes(t, errs, []string{"other", "other"})
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled in flight: outcome %d = %v, want it to match context.Canceled", i, err)
		}
	}
}

// TestWriteBatchRollbackFallsBack: when one write makes the batch's
// transaction fail (here a log row in the way of its entry, which only
// damaged data can cause), the others are applied one by one and commit,
// and the failing one alone reports the error.
func TestWriteBatchRollbackFallsBack(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	var heard []error
	s.rolledBack = func(err error) { heard = append(heard, err) }
	for _, id := range []string{"a", "b", "c"} {
		mustWrite(t, s, store.Write{ID: id})
	}
	if _, err := s.pool.Exec(ctx, s.sql(`INSERT INTO _S_.log (lobby, version, at, data) VALUES ('b', $1, 0, '')`), toOrdered(2)); err != nil {
		t.Fatal(err)
	}
	ws := []store.Write{
		{ID: "c", Expected: 1, Effects: []byte("e")},
		{ID: "b", Expected: 1, Effects: []byte("e")},
		{ID: "a", Expected: 1},
	}
	errs := s.WriteBatch(ctx, ws)
	adaptertest.CheckOutcomes(t, errs, []string{"ok", "other", "ok"})
	var pe *pgconn.PgError
	if !errors.As(errs[1], &pe) || pe.Code != "23505" {
		t.Errorf("b: %v, want the unique violation", errs[1])
	}
	if len(heard) != 1 {
		t.Errorf("fell back %d times, want 1", len(heard))
	}
	for id, want := range map[string]uint64{"a": 2, "b": 1, "c": 2} {
		if got := versionOf(t, s, id); got != want {
			t.Errorf("version of %q = %d, want %d", id, got, want)
		}
	}
}

// TestWriteBatchConcurrentOverlapping: goroutines send batches over the
// same lobbies in different orders, each write expecting the version its
// goroutine last saw. Every outcome is nil or a conflict (no deadlock
// surfaces, and none needed the one-by-one fallback thanks to the sorted
// lock order), and each lobby's version counts exactly its winners: one
// per version.
func TestWriteBatchConcurrentOverlapping(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	var fallbacks sync.Map
	s.rolledBack = func(err error) { fallbacks.Store(err.Error(), true) }
	const lobbies, goroutines, rounds = 12, 6, 15
	ids := make([]string, lobbies)
	for i := range ids {
		ids[i] = fmt.Sprintf("lobby-%02d", i)
	}
	type key struct {
		id string
		v  uint64
	}
	var (
		mu      sync.Mutex
		winners = map[key]int{}
		wins    = map[string]uint64{}
		wg      sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range rounds {
				ws := make([]store.Write, 0, lobbies)
				for _, i := range rng.Perm(lobbies) {
					rec, err := s.Load(ctx, ids[i])
					if err != nil && !errors.Is(err, store.ErrNotFound) {
						t.Error(err)
						return
					}
					w := store.Write{ID: ids[i], Expected: rec.Version, Data: []byte{byte(g)}, Deadline: batchBase.Add(time.Duration(g) * time.Second)}
					if rng.IntN(2) == 0 {
						w.Effects, w.At = []byte{byte(g)}, batchBase
					}
					ws = append(ws, w)
				}
				errs := s.WriteBatch(ctx, ws)
				mu.Lock()
				for i, err := range errs {
					switch {
					case err == nil:
						winners[key{ws[i].ID, ws[i].Expected}]++
						wins[ws[i].ID]++
					case errors.Is(err, store.ErrConflict):
					default:
						t.Errorf("write %q expecting %d: %v", ws[i].ID, ws[i].Expected, err)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for k, n := range winners {
		if n != 1 {
			t.Errorf("%q expecting %d committed %d times", k.id, k.v, n)
		}
	}
	for _, id := range ids {
		if got := versionOf(t, s, id); got != wins[id] {
			t.Errorf("%q at version %d after %d committed writes", id, got, wins[id])
		}
	}
	fallbacks.Range(func(k, _ any) bool {
		t.Errorf("a batch fell back to single writes: %v", k)
		return true
	})
}

// TestWriteBatchNotifies: a subscriber hears a Change for every batched
// write with an entry, once the batch committed.
func TestWriteBatchNotifies(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	adaptertest.CheckBatchNotifies(t, ctx, s, time.Now())
}

// TestWriteBatchLarge: 500 writes, more than one pipeline, with a chain
// of writes to one lobby where the cut would fall, all commit.
func TestWriteBatchLarge(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	var ws []store.Write
	for i := range 495 {
		w := store.Write{ID: fmt.Sprintf("w%03d", i), Data: []byte("d")}
		if i%3 == 0 {
			w.Effects = []byte("e")
		}
		ws = append(ws, w)
	}
	// Sorted, "w253x" comes after w000..w253: positions 254 to 258, across
	// the cut at MaxBatch.
	for v := range uint64(5) {
		ws = append(ws, store.Write{ID: "w253x", Expected: v, Effects: []byte{byte(v)}})
	}
	errs := s.WriteBatch(ctx, ws)
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d (%q): %v", i, ws[i].ID, err)
		}
	}
	var n int
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT count(*) FROM _S_.lobbies WHERE version = 1`)).Scan(&n); err != nil || n != 495 {
		t.Errorf("%d lobbies at version 1 (%v), want 495", n, err)
	}
	if v := versionOf(t, s, "w253x"); v != 5 {
		t.Errorf("w253x at version %d, want 5", v)
	}
}

// TestClaimLogLocksInBatchOrder: ClaimLog locks cursors in lobby order, as
// a WriteBatch does, whatever the age order it picks them in. Here "b" has
// the older work, so a claim locking by age would take b's cursor and then
// wait for a's, held by a transaction that (like a batch writing a, then
// b) wants b's next: a deadlock. Locking by lobby, the claim waits for a
// first, holding nothing, and both go through.
func TestClaimLogLocksInBatchOrder(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	if err := s.RegisterConsumer(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, store.Write{ID: "b", Effects: []byte("e"), At: batchBase})
	mustWrite(t, s, store.Write{ID: "a", Effects: []byte("e"), At: batchBase.Add(time.Second)})

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	lockCursor := s.sql(`SELECT FROM _S_.cursors WHERE name = 'relay' AND lobby = $1 FOR UPDATE`)
	if _, err := tx.Exec(ctx, lockCursor, []byte("a")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		cs  []store.Cursor
		err error
	}
	res := make(chan result, 1)
	go func() {
		cs, err := s.ClaimLog(ctx, "relay", batchBase, 10, time.Minute)
		res <- result{cs, err}
	}()
	waitForLockWaiters(t, s, 1)
	if _, err := tx.Exec(ctx, lockCursor, []byte("b")); err != nil {
		t.Fatalf("locking b's cursor after a's while ClaimLog waits: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil {
		t.Fatalf("ClaimLog: %v", r.err)
	}
	if len(r.cs) != 2 || r.cs[0].Lobby != "b" || r.cs[1].Lobby != "a" {
		t.Errorf("ClaimLog = %+v, want b then a (oldest work first)", r.cs)
	}
}

// TestDeleteRetriesDeadlock: a Delete that folds (it locks the lobby's row,
// then the store floor) against a transaction that, like a WriteBatch that
// created a lobby, holds the floor shared and then wants that row, is the
// deadlock's victim (the other side waits with a longer deadlock_timeout),
// and runs again instead of reporting it.
func TestDeleteRetriesDeadlock(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	mustWrite(t, s, store.Write{ID: "b"}) // no log entry: its Delete folds
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SET LOCAL deadlock_timeout = '20s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, s.sql(`SELECT FROM _S_.store_floor FOR SHARE`)); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- s.Delete(ctx, store.Deletion{ID: "b", Expected: 1}) }()
	waitForLockWaiters(t, s, 1) // Delete holds b's row, waits for the floor
	if _, err := tx.Exec(ctx, s.sql(`SELECT FROM _S_.lobbies WHERE id = 'b' FOR UPDATE`)); err != nil {
		t.Fatalf("locking b after the floor: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("Delete = %v, want nil after running again", err)
	}
	if rec, err := s.Load(ctx, "b"); !errors.Is(err, store.ErrNotFound) || rec.Version != 1 {
		t.Errorf("Load(b) = %+v, %v; want ErrNotFound at floor 1", rec, err)
	}
}

// TestCutPieces: pieces are about size long, keep each lobby's writes
// together and in order, and cover every write once.
func TestCutPieces(t *testing.T) {
	ids := []string{"a", "b", "b", "b", "c", "d", "d", "e", "e", "e", "e", "e", "f"}
	ws := make([]store.Write, len(ids))
	send := make([]batched, len(ids))
	for i, id := range ids {
		ws[i] = store.Write{ID: id}
		send[i] = batched{i: i}
	}
	for _, size := range []int{1, 2, 3, 4, 100} {
		pieces := cutPieces(ws, send, size)
		var got []int
		owner := map[string]int{}
		for k, p := range pieces {
			if len(p) == 0 {
				t.Errorf("size %d: piece %d is empty", size, k)
			}
			for j, b := range p {
				got = append(got, b.i)
				id := ws[b.i].ID
				if o, ok := owner[id]; ok && o != k {
					t.Errorf("size %d: lobby %q in pieces %d and %d", size, id, o, k)
				}
				owner[id] = k
				// Only a lobby's run may carry a piece past size.
				if j >= size && ws[p[j-1].i].ID != id {
					t.Errorf("size %d: piece %d has %d writes, more than its lobbies' runs need", size, k, len(p))
				}
			}
		}
		for i, v := range got {
			if v != i {
				t.Fatalf("size %d: pieces hold %v, want every write once, in order", size, got)
			}
		}
	}
}
