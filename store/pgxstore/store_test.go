package pgxstore

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lobbyhost/lobbyhost/store"
)

// timeEqual compares instants, ignoring location and monotonic reading.
var timeEqual = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

// lazyPool returns a pool that has not connected (pgxpool connects on first
// use), so tests of New need no server.
func lazyPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatalf("pgxpool.New(%q): %v", dsn, err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestNewRejectsBadOptions(t *testing.T) {
	pool := lazyPool(t, exampleDSN)
	tests := []struct {
		name string
		pool *pgxpool.Pool
		opts []Option
	}{
		{"nil pool", nil, nil},
		{"empty schema", pool, []Option{WithSchema("")}},
		{"schema too long", pool, []Option{WithSchema(strings.Repeat("s", maxSchemaLen+1))}},
		{"schema with NUL", pool, []Option{WithSchema("a\x00b")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.pool, tt.opts...)
			if !errors.Is(err, store.ErrInvalid) || s != nil {
				t.Fatalf("New = %v, %v; want nil, an error wrapping %v", s, err, store.ErrInvalid)
			}
		})
	}
	s, err := New(pool, WithSchema(strings.Repeat("s", maxSchemaLen)))
	if err != nil {
		t.Fatalf("New with the longest schema name = %v, want nil", err)
	}
	if got, want := s.Schema(), strings.Repeat("s", maxSchemaLen); got != want {
		t.Errorf("Schema() = %q, want %q", got, want)
	}
	if d, _ := New(pool); d.Schema() != DefaultSchema {
		t.Errorf("default Schema() = %q, want %q", d.Schema(), DefaultSchema)
	}
}

// TestMigrateIsIdempotentAndConcurrent starts several migrations of one new
// schema at once (processes booting together), then one more.
func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	pool := testPool(t, 16)
	schema := uniqueSchema(t)
	t.Cleanup(func() { dropSchema(t, pool, schema) })
	s, err := New(pool, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	const n = 6
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = s.Migrate(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent Migrate #%d = %v, want nil", i, err)
		}
	}
	if err := s.Write(ctx, store.Write{ID: "a", Data: []byte("x")}); err != nil {
		t.Fatalf("Write after Migrate = %v", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate on an up-to-date schema = %v, want nil", err)
	}
	if r, err := s.Load(ctx, "a"); err != nil || r.Version != 1 {
		t.Fatalf("Load after re-Migrate = %+v, %v; want version 1 kept", r, err)
	}
	if sql := s.MigrationSQL(); !strings.Contains(sql, `"`+schema+`".lobbies`) {
		t.Errorf("MigrationSQL() does not name the table in schema %q:\n%s", schema, sql)
	}
}

