package lobby

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby/rules"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// pausingLoads moves the clock by pause at the next Load: a process that
// stalls between choosing a join's session and judging the join.
type pausingLoads struct {
	store.Store
	clock *clockwork.FakeClock
	pause time.Duration
}

func (p *pausingLoads) Load(ctx context.Context, id string) (store.Record, error) {
	if d := p.pause; d > 0 {
		p.pause = 0
		p.clock.Advance(d)
	}
	return p.Store.Load(ctx, id)
}

// TestJoinJudgedAfterItsSessionEndedIsNotHeldByIt: a join that chose this
// Service's session while it was alive, but is judged after the session's
// deadline (the process stalled in between, and no renewal came), must not
// leave a connection held by a session that is over: it is judged with
// that deadline, and gets a stored heartbeat deadline instead.
func TestJoinJudgedAfterItsSessionEndedIsNotHeldByIt(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	pl := &pausingLoads{Store: mem, clock: clock}
	p := DefaultPolicy()
	p.HeartbeatTTL = 5 * time.Second
	svc, err := NewService(store.ComposeWith(pl, store.Of(mem)), WithClock(clock), WithPolicy(p), WithSessionTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	svc.live.renewOnce(ctx, clock.Now())
	session := svc.Session()
	if session == "" {
		t.Fatal("no session opened")
	}
	pl.pause = 4 * time.Second // past the session's deadline
	res, err := svc.Join(ctx, "l", "p-17", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := mem.Load(ctx, "l")
	if err != nil {
		t.Fatal(err)
	}
	st, err := rules.DecodeState(rec.Data)
	if err != nil {
		t.Fatal(err)
	}
	c := st.Member("p-17").Conns[0]
	if c.Gen != res.Gen || c.Session != "" || !c.Deadline.Equal(clock.Now().Add(p.HeartbeatTTL)) {
		t.Fatalf("connection %+v joined at %v, after session %q ended at %v: want a stored heartbeat deadline", c, clock.Now(), session, t0.Add(3*time.Second))
	}
}
