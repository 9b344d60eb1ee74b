package lobbytest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// cmpOpts compare events and snapshots: instants by Equal, nil and empty
// alike.
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	cmpopts.EquateEmpty(),
}

// collector is a Publisher that keeps every delivery; while hold is set it
// refuses them, so that events stay unpublished in the effects log.
type collector struct {
	hold   atomic.Bool
	mu     sync.Mutex
	events []lobby.Event
}

var errHeld = errors.New("lobbytest: publishing is held")

func (c *collector) Publish(_ context.Context, events []lobby.Event) error {
	if c.hold.Load() {
		return errHeld
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, events...)
	return nil
}

func (c *collector) has(id string, rev uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.events, func(ev lobby.Event) bool { return ev.Lobby == id && ev.Revision == rev })
}

// contents returns, for each revision of lobby id that was published, its
// distinct contents in the order first published.
func (c *collector) contents(id string) map[uint64][]lobby.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	byRev := map[uint64][]lobby.Event{}
	for _, ev := range c.events {
		if ev.Lobby != id {
			continue
		}
		if !slices.ContainsFunc(byRev[ev.Revision], func(e lobby.Event) bool { return cmp.Equal(e, ev, cmpOpts) }) {
			byRev[ev.Revision] = append(byRev[ev.Revision], ev)
		}
	}
	return byRev
}

// history returns lobby id's published events in revision order, each
// revision once, failing the test if one was published with two contents.
func (c *collector) history(t testing.TB, id string) []lobby.Event {
	t.Helper()
	var out []lobby.Event
	for rev, evs := range c.contents(id) {
		for _, ev := range evs[1:] {
			t.Errorf("lobby %q revision %d was published with two contents (-first +second):\n%s", id, rev, cmp.Diff(evs[0], ev, cmpOpts))
		}
		out = append(out, evs[0])
	}
	slices.SortFunc(out, func(a, b lobby.Event) int { return int(a.Revision) - int(b.Revision) })
	return out
}

// repeats counts deliveries of an event delivered before with the same
// contents (delivery is at least once).
func (c *collector) repeats() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string][]lobby.Event{}
	n := 0
	for _, ev := range c.events {
		k := ev.Lobby + "/" + strconv.FormatUint(ev.Revision, 10)
		if slices.ContainsFunc(seen[k], func(e lobby.Event) bool { return cmp.Equal(e, ev, cmpOpts) }) {
			n++
			continue
		}
		seen[k] = append(seen[k], ev)
	}
	return n
}

// relayAll publishes everything pending through svc.
func relayAll(t testing.TB, ctx context.Context, svc *lobby.Service) {
	t.Helper()
	for range 1000 {
		n, err := svc.Relay(ctx)
		if err != nil {
			t.Fatalf("Relay: %v", err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("Relay still publishing after 1000 passes")
}

// sweepAll applies every deadline due now through svc.
func sweepAll(t testing.TB, ctx context.Context, svc *lobby.Service) {
	t.Helper()
	for range 1000 {
		n, err := svc.Sweep(ctx)
		if err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("Sweep still changing lobbies after 1000 passes")
}
