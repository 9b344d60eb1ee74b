package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// A lobby's life in the store: created at its floor, rewritten with a
// compare-and-set, found by the sweeper when its deadline passes, its events
// relayed from the outbox, and deleted with a floor that a new lobby of the
// same ID continues from.
func Example() {
	ctx := context.Background()
	s := memstore.New()
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

	// Create: an unknown lobby reports ErrNotFound and floor 0.
	r, err := s.Load(ctx, "lobby-1")
	fmt.Println(errors.Is(err, store.ErrNotFound), r.Version)
	err = s.Write(ctx, store.Write{
		ID: "lobby-1", Expected: r.Version, Data: []byte("alice"), Deadline: start.Add(15 * time.Second),
		Events: []store.Event{{Lobby: "lobby-1", Seq: 1, Data: []byte("alice joined")}},
	})
	fmt.Println(err)

	// A writer holding an old version loses.
	err = s.Write(ctx, store.Write{ID: "lobby-1", Expected: 0, Data: []byte("bob")})
	fmt.Println(errors.Is(err, store.ErrConflict))

	// The sweeper asks what is due; the relay reads and acks the outbox.
	due, _ := s.Due(ctx, start.Add(time.Minute), 10)
	fmt.Println(due[0].ID, due[0].Deadline.Format(time.TimeOnly))
	events, _ := s.Pending(ctx, 10)
	fmt.Printf("%s #%d: %s\n", events[0].Lobby, events[0].Seq, events[0].Data)
	_ = s.Ack(ctx, events)

	// Reclaim, then create again above the floor.
	_ = s.Delete(ctx, "lobby-1", 1, 5)
	r, err = s.Load(ctx, "lobby-1")
	fmt.Println(errors.Is(err, store.ErrNotFound), r.Version)
	_ = s.Write(ctx, store.Write{ID: "lobby-1", Expected: r.Version, Data: []byte("carol")})
	r, _ = s.Load(ctx, "lobby-1")
	fmt.Println(r.Version, string(r.Data))
	// Output:
	// true 0
	// <nil>
	// true
	// lobby-1 12:00:15
	// lobby-1 #1: alice joined
	// true 5
	// 6 carol
}
