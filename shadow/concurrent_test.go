package shadow_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/lobbyhost/lobbyhost/shadow"
)

// Transports call the Shadow from many goroutines at once (run with -race):
// every comparison is counted, and goroutines that agree record nothing.
func TestConcurrentLobbies(t *testing.T) {
	r := newRig(t, shadow.Config{})
	ctx := context.Background()
	var wg sync.WaitGroup
	const lobbies, rounds = 8, 50
	for i := range lobbies {
		wg.Go(func() {
			id := fmt.Sprintf("room-%d", i)
			res, err := r.sh.Join(ctx, id, "ann", nil)
			if err != nil {
				t.Error(err)
				return
			}
			for range rounds {
				if _, err := r.sh.Heartbeat(ctx, id, "ann", res.Gen); err != nil {
					t.Error(err)
					return
				}
				if d, err := r.sh.ReportLegacyHost(ctx, id, "ann", r.clock.Now()); err != nil || d.Class != 0 {
					t.Errorf("decision %+v, %v; want agreement", d, err)
					return
				}
			}
		})
	}
	wg.Wait()
	rep := r.sh.Report()
	if rep.Comparisons != lobbies*rounds || rep.Disagreements != 0 {
		t.Fatalf("%d comparisons, %d disagreements; want %d, 0", rep.Comparisons, rep.Disagreements, lobbies*rounds)
	}
}
