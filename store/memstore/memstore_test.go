package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

var t0 = time.Date(2031, 3, 14, 15, 9, 26, 535897932, time.UTC)

// A heartbeat rewrites a record with data of the same size and a later
// deadline and no log entry; once the record exists, that allocates
// nothing, also with a consumer and a feed following the store.
func TestHeartbeatWriteAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	if err := s.RegisterConsumer(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Subscribe(ctx); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 200)
	var v uint64
	write := func() {
		data[0] = byte(v)
		err := s.Write(ctx, store.Write{ID: "lobby", Expected: v, Data: data, Deadline: t0.Add(time.Duration(v) * time.Second)})
		if err != nil {
			t.Fatalf("Write(lobby, %d) = %v", v, err)
		}
		v++
	}
	write()
	if allocs := testing.AllocsPerRun(1000, write); allocs != 0 {
		t.Errorf("heartbeat Write: %v allocations, want 0", allocs)
	}
	// The index moved with every write: the lobby is due at its last deadline.
	got, err := s.Due(ctx, t0.Add(time.Duration(v)*time.Second), 10)
	if err != nil || len(got) != 1 || !got[0].Deadline.Equal(t0.Add(time.Duration(v-1)*time.Second)) {
		t.Errorf("Due after %d heartbeats = %v, %v; want the lobby at its last deadline", v, got, err)
	}
}

// An idle lobby with 200 bytes of data and a deadline costs well under
// 1 KiB of heap.
func TestIdleLobbyMemory(t *testing.T) {
	const n = 20000
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("lobby-%06d", i) // allocated before measuring
	}
	data := make([]byte, 200)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := memstore.New()
	for i, id := range ids {
		if err := s.Write(ctx, store.Write{ID: id, Data: data, Deadline: t0.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perLobby := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes of heap per idle lobby with 200 bytes of data and a %d-byte ID", perLobby, len(ids[0]))
	if perLobby > 600 {
		t.Errorf("an idle lobby costs %.0f bytes, want at most 600", perLobby)
	}
	runtime.KeepAlive(s)
}

// Errors memstore documents beyond the contract.
func TestMemstoreInvalid(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	if err := s.Write(ctx, store.Write{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, store.Deletion{ID: "x", Expected: 1, Floor: math.MaxUint64}); err != nil {
		t.Fatal(err)
	}
	// No version follows the largest floor.
	if err := s.Write(ctx, store.Write{ID: "x", Expected: math.MaxUint64}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Write(Expected MaxUint64) = %v, want %v", err, store.ErrInvalid)
	}
	if _, err := s.Load(ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Load(\"\") = %v, want %v", err, store.ErrInvalid)
	}
	if err := s.Delete(ctx, store.Deletion{ID: "", Expected: 0}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Delete(\"\") = %v, want %v", err, store.ErrInvalid)
	}
	for _, hold := range []time.Duration{0, -time.Second} {
		if _, err := s.Claim(ctx, t0, 1, hold); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Claim(hold %v) = %v, want %v", hold, err, store.ErrInvalid)
		}
	}
}
