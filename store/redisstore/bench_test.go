package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/internal/adaptertest"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
)

// benchClients are the concurrency levels of the write benchmarks, matched
// by bench/run.sh against redis-benchmark's EVALSHA figures.
var benchClients = []int{1, 8, 32}

// BenchmarkWrite measures commits per second with c goroutines, each
// writing its own lobby (no conflicts):
//
//   - heartbeat: a record of 256 bytes whose deadline moves on every write
//     and no log entry, what a heartbeat commits;
//   - events: the same plus a 256-byte log entry, what a visible change
//     commits.
//
// It reports writes/s, the figure bench/run.sh compares.
func BenchmarkWrite(b *testing.B) {
	for _, kind := range []string{"heartbeat", "events"} {
		for _, c := range benchClients {
			b.Run(fmt.Sprintf("%s/clients=%d", kind, c), func(b *testing.B) {
				benchWrite(b, c, kind == "events")
			})
		}
	}
}

func benchWrite(b *testing.B, clients int, withEvents bool) {
	s := newBenchStore(b)
	data := benchData()
	ctx := context.Background()
	adaptertest.BenchClients(b, clients, 1, "Write", func(g int) func(int64) error {
		var version uint64
		w := store.Write{ID: "bench-" + strconv.Itoa(g), Data: data}
		return func(int64) error {
			w.Expected = version
			w.Deadline = t0.Add(time.Duration(version) * time.Millisecond)
			if withEvents {
				w.At = w.Deadline
				w.Effects = data
			}
			if err := s.Write(ctx, w); err != nil {
				return err
			}
			version++
			return nil
		}
	})
}

// benchData returns the 256 bytes the write benchmarks store in a record
// and, with events, in its log entry.
func benchData() []byte {
	data := make([]byte, 256)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	return data
}

// BenchmarkLoad measures single-lobby reads with c goroutines, for
// comparison with the writes.
func BenchmarkLoad(b *testing.B) {
	for _, c := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
			s := newBenchStore(b)
			if err := s.Write(context.Background(), store.Write{ID: "l", Data: make([]byte, 256), Deadline: t0}); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			var failed atomic.Bool
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range c {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := s.Load(context.Background(), "l"); err != nil {
							failed.Store(true)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if failed.Load() {
				b.Fatal("Load failed")
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "loads/s")
		})
	}
}

// newBenchStore returns a store in a fresh namespace on a client of its
// own, so that each benchmark starts from a client that has not yet seen
// concurrent callers: rueidis serves a lone caller synchronously and starts
// its pipelining goroutines only when calls overlap, as they do from 8 and
// 32 clients.
func newBenchStore(b *testing.B) *redisstore.Store {
	b.Helper()
	sharedClient(b) // skip or fail as every Redis test does
	c, err := newClient(os.Getenv(addrEnv))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	prefix := newPrefix()
	s, err := redisstore.New(c, redisstore.WithPrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { purge(b, c, prefix) })
	return s
}

// BenchmarkWriteBatch measures WriteBatch with batches of 1, 16 and 128
// writes (heartbeats, and writes with a 256-byte entry) from 1 and 8
// goroutines, each on lobbies of its own, so its writes/s compare with
// BenchmarkWrite's: the gain is the round trips a pipeline shares.
func BenchmarkWriteBatch(b *testing.B) {
	for _, kind := range []string{"heartbeat", "events"} {
		for _, c := range []int{1, 8} {
			for _, size := range []int{1, 16, 128} {
				b.Run(fmt.Sprintf("%s/clients=%d/size=%d", kind, c, size), func(b *testing.B) {
					benchBatch(b, c, size, kind == "events")
				})
			}
		}
	}
}

func benchBatch(b *testing.B, clients, size int, withEvents bool) {
	s := newBenchStore(b)
	data := benchData()
	ctx := context.Background()
	adaptertest.BenchClients(b, clients, size, "WriteBatch", func(g int) func(int64) error {
		versions := make([]uint64, size)
		ws := make([]store.Write, size)
		for k := range ws {
			ws[k] = store.Write{ID: "bench-" + strconv.Itoa(g) + "-" + strconv.Itoa(k), Data: data}
		}
		return func(int64) error {
			for k := range ws {
				ws[k].Expected = versions[k]
				ws[k].Deadline = t0.Add(time.Duration(versions[k]) * time.Millisecond)
				if withEvents {
					ws[k].At = ws[k].Deadline
					ws[k].Effects = data
				}
			}
			for k, err := range s.WriteBatch(ctx, ws) {
				if err != nil {
					return err
				}
				versions[k]++
			}
			return nil
		}
	})
}

// BenchmarkWriteBatchBurst measures one WriteBatch of 2,000 writes with a
// 256-byte log entry, each to a lobby of its own: the expiries of every
// lobby a dead process hosted, committed at once. It reports the time of
// one burst (ms/burst) beside writes/s.
func BenchmarkWriteBatchBurst(b *testing.B) {
	const burst = 2000
	s := newBenchStore(b)
	data := benchData()
	ws := make([]store.Write, burst)
	for i := range ws {
		ws[i] = store.Write{ID: "burst-" + strconv.Itoa(i), Data: data, At: t0, Effects: data}
	}
	adaptertest.BenchBurst(b, s, ws)
}
