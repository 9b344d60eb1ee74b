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
// compare-and-set, found by the sweeper when its deadline passes, its
// effects read from its log, and deleted with a floor that a new lobby of
// the same ID continues from.
func Example() {
	ctx := context.Background()
	s := memstore.New()
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

	// Create: an unknown lobby reports ErrNotFound and floor 0.
	r, err := s.Load(ctx, "lobby-1")
	fmt.Println(errors.Is(err, store.ErrNotFound), r.Version)
	err = s.Write(ctx, store.Write{
		ID: "lobby-1", Expected: r.Version, Data: []byte("alice"), Deadline: start.Add(15 * time.Second),
		At: start, Effects: []byte("alice joined"),
	})
	fmt.Println(err)

	// A writer holding an old version loses.
	err = s.Write(ctx, store.Write{ID: "lobby-1", Expected: 0, Data: []byte("bob")})
	fmt.Println(errors.Is(err, store.ErrConflict))

	// The sweeper asks what is due; a reader follows the lobby's log.
	due, _ := s.Due(ctx, start.Add(time.Minute), 10)
	fmt.Println(due[0].ID, due[0].Deadline.Format(time.TimeOnly))
	entries, _ := s.ReadLog(ctx, "lobby-1", 0, 10)
	fmt.Printf("%s #%d: %s\n", entries[0].Lobby, entries[0].Version, entries[0].Data)

	// Reclaim, then create again above the floor. The tombstone lasts
	// while the log has entries.
	_ = s.Delete(ctx, store.Deletion{ID: "lobby-1", Expected: 1, Floor: 5})
	r, err = s.Load(ctx, "lobby-1")
	fmt.Println(errors.Is(err, store.ErrNotFound), r.Version, string(r.Data))
	_ = s.Write(ctx, store.Write{ID: "lobby-1", Expected: r.Version, Data: []byte("carol")})
	r, _ = s.Load(ctx, "lobby-1")
	fmt.Println(r.Version, string(r.Data))
	// Output:
	// true 0
	// <nil>
	// true
	// lobby-1 12:00:15
	// lobby-1 #1: alice joined
	// true 5 alice
	// 6 carol
}

// A durable consumer claims the lobbies with entries it has not committed,
// reads them and commits; processes sharing its name split the lobbies.
func ExampleStore_ClaimLog() {
	ctx := context.Background()
	s := memstore.New()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	_ = s.RegisterConsumer(ctx, "relay") // sees writes from now on

	_ = s.Write(ctx, store.Write{ID: "a", Data: []byte("a"), At: now, Effects: []byte("a1")})
	_ = s.Write(ctx, store.Write{ID: "a", Expected: 1, Data: []byte("a"), At: now, Effects: []byte("a2")})

	claimed, _ := s.ClaimLog(ctx, "relay", now, 10, time.Minute)
	for _, c := range claimed {
		entries, _ := s.ReadLog(ctx, c.Lobby, c.After, 100)
		for _, e := range entries {
			fmt.Printf("%s #%d: %s\n", e.Lobby, e.Version, e.Data)
		}
		_ = s.CommitLog(ctx, "relay", c.Lobby, entries[len(entries)-1].Version)
	}
	claimed, _ = s.ClaimLog(ctx, "relay", now, 10, time.Minute)
	fmt.Println(len(claimed), "lobbies left")
	// Output:
	// a #1: a1
	// a #2: a2
	// 0 lobbies left
}
