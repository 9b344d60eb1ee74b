package pgxstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lobbyhost/lobbyhost/store"
)

// countingConn counts the writes a connection makes to its socket. pgx
// buffers the messages of one exchange and flushes them with one write, so
// the count bounds the number of round trips from above.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// roundTrips records, per statement execution, how many socket writes it
// took.
type roundTrips struct {
	mu   sync.Mutex
	runs []run
}

type run struct {
	sql    string
	writes int64
}

type rtKey struct{}

type rtStart struct {
	sql    string
	writes int64
}

func writesOf(conn *pgx.Conn) int64 {
	return conn.PgConn().Conn().(*countingConn).writes.Load()
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, rtKey{}, rtStart{data.SQL, writesOf(conn)})
}

func (r *roundTrips) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, _ pgx.TraceQueryEndData) {
	st := ctx.Value(rtKey{}).(rtStart)
	r.mu.Lock()
	r.runs = append(r.runs, run{st.sql, writesOf(conn) - st.writes})
	r.mu.Unlock()
}

// last returns the socket writes of the latest execution of sql, and how
// often sql ran.
func (r *roundTrips) last(sql string) (writes int64, runs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.runs {
		if x.sql == sql {
			writes = x.writes
			runs++
		}
	}
	return writes, runs
}

// countingConfig is the configuration of a one-connection pool whose
// connection counts its socket writes (a *countingConn).
func countingConfig(t *testing.T) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	var d net.Dialer
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c}, nil
	}
	return cfg
}

// countingPool returns a one-connection pool whose connection counts its
// socket writes and whose tracer records every statement, for the tests
// that count round trips of single statements (the tracer does not follow
// batches).
func countingPool(t *testing.T) (*pgxpool.Pool, *roundTrips) {
	t.Helper()
	cfg := countingConfig(t)
	rt := &roundTrips{}
	cfg.ConnConfig.Tracer = rt
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, rt
}

