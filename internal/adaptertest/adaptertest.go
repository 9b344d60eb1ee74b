// Package adaptertest holds test and benchmark helpers shared by this
// repository's store adapters (store/pgxstore and store/redisstore). It is
// not for users: it changes whenever those adapters' tests need it to.
package adaptertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// CheckOutcomes compares the outcomes a WriteBatch returned with want, by
// class: "ok" (nil), "conflict" (store.ErrConflict), "invalid"
// (store.ErrInvalid), or "other" (an error that is neither). A count that
// differs fails the test at once; each outcome of the wrong class is
// reported.
func CheckOutcomes(t testing.TB, got []error, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("WriteBatch returned %d outcomes for %d writes", len(got), len(want))
	}
	for i, err := range got {
		var class string
		switch {
		case err == nil:
			class = "ok"
		case errors.Is(err, store.ErrConflict):
			class = "conflict"
		case errors.Is(err, store.ErrInvalid):
			class = "invalid"
		default:
			class = "other"
		}
		if class != want[i] {
			t.Errorf("outcome %d = %v (%s), want %s", i, err, class, want[i])
		}
	}
}

// BenchBurst runs b.N bursts of one WriteBatch of ws on s, each write of
// which must commit; after each burst every write's Expected moves on by
// one, so ws should be writes to distinct lobbies starting at the lobbies'
// versions. It reports allocations, the time of one burst (ms/burst) and
// writes/s.
func BenchBurst(b *testing.B, s store.BatchWriter, ws []store.Write) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		for k, err := range s.WriteBatch(ctx, ws) {
			if err != nil {
				b.Fatalf("write %d: %v", k, err)
			}
			ws[k].Expected++
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/burst")
	b.ReportMetric(float64(b.N*len(ws))/elapsed.Seconds(), "writes/s")
}

// BenchClients runs a write benchmark from clients concurrent goroutines
// that claim the b.N writes size at a time. Client c (0 <= c < clients)
// calls newClient(c) once, after the timer starts, for its step, then
// step(n) for each claim until a claim starts at or past b.N; n counts the
// writes all clients have claimed, this claim included. A step makes the
// size writes it claimed. The first error a step returns stops its client
// and fails the benchmark as "op: error". BenchClients reports allocations
// and writes/s: the writes the steps made (whole claims, so b.N when size
// is 1) over the wall time of the run.
func BenchClients(b *testing.B, clients, size int, op string, newClient func(c int) (step func(n int64) error)) {
	var (
		claimed atomic.Int64
		wg      sync.WaitGroup
		mu      sync.Mutex
		first   error
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			step := newClient(c)
			for n := claimed.Add(int64(size)); n-int64(size) < int64(b.N); n = claimed.Add(int64(size)) {
				if err := step(n); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if first != nil {
		b.Fatalf("%s: %v", op, first)
	}
	b.ReportMetric(float64(claimed.Load()-int64(clients*size))/elapsed.Seconds(), "writes/s")
}
