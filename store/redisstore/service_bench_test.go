package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
)

// The benchmarks in this file measure the whole path a game server takes:
// lobby.Service, with Run going, on a redisstore. bench/run.sh sets their
// figures beside redis-benchmark's EVALSHA on the same server.

// svcLobbiesPerClient is how many lobbies each uncontended client cycles
// through, with one player of its own in each.
const svcLobbiesPerClient = 4

// svcLobby is one lobby and the one player a benchmark client drives in it.
type svcLobby struct {
	id, player string
	gen        uint64
	online     bool
}

// svcOp is one measured operation on a lobby a client drives.
type svcOp func(ctx context.Context, svc *lobby.Service, l *svcLobby) error

// heartbeatSvcOp keeps the player's connection alive: an invisible change
// (the deadline moves), so one write without events.
func heartbeatSvcOp(ctx context.Context, svc *lobby.Service, l *svcLobby) error {
	res, err := svc.Heartbeat(ctx, l.id, l.player, l.gen)
	if err == nil && (res.Outcome != lobby.OutcomeApplied || !res.Changed) {
		err = fmt.Errorf("heartbeat %s/%s: outcome %v, changed %v; want applied and changed", l.id, l.player, res.Outcome, res.Changed)
	}
	return err
}

// transitionSvcOp disconnects the player if it is online and rejoins it
// otherwise: either way a visible change, one write with one event.
func transitionSvcOp(ctx context.Context, svc *lobby.Service, l *svcLobby) error {
	if l.online {
		res, err := svc.Disconnect(ctx, l.id, l.player, l.gen)
		if err != nil {
			return err
		}
		if len(res.Events) != 1 {
			return fmt.Errorf("disconnect %s/%s: %d events, want 1", l.id, l.player, len(res.Events))
		}
		l.online = false
		return nil
	}
	res, err := svc.Join(ctx, l.id, l.player, nil)
	if err != nil {
		return err
	}
	if len(res.Events) != 1 {
		return fmt.Errorf("rejoin %s/%s: %d events, want 1", l.id, l.player, len(res.Events))
	}
	l.gen, l.online = res.Gen, true
	return nil
}

// BenchmarkServiceHeartbeat measures lobby.Service.Heartbeat on redisstore
// with Run going: from 1, 8 and 32 concurrent clients, each on lobbies of
// its own (the Service's cache makes each heartbeat one EVALSHA), and from
// 8 clients on one lobby through two Services with their own connections
// (two processes' worth of compare-and-set contention). It reports
// heartbeats/s, which bench/run.sh compares with redis-benchmark, the
// p50 and p99 latency of one heartbeat in microseconds, and the
// compare-and-set retries per heartbeat.
func BenchmarkServiceHeartbeat(b *testing.B) {
	benchServiceOps(b, "heartbeats/s", heartbeatSvcOp)
}

// BenchmarkServiceTransition measures visible transitions the same way:
// each operation is a disconnect or the rejoin after it, one write with one
// event and a notification; Run's relay publishes and acknowledges the
// events meanwhile, as in a real process.
func BenchmarkServiceTransition(b *testing.B) {
	benchServiceOps(b, "transitions/s", transitionSvcOp)
}

// BenchmarkServicePooled runs both operations from 1, 8 and 32 clients on
// a rueidis client with DisableAutoPipelining, which serves each call on a
// pooled connection of its own instead of pipelining concurrent calls onto
// one: the trade between latency for few callers and throughput for many
// that docs/redis.md describes. bench/run.sh prints it with POOLED=1.
func BenchmarkServicePooled(b *testing.B) {
	for _, kind := range []struct {
		name, unit string
		op         svcOp
	}{
		{"heartbeat", "heartbeats/s", heartbeatSvcOp},
		{"transition", "transitions/s", transitionSvcOp},
	} {
		for _, c := range benchClients {
			b.Run(fmt.Sprintf("%s/clients=%d", kind.name, c), func(b *testing.B) {
				runServiceBench(b, svcBench{unit: kind.unit, op: kind.op, clients: c, services: 1, pooled: true})
			})
		}
	}
}

func benchServiceOps(b *testing.B, unit string, op svcOp) {
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
	op       svcOp
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

	clients, services, op := cfg.clients, cfg.services, cfg.op
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

	// Join every client's lobbies and run op once on each, so that the
	// measurement starts with warm caches and loaded scripts.
	held := make([][]*svcLobby, clients)
	for c := range clients {
		svc := svcs[c%services]
		n := svcLobbiesPerClient
		if services > 1 {
			n = 1
		}
		for i := range n {
			l := &svcLobby{id: "c" + strconv.Itoa(c) + "-l" + strconv.Itoa(i), player: "p" + strconv.Itoa(c)}
			if services > 1 {
				l.id = "hot"
			}
			res, err := svc.Join(ctx, l.id, l.player, nil)
			if err != nil {
				b.Fatal(err)
			}
			l.gen, l.online = res.Gen, true
			if err := op(ctx, svc, l); err != nil {
				b.Fatal(err)
			}
			held[c] = append(held[c], l)
		}
	}
	retriesBefore := retries(counters)

	var (
		next     atomic.Int64
		failed   atomic.Pointer[error]
		gaveUp   atomic.Int64
		wg       sync.WaitGroup
		contends = services > 1
	)
	lat := make([][]time.Duration, clients)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			svc, mine := svcs[c%services], held[c]
			lat[c] = make([]time.Duration, 0, b.N/clients+1)
			for j := 0; next.Add(1) <= int64(b.N); j++ {
				l := mine[j%len(mine)]
				began := time.Now()
				err := op(ctx, svc, l)
				if contends && errors.Is(err, lobby.ErrContention) {
					// Lost the race on every attempt: counted, and the
					// client carries on with the same lobby.
					gaveUp.Add(1)
					err = nil
				}
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				lat[c] = append(lat[c], time.Since(began))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), cfg.unit)
	b.ReportMetric(quantileMicros(all, 0.50), "p50-us")
	b.ReportMetric(quantileMicros(all, 0.99), "p99-us")
	b.ReportMetric(float64(retries(counters)-retriesBefore)/float64(b.N), "retries/op")
	if contends {
		b.ReportMetric(float64(gaveUp.Load())/float64(b.N), "contention-errors/op")
	}
}

// quantileMicros returns the q-quantile of sorted durations in
// microseconds, 0 for none.
func quantileMicros(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(int(q*float64(len(sorted))), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Microsecond)
}

// retries sums the compare-and-set retries the Services counted.
func retries(cs []*lobby.Counters) uint64 {
	var n uint64
	for _, c := range cs {
		n += c.Snapshot().Conflicts
	}
	return n
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
			l := &svcLobby{id: "l", player: "p"}
			res, err := svc.Join(ctx, l.id, l.player, nil)
			if err != nil {
				t.Fatal(err)
			}
			l.gen, l.online = res.Gen, true
			if got := cc.take(); len(got) < 2 || got[0] != "HMGET" {
				t.Errorf("commands of the first join = %q, want a load (HMGET) and then the write", got)
			}

			for _, tc := range []struct {
				name string
				op   svcOp
			}{
				{"heartbeat", heartbeatSvcOp},
				{"transition", transitionSvcOp},
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