// TestWriteIsOneRoundTrip: once pgx has prepared a statement on a
// connection, a heartbeat Write (no log entry), a Write with a log entry, a
// Load and a ReadLog each cost one statement and one round trip.
func TestWriteIsOneRoundTrip(t *testing.T) {
	ctx := ctxT(t)
	pool, rt := countingPool(t)
	s := newTestStoreOn(t, pool)

	base := time.Unix(1_700_000_000, 0)
	v := uint64(0)
	for i := range 3 {
		if err := s.Write(ctx, store.Write{ID: "hb", Expected: v, Data: []byte("lobby"), Deadline: base.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
		v++
	}
	for i := range 3 {
		if err := s.Write(ctx, store.Write{ID: "hb", Expected: v, Data: []byte("lobby"), Effects: []byte("joined"), At: base, Deadline: base.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
		v++
		if _, err := s.Load(ctx, "hb"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReadLog(ctx, "hb", 0, 10); err != nil {
			t.Fatal(err)
		}
	}
	for name, sql := range map[string]string{"heartbeat Write": s.q.update, "Write with a log entry": s.q.write, "Load": s.q.load, "ReadLog": s.q.readLog} {
		writes, runs := rt.last(sql)
		if runs < 2 || writes != 1 {
			t.Errorf("%s: ran %d times, the last taking %d socket writes; want >= 2 runs, the last taking 1", name, runs, writes)
		}
	}
}

// waitForLockWaiters waits until n statements on the store's schema wait
// for a lock, as pg_stat_activity reports them.
func waitForLockWaiters(t *testing.T, s *Store, n int) {
	t.Helper()
	waitLockWaiters(t, s, func(got int) bool { return got >= n }, fmt.Sprintf("at least %d", n))
}

// waitForNoLockWaiters waits until no statement on the store's schema waits
// for a lock any more.
func waitForNoLockWaiters(t *testing.T, s *Store) {
	t.Helper()
	waitLockWaiters(t, s, func(got int) bool { return got == 0 }, "no")
}

func waitLockWaiters(t *testing.T, s *Store, ok func(int) bool, what string) {
	t.Helper()
	ctx := ctxT(t)
	got := -1
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(5 * time.Millisecond) {
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND position($1 in query) > 0`, quoteIdent(s.schema)+".").Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		if ok(got) {
			return
		}
	}
	t.Fatalf("want %s statements waiting for a lock, still %d after 10s", what, got)
}

// TestBlockedWriterRechecksVersion: a Write that waits for the row lock of
// a concurrent transaction re-checks the version on the row that
// transaction committed, and so reports ErrConflict instead of
// overwriting it.
func TestBlockedWriterRechecksVersion(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	if err := s.Write(ctx, store.Write{ID: "l", Data: []byte("v1")}); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op once committed
	if _, err := tx.Exec(ctx, s.sql(`UPDATE _S_.lobbies SET version = 2, data = 'v2' WHERE id = 'l'`)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.Write(ctx, store.Write{ID: "l", Expected: 1, Data: []byte("lost")})
	}()
	waitForLockWaiters(t, s, 1)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrConflict) {
		t.Fatalf("blocked Write(Expected 1) after the other commit = %v, want %v", err, store.ErrConflict)
	}
	want := store.Record{ID: "l", Version: 2, Data: []byte("v2")}
	if r, err := s.Load(ctx, "l"); err != nil || !cmp.Equal(want, r, timeEqual) {
		t.Fatalf("Load = %+v, %v; want %+v", r, err, want)
	}
}

// TestBlockedCallsHonourContext: a Write and a Delete stuck behind a row
// lock return their context's error when it expires, and change nothing.
func TestBlockedCallsHonourContext(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	if err := s.Write(ctx, store.Write{ID: "l", Data: []byte("v1")}); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op once committed or rolled back
	if _, err := tx.Exec(ctx, s.sql(`SELECT 1 FROM _S_.lobbies WHERE id = 'l' FOR UPDATE`)); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func(context.Context) error{
		"Write": func(ctx context.Context) error {
			return s.Write(ctx, store.Write{ID: "l", Expected: 1, Data: []byte("v2")})
		},
		"Delete": func(ctx context.Context) error { return s.Delete(ctx, store.Deletion{ID: "l", Expected: 1}) },
	} {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		start := time.Now()
		err := call(cctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("blocked %s = %v, want an error matching %v", name, err, context.DeadlineExceeded)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("blocked %s returned after %v, want promptly after its 300ms deadline", name, el)
		}
	}
	// pgx cancels the server side of a call whose context ended with a
	// cancel request sent in the background, as it closes the connection.
	// Until that request lands the statement still waits for the lock, and
	// releasing the lock now would let it commit (the ambiguity every remote
	// commit has), so wait for the cancellation first.
	waitForNoLockWaiters(t, s)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	want := store.Record{ID: "l", Version: 1, Data: []byte("v1")}
	if r, err := s.Load(ctx, "l"); err != nil || !cmp.Equal(want, r, timeEqual) {
		t.Fatalf("Load = %+v, %v; want %+v unchanged", r, err, want)
	}
}

// TestClaimSkipsLockedRowsAndExpires walks one lobby set through the claim
// life cycle with explicit interleavings.
func TestClaimSkipsLockedRowsAndExpires(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	at := time.Unix(1_000, 0)
	for _, id := range []string{"a", "b", "c"} {
		if err := s.Write(ctx, store.Write{ID: id, Deadline: at}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(ds []store.Due) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	claim := func(now time.Time, want ...string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		got, err := s.Claim(cctx, now, 10, time.Minute)
		if err != nil {
			t.Fatalf("Claim(%v) = %v (a claimer must not wait for locked rows)", now.Sub(at), err)
		}
		if d := cmp.Diff(want, ids(got)); d != "" {
			t.Fatalf("Claim(%v) (-want +got):\n%s", now.Sub(at), d)
		}
	}

	// Another sweeper's claim transaction (or a write in flight) holds "a".
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op once committed or rolled back
	if _, err := tx.Exec(ctx, s.sql(`SELECT 1 FROM _S_.lobbies WHERE id = 'a' FOR UPDATE`)); err != nil {
		t.Fatal(err)
	}
	claim(at, "b", "c") // skips the locked row instead of waiting for it
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	claim(at, "a")                 // b and c are held until at+1m
	claim(at.Add(time.Minute - 1)) // all held
	if err := s.Write(ctx, store.Write{ID: "b", Expected: 1, Deadline: at}); err != nil {
		t.Fatal(err)
	}
	claim(at.Add(time.Second), "b")              // the Write released b; now held until at+1m+1s
	claim(at.Add(time.Minute), "a", "c")         // the holds of a and c ran out
	claim(at.Add(time.Minute + time.Second - 1)) // b is still held
	claim(at.Add(time.Minute+time.Second), "b")  // and now it is not
	if got, err := s.Due(ctx, at, 10); err != nil || len(got) != 3 {
		t.Fatalf("Due ignores claims: got %v, %v; want all three", got, err)
	}
}

// TestConcurrentClaimersGetDisjointSets: sweepers racing over one backlog
// claim every due lobby exactly once between them.
func TestConcurrentClaimersGetDisjointSets(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	const lobbies, sweepers = 200, 6
	at := time.Unix(2_000, 0)
	batch, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Rollback(context.Background()) //nolint:errcheck // a no-op once committed or rolled back
	for i := range lobbies {
		if _, err := batch.Exec(ctx, s.sql(`INSERT INTO _S_.lobbies (id, version, deadline) VALUES ($1, 1, $2)`),
			[]byte(fmt.Sprintf("l%03d", i)), at.UnixNano()+int64(i%7)); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	claimed := make([][]string, sweepers)
	errs := make([]error, sweepers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range sweepers {
		wg.Go(func() {
			<-start
			for {
				got, err := s.Claim(ctx, at.Add(time.Second), 7, time.Hour)
				if err != nil {
					errs[w] = err
					return
				}
				if len(got) == 0 {
					return
				}
				for _, d := range got {
					claimed[w] = append(claimed[w], d.ID)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	var all []string
	for w := range sweepers {
		if errs[w] != nil {
			t.Errorf("sweeper %d: Claim = %v", w, errs[w])
		}
		all = append(all, claimed[w]...)
	}
	slices.Sort(all)
	var want []string
	for i := range lobbies {
		want = append(want, fmt.Sprintf("l%03d", i))
	}
	if d := cmp.Diff(want, all); d != "" {
		t.Fatalf("union of all claims is not every lobby exactly once (-want +got):\n%s", d)
	}
}
