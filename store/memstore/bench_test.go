package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// fill writes n lobbies with 200 bytes of data; lobby i's deadline is t0
// plus i*step.
func fill(b *testing.B, s *memstore.Store, n int, step time.Duration) []string {
	b.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	data := make([]byte, 200)
	for i := range ids {
		ids[i] = fmt.Sprintf("lobby-%06d", i)
		if err := s.Write(ctx, store.Write{ID: ids[i], Data: data, Deadline: t0.Add(time.Duration(i) * step)}); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

// BenchmarkWriteHeartbeat: one goroutine writes heartbeats (no events, a
// later deadline) round-robin over 10k lobbies.
func BenchmarkWriteHeartbeat(b *testing.B) {
	ctx := context.Background()
	s := memstore.New()
	ids := fill(b, s, 10000, time.Millisecond)
	versions := make([]uint64, len(ids))
	for i := range versions {
		versions[i] = 1
	}
	data := make([]byte, 200)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		j := i % len(ids)
		err := s.Write(ctx, store.Write{ID: ids[j], Expected: versions[j], Data: data, Deadline: t0.Add(time.Duration(i) * time.Microsecond)})
		if err != nil {
			b.Fatal(err)
		}
		versions[j]++
	}
}

// BenchmarkWriteHeartbeatParallel: every P writes heartbeats to its own
// slice of 10k lobbies, so throughput shows lock contention, not conflicts.
func BenchmarkWriteHeartbeatParallel(b *testing.B) {
	ctx := context.Background()
	s := memstore.New()
	ids := fill(b, s, 10000, time.Millisecond)
	var worker atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := int(worker.Add(1) - 1)
		const workers = 64 // more than any GOMAXPROCS this runs with
		if w >= workers {
			b.Error("too many parallel workers")
			return
		}
		var mine []string
		for i := w; i < len(ids); i += workers {
			mine = append(mine, ids[i])
		}
		versions := make([]uint64, len(mine))
		for i := range versions {
			versions[i] = 1
		}
		data := make([]byte, 200)
		for i := 0; pb.Next(); i++ {
			j := i % len(mine)
			err := s.Write(ctx, store.Write{ID: mine[j], Expected: versions[j], Data: data, Deadline: t0.Add(time.Duration(i) * time.Microsecond)})
			if err != nil {
				b.Error(err)
				return
			}
			versions[j]++
		}
	})
}

// BenchmarkLoadWriteParallel: what a heartbeat costs the store in the
// Service's loop: Load, then a conditional Write of the same lobby.
func BenchmarkLoadWriteParallel(b *testing.B) {
	ctx := context.Background()
	s := memstore.New()
	ids := fill(b, s, 10000, time.Millisecond)
	var worker atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := int(worker.Add(1))
		for i := w * 7919; pb.Next(); i++ {
			id := ids[i%len(ids)]
			r, err := s.Load(ctx, id)
			if err != nil {
				b.Error(err)
				return
			}
			err = s.Write(ctx, store.Write{ID: id, Expected: r.Version, Data: r.Data, Deadline: t0.Add(time.Duration(i) * time.Microsecond)})
			if err != nil && !isConflict(err) {
				b.Error(err)
				return
			}
		}
	})
}

func isConflict(err error) bool { return errors.Is(err, store.ErrConflict) }

// BenchmarkDue over 100k lobbies: a sweep of a backlog (all due, limit
// 100), a quiet sweep (100 due), and the next-deadline query (limit 1).
func BenchmarkDue(b *testing.B) {
	ctx := context.Background()
	s := memstore.New()
	fill(b, s, 100000, time.Millisecond)
	for _, bc := range []struct {
		name  string
		now   time.Time
		limit int
		want  int
	}{
		{"backlog-limit100", t0.Add(time.Hour), 100, 100},
		{"100due-limit1000", t0.Add(99 * time.Millisecond), 1000, 100},
		{"none-due", t0.Add(-time.Millisecond), 100, 0},
		{"next-limit1", t0.Add(1000 * time.Hour), 1, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, err := s.Due(ctx, bc.now, bc.limit)
				if err != nil || len(got) != bc.want {
					b.Fatalf("Due = %d lobbies, %v; want %d", len(got), err, bc.want)
				}
			}
		})
	}
}

// BenchmarkOutbox: a write with one event, read by Pending and acked.
func BenchmarkOutbox(b *testing.B) {
	ctx := context.Background()
	s := memstore.New()
	data := make([]byte, 200)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		v := uint64(i)
		ev := store.Event{Lobby: "lobby", Seq: v + 1, Data: data}
		if err := s.Write(ctx, store.Write{ID: "lobby", Expected: v, Data: data, Events: []store.Event{ev}}); err != nil {
			b.Fatal(err)
		}
		p, err := s.Pending(ctx, 10)
		if err != nil || len(p) != 1 {
			b.Fatalf("Pending = %d events, %v", len(p), err)
		}
		if err := s.Ack(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}
