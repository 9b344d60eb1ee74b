package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/internal/servicebench"
	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
)

// The benchmarks in this file measure the whole path a game server takes:
// lobby.Service, with Run going, on a redisstore. bench/run.sh sets their
// figures beside redis-benchmark's EVALSHA on the same server.

// BenchmarkServiceHeartbeat measures lobby.Service.Heartbeat on redisstore
// with Run going: from 1, 8 and 32 concurrent clients, each on lobbies of
// its own (the Service's cache makes each heartbeat one EVALSHA), and from
// 8 clients on one lobby through two Services with their own connections
// (two processes' worth of compare-and-set contention). It reports
// heartbeats/s, which bench/run.sh compares with redis-benchmark, the
// p50 and p99 latency of one heartbeat in microseconds, and the
// compare-and-set retries per heartbeat.
func BenchmarkServiceHeartbeat(b *testing.B) {
	benchServiceOps(b, "heartbeats/s", servicebench.Heartbeat)
}

// BenchmarkServiceTransition measures visible transitions the same way:
// each operation is a disconnect or the rejoin after it, one write with one
// event and a notification; Run's relay publishes and acknowledges the
// events meanwhile, as in a real process.
func BenchmarkServiceTransition(b *testing.B) {
	benchServiceOps(b, "transitions/s", servicebench.Transition)
}

// BenchmarkServicePooled runs both operations from 1, 8 and 32 clients on
// a rueidis client with DisableAutoPipelining, which serves each call on a
// pooled connection of its own instead of pipelining concurrent calls onto
// one: the trade between latency for few callers and throughput for many
// that docs/redis.md describes. bench/run.sh prints it with POOLED=1.
func BenchmarkServicePooled(b *testing.B) {
	for _, kind := range []struct {
		name, unit string
		op         servicebench.Op
	}{
		{"heartbeat", "heartbeats/s", servicebench.Heartbeat},
		{"transition", "transitions/s", servicebench.Transition},
	} {
		for _, c := range benchClients {
			b.Run(fmt.Sprintf("%s/clients=%d", kind.name, c), func(b *testing.B) {
				runServiceBench(b, svcBench{unit: kind.unit, op: kind.op, clients: c, services: 1, pooled: true})
			})
		}
	}
}

func benchServiceOps(b *testing.B, unit string, op servicebench.Op) {
	for _, c := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
			runServiceBench(b, svcBench{unit: unit, op: op, clients: c, services: 1})
		})
	}
	b.Run("contended", func(b *testing.B) {
		runServiceBench(b, svcBench{unit: unit, op: op, clients: 8, services: 2})
	})
}

// svcBench is one Service benchmark.
type svcBench struct {
	unit     string // of the throughput metric
	op       servicebench.Op
	clients  int
	services int  // Services (processes) sharing the namespace
	pooled   bool // rueidis without auto-pipelining
}

// notifyHook is a Store that reports when Run has subscribed to its
// notifications, so that the measurement starts with Run fully up.
type notifyHook struct {
	*redisstore.Store
	subscribed chan struct{}
	once       sync.Once
}

func (h *notifyHook) Notify(ctx context.Context) (<-chan struct{}, error) {
	ch, err := h.Store.Notify(ctx)
	if err == nil {
		h.once.Do(func() { close(h.subscribed) })
	}
	return ch, err
}

// runServiceBench runs cfg.op from cfg.clients goroutines over
// cfg.services Services sharing one namespace, each Service on a client of
// its own and with Run going. With one Service each client has lobbies of
// its own; with several, every client drives its own player in one shared
// lobby and the clients are dealt round-robin to the Services.
func runServiceBench(b *testing.B, cfg svcBench) {
	sharedClient(b) // skip or fail as every Redis test does
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	defer running.Wait()
	defer cancel()

	services := cfg.services
	prefix := newPrefix()
	svcs := make([]*lobby.Service, services)
	counters := make([]*lobby.Counters, services)
	for i := range svcs {
		c, err := newClientWith(os.Getenv(addrEnv), func(o *rueidis.ClientOption) { o.DisableAutoPipelining = cfg.pooled })
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		if i == 0 {
			b.Cleanup(func() { purge(b, c, prefix) })
		}
		st, err := redisstore.New(c, redisstore.WithPrefix(prefix))
		if err != nil {
			b.Fatal(err)
		}
		hook := &notifyHook{Store: st, subscribed: make(chan struct{})}
		counters[i] = &lobby.Counters{}
		svcs[i], err = lobby.NewService(hook, lobby.WithObserver(counters[i]))
		if err != nil {
			b.Fatal(err)
		}
		running.Add(1)
		go func() {
			defer running.Done()
			if err := svcs[i].Run(ctx); err != nil && ctx.Err() == nil {
				b.Errorf("Run: %v", err)
			}
		}()
		select {
		case <-hook.subscribed:
		case <-time.After(10 * time.Second):
			b.Fatal("Run has not subscribed to notifications after 10s")
		}
	}

	servicebench.Run(b, cfg.unit, cfg.op, cfg.clients, svcs, counters)
}

// TestServiceHeartbeatIsOneRoundTrip checks what the benchmarks rely on:
// through lobby.Service, which keeps the lobbies it wrote, a steady
// heartbeat sends exactly one command, the write script's EVALSHA, and so
// does a visible transition (its event, deadline and notification are in
// the same script). Neither loads the lobby first.
func TestServiceHeartbeatIsOneRoundTrip(t *testing.T) {
	for _, shards := range shardCounts {
		t.Run("shards="+strconv.Itoa(shards), func(t *testing.T) {
			cc := &counting{Client: sharedClient(t)}
			prefix := newPrefix()
			t.Cleanup(func() { purge(t, cc.Client, prefix) })
			st, err := redisstore.New(cc, redisstore.WithPrefix(prefix), redisstore.WithShards(shards))
			if err != nil {
				t.Fatal(err)
			}
			svc, err := lobby.NewService(st)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			l := &servicebench.Lobby{ID: "l", Player: "p"}
			res, err := svc.Join(ctx, l.ID, l.Player, nil)
			if err != nil {
				t.Fatal(err)
			}
			l.Gen, l.Online = res.Gen, true
			if got := cc.take(); len(got) < 2 || got[0] != "HMGET" {
				t.Errorf("commands of the first join = %q, want a load (HMGET) and then the write", got)
			}

			for _, tc := range []struct {
				name string
				op   servicebench.Op
			}{
				{"heartbeat", servicebench.Heartbeat},
				{"transition", servicebench.Transition},
			} {
				for i := range 4 {
					if err := tc.op(ctx, svc, l); err != nil {
						t.Fatal(err)
					}
					if d := cmp.Diff([]string{"EVALSHA"}, cc.take()); d != "" {
						t.Errorf("commands of %s %d through the Service (-want +got):\n%s", tc.name, i+1, d)
					}
				}
			}
		})
	}
}
