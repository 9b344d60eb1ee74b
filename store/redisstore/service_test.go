package redisstore_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/lobbytest"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
)

// harness gives the Service-level suite (lobbytest) Stores on the shared
// server, each in a fresh prefix; Connect opens a second client on the same
// prefix, as another process would. It restarts servers of its own (see
// restart_test.go) and counts commands.
type harness struct {
	shards int

	mu       sync.Mutex
	prefixes map[*redisstore.Store]string
}

func newHarness(shards int) *harness {
	return &harness{shards: shards, prefixes: map[*redisstore.Store]string{}}
}

var (
	_ lobbytest.Restarter         = (*harness)(nil)
	_ lobbytest.VolatileRestarter = (*harness)(nil)
	_ lobbytest.RoundTripCounter  = (*harness)(nil)
	_ lobbytest.ErrorNamer        = (*harness)(nil)
)

func (h *harness) NewStore(t testing.TB) store.Store {
	t.Helper()
	c := sharedClient(t)
	prefix := newPrefix()
	s, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithShards(h.shards), redisstore.WithRetention(lobbytest.MinRetention))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { purge(t, c, prefix) })
	h.mu.Lock()
	h.prefixes[s] = prefix
	h.mu.Unlock()
	return s
}

func (h *harness) Connect(t testing.TB, s store.Store) store.Store {
	t.Helper()
	h.mu.Lock()
	prefix, ok := h.prefixes[s.(*redisstore.Store)]
	h.mu.Unlock()
	if !ok {
		t.Fatal("Connect: not a store of this harness")
	}
	c, err := newClient(os.Getenv(addrEnv))
	if err != nil {
		t.Fatalf("a second client: %v", err)
	}
	t.Cleanup(c.Close)
	s2, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithShards(h.shards), redisstore.WithRetention(lobbytest.MinRetention))
	if err != nil {
		t.Fatal(err)
	}
	return s2
}

// Restartable starts a redis-server of its own with appendfsync always.
func (h *harness) Restartable(t *testing.T) (store.Store, lobbytest.Server) {
	return h.restartable(t, "--appendonly", "yes", "--appendfsync", "always", "--dir", t.TempDir())
}

// RestartableVolatile starts a redis-server of its own without
// persistence.
func (h *harness) RestartableVolatile(t *testing.T) (store.Store, lobbytest.Server) {
	return h.restartable(t, "--appendonly", "no")
}

func (h *harness) restartable(t *testing.T, args ...string) (store.Store, lobbytest.Server) {
	srv := startServer(t, args...)
	s, err := redisstore.New(dial(t, srv.addr()), redisstore.WithPrefix("svc"), redisstore.WithShards(h.shards), redisstore.WithRetention(lobbytest.MinRetention))
	if err != nil {
		t.Fatal(err)
	}
	return s, serverHandle{srv}
}

func (h *harness) StoreName() string { return "redisstore" }

// CountingStore counts the commands sent through Do and DoMulti: each is
// one round trip unless pipelined with others, which a single caller's
// commands through the Service are not.
func (h *harness) CountingStore(t *testing.T) (store.Store, func() []string) {
	cc := &counting{Client: sharedClient(t)}
	prefix := newPrefix()
	t.Cleanup(func() { purge(t, cc.Client, prefix) })
	s, err := redisstore.New(cc, redisstore.WithPrefix(prefix), redisstore.WithShards(h.shards), redisstore.WithRetention(lobbytest.MinRetention))
	if err != nil {
		t.Fatal(err)
	}
	return s, cc.take
}

// serverHandle lets lobbytest kill and start a server of restart_test.go.
type serverHandle struct{ s *server }

func (h serverHandle) Kill(*testing.T)  { h.s.kill() }
func (h serverHandle) Start(*testing.T) { h.s.start() }

// TestService runs the Service-level suite with every lobby in one shard.
func TestService(t *testing.T) { lobbytest.RunService(t, newHarness(1)) }

// TestServiceSharded runs it with lobbies spread over shards.
func TestServiceSharded(t *testing.T) { lobbytest.RunService(t, newHarness(5)) }

// BenchmarkServiceHeartbeat and BenchmarkServiceTransition measure the
// whole path a game server takes, lobby.Service with Run going on a
// redisstore, the way every adapter does (package lobbytest). bench/run.sh
// sets their figures beside redis-benchmark's EVALSHA on the same server.
func BenchmarkServiceHeartbeat(b *testing.B)   { lobbytest.BenchHeartbeat(b, newHarness(1)) }
func BenchmarkServiceExpiryBurst(b *testing.B) { lobbytest.BenchExpiryBurst(b, newHarness(1)) }
func BenchmarkServiceTransition(b *testing.B)  { lobbytest.BenchTransition(b, newHarness(1)) }

// BenchmarkServicePooled runs both operations from 1, 8 and 32 clients on
// a rueidis client with DisableAutoPipelining, which serves each call on a
// pooled connection of its own instead of pipelining concurrent calls onto
// one: the trade between latency for few callers and throughput for many
// that docs/redis.md describes. bench/run.sh prints it with POOLED=1.
func BenchmarkServicePooled(b *testing.B) {
	for _, kind := range []struct {
		name, unit string
		op         lobbytest.Op
	}{
		{"heartbeat", "heartbeats/s", lobbytest.Heartbeat},
		{"transition", "transitions/s", lobbytest.Transition},
	} {
		for _, clients := range benchClients {
			b.Run(fmt.Sprintf("%s/clients=%d", kind.name, clients), func(b *testing.B) {
				sharedClient(b) // skip or fail as every Redis test does
				c, err := newClientWith(os.Getenv(addrEnv), func(o *rueidis.ClientOption) { o.DisableAutoPipelining = true })
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(c.Close)
				prefix := newPrefix()
				b.Cleanup(func() { purge(b, c, prefix) })
				s, err := redisstore.New(c, redisstore.WithPrefix(prefix))
				if err != nil {
					b.Fatal(err)
				}
				svcs, counters := lobbytest.StartServices(b, []store.Store{s})
				lobbytest.Measure(b, kind.unit, kind.op, clients, svcs, counters)
			})
		}
	}
}
