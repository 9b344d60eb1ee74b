package pgxstore

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lobbyhost/lobbyhost/internal/adaptertest"
	"github.com/lobbyhost/lobbyhost/store"
)

// benchLobbies matches the row count of the pgbench ceiling in bench/run.sh.
const benchLobbies = 10_000

// BenchmarkWriteHeartbeat measures heartbeat-like Writes (no events, a new
// deadline, ~200 bytes of data) from 1, 8 and 32 concurrent clients, each
// client writing its own lobbies so that no write conflicts. The writes/s
// metric is what bench/run.sh compares with pgbench's one-row UPDATE
// ceiling on the same server.
func BenchmarkWriteHeartbeat(b *testing.B) {
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			benchHeartbeat(b, clients)
		})
	}
}

// BenchmarkWriteEffects measures Writes that append a 100-byte log entry
// (the write function: compare-and-set, entry, count retention, cursors,
// notification), with no consumer and with two registered, each client on
// lobbies of its own. A lobby gets a few hundred entries at most here, so
// count retention does not trim.
func BenchmarkWriteEffects(b *testing.B) {
	for _, consumers := range []int{0, 2} {
		for _, clients := range []int{1, 8} {
			b.Run(fmt.Sprintf("consumers=%d/clients=%d", consumers, clients), func(b *testing.B) {
				benchWrites(b, clients, bytes.Repeat([]byte{'e'}, 100), consumers)
			})
		}
	}
}

func benchHeartbeat(b *testing.B, clients int) { benchWrites(b, clients, nil, 0) }

func benchWrites(b *testing.B, clients int, effects []byte, consumers int) {
	pool := benchPool(b, int32(clients))
	s := newTestStoreOn(b, pool)
	ctx := context.Background()
	for i := range consumers {
		if err := s.RegisterConsumer(ctx, fmt.Sprintf("consumer-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	lb := seedBenchLobbies(b, s)
	adaptertest.BenchClients(b, clients, 1, "Write", func(c int) func(int64) error {
		// Client c owns lobbies c, c+clients, c+2*clients, ...
		j := c
		return func(n int64) error {
			if err := s.Write(ctx, lb.write(j, n, effects)); err != nil {
				return err
			}
			lb.versions[j]++
			if j += clients; j >= benchLobbies {
				j = c
			}
			return nil
		}
	})
}

// benchPool returns a pool of its own for a benchmark, with the server's
// default settings (in particular synchronous_commit), as pgbench has.
func benchPool(b *testing.B, maxConns int32) *pgxpool.Pool {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = maxConns
	cfg.MinConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// BenchmarkWriteBatch measures WriteBatch with batches of 1, 16 and 128
// writes: heartbeats from 1, 8 and 32 concurrent clients, and writes with a
// 100-byte log entry from 1 and 8, each client on lobbies of its own (no
// conflicts), so its writes/s compare with BenchmarkWriteHeartbeat and
// BenchmarkWriteEffects (consumers=0): the gain is the round trips and
// commits a batch shares. bench/run.sh sets the 128-write heartbeat
// batches beside pgbench's ceiling.
func BenchmarkWriteBatch(b *testing.B) {
	for _, kind := range []string{"heartbeat", "effects"} {
		var effects []byte
		clientCounts := []int{1, 8, 32}
		if kind == "effects" {
			effects = bytes.Repeat([]byte{'e'}, 100)
			clientCounts = []int{1, 8}
		}
		for _, clients := range clientCounts {
			for _, size := range []int{1, 16, 128} {
				b.Run(fmt.Sprintf("%s/clients=%d/size=%d", kind, clients, size), func(b *testing.B) {
					benchBatch(b, clients, size, effects)
				})
			}
		}
	}
}

func benchBatch(b *testing.B, clients, size int, effects []byte) {
	pool := benchPool(b, int32(clients))
	s := newTestStoreOn(b, pool)
	ctx := context.Background()
	lb := seedBenchLobbies(b, s)
	adaptertest.BenchClients(b, clients, size, "WriteBatch", func(c int) func(int64) error {
		// Client c owns lobbies c, c+clients, c+2*clients, ...
		j := c
		ws := make([]store.Write, size)
		idx := make([]int, size)
		return func(n int64) error {
			for k := range ws {
				idx[k] = j
				ws[k] = lb.write(j, n, effects)
				if j += clients; j >= benchLobbies {
					j = c
				}
			}
			for k, err := range s.WriteBatch(ctx, ws) {
				if err != nil {
					return err
				}
				lb.versions[idx[k]]++
			}
			return nil
		}
	})
}

// BenchmarkWriteBatchBurst measures one WriteBatch of 2,000 writes with a
// 100-byte log entry, each to a lobby of its own: the expiries of every
// lobby a dead process hosted, committed at once. It reports the time of
// one burst (ms/burst) beside writes/s.
func BenchmarkWriteBatchBurst(b *testing.B) {
	const burst = 2000
	pool := benchPool(b, 8)
	s := newTestStoreOn(b, pool)
	data := bytes.Repeat([]byte{'x'}, 200)
	effects := bytes.Repeat([]byte{'e'}, 100)
	base := time.Unix(1_800_000_000, 0)
	ws := make([]store.Write, burst)
	for i := range ws {
		ws[i] = store.Write{ID: fmt.Sprintf("lobby-%d", i), Data: data, At: base, Effects: effects}
	}
	adaptertest.BenchBurst(b, s, ws)
}

// seedBenchLobbies inserts benchLobbies lobbies at version 1, each with
// 200 bytes of data and a deadline at base, in one statement, and returns
// the data, base, the IDs and their versions.
func seedBenchLobbies(b *testing.B, s *Store) *benchLobbySet {
	data := bytes.Repeat([]byte{'x'}, 200)
	base := time.Unix(1_800_000_000, 0)
	if _, err := s.pool.Exec(context.Background(), s.sql(`INSERT INTO _S_.lobbies (id, version, data, deadline)
SELECT convert_to('lobby-' || g, 'UTF8'), 1, $1, $2 FROM generate_series(0, $3 - 1) AS g`),
		data, base.UnixNano(), benchLobbies); err != nil {
		b.Fatal(err)
	}
	lb := &benchLobbySet{data: data, base: base, ids: make([]string, benchLobbies), versions: make([]uint64, benchLobbies)}
	for i := range lb.ids {
		lb.ids[i] = fmt.Sprintf("lobby-%d", i)
		lb.versions[i] = 1
	}
	return lb
}

// benchLobbySet is the seeded lobbies and the version each is at.
type benchLobbySet struct {
	data     []byte
	base     time.Time
	ids      []string
	versions []uint64
}

// write is the n-th write of a benchmark, to lobby j at its version.
func (lb *benchLobbySet) write(j int, n int64, effects []byte) store.Write {
	return store.Write{
		ID:       lb.ids[j],
		Expected: lb.versions[j],
		Data:     lb.data,
		Deadline: lb.base.Add(time.Duration(n) * time.Millisecond),
		At:       lb.base,
		Effects:  effects,
	}
}
