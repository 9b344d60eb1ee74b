package lobbytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
)

// The Service benchmarks: BenchHeartbeat and BenchTransition run the
// standard set on a harness;
// Measure, Heartbeat and Transition let an adapter measure variants of its
// own (a differently configured client, say) the same way, so that every
// adapter's figures are taken and read alike. Each reports throughput (in
// the unit it is given), p50-us, p99-us, retries/op and, with several
// Services on one lobby, contention-errors/op.

// BenchHeartbeat measures lobby.Service.Heartbeat with Run going on h's
// stores: from 1, 8, 32 and 256 clients, each on lobbies of its own (the
// Service's cache makes each heartbeat one conditional write; 256 callers
// are a server's sockets heartbeating at once, which a store that batches
// (store.BatchWriter) serves in few round trips), and from 8
// clients on one lobby through two Services, the second on h.Connect (two
// processes' worth of compare-and-set contention). Call it from an
// adapter's BenchmarkServiceHeartbeat; the subtests are clients=N and
// contended, for bench scripts to select.
func BenchHeartbeat(b *testing.B, h Harness) { benchOp(b, h, "heartbeats/s", Heartbeat) }

// BenchTransition measures visible transitions the same way: each operation
// is a disconnect or the rejoin after it, one write with one event; Run's
// relay publishes and acknowledges the events meanwhile, as in a real
// process.
func BenchTransition(b *testing.B, h Harness) { benchOp(b, h, "transitions/s", Transition) }

func benchOp(b *testing.B, h Harness, unit string, op Op) {
	for _, clients := range []int{1, 8, 32, 256} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			svcs, counters := StartServices(b, []store.Store{h.NewStore(b)})
			Measure(b, unit, op, clients, svcs, counters)
		})
	}
	b.Run("contended", func(b *testing.B) {
		s := h.NewStore(b)
		svcs, counters := StartServices(b, []store.Store{s, h.Connect(b, s)})
		Measure(b, unit, op, 8, svcs, counters)
	})
}

// StartServices returns a Service on each store, each with Counters as its
// Observer and Run going until the benchmark ends. With a store.Notifier it
// returns once Run has subscribed, so that the measurement starts with Run
// fully up. On a store with store.Sessions, Run opens a session, and the
// connections joined through it keep their heartbeats in the Service's
// memory: BenchHeartbeat then measures heartbeats that make no store call.
func StartServices(b *testing.B, stores []store.Store) ([]*lobby.Service, []*lobby.Counters) {
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	b.Cleanup(func() { cancel(); running.Wait() })
	var svcs []*lobby.Service
	var counters []*lobby.Counters
	for _, s := range stores {
		subscribed := make(chan struct{})
		if n, ok := s.(store.Notifier); ok {
			s = notifyHook(s, n, subscribed)
		} else {
			close(subscribed)
		}
		c := &lobby.Counters{}
		svc, err := lobby.NewService(s, lobby.WithObserver(c), lobby.WithClock(clockwork.NewRealClock()))
		if err != nil {
			b.Fatal(err)
		}
		running.Go(func() {
			if err := svc.Run(ctx); err != nil && ctx.Err() == nil {
				b.Errorf("Run: %v", err)
			}
		})
		select {
		case <-subscribed:
		case <-time.After(10 * time.Second):
			b.Fatal("Run has not subscribed to notifications after 10s")
		}
		svcs, counters = append(svcs, svc), append(counters, c)
	}
	return svcs, counters
}

// notifyHook returns s (with its other capabilities, Sessions included) with a Subscribe that closes
// subscribed once it has succeeded.
func notifyHook(s store.Store, n store.Notifier, subscribed chan struct{}) store.Store {
	var once sync.Once
	hooked := notifierFunc(func(ctx context.Context) (*store.Feed, error) {
		feed, err := n.Subscribe(ctx)
		if err == nil {
			once.Do(func() { close(subscribed) })
		}
		return feed, err
	})
	caps := store.Of(s)
	caps.Notifier = hooked
	return store.ComposeWith(s, caps)
}

type notifierFunc func(ctx context.Context) (*store.Feed, error)

func (f notifierFunc) Subscribe(ctx context.Context) (*store.Feed, error) { return f(ctx) }

// LobbiesPerClient is how many lobbies each uncontended client cycles
// through, one player of its own in each.
const LobbiesPerClient = 4

// Lobby is one lobby and the one player a benchmark client drives in it.
type Lobby struct {
	ID, Player string
	Gen        uint64
	Online     bool
}

// Op is one measured operation on a lobby a client drives.
type Op func(ctx context.Context, svc *lobby.Service, l *Lobby) error

// Heartbeat keeps the player's connection alive: an invisible change (the
// deadline moves), so one write without events; or, on a store with
// sessions, where the connection is held by the Service's session, no
// store call at all (the deadline moves in its memory).
func Heartbeat(ctx context.Context, svc *lobby.Service, l *Lobby) error {
	res, err := svc.Heartbeat(ctx, l.ID, l.Player, l.Gen)
	if err == nil && (res.Outcome != lobby.OutcomeApplied || (!res.Changed && svc.Session() == "")) {
		err = fmt.Errorf("heartbeat %s/%s: outcome %v, changed %v; want applied, and changed for a connection without a session", l.ID, l.Player, res.Outcome, res.Changed)
	}
	return err
}

