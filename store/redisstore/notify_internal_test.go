package redisstore

import (
	"sync"
	"testing"

	"github.com/lobbyhost/lobbyhost/store"
)

// TestNotificationRoundTrip checks the message format of a change, for IDs
// holding the separator, NUL and other bytes, and that malformed messages
// (among them the "w" of earlier versions) are refused.
func TestNotificationRoundTrip(t *testing.T) {
	for _, c := range []store.Change{
		{Lobby: "a", Version: 1},
		{Lobby: "1:2:3", Version: 18446744073709551615},
		{Lobby: "nul\x00byte", Version: 42},
		{Lobby: ":", Version: 7},
		{Lobby: "é{x}", Version: 10},
	} {
		got, ok := parseNotification(notification(c))
		if !ok || got != c {
			t.Errorf("parseNotification(notification(%+v)) = %+v, %v", c, got, ok)
		}
	}
	for _, m := range []string{"w", "", "1:", ":a", "0:a", "x:a", "-1:a", "18446744073709551616:a"} {
		if c, ok := parseNotification(m); ok {
			t.Errorf("parseNotification(%q) = %+v, true; want false", m, c)
		}
	}
}

// TestGateAfterClose: rueidis may run a subscription callback after the
// subscription's goroutine ended; once the gate is closed the feed must not
// change, and calls racing with the close must be safe (go test -race).
func TestGateAfterClose(t *testing.T) {
	f := store.NewFeed(0)
	g := &gate{feed: f}
	g.add(store.Change{Lobby: "a", Version: 1})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				g.add(store.Change{Lobby: "b", Version: uint64(i + 1)})
			}
		}()
	}
	g.close()
	wg.Wait()
	f.Take()
	g.add(store.Change{Lobby: "c", Version: 1})
	g.lose()
	if changes, lost := f.Take(); len(changes) != 0 || lost {
		t.Fatalf("Take after the gate closed = %v, lost %v; want nothing", changes, lost)
	}
}
