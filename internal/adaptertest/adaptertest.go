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

// BatchNotifier is a store whose batches and notifications CheckBatchNotifies
// checks.
type BatchNotifier interface {
	store.BatchWriter
	store.Notifier
}

// CheckBatchNotifies writes one batch to s (two lobbies written once, one
// twice, one without an effects entry) and checks that a subscriber taken
// before it hears a Change for each lobby's last version with an entry
// within 10 s, and none for the write without an entry: the adapters of
// this repository notify only writes with an entry, stricter than the
// Store contract (storetest allows the others).
func CheckBatchNotifies(t testing.TB, ctx context.Context, s BatchNotifier, at time.Time) {
	t.Helper()
	feed, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws := []store.Write{
		{ID: "n2", Effects: []byte("e"), At: at},
		{ID: "n1", Effects: []byte("e"), At: at},
		{ID: "quiet"},
		{ID: "n1", Expected: 1, Effects: []byte("e"), At: at},
		{ID: "n3", Effects: []byte("e"), At: at},
	}
	CheckOutcomes(t, s.WriteBatch(ctx, ws), []string{"ok", "ok", "ok", "ok", "ok"})
	want := map[store.Change]bool{{Lobby: "n1", Version: 2}: true, {Lobby: "n2", Version: 1}: true, {Lobby: "n3", Version: 1}: true}
	timeout := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case <-feed.Ready():
		case <-timeout:
			t.Fatalf("no changes %v within 10s of the batch", want)
		}
		changes, lost := feed.Take()
		if lost {
			t.Fatal("feed lost")
		}
		for _, c := range changes {
			if c.Lobby == "quiet" {
				t.Errorf("change %+v for a write without an entry", c)
			}
			delete(want, c)
		}
	}
}
