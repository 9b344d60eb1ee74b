package pgxstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// dsnEnv names the environment variable holding the test server's DSN.
const dsnEnv = "LOBBYHOST_POSTGRES_DSN"

const exampleDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testPools caches one pool per size for the whole test binary.
var testPools struct {
	sync.Mutex
	m map[int32]*pgxpool.Pool
}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// Started by a multi-process test as a server process.
		os.Exit(childMain())
	}
	code := m.Run()
	testPools.Lock()
	for _, p := range testPools.m {
		p.Close()
	}
	testPools.Unlock()
	os.Exit(code)
}

// testDSN returns the DSN of the test server. Without one it skips the test,
// except under CI=true, where a missing server is a failure.
func testDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(dsnEnv)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%s is not set, and CI=true requires the PostgreSQL tests to run (e.g. %s=%s)", dsnEnv, dsnEnv, exampleDSN)
		}
		tb.Skipf("PostgreSQL tests skipped: set %s to enable them, e.g. %s=%s", dsnEnv, dsnEnv, exampleDSN)
	}
	return dsn
}

// testPool returns a shared pool of at most maxConns connections to the
// test server, failing the test if the server does not answer.
func testPool(tb testing.TB, maxConns int32) *pgxpool.Pool {
	tb.Helper()
	dsn := testDSN(tb)
	testPools.Lock()
	defer testPools.Unlock()
	if p := testPools.m[maxConns]; p != nil {
		return p
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		tb.Fatalf("%s=%q does not parse: %v", dsnEnv, dsn, err)
	}
	cfg.MaxConns = maxConns
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = p.Ping(ctx)
	}
	if err != nil {
		tb.Fatalf("PostgreSQL at %s=%q is unreachable: %v", dsnEnv, dsn, err)
	}
	if testPools.m == nil {
		testPools.m = make(map[int32]*pgxpool.Pool)
	}
	testPools.m[maxConns] = p
	return p
}

// uniqueSchema returns a schema name no other test, process or earlier run
// uses.
func uniqueSchema(tb testing.TB) string {
	tb.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	return "lh_test_" + hex.EncodeToString(b[:])
}

// newTestStore returns a migrated Store in a fresh schema on the shared
// pool, and drops the schema when the test ends.
func newTestStore(tb testing.TB, opts ...Option) *Store {
	tb.Helper()
	return newTestStoreOn(tb, testPool(tb, 16), opts...)
}

func newTestStoreOn(tb testing.TB, pool *pgxpool.Pool, opts ...Option) *Store {
	tb.Helper()
	schema := uniqueSchema(tb)
	s, err := New(pool, append([]Option{WithSchema(schema)}, opts...)...)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tb.Cleanup(func() { dropSchema(tb, pool, schema) })
	if err := s.Migrate(ctx); err != nil {
		tb.Fatalf("Migrate: %v", err)
	}
	return s
}

func dropSchema(tb testing.TB, pool *pgxpool.Pool, schema string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+quoteIdent(schema)+" CASCADE"); err != nil {
		tb.Errorf("dropping schema %s: %v", schema, err)
	}
}

// sql fills in the schema placeholder _S_ of a test statement.
func (s *Store) sql(q string) string {
	return strings.ReplaceAll(q, "_S_.", quoteIdent(s.schema)+".")
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return ctx
}
