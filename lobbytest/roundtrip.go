package lobbytest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
)

// testOneRoundTrip: through lobby.Service, which keeps the lobbies it wrote,
// a steady heartbeat is one round trip to the store's server (the
// conditional write), and so is a visible transition (its event, deadline
// and notification travel in the same request); neither loads the lobby
// first. The first join of a lobby the Service has not seen loads it, so it
// takes more: that it does shows that the counting works.
func testOneRoundTrip(t *testing.T, c RoundTripCounter) {
	ctx := t.Context()
	s, take := c.CountingStore(t)
	svc := newService(t, s, clockwork.NewRealClock())
	l := &Lobby{ID: "l", Player: "p"}
	res, err := svc.Join(ctx, l.ID, l.Player, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Gen, l.Online = res.Gen, true
	if got := take(); len(got) < 2 {
		t.Errorf("round trips of the first join = %q, want a load and then the write", got)
	}
	// Once each first, so that drivers have prepared what they prepare.
	for _, op := range []Op{Heartbeat, Transition, Transition} {
		if err := op(ctx, svc, l); err != nil {
			t.Fatal(err)
		}
	}
	take()
	for _, tc := range []struct {
		name string
		op   Op
	}{
		{"heartbeat", Heartbeat},
		{"transition", Transition},
	} {
		for i := range 4 {
			if err := tc.op(ctx, svc, l); err != nil {
				t.Fatal(err)
			}
			if got := take(); len(got) != 1 {
				t.Errorf("%s %d through the Service took %d round trips, want 1: %s", tc.name, i+1, len(got), cmp.Diff([]string{"the write"}, got))
			}
		}
	}
}
