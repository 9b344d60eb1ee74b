package memstore_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// WriteBatch gives every write the outcome Write would, in order: chained
// writes to one lobby commit one after another, a conflict or an invalid
// write fails alone, and the feed hears of the committed entries.
func TestWriteBatch(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	feed, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, store.Write{ID: "b", Data: []byte("b1"), At: t0}); err != nil {
		t.Fatal(err)
	}
	errs := s.WriteBatch(ctx, []store.Write{
		{ID: "a", Expected: 0, Data: []byte("a1"), Deadline: t0, At: t0, Effects: []byte("ea1")},
		{ID: "b", Expected: 0, Data: []byte("stale"), At: t0, Effects: []byte("x")},
		{ID: "a", Expected: 1, Data: []byte("a2"), Deadline: t0.Add(time.Second), At: t0, Effects: []byte("ea2")},
		{ID: "", Data: []byte("no ID")},
		{ID: "c", Expected: math.MaxUint64},
		{ID: "b", Expected: 1, Data: []byte("b2"), At: t0},
	})
	want := []error{nil, store.ErrConflict, nil, store.ErrInvalid, store.ErrInvalid, nil}
	if len(errs) != len(want) {
		t.Fatalf("WriteBatch of %d writes returned %d outcomes: %v", len(want), len(errs), errs)
	}
	for i, w := range want {
		if (w == nil) != (errs[i] == nil) || (w != nil && !errors.Is(errs[i], w)) {
			t.Errorf("outcome %d = %v, want %v", i, errs[i], w)
		}
	}
	for id, v := range map[string]struct {
		version uint64
		data    string
	}{"a": {2, "a2"}, "b": {2, "b2"}} {
		r, err := s.Load(ctx, id)
		if err != nil || r.Version != v.version || string(r.Data) != v.data {
			t.Errorf("Load(%q) = version %d data %q, %v; want version %d data %q", id, r.Version, r.Data, err, v.version, v.data)
		}
	}
	if _, err := s.Load(ctx, "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Load(c) after an invalid batched write = %v, want %v", err, store.ErrNotFound)
	}
	entries, err := s.ReadLog(ctx, "a", 0, 10)
	if err != nil || len(entries) != 2 || string(entries[0].Data) != "ea1" || string(entries[1].Data) != "ea2" || entries[1].Version != 2 {
		t.Errorf("ReadLog(a) = %+v, %v; want ea1 at 1 and ea2 at 2", entries, err)
	}
	due, err := s.Due(ctx, t0.Add(time.Hour), 10)
	if err != nil || len(due) != 1 || due[0].ID != "a" || !due[0].Deadline.Equal(t0.Add(time.Second)) {
		t.Errorf("Due = %v, %v; want a at its second deadline", due, err)
	}
	changes, lost := feed.Take()
	// A feed coalesces the changes of one lobby to the highest position.
	if lost || len(changes) != 1 || changes[0] != (store.Change{Lobby: "a", Version: 2}) {
		t.Errorf("feed after the batch = %v (lost %v), want a at 2", changes, lost)
	}
}

// A done context fails every write of a batch and writes none of them.
func TestWriteBatchDoneContext(t *testing.T) {
	s := memstore.New()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs := s.WriteBatch(ctx, []store.Write{{ID: "a", Data: []byte("a")}, {ID: "b", Data: []byte("b")}})
	if len(errs) != 2 || !errors.Is(errs[0], context.Canceled) || !errors.Is(errs[1], context.Canceled) {
		t.Fatalf("WriteBatch with a cancelled context = %v, want context.Canceled twice", errs)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Load(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Load(%q) after a cancelled batch = %v, want %v", id, err, store.ErrNotFound)
		}
	}
	if errs := s.WriteBatch(context.Background(), nil); len(errs) != 0 {
		t.Errorf("WriteBatch(nil) = %v, want no outcomes", errs)
	}
}