// TestSchemasAreIsolated: two stores in two schemas of one database share
// nothing.
func TestSchemasAreIsolated(t *testing.T) {
	a, b := newTestStore(t), newTestStore(t)
	ctx := ctxT(t)
	deadline := time.Unix(100, 0)
	if err := a.Write(ctx, store.Write{ID: "x", Data: []byte("a"), Deadline: deadline, Effects: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Load(ctx, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other schema: Load = %+v, %v; want %v", r, err, store.ErrNotFound)
	}
	if d, err := b.Due(ctx, deadline, 10); err != nil || len(d) != 0 {
		t.Errorf("other schema: Due = %v, %v; want none", d, err)
	}
	if p, err := b.ReadLog(ctx, "x", 0, 10); err != nil || len(p) != 0 {
		t.Errorf("other schema: ReadLog = %v, %v; want none", p, err)
	}
	// The same ID can be created in b, independently.
	if err := b.Write(ctx, store.Write{ID: "x", Data: []byte("b")}); err != nil {
		t.Errorf("other schema: creating the same ID = %v, want nil", err)
	}
}

// TestOddSchemaName: a schema name with quotes, dots, spaces and capitals
// is quoted everywhere it appears (identifiers, the functions' bodies, the
// notification channel).
func TestOddSchemaName(t *testing.T) {
	pool := testPool(t, 16)
	schema := `Odd "Name".it's ` + uniqueSchema(t)
	t.Cleanup(func() { dropSchema(t, pool, schema) })
	s, err := New(pool, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate = %v", err)
	}
	nctx, cancel := context.WithCancel(ctx)
	defer cancel()
	feed, err := s.Subscribe(nctx)
	if err != nil {
		t.Fatalf("Subscribe = %v", err)
	}
	if err := s.RegisterConsumer(ctx, "c"); err != nil {
		t.Fatalf("RegisterConsumer = %v", err)
	}
	at := time.Unix(1_700_000_000, 0).UTC()
	if err := s.Write(ctx, store.Write{ID: "l", Data: []byte("d"), At: at, Effects: []byte("e")}); err != nil {
		t.Fatalf("Write = %v", err)
	}
	if err := s.Write(ctx, store.Write{ID: "l", Expected: 1, Data: []byte("d2"), At: at, Effects: []byte{}}); err != nil {
		t.Fatalf("Write = %v", err)
	}
	got, err := s.ReadLog(ctx, "l", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Entry{{Lobby: "l", Version: 1, At: at, Data: []byte("e")}, {Lobby: "l", Version: 2, At: at, Data: []byte{}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ReadLog (-want +got):\n%s", d)
	}
	if c, err := s.ClaimLog(ctx, "c", at, 10, time.Second); err != nil || len(c) != 1 || c[0] != (store.Cursor{Lobby: "l"}) {
		t.Errorf("ClaimLog = %v, %v; want lobby l after 0", c, err)
	}
	if err := s.Delete(ctx, store.Deletion{ID: "l", Expected: 2}); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	receiveChange(t, feed, store.Change{Lobby: "l", Version: 2}, "Writes in an oddly named schema")
}

// TestFullUint64Range: versions and log positions above math.MaxInt64
// survive the bigint columns and keep their order.
func TestFullUint64Range(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	const top = math.MaxUint64
	if err := s.Write(ctx, store.Write{ID: "v", Data: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, store.Deletion{ID: "v", Expected: 1, Floor: top - 1}); err != nil {
		t.Fatalf("Delete with floor MaxUint64-1 = %v", err)
	}
	if r, err := s.Load(ctx, "v"); !errors.Is(err, store.ErrNotFound) || r.Version != top-1 {
		t.Fatalf("Load after Delete = %+v, %v; want floor %d and %v", r, err, uint64(top-1), store.ErrNotFound)
	}
	if err := s.Write(ctx, store.Write{ID: "w", Expected: 1<<63 - 2, Effects: []byte("a")}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Write to a new ID expecting 2^63-2 = %v, want %v", err, store.ErrConflict)
	}
	if err := s.Write(ctx, store.Write{ID: "v", Expected: top - 1, Data: []byte("2"), Effects: []byte("last")}); err != nil {
		t.Fatalf("Write expecting MaxUint64-1 = %v", err)
	}
	want := store.Record{ID: "v", Version: top, Data: []byte("2")}
	if r, err := s.Load(ctx, "v"); err != nil || !cmp.Equal(want, r, timeEqual) {
		t.Fatalf("Load = %+v, %v; want %+v", r, err, want)
	}
	if err := s.Write(ctx, store.Write{ID: "v", Expected: top}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Write expecting MaxUint64 = %v, want %v", err, store.ErrInvalid)
	}
	// Positions above 2^63 order after those below it. The lobby was
	// created on the store-wide floor, so what lies below it counts as
	// trimmed.
	for _, after := range []uint64{0, 1 << 62, 1<<63 - 1, 1 << 63, top - 2} {
		var ce *store.CompactedError
		if _, err := s.ReadLog(ctx, "v", after, 10); !errors.As(err, &ce) || ce.Trimmed != top-1 {
			t.Fatalf("ReadLog after %d = %v; want compacted up to MaxUint64-1", after, err)
		}
	}
	if got, err := s.ReadLog(ctx, "v", top-1, 10); err != nil || len(got) != 1 || got[0].Version != top || string(got[0].Data) != "last" {
		t.Fatalf("ReadLog after MaxUint64-1 = %+v, %v; want the entry at MaxUint64", got, err)
	}
	if got, err := s.ReadLog(ctx, "v", top, 10); err != nil || len(got) != 0 {
		t.Fatalf("ReadLog after MaxUint64 = %+v, %v; want none", got, err)
	}
	if h, err := s.LogHeads(ctx, []string{"v", "w"}); err != nil || h[0] != top || h[1] != 0 {
		t.Fatalf("LogHeads = %v, %v; want [MaxUint64 0]", h, err)
	}
	// Deleting it folds nothing (the log keeps the entry); with the floor
	// passed as MaxUint64 the tombstone keeps that.
	if err := s.Delete(ctx, store.Deletion{ID: "v", Expected: top}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Load(ctx, "v"); !errors.Is(err, store.ErrNotFound) || r.Version != top {
		t.Fatalf("Load after the second Delete = %+v, %v; want floor MaxUint64", r, err)
	}
}

// TestNilAndEmptyDataStayApart: the store keeps nil and empty data apart
// (storetest treats them alike, so this is stricter than the contract).
func TestNilAndEmptyDataStayApart(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	if err := s.Write(ctx, store.Write{ID: "nil"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, store.Write{ID: "empty", Data: []byte{}}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Load(ctx, "nil"); err != nil || r.Data != nil {
		t.Errorf("Load(nil data) = %#v, %v; want nil Data", r.Data, err)
	}
	if r, err := s.Load(ctx, "empty"); err != nil || r.Data == nil || len(r.Data) != 0 {
		t.Errorf("Load(empty data) = %#v, %v; want non-nil empty Data", r.Data, err)
	}
	if err := s.Write(ctx, store.Write{ID: "nil", Expected: 1, Effects: []byte{}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadLog(ctx, "nil", 0, 10)
	if err != nil || len(got) != 1 || got[0].Version != 2 || got[0].Data == nil || len(got[0].Data) != 0 {
		t.Errorf("ReadLog = %#v, %v; want one empty entry at 2 (the nil Effects appended none)", got, err)
	}
}

// TestDeadlineRange: nanosecond-exact deadlines inside the int64 range,
// ErrInvalid outside it, and any now accepted by Due and Claim.
func TestDeadlineRange(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	lo := time.Unix(0, math.MinInt64)
	hi := time.Unix(0, math.MaxInt64)
	for _, d := range []time.Time{lo.Add(-1), hi.Add(1), time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if err := s.Write(ctx, store.Write{ID: "r", Deadline: d}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Write with deadline %v = %v, want %v", d, err, store.ErrInvalid)
		}
	}
	if _, err := s.Load(ctx, "r"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a rejected Write stored something: Load = %v", err)
	}
	loc := time.FixedZone("odd", 3*3600+1800)
	edges := map[string]time.Time{"lo": lo, "hi": hi, "mid": time.Date(2031, 3, 14, 15, 9, 26, 535897932, loc)}
	for id, d := range edges {
		if err := s.Write(ctx, store.Write{ID: id, Deadline: d}); err != nil {
			t.Fatalf("Write with deadline %v = %v", d, err)
		}
		r, err := s.Load(ctx, id)
		if err != nil || !r.Deadline.Equal(d) {
			t.Errorf("Load(%s).Deadline = %v, %v; want %v", id, r.Deadline, err, d)
		}
	}
	far := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	got, err := s.Due(ctx, far, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Due{{ID: "lo", Deadline: lo}, {ID: "mid", Deadline: edges["mid"]}, {ID: "hi", Deadline: hi}}
	if d := cmp.Diff(want, got, timeEqual); d != "" {
		t.Errorf("Due(year 9999) (-want +got):\n%s", d)
	}
	if got, err := s.Due(ctx, time.Time{}, 10); err != nil || got != nil {
		t.Errorf("Due(zero time) = %v, %v; want nil, nil", got, err)
	}
	if got, err := s.Due(ctx, lo, 10); err != nil || len(got) != 1 || got[0].ID != "lo" {
		t.Errorf("Due(earliest storable instant) = %v, %v; want lobby lo", got, err)
	}
	if got, err := s.Claim(ctx, far, 10, math.MaxInt64); err != nil || len(got) != 3 {
		t.Errorf("Claim(year 9999, longest hold) = %v, %v; want all three", got, err)
	}
}

// TestIDsAreBytes: IDs are bytea, so they compare and sort by bytes (not
// by the database collation) and may hold any byte, even invalid UTF-8 and
// NUL, which a text column would refuse.
func TestIDsAreBytes(t *testing.T) {
	s := newTestStore(t)
	ctx := ctxT(t)
	ids := []string{"a", "B", "a\x00", "\xff\xfe", "ä", "A"}
	at := time.Unix(1_000, 1)
	for i, id := range ids {
		if err := s.Write(ctx, store.Write{ID: id, Data: []byte{byte(i)}, Deadline: at}); err != nil {
			t.Fatalf("Write(%q) = %v", id, err)
		}
	}
	for i, id := range ids {
		r, err := s.Load(ctx, id)
		if err != nil || r.ID != id || len(r.Data) != 1 || r.Data[0] != byte(i) {
			t.Errorf("Load(%q) = %+v, %v; want data %d", id, r, err, i)
		}
	}
	got, err := s.Due(ctx, at, 10)
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, d := range got {
		gotIDs = append(gotIDs, d.ID)
	}
	want := []string{"A", "B", "a", "a\x00", "ä", "\xff\xfe"}
	if d := cmp.Diff(want, gotIDs); d != "" {
		t.Errorf("Due order is not byte order (-want +got):\n%s", d)
	}
}

// TestNow: the database clock agrees with this machine's (same host).
func TestNow(t *testing.T) {
	s := newTestStore(t)
	before := time.Now()
	got, err := s.Now(ctxT(t))
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if got.Before(before.Add(-time.Second)) || got.After(after.Add(time.Second)) {
		t.Errorf("Now() = %v, want within a second of [%v, %v]", got, before, after)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Now(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Now(cancelled) = %v, want %v", err, context.Canceled)
	}
}

// TestUnreachableServer: with no server, every method fails with a wrapped
// error that names the operation and is none of the sentinels.
func TestUnreachableServer(t *testing.T) {
	// Port 1 on loopback: nothing listens there, the connection is refused.
	pool := lazyPool(t, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	s, err := New(pool)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	calls := map[string]func() error{
		"migrate":           func() error { return s.Migrate(ctx) },
		"load":              func() error { _, err := s.Load(ctx, "x"); return err },
		"write":             func() error { return s.Write(ctx, store.Write{ID: "x"}) },
		"delete":            func() error { return s.Delete(ctx, store.Deletion{ID: "x", Expected: 1}) },
		"due":               func() error { _, err := s.Due(ctx, time.Now(), 1); return err },
		"claim":             func() error { _, err := s.Claim(ctx, time.Now(), 1, time.Second); return err },
		"read log":          func() error { _, err := s.ReadLog(ctx, "x", 0, 1); return err },
		"log heads":         func() error { _, err := s.LogHeads(ctx, []string{"x"}); return err },
		"trim log":          func() error { _, err := s.TrimLog(ctx, time.Now(), 1); return err },
		"register consumer": func() error { return s.RegisterConsumer(ctx, "c") },
		"claim log":         func() error { _, err := s.ClaimLog(ctx, "c", time.Now(), 1, time.Second); return err },
		"commit log":        func() error { return s.CommitLog(ctx, "c", "x", 1) },
		"subscribe":         func() error { _, err := s.Subscribe(ctx); return err },
		"now":               func() error { _, err := s.Now(ctx); return err },
	}
	for op, call := range calls {
		err := call()
		if err == nil {
			t.Errorf("%s without a server = nil, want an error", op)
			continue
		}
		for _, sentinel := range []error{store.ErrNotFound, store.ErrConflict, store.ErrInvalid, context.Canceled, context.DeadlineExceeded} {
			if errors.Is(err, sentinel) {
				t.Errorf("%s without a server = %v, which matches %v", op, err, sentinel)
			}
		}
		if !strings.HasPrefix(err.Error(), "pgxstore: "+op) {
			t.Errorf("%s without a server = %q, want it to start with %q", op, err, "pgxstore: "+op)
		}
	}
}

// receiveChange waits (boundedly) until feed holds want, failing if it was
// lost or names another change of the lobby instead.
func receiveChange(t *testing.T, feed *store.Feed, want store.Change, after string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case <-feed.Ready():
		case <-timeout:
			t.Fatalf("no change %+v within 10s after %s", want, after)
		}
		changes, lost := feed.Take()
		if lost {
			t.Fatalf("feed lost waiting for %+v after %s", want, after)
		}
		for _, c := range changes {
			if c == want {
				return
			}
			t.Logf("change %+v while waiting for %+v", c, want)
		}
	}
}

// receiveLost waits (boundedly) until feed reports itself lost.
func receiveLost(t *testing.T, feed *store.Feed, after string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case <-feed.Ready():
		case <-timeout:
			t.Fatalf("feed not lost within 10s after %s", after)
		}
		if _, lost := feed.Take(); lost {
			return
		}
	}
}
