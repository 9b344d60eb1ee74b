package pgxstore

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lobbyhost/lobbyhost/lobbytest"
	"github.com/lobbyhost/lobbyhost/store"
)

// harness gives the Service-level suite (lobbytest) Stores in fresh schemas
// on the test server; Connect opens a second pool on the same schema, as
// another process would. It counts round trips, and restarts the server
// only when LOBBYHOST_POSTGRES_CTL is set (it stops the server for
// everyone using it).
type harness struct {
	conns int32 // the size of the pools it opens
}

var (
	_ lobbytest.Restarter        = harness{}
	_ lobbytest.RoundTripCounter = harness{}
	_ lobbytest.ErrorNamer       = harness{}
)

func (h harness) NewStore(t testing.TB) store.Store {
	t.Helper()
	return newTestStoreOn(t, testPool(t, h.conns), WithRetention(lobbytest.MinRetention))
}

func (h harness) Connect(t testing.TB, s store.Store) store.Store {
	t.Helper()
	s2, err := New(h.ownPool(t), WithSchema(s.(*Store).Schema()), WithRetention(lobbytest.MinRetention))
	if err != nil {
		t.Fatal(err)
	}
	return s2
}

// ownPool opens a pool of h.conns connections that the test closes.
func (h harness) ownPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = h.conns
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Restartable stops and starts the test server itself with the command in
// LOBBYHOST_POSTGRES_CTL. PostgreSQL keeps every committed transaction, so
// the harness is no lobbytest.VolatileRestarter: there is no server without
// persistence to test.
func (h harness) Restartable(t *testing.T) (store.Store, lobbytest.Server) {
	skipWithoutCtl(t)
	base := h.NewStore(t)
	s, err := New(h.ownPool(t), WithSchema(base.(*Store).Schema()), WithRetention(lobbytest.MinRetention))
	if err != nil {
		t.Fatal(err)
	}
	srv := &ctlServer{}
	t.Cleanup(func() { // whatever happens, leave it running
		if srv.down {
			_ = pgctl(t, "start")
		}
	})
	return s, srv
}

func (harness) StoreName() string { return "pgxstore" }

// CountingStore counts socket writes per statement: pgx sends one
// exchange's messages in one write, so a statement that takes one write is
// one round trip.
func (h harness) CountingStore(t *testing.T) (store.Store, func() []string) {
	pool, rt := countingPool(t)
	s := newTestStoreOn(t, pool)
	taken := 0
	return s, func() []string {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		var out []string
		for _, r := range rt.runs[taken:] {
			for range r.writes {
				out = append(out, r.sql)
			}
		}
		taken = len(rt.runs)
		return out
	}
}

// ctlServer stops and starts the test server with LOBBYHOST_POSTGRES_CTL.
type ctlServer struct{ down bool }

func (s *ctlServer) Kill(t *testing.T) {
	if err := pgctl(t, "stop"); err != nil {
		t.Fatalf("stopping the server: %v", err)
	}
	s.down = true
}

func (s *ctlServer) Start(t *testing.T) {
	if err := pgctl(t, "start"); err != nil {
		t.Fatalf("starting the server: %v", err)
	}
	s.down = false
}

// TestService runs the Service-level suite. Its StoreRestart/durable
// subtest stops the server for everyone, so it runs only with
// LOBBYHOST_POSTGRES_CTL set; run it on its own:
//
//	LOBBYHOST_POSTGRES_CTL='pg_ctlcluster --skip-systemctl-redirect 15 main' \
//	go test -run 'TestService/StoreRestart' ./store/pgxstore/
func TestService(t *testing.T) { lobbytest.RunService(t, harness{conns: 16}) }

// BenchmarkServiceHeartbeat and BenchmarkServiceTransition measure
// lobby.Service with Run going on pgxstore, the way every adapter does
// (package lobbytest): heartbeats/s is what bench/run.sh sets beside
// pgbench's one-row UPDATE ceiling. Each process's pool has a connection per
// client plus two for Run.
func BenchmarkServiceHeartbeat(b *testing.B)   { lobbytest.BenchHeartbeat(b, harness{conns: 34}) }
func BenchmarkServiceExpiryBurst(b *testing.B) { lobbytest.BenchExpiryBurst(b, harness{conns: 34}) }
func BenchmarkServiceTransition(b *testing.B)  { lobbytest.BenchTransition(b, harness{conns: 34}) }
