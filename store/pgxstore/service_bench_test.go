package pgxstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/lobbyhost/lobbyhost/internal/servicebench"
	"github.com/lobbyhost/lobbyhost/lobby"
)

// BenchmarkServiceHeartbeat measures heartbeats through lobby.Service on
// pgxstore, with Run going, from 1, 8 and 32 concurrent clients, each on
// lobbies of its own, and from 8 clients on one lobby through two Services
// (two processes' worth of compare-and-set contention). heartbeats/s is
// what bench/run.sh sets beside pgbench's one-row UPDATE ceiling; p50-us and
// p99-us are per heartbeat.
func BenchmarkServiceHeartbeat(b *testing.B) {
	benchService(b, "heartbeats/s", servicebench.Heartbeat)
}

// BenchmarkServiceTransition measures visible transitions (a disconnect, or
// the rejoin after it) the same way: each one commit with an event, which
// PostgreSQL commits one at a time because of its notification.
func BenchmarkServiceTransition(b *testing.B) {
	benchService(b, "transitions/s", servicebench.Transition)
}

func benchService(b *testing.B, unit string, op servicebench.Op) {
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
func runServiceBench(b *testing.B, unit string, op servicebench.Op, clients, services int) {
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

	servicebench.Run(b, unit, op, clients, svcs, counters)
}

// TestServiceHeartbeatIsOneRoundTrip: through lobby.Service, whose cache
// keeps the lobbies it wrote, a steady heartbeat is one conditional UPDATE
// in one round trip, and a visible transition one UPDATE with its outbox
// insert, also in one round trip; neither loads the lobby first.
func TestServiceHeartbeatIsOneRoundTrip(t *testing.T) {
	ctx := ctxT(t)
	pool, rt := countingPool(t)
	s := newTestStoreOn(t, pool)
	svc, err := lobby.NewService(s)
	if err != nil {
		t.Fatal(err)
	}
	l := &servicebench.Lobby{ID: "l", Player: "p", Online: true}
	res, err := svc.Join(ctx, l.ID, l.Player, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Gen = res.Gen
	// Once each, so that pgx has prepared the statements on the connection.
	for _, op := range []servicebench.Op{servicebench.Heartbeat, servicebench.Transition, servicebench.Transition} {
		if err := op(ctx, svc, l); err != nil {
			t.Fatal(err)
		}
	}

	measure := func(name string, op servicebench.Op, times int, sql string) {
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
	measure("heartbeat", servicebench.Heartbeat, 5, s.q.update)
	measure("transition", servicebench.Transition, 4, s.q.updateEvents)
}