// Transition disconnects the player if it is online and rejoins it
// otherwise: either way a visible change, one write with one event.
func Transition(ctx context.Context, svc *lobby.Service, l *Lobby) error {
	if l.Online {
		res, err := svc.Disconnect(ctx, l.ID, l.Player, l.Gen)
		if err == nil && len(res.Events) != 1 {
			err = fmt.Errorf("disconnect %s/%s: %d events, want 1", l.ID, l.Player, len(res.Events))
		}
		if err == nil {
			l.Online = false
		}
		return err
	}
	res, err := svc.Join(ctx, l.ID, l.Player, nil)
	if err == nil && len(res.Events) != 1 {
		err = fmt.Errorf("rejoin %s/%s: %d events, want 1", l.ID, l.Player, len(res.Events))
	}
	if err == nil {
		l.Gen, l.Online = res.Gen, true
	}
	return err
}

// Measure measures op from clients goroutines over svcs; counters[i] must be
// the Observer of svcs[i]. Client c uses svcs[c%len(svcs)]. With one
// Service each client drives LobbiesPerClient lobbies of its own; with
// several, every client drives its own player in one shared lobby, which
// is compare-and-set contention between processes. unit names the
// throughput metric (heartbeats/s, transitions/s).
func Measure(b *testing.B, unit string, op Op, clients int, svcs []*lobby.Service, counters []*lobby.Counters) {
	ctx := context.Background()
	services := len(svcs)
	contends := services > 1

	// Join every client's lobbies and run op once on each, so that the
	// measurement starts with warm caches, prepared statements and loaded
	// scripts.
	held := make([][]*Lobby, clients)
	for c := range clients {
		svc := svcs[c%services]
		n := LobbiesPerClient
		if contends {
			n = 1
		}
		for i := range n {
			l := &Lobby{ID: "c" + strconv.Itoa(c) + "-l" + strconv.Itoa(i), Player: "p" + strconv.Itoa(c)}
			if contends {
				l.ID = "hot"
			}
			res, err := svc.Join(ctx, l.ID, l.Player, nil)
			if err != nil {
				b.Fatal(err)
			}
			l.Gen, l.Online = res.Gen, true
			if err := op(ctx, svc, l); err != nil {
				b.Fatal(err)
			}
			held[c] = append(held[c], l)
		}
	}
	retriesBefore := retries(counters)

	var (
		next   atomic.Int64
		failed atomic.Pointer[error]
		gaveUp atomic.Int64
		wg     sync.WaitGroup
	)
	lat := make([][]time.Duration, clients)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
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
	b.ReportMetric(Micros(all, 0.50), "p50-us")
	b.ReportMetric(Micros(all, 0.99), "p99-us")
	b.ReportMetric(float64(retries(counters)-retriesBefore)/float64(b.N), "retries/op")
	if contends {
		b.ReportMetric(float64(gaveUp.Load())/float64(b.N), "contention-errors/op")
	}
}

// Micros returns the q-quantile of sorted durations in microseconds, 0 for
// none.
func Micros(sorted []time.Duration, q float64) float64 {
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

// BurstRooms is the size of BenchExpiryBurst: the rooms whose host's grace
// ends at once.
const BurstRooms = 2000

// BenchExpiryBurst measures a burst of host expiries on h's store:
// BurstRooms lobbies of four players whose hosts all dropped at the same
// moment, their graces over, advanced by one Sweep (each lobby one
// transition: the host removed, the next member hosting). Each op is a
// whole burst; the metrics are ms/burst and expiries/s. The subtests are
// sweepers=1 (one lobby after another, as before sweeps were concurrent)
// and sweepers=default. Call it from an adapter's
// BenchmarkServiceExpiryBurst.
func BenchExpiryBurst(b *testing.B, h Harness) {
	for _, sweepers := range []int{1, 0} {
		name := "sweepers=default"
		if sweepers > 0 {
			name = "sweepers=" + strconv.Itoa(sweepers)
		}
		b.Run(name, func(b *testing.B) {
			var elapsed time.Duration
			for range b.N {
				elapsed += expiryBurst(b, h, sweepers)
			}
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/burst")
			b.ReportMetric(float64(BurstRooms*b.N)/elapsed.Seconds(), "expiries/s")
		})
	}
}

// expiryBurst prepares one burst on a fresh store and times its Sweep.
func expiryBurst(b *testing.B, h Harness, sweepers int) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	p := lobby.DefaultPolicy()
	p.HeartbeatTTL = 0
	opts := []lobby.Option{lobby.WithClock(clock), lobby.WithPolicy(p)}
	if sweepers > 0 {
		opts = append(opts, lobby.WithSweepConcurrency(sweepers))
	}
	svc, err := lobby.NewService(h.NewStore(b), opts...)
	if err != nil {
		b.Fatal(err)
	}
	// Set up from many goroutines: thousands of writes one after another
	// would take longer than the burst.
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	sem := make(chan struct{}, 64)
	for r := range BurstRooms {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			id := "burst-" + strconv.Itoa(r)
			var host uint64
			for i := range 4 {
				res, err := svc.Join(ctx, id, "p"+strconv.Itoa(i), nil)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				if i == 0 {
					host = res.Gen
				}
			}
			if _, err := svc.Disconnect(ctx, id, "p0", host); err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	clock.Advance(p.Grace)
	b.StartTimer()
	start := time.Now()
	n, err := svc.Sweep(ctx)
	took := time.Since(start)
	b.StopTimer()
	if err != nil || n != BurstRooms {
		b.Fatalf("Sweep changed %d lobbies of %d: %v", n, BurstRooms, err)
	}
	return took
}
