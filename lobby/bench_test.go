package lobby_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

var benchPlayers = [4]string{"p-17", "p-23", "p-41", "p-62"}

// fourMemberLobby returns a machine and a lobby of four online members, and
// the generation of each. Heartbeat deadlines are disabled unless
// withTTL: the benchmarks that do not heartbeat run for longer than a TTL.
func fourMemberLobby(b *testing.B, withTTL bool) (*rules.Machine, *rules.State, [4]uint64) {
	p := lobby.DefaultPolicy()
	if !withTTL {
		p.HeartbeatTTL = 0
	}
	m, err := rules.NewMachine(p)
	if err != nil {
		b.Fatal(err)
	}
	s := rules.NewState("bench", 0)
	var gens [4]uint64
	for i, p := range benchPlayers {
		res, err := m.Apply(s, rules.Join(p, nil), t0)
		if err != nil {
			b.Fatal(err)
		}
		gens[i] = res.Gen
	}
	return m, s, gens
}

// BenchmarkMachineHeartbeat: one pure transition on a 4-member lobby.
// Target: ≤ 300 ns and ≤ 1 allocation.
func BenchmarkMachineHeartbeat(b *testing.B) {
	m, s, gens := fourMemberLobby(b, true)
	now := t0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Millisecond)
		res, err := m.Apply(s, rules.Heartbeat(benchPlayers[i&3], gens[i&3]), now)
		if err != nil || res.Outcome != lobby.OutcomeApplied {
			b.Fatal(res.Outcome, err)
		}
	}
}

// BenchmarkMachineHeartbeatBlocks: one pure heartbeat on a 4-member lobby
// that holds 0 or 1,000 blocks from earlier kicks; it touches no block, so
// it should cost the same either way.
func BenchmarkMachineHeartbeatBlocks(b *testing.B) {
	for _, blocks := range []int{0, 1000} {
		b.Run(fmt.Sprintf("blocks=%d", blocks), func(b *testing.B) {
			m, s, gens := fourMemberLobby(b, true)
			for i := range blocks {
				kicked := fmt.Sprintf("kicked-%04d", i)
				if _, err := m.Apply(s, rules.Join(kicked, nil), t0); err != nil {
					b.Fatal(err)
				}
				if _, err := m.Apply(s, rules.Kick("", kicked, 24*time.Hour), t0); err != nil {
					b.Fatal(err)
				}
			}
			now := t0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now = now.Add(time.Millisecond)
				res, err := m.Apply(s, rules.Heartbeat(benchPlayers[i&3], gens[i&3]), now)
				if err != nil || res.Outcome != lobby.OutcomeApplied {
					b.Fatal(res.Outcome, err)
				}
			}
		})
	}
}

