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

// BenchmarkWriteEffects: writes with a 200-byte log entry round-robin
// over 1k lobbies whose logs are full (16 entries kept), so every append
// also trims; one consumer and one feed follow along.
func BenchmarkWriteEffects(b *testing.B) {
	ctx := context.Background()
	s := memstore.New(memstore.WithRetention(store.Retention{Entries: 16, Age: time.Hour}))
	if err := s.RegisterConsumer(ctx, "relay"); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Subscribe(ctx); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 1000)
	versions := make([]uint64, len(ids))
	for i := range ids {
		ids[i] = fmt.Sprintf("lobby-%06d", i)
	}
	data := make([]byte, 200)
	write := func(i int) {
		j := i % len(ids)
		err := s.Write(ctx, store.Write{ID: ids[j], Expected: versions[j], Data: data, At: t0, Effects: data})
		if err != nil {
			b.Fatal(err)
		}
		versions[j]++
	}
	for i := range 16 * len(ids) {
		write(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		write(i)
	}
}

// BenchmarkReadLog: a reader catching up with the last 10 of a lobby's
// 1024 kept entries.
func BenchmarkReadLog(b *testing.B) {
	ctx := context.Background()
	s := memstore.New()
	data := make([]byte, 200)
	for v := range uint64(memstore.DefaultRetentionEntries) {
		if err := s.Write(ctx, store.Write{ID: "lobby", Expected: v, Data: data, At: t0, Effects: data}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.ReadLog(ctx, "lobby", memstore.DefaultRetentionEntries-10, 100)
		if err != nil || len(got) != 10 {
			b.Fatalf("ReadLog = %d entries, %v; want 10", len(got), err)
		}
	}
}

// BenchmarkConsumer: a write with an entry, claimed, read and committed by
// a durable consumer, among 10k lobbies without work.
func BenchmarkConsumer(b *testing.B) {
	ctx := context.Background()
	s := memstore.New()
	fill(b, s, 10000, time.Millisecond)
	if err := s.RegisterConsumer(ctx, "relay"); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 200)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		v := uint64(i)
		if err := s.Write(ctx, store.Write{ID: "lobby", Expected: v, Data: data, At: t0, Effects: data}); err != nil {
			b.Fatal(err)
		}
		c, err := s.ClaimLog(ctx, "relay", t0, 10, time.Minute)
		if err != nil || len(c) != 1 {
			b.Fatalf("ClaimLog = %v, %v; want one lobby", c, err)
		}
		got, err := s.ReadLog(ctx, c[0].Lobby, c[0].After, 10)
		if err != nil || len(got) != 1 {
			b.Fatalf("ReadLog = %d entries, %v; want 1", len(got), err)
		}
		if err := s.CommitLog(ctx, "relay", c[0].Lobby, got[0].Version); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTrimLog: appends to 10k lobbies at successive times, with
// TrimLog removing what went past the age as it goes, so the log holds a
// steady 10 minutes' worth.
func BenchmarkTrimLog(b *testing.B) {
	ctx := context.Background()
	s := memstore.New(memstore.WithRetention(store.Retention{Age: 10 * time.Minute}))
	ids := make([]string, 10000)
	versions := make([]uint64, len(ids))
	for i := range ids {
		ids[i] = fmt.Sprintf("lobby-%06d", i)
	}
	data := make([]byte, 200)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j := i % len(ids)
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		if err := s.Write(ctx, store.Write{ID: ids[j], Expected: versions[j], Data: data, At: at, Effects: data}); err != nil {
			b.Fatal(err)
		}
		versions[j]++
		if _, err := s.TrimLog(ctx, at, 100); err != nil {
			b.Fatal(err)
		}
	}
}
