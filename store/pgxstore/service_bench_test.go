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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// benchLobbiesPerClient is how many lobbies each uncontended client cycles
// through, one player in each.
const benchLobbiesPerClient = 4

// serviceOp is one benchmarked operation on a lobby a client holds.
type serviceOp func(ctx context.Context, svc *lobby.Service, l *benchLobby) error

// benchLobby is a lobby with the one player a client drives in it.
type benchLobby struct {
	id, player string
	gen        uint64
	online     bool
}

// heartbeatOp keeps the player's connection alive: no visible change, so
// with the Service's cache one conditional UPDATE.
func heartbeatOp(ctx context.Context, svc *lobby.Service, l *benchLobby) error {
	res, err := svc.Heartbeat(ctx, l.id, l.player, l.gen)
	if err == nil && res.Outcome != lobby.OutcomeApplied {
		err = fmt.Errorf("heartbeat %s/%s: outcome %v, want applied", l.id, l.player, res.Outcome)
	}
	return err
}

// transitionOp alternates a disconnect and a rejoin of the player: each a
// visible change with one event, written with its outbox row and a
// notification.
func transitionOp(ctx context.Context, svc *lobby.Service, l *benchLobby) error {
	if l.online {
		res, err := svc.Disconnect(ctx, l.id, l.player, l.gen)
		if err == nil && len(res.Events) != 1 {
			err = fmt.Errorf("disconnect %s/%s: %d events, want 1", l.id, l.player, len(res.Events))
		}
		l.online = err != nil
		return err
	}
	res, err := svc.Join(ctx, l.id, l.player, nil)
	if err == nil && len(res.Events) != 1 {
		err = fmt.Errorf("rejoin %s/%s: %d events, want 1", l.id, l.player, len(res.Events))
	}
	if err == nil {
		l.gen, l.online = res.Gen, true
	}
	return err
}

// BenchmarkServiceHeartbeat measures heartbeats through lobby.Service on
// pgxstore, with Run going, from 1, 8 and 32 concurrent clients, each on
// lobbies of its own, and from 8 clients on one lobby through two Services
// (two processes' worth of compare-and-set contention). heartbeats/s is
// what bench/run.sh sets beside pgbench's one-row UPDATE ceiling; p50-us and
// p99-us are per heartbeat.
func BenchmarkServiceHeartbeat(b *testing.B) {
	benchService(b, "heartbeats/s", heartbeatOp)
}

// BenchmarkServiceTransition measures visible transitions (a disconnect, or
// the rejoin after it) the same way: each one commit with an event, which
// PostgreSQL commits one at a time because of its notification.
func BenchmarkServiceTransition(b *testing.B) {
	benchService(b, "transitions/s", transitionOp)
}

func benchService(b *testing.B, unit string, op serviceOp) {
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			runServiceBench(b, unit, op, clients, 1)
		})
	}
	b.Run("contended", func(b *testing.B) {
		runServiceBench(b, unit, op, 8, 2)
	})
}

