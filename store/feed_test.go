package store_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lobbyhost/lobbyhost/store"
)

// sorted returns the changes ordered by lobby, so tests can compare them
// whatever order Take gave.
func sorted(c []store.Change) []store.Change {
	slices.SortFunc(c, func(a, b store.Change) int { return strings.Compare(a.Lobby, b.Lobby) })
	return c
}

// Changes to one lobby coalesce to the highest position added since the
// last Take, whatever order they are added in; a Take empties the feed.
func TestFeedCoalescesPerLobby(t *testing.T) {
	f := store.NewFeed(0)
	f.Add(store.Change{Lobby: "a", Version: 3})
	f.Add(store.Change{Lobby: "b", Version: 1})
	f.Add(store.Change{Lobby: "a", Version: 5})
	f.Add(store.Change{Lobby: "a", Version: 4}) // late, lower: changes nothing
	got, lost := f.Take()
	want := []store.Change{{Lobby: "a", Version: 5}, {Lobby: "b", Version: 1}}
	if lost || !slices.Equal(sorted(got), want) {
		t.Fatalf("Take = %v, lost %v; want %v, not lost", got, lost, want)
	}
	if got, lost := f.Take(); got != nil || lost {
		t.Fatalf("second Take = %v, lost %v; want nothing", got, lost)
	}
	// After a Take a lower position is news again.
	f.Add(store.Change{Lobby: "a", Version: 2})
	if got, _ := f.Take(); !slices.Equal(got, []store.Change{{Lobby: "a", Version: 2}}) {
		t.Fatalf("Take after re-adding a = %v, want [a 2]", got)
	}
}

// A feed holds up to its size of distinct lobbies; one more drops them all
// and marks it lost until the next Take, and further changes to new
// lobbies are not named meanwhile (the reader checks every head anyway).
func TestFeedOverflowIsLost(t *testing.T) {
	f := store.NewFeed(3)
	for i := range 3 {
		f.Add(store.Change{Lobby: fmt.Sprint(i), Version: 1})
	}
	f.Add(store.Change{Lobby: "0", Version: 2}) // a known lobby still fits
	if got, lost := f.Take(); len(got) != 3 || lost {
		t.Fatalf("Take of a full feed = %v, lost %v; want 3 changes, not lost", got, lost)
	}
	for i := range 4 {
		f.Add(store.Change{Lobby: fmt.Sprint(i), Version: 2})
	}
	f.Add(store.Change{Lobby: "x", Version: 1})
	if got, lost := f.Take(); got != nil || !lost {
		t.Fatalf("Take after overflow = %v, lost %v; want no changes, lost", got, lost)
	}
	// Lost is reported once; the feed then names lobbies again.
	f.Add(store.Change{Lobby: "y", Version: 7})
	if got, lost := f.Take(); lost || !slices.Equal(got, []store.Change{{Lobby: "y", Version: 7}}) {
		t.Fatalf("Take after recovery = %v, lost %v; want [y 7], not lost", got, lost)
	}
}

func TestFeedDefaultSize(t *testing.T) {
	for _, size := range []int{0, -1} {
		f := store.NewFeed(size)
		for i := range store.DefaultFeedLobbies {
			f.Add(store.Change{Lobby: fmt.Sprint(i), Version: 1})
		}
		if got, lost := f.Take(); len(got) != store.DefaultFeedLobbies || lost {
			t.Fatalf("NewFeed(%d): Take of %d lobbies = %d changes, lost %v", size, store.DefaultFeedLobbies, len(got), lost)
		}
		for i := range store.DefaultFeedLobbies + 1 {
			f.Add(store.Change{Lobby: fmt.Sprint(i), Version: 1})
		}
		if got, lost := f.Take(); got != nil || !lost {
			t.Fatalf("NewFeed(%d): Take of %d lobbies = %d changes, lost %v; want lost", size, store.DefaultFeedLobbies+1, len(got), lost)
		}
	}
}

// Lose drops what the feed holds and reports lost once.
func TestFeedLose(t *testing.T) {
	f := store.NewFeed(0)
	f.Add(store.Change{Lobby: "a", Version: 1})
	f.Lose()
	select {
	case <-f.Ready():
	default:
		t.Fatal("Lose did not make the feed ready")
	}
	if got, lost := f.Take(); got != nil || !lost {
		t.Fatalf("Take after Lose = %v, lost %v; want no changes, lost", got, lost)
	}
	if got, lost := f.Take(); got != nil || lost {
		t.Fatalf("second Take after Lose = %v, lost %v; want nothing", got, lost)
	}
}

// Ready signals after an Add, coalescing several Adds into one value, and
// holds nothing for a reader that took everything.
func TestFeedReadyWakes(t *testing.T) {
	f := store.NewFeed(0)
	select {
	case <-f.Ready():
		t.Fatal("a new feed is ready")
	default:
	}
	f.Add(store.Change{Lobby: "a", Version: 1})
	f.Add(store.Change{Lobby: "b", Version: 1})
	<-f.Ready() // would block forever (and time the test out) without a wake
	select {
	case <-f.Ready():
		t.Fatal("two Adds left two values in Ready")
	default:
	}
	if got, _ := f.Take(); len(got) != 2 {
		t.Fatalf("Take = %v, want both lobbies", got)
	}

	// A reader blocked on Ready wakes up for an Add from another goroutine.
	done := make(chan []store.Change)
	go func() {
		<-f.Ready()
		got, _ := f.Take()
		done <- got
	}()
	f.Add(store.Change{Lobby: "c", Version: 9})
	if got := <-done; !slices.Equal(got, []store.Change{{Lobby: "c", Version: 9}}) {
		t.Fatalf("woken reader took %v, want [c 9]", got)
	}
}

// Concurrent writers and one reader: the reader, waking on Ready, ends up
// having seen the last position of every lobby (the feed is large enough
// never to be lost), and never a position going backward between Takes
// unless it was lost.
func TestFeedConcurrentAddTake(t *testing.T) {
	const writers, lobbies, versions = 8, 50, 200
	f := store.NewFeed(writers * lobbies)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range uint64(versions) {
				for l := range lobbies {
					f.Add(store.Change{Lobby: fmt.Sprintf("w%d-l%d", w, l), Version: v + 1})
				}
			}
		}()
	}
	stop := make(chan struct{})
	go func() { wg.Wait(); close(stop) }()

	seen := map[string]uint64{}
	take := func() {
		got, lost := f.Take()
		if lost {
			t.Errorf("a feed holding every lobby was lost")
		}
		for _, c := range got {
			if c.Version <= seen[c.Lobby] {
				t.Errorf("%s went from %d to %d", c.Lobby, seen[c.Lobby], c.Version)
			}
			seen[c.Lobby] = c.Version
		}
	}
	for running := true; running; {
		select {
		case <-f.Ready():
			take()
		case <-stop:
			running = false
		}
	}
	take()
	if len(seen) != writers*lobbies {
		t.Fatalf("saw %d lobbies, want %d", len(seen), writers*lobbies)
	}
	for id, v := range seen {
		if v != versions {
			t.Errorf("%s: last position seen %d, want %d", id, v, versions)
		}
	}
}