// BenchmarkMachineCommands: the other commands on a 4-member lobby, each
// measured in a cycle that leaves the lobby as it found it.
func BenchmarkMachineCommands(b *testing.B) {
	b.Run("disconnect+reconnect", func(b *testing.B) {
		m, s, gens := fourMemberLobby(b, false)
		now := t0
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			now = now.Add(time.Millisecond)
			p := i & 3
			if _, err := m.Apply(s, rules.Disconnect(benchPlayers[p], gens[p]), now); err != nil {
				b.Fatal(err)
			}
			res, err := m.Apply(s, rules.Join(benchPlayers[p], nil), now)
			if err != nil {
				b.Fatal(err)
			}
			gens[p] = res.Gen
		}
	})
	b.Run("transfer", func(b *testing.B) {
		m, s, _ := fourMemberLobby(b, false)
		now := t0
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			now = now.Add(time.Millisecond)
			if _, err := m.Apply(s, rules.TransferHost(s.Host, benchPlayers[(i+1)&3]), now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode+decode", func(b *testing.B) {
		_, s, _ := fourMemberLobby(b, false)
		buf := rules.AppendState(nil, s)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			buf = rules.AppendState(buf[:0], s)
			if _, err := rules.DecodeState(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkServiceHeartbeat: heartbeats through Service and memstore,
// spread over 10,000 four-player lobbies, from as many goroutines as
// -cpu allows. Target: ≥ 1M heartbeats/s on 2 cores. It reads the real
// clock, as production does, so every heartbeat moves its deadline and is
// written (a frozen clock would make repeats no-ops); the TTL is long
// enough that nothing expires while it runs.
func BenchmarkServiceHeartbeat(b *testing.B) {
	ctx := context.Background()
	p := lobby.DefaultPolicy()
	p.HeartbeatTTL = time.Hour
	svc, err := lobby.NewService(memstore.New(), lobby.WithPolicy(p))
	if err != nil {
		b.Fatal(err)
	}
	const lobbies = 10_000
	ids := make([]string, lobbies)
	gens := make([][4]uint64, lobbies)
	for i := range ids {
		ids[i] = fmt.Sprintf("lobby-%05d", i)
		for j, p := range benchPlayers {
			res, err := svc.Join(ctx, ids[i], p, nil)
			if err != nil {
				b.Fatal(err)
			}
			gens[i][j] = res.Gen
		}
	}
	// Each goroutine walks its own part of the lobbies, as the sockets of
	// different rooms would arrive on different connections.
	var workers atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := workers.Add(1)
		n := w * lobbies / 7
		for pb.Next() {
			n++
			l, p := int(n/4)%lobbies, int(n%4)
			res, err := svc.Heartbeat(ctx, ids[l], benchPlayers[p], gens[l][p])
			if err != nil || res.Outcome != lobby.OutcomeApplied {
				b.Fatal(res.Outcome, err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
}

// BenchmarkServiceHeartbeatBlocks: heartbeats through Service and memstore
// on one four-player lobby that holds 0 or 1,000 blocks from earlier kicks.
// A heartbeat touches no block, so it should cost the same either way. The
// fake clock moves 1 ms per heartbeat, so each one moves its deadline and
// is written.
func BenchmarkServiceHeartbeatBlocks(b *testing.B) {
	for _, blocks := range []int{0, 1000} {
		b.Run(fmt.Sprintf("blocks=%d", blocks), func(b *testing.B) {
			ctx := context.Background()
			clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
			p := lobby.DefaultPolicy()
			p.HeartbeatTTL = time.Hour
			svc, err := lobby.NewService(memstore.New(), lobby.WithPolicy(p), lobby.WithClock(clock))
			if err != nil {
				b.Fatal(err)
			}
			var gens [4]uint64
			for j, p := range benchPlayers {
				res, err := svc.Join(ctx, "blocked", p, nil)
				if err != nil {
					b.Fatal(err)
				}
				gens[j] = res.Gen
			}
			for i := range blocks {
				kicked := fmt.Sprintf("kicked-%04d", i)
				if _, err := svc.Join(ctx, "blocked", kicked, nil); err != nil {
					b.Fatal(err)
				}
				if _, err := svc.Kick(ctx, "blocked", "", kicked, 24*time.Hour); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				clock.Advance(time.Millisecond)
				res, err := svc.Heartbeat(ctx, "blocked", benchPlayers[i&3], gens[i&3])
				if err != nil || res.Outcome != lobby.OutcomeApplied {
					b.Fatal(res.Outcome, err)
				}
			}
		})
	}
}

// BenchmarkSweep100kLeases: 25,000 lobbies of four reconnecting players,
// all graces due; one Sweep applies the 100,000 lease expirations.
// Target: ≤ 1 s per op.
func BenchmarkSweep100kLeases(b *testing.B) {
	ctx := context.Background()
	p := lobby.DefaultPolicy()
	p.HeartbeatTTL = 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		clock := clockwork.NewFakeClockAt(t0)
		mem := memstore.New()
		svc, err := lobby.NewService(mem, lobby.WithClock(clock), lobby.WithPolicy(p))
		if err != nil {
			b.Fatal(err)
		}
		for l := 0; l < 25_000; l++ {
			id := fmt.Sprintf("lobby-%05d", l)
			for _, pl := range benchPlayers {
				res, err := svc.Join(ctx, id, pl, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := svc.Disconnect(ctx, id, pl, res.Gen); err != nil {
					b.Fatal(err)
				}
			}
		}
		drainOutbox(b, svc) // idle before the expiries
		clock.Advance(p.Grace)
		runtime.GC()
		b.StartTimer()
		n, err := svc.Sweep(ctx)
		if err != nil || n != 25_000 {
			b.Fatalf("swept %d lobbies, %v", n, err)
		}
	}
	b.ReportMetric(100_000, "leases/op")
}

// TestIdleLobbyMemory measures the heap cost of idle four-player lobbies
// (store record, deadline index, Service cache). Target: ≤ 2,112 bytes
// each: 2 KiB, plus the 16 bytes of the session field each of the cached
// lobby's four connections carries (the session's own deadline lives in the
// store, once per process). It is a measurement, not a timing claim, and
// reports the figure with -v.
func TestIdleLobbyMemory(t *testing.T) {
	idleLobbyMemory(t, false, 2112)
}

// TestIdleHeldLobbyMemory is TestIdleLobbyMemory with the connections held
// by the Service's session, whose heartbeat deadlines it keeps in memory
// instead of the store. Target: ≤ 3,072 bytes each.
func TestIdleHeldLobbyMemory(t *testing.T) {
	idleLobbyMemory(t, true, 3072)
}

func idleLobbyMemory(t *testing.T, held bool, target float64) {
	if testing.Short() {
		t.Skip("measures 20,000 lobbies; skipped with -short")
	}
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	svc, err := lobby.NewService(mem, lobby.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	if held {
		stop := running(t, svc)
		defer stop()
	}
	// Warm up a few, so one-time allocations do not count.
	for i := 0; i < 100; i++ {
		for _, p := range benchPlayers {
			svc.Join(ctx, fmt.Sprintf("warm-%d", i), p, nil)
		}
	}
	const n = 20_000
	before := heapInUse()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("lobby-%05d", i)
		for _, p := range benchPlayers {
			if _, err := svc.Join(ctx, id, p, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	drainOutbox(t, svc) // idle
	after := heapInUse()
	per := float64(after-before) / n
	t.Logf("idle 4-player lobby (held by a session: %v): %.0f bytes of heap each (store + deadline index + service cache + held connections)", held, per)
	if per > target {
		t.Errorf("idle lobby costs %.0f bytes, target ≤ %.0f", per, target)
	}
	runtime.KeepAlive(svc)
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// drainOutbox relays until the outbox is empty, as an idle server's Run
// would have.
func drainOutbox(tb testing.TB, svc *lobby.Service) {
	tb.Helper()
	for {
		k, err := svc.Relay(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		if k == 0 {
			return
		}
	}
}

// noTTLService returns a Service on memstore whose policy has no heartbeat
// deadlines (the benchmarks below run longer than a TTL), and the policy.
func noTTLService(b *testing.B, opts ...lobby.Option) (*lobby.Service, lobby.Policy) {
	p := lobby.DefaultPolicy()
	p.HeartbeatTTL = 0
	svc, err := lobby.NewService(memstore.New(), append(opts, lobby.WithPolicy(p))...)
	if err != nil {
		b.Fatal(err)
	}
	return svc, p
}

// BenchmarkServiceJoin: the fixed cost of a join through Service and
// memstore: each op joins one new player, four to a lobby, so three in
// four joins find a lobby with members and one creates it.
func BenchmarkServiceJoin(b *testing.B) {
	ctx := context.Background()
	svc, _ := noTTLService(b)
	ids := make([]string, b.N/4+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("lobby-%07d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := svc.Join(ctx, ids[i/4], benchPlayers[i&3], nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServiceExpiry: the fixed cost of one host lease expiring: each
// op is one lobby whose host dropped and whose grace is over, advanced by
// a Sweep (the new host takes over in the same transition).
func BenchmarkServiceExpiry(b *testing.B) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	svc, p := noTTLService(b, lobby.WithClock(clock))
	for l := 0; l < b.N; l++ {
		id := fmt.Sprintf("lobby-%07d", l)
		var host uint64
		for j, pl := range benchPlayers {
			res, err := svc.Join(ctx, id, pl, nil)
			if err != nil {
				b.Fatal(err)
			}
			if j == 0 {
				host = res.Gen
			}
		}
		if _, err := svc.Disconnect(ctx, id, benchPlayers[0], host); err != nil {
			b.Fatal(err)
		}
	}
	clock.Advance(p.Grace)
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	n, err := svc.Sweep(ctx)
	if err != nil || n != b.N {
		b.Fatalf("swept %d lobbies of %d, %v", n, b.N, err)
	}
}

// BenchmarkWatchCommit: the fixed cost of one commit reaching a Watcher
// of its lobby in the same process: each op changes a member's
// attributes and takes the change from the Watcher.
func BenchmarkWatchCommit(b *testing.B) {
	ctx := context.Background()
	svc, _ := noTTLService(b)
	for _, pl := range benchPlayers {
		if _, err := svc.Join(ctx, "bench", pl, nil); err != nil {
			b.Fatal(err)
		}
	}
	w, err := svc.Watch(ctx, "bench", 4)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	attrs := [2]map[string]string{{"team": "red"}, {"team": "blue"}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := svc.Update(ctx, "bench", benchPlayers[1], attrs[i&1]); err != nil {
			b.Fatal(err)
		}
		c, err := w.Next(ctx)
		if err != nil || c.Version != uint64(i)+5 {
			b.Fatalf("change %+v, %v; want version %d", c, err, i+5)
		}
	}
}