// runServiceBench runs op from clients goroutines. With one Service each
// client has lobbies of its own; with several, all clients share one lobby
// and take turns on the Services.
func runServiceBench(b *testing.B, unit string, op serviceOp, clients, services int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		svcs     []*lobby.Service
		counters []*lobby.Counters
		schema   string
		running  sync.WaitGroup
	)
	defer running.Wait()
	defer cancel()
	for i := range services {
		// Each Service has its own pool, as a process would: a connection
		// per client plus two for Run's sweeper and relay.
		pool := benchPool(b, int32(clients/services+2))
		var s *Store
		if i == 0 {
			s = newTestStoreOn(b, pool)
			schema = s.Schema()
		} else {
			var err error
			if s, err = New(pool, WithSchema(schema)); err != nil {
				b.Fatal(err)
			}
		}
		c := &lobby.Counters{}
		subscribed := make(chan struct{})
		var once sync.Once
		hook := claimHook{notifyHook{Store: s, n: s, subscribed: func() { once.Do(func() { close(subscribed) }) }}, s}
		svc, err := lobby.NewService(hook, lobby.WithObserver(c))
		if err != nil {
			b.Fatal(err)
		}
		svcs, counters = append(svcs, svc), append(counters, c)
		running.Go(func() {
			if err := svc.Run(ctx); err != nil && ctx.Err() == nil {
				b.Errorf("Run: %v", err)
			}
		})
		<-subscribed // Run is up: its listener connection is not part of the measurement
	}

	// Each client's lobbies, joined and heartbeaten once through its
	// Service, so that the measurement starts on warm caches and prepared
	// statements.
	held := make([][]*benchLobby, clients)
	for c := range clients {
		svc := svcs[c%services]
		n := benchLobbiesPerClient
		if services > 1 {
			n = 1
		}
		for i := range n {
			l := &benchLobby{id: fmt.Sprintf("c%d-l%d", c, i), player: fmt.Sprintf("p%d", c), online: true}
			if services > 1 {
				l.id = "hot"
			}
			res, err := svc.Join(ctx, l.id, l.player, nil)
			if err != nil {
				b.Fatal(err)
			}
			l.gen = res.Gen
			if err := op(ctx, svc, l); err != nil {
				b.Fatal(err)
			}
			held[c] = append(held[c], l)
		}
	}
	conflictsBefore := conflicts(counters)

	var (
		done     atomic.Int64
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
		wg.Go(func() {
			svc := svcs[c%services]
			mine := held[c]
			lat[c] = make([]time.Duration, 0, b.N/clients+1)
			for n, j := done.Add(1), 0; n <= int64(b.N); n, j = done.Add(1), j+1 {
				l := mine[j%len(mine)]
				t0 := time.Now()
				err := op(ctx, svc, l)
				if contends && errors.Is(err, lobby.ErrContention) {
					// Lost every compare-and-set race of its attempts:
					// counted, and the client carries on.
					gaveUp.Add(1)
					err = nil
				}
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), unit)
	b.ReportMetric(percentile(all, 0.50), "p50-us")
	b.ReportMetric(percentile(all, 0.99), "p99-us")
	b.ReportMetric(float64(conflicts(counters)-conflictsBefore)/float64(b.N), "retries/op")
	if contends {
		b.ReportMetric(float64(gaveUp.Load())/float64(b.N), "contention-errors/op")
	}
}

// percentile returns the q-quantile of sorted durations, in microseconds.
func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(int(q*float64(len(sorted))), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Microsecond)
}

func conflicts(cs []*lobby.Counters) uint64 {
	var n uint64
	for _, c := range cs {
		n += c.Snapshot().Conflicts
	}
	return n
}

// TestServiceHeartbeatIsOneRoundTrip: through lobby.Service, whose cache
// keeps the lobbies it wrote, a steady heartbeat is one conditional UPDATE
// in one round trip, and a visible transition one UPDATE with its outbox
// insert, also in one round trip; neither loads the lobby first.
func TestServiceHeartbeatIsOneRoundTrip(t *testing.T) {
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
	rt := &roundTrips{}
	cfg.ConnConfig.Tracer = rt
	ctx := ctxT(t)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := newTestStoreOn(t, pool)
	svc, err := lobby.NewService(s)
	if err != nil {
		t.Fatal(err)
	}
	l := &benchLobby{id: "l", player: "p", online: true}
	res, err := svc.Join(ctx, l.id, l.player, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.gen = res.Gen
	// Once each, so that pgx has prepared the statements on the connection.
	for _, op := range []serviceOp{heartbeatOp, transitionOp, transitionOp} {
		if err := op(ctx, svc, l); err != nil {
			t.Fatal(err)
		}
	}

	measure := func(name string, op serviceOp, times int, sql string) {
		t.Helper()
		rt.mu.Lock()
		from := len(rt.runs)
		rt.mu.Unlock()
		for range times {
			if err := op(ctx, svc, l); err != nil {
				t.Fatal(err)
			}
		}
		rt.mu.Lock()
		got := slices.Clone(rt.runs[from:])
		rt.mu.Unlock()
		want := slices.Repeat([]run{{sql, 1}}, times)
		if !slices.Equal(want, got) {
			t.Errorf("%d %ss through the Service ran %d statements, want %d, each the %s statement in one socket write; got:",
				times, name, len(got), times, name)
			for _, r := range got {
				t.Logf("  %d writes: %s", r.writes, r.sql)
			}
		}
	}
	measure("heartbeat", heartbeatOp, 5, s.q.update)
	measure("transition", transitionOp, 4, s.q.updateEvents)
}
