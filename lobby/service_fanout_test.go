package lobby_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// fakeSink records what an Attachment hands it. If gate is set, every Send
// waits for a value from it first (a socket whose writes are stuck).
type fakeSink struct {
	gate chan struct{}

	mu     sync.Mutex
	got    []lobby.Delivery
	ended  []lobby.Ended
	notify chan struct{}
}

func newSink() *fakeSink { return &fakeSink{notify: make(chan struct{}, 1)} }

func (s *fakeSink) Send(ctx context.Context, d lobby.Delivery) {
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return
		}
	}
	s.mu.Lock()
	s.got = append(s.got, d)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *fakeSink) End(e lobby.Ended) {
	s.mu.Lock()
	s.ended = append(s.ended, e)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *fakeSink) snapshot() ([]lobby.Delivery, []lobby.Ended) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]lobby.Delivery(nil), s.got...), append([]lobby.Ended(nil), s.ended...)
}

// waitUntil waits until ok holds for what s has received, failing the test
// at the hang guard.
func (s *fakeSink) waitUntil(t *testing.T, what string, ok func(got []lobby.Delivery, ended []lobby.Ended) bool) {
	t.Helper()
	timeout := time.NewTimer(hangGuard)
	defer timeout.Stop()
	for {
		got, ended := s.snapshot()
		if ok(got, ended) {
			return
		}
		select {
		case <-s.notify:
		case <-timeout.C:
			t.Fatalf("%s: never happened; got %s, ended %v", what, describe(got), ended)
		}
	}
}

// waitRevision waits for a delivery at revision rev.
func (s *fakeSink) waitRevision(t *testing.T, rev uint64) {
	t.Helper()
	s.waitUntil(t, fmt.Sprintf("revision %d", rev), func(got []lobby.Delivery, _ []lobby.Ended) bool {
		return len(got) > 0 && got[len(got)-1].Revision >= rev
	})
}

func (s *fakeSink) waitEnded(t *testing.T) lobby.Ended {
	t.Helper()
	var e lobby.Ended
	s.waitUntil(t, "End", func(_ []lobby.Delivery, ended []lobby.Ended) bool {
		if len(ended) > 0 {
			e = ended[0]
			return true
		}
		return false
	})
	return e
}

func describe(got []lobby.Delivery) string {
	out := "["
	for i, d := range got {
		if i > 0 {
			out += " "
		}
		switch {
		case d.State != nil:
			out += fmt.Sprintf("%d:state", d.Revision)
		case d.Event != nil:
			out += fmt.Sprintf("%d:%s:%s", d.Revision, d.Event.Reason, d.Event.Subject)
		default:
			out += fmt.Sprintf("%d:empty", d.Revision)
		}
	}
	return out + "]"
}

// checkOrder fails unless got continues strictly after from, one revision
// at a time (states only where allowed), with each delivery well formed.
func checkOrder(t *testing.T, who string, from uint64, got []lobby.Delivery, statesAllowed bool) {
	t.Helper()
	rev := from
	for _, d := range got {
		switch {
		case (d.Event == nil) == (d.State == nil):
			t.Errorf("%s: delivery at %d has neither or both of Event and State", who, d.Revision)
		case d.State != nil:
			if !statesAllowed {
				t.Errorf("%s: a state at %d: %s", who, d.Revision, describe(got))
			}
			if d.Revision <= rev || d.State.Revision != d.Revision {
				t.Errorf("%s: state at %d after %d: %s", who, d.Revision, rev, describe(got))
			}
		default:
			if d.Revision != rev+1 || d.Event.Revision != d.Revision {
				t.Errorf("%s: event at %d after %d: %s", who, d.Revision, rev, describe(got))
			}
		}
		rev = d.Revision
	}
}

func newRooms(t *testing.T, svc *lobby.Service, opts ...lobby.RoomsOption) *lobby.Rooms {
	t.Helper()
	r, err := lobby.NewRooms(svc, opts...)
	if err != nil {
		t.Fatalf("NewRooms: %v", err)
	}
	return r
}

func join(t *testing.T, r *lobby.Rooms, id, player string, attrs map[string]string, s lobby.Sink) (*lobby.Attachment, lobby.Snapshot) {
	t.Helper()
	a, snap, err := r.Join(context.Background(), id, player, attrs, s)
	if err != nil {
		t.Fatalf("Join(%q, %q): %v", id, player, err)
	}
	t.Cleanup(a.Close)
	return a, snap
}

// Sockets in two processes on one store: every sink sees every revision
// after its join's snapshot, once, in order, whichever process committed.
func TestRoomsAcrossServices(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	a := newService(t, mem, clock)
	b := newService(t, mem, clock)
	runService(t, a)
	runService(t, b)
	ra, rb := newRooms(t, a), newRooms(t, b)

	type socket struct {
		name string
		sink *fakeSink
		snap lobby.Snapshot
	}
	var sockets []socket
	players := []string{"p0", "p1", "p2", "p3", "p4"}
	for i, p := range players {
		r := ra
		if i%2 == 1 {
			r = rb
		}
		s := newSink()
		_, snap := join(t, r, "room", p, nil, s)
		if snap.Revision != uint64(i+1) || len(snap.Members) != i+1 {
			t.Fatalf("join of %s: snapshot at %d with %d members, want %d", p, snap.Revision, len(snap.Members), i+1)
		}
		sockets = append(sockets, socket{name: p, sink: s, snap: snap})
	}
	// Attribute changes from both processes, interleaved.
	for i := range 10 {
		svc := a
		if i%2 == 1 {
			svc = b
		}
		must(t)(svc.Update(ctx, "room", players[i%len(players)], map[string]string{"n": fmt.Sprint(i)}))
	}
	final := must2(t)(a.Snapshot(ctx, "room")).Revision
	if final != 15 {
		t.Fatalf("final revision %d, want 15", final)
	}
	for _, s := range sockets {
		s.sink.waitRevision(t, final)
		got, ended := s.sink.snapshot()
		checkOrder(t, s.name, s.snap.Revision, got, false)
		if len(ended) > 0 {
			t.Errorf("%s: ended %v", s.name, ended)
		}
	}
	if n := ra.Attached("room"); n != 3 {
		t.Errorf("Attached in a: %d, want 3", n)
	}
	if n := rb.Attached("room"); n != 2 {
		t.Errorf("Attached in b: %d, want 2", n)
	}
}

func must2(t *testing.T) func(lobby.Snapshot, error) lobby.Snapshot {
	return func(s lobby.Snapshot, err error) lobby.Snapshot {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// A second tab of a member: its join may make no revision, and it still
// gets the current lobby to render; with new attributes it is an updated
// revision that the first tab sees too.
func TestRoomsSecondTab(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0)
	svc := newService(t, memstore.New(), clock)
	runService(t, svc)
	r := newRooms(t, svc)

	tab1 := newSink()
	a1, snap1 := join(t, r, "l", "ana", map[string]string{"c": "red"}, tab1)
	_, _ = join(t, r, "l", "bo", nil, newSink())
	tab1.waitRevision(t, 2)

	tab2 := newSink()
	a2, snap2 := join(t, r, "l", "ana", map[string]string{"c": "red"}, tab2)
	if snap2.Revision != 2 || len(snap2.Members) != 2 || snap2.Host != "ana" {
		t.Fatalf("second tab's snapshot: %+v, want revision 2 with ana hosting ana and bo", snap2)
	}
	if a2.Gen() == a1.Gen() || a2.Player() != "ana" || a2.Lobby() != "l" {
		t.Fatalf("second tab: gen %d (first %d), player %q, lobby %q", a2.Gen(), a1.Gen(), a2.Player(), a2.Lobby())
	}
	// The join's Result: the first tab's made revision 1, the second
	// tab's none.
	if res := a1.Result(); res.Gen != a1.Gen() || len(res.Events) != 1 || res.Events[0].Revision != snap1.Revision || res.Events[0].Reason != lobby.ReasonJoined {
		t.Fatalf("first tab's join result %+v, want gen %d and one joined event at revision %d", res, a1.Gen(), snap1.Revision)
	}
	if res := a2.Result(); res.Gen != a2.Gen() || len(res.Events) != 0 {
		t.Fatalf("second tab's join result %+v, want gen %d and no events", res, a2.Gen())
	}

	tab3 := newSink()
	a3, snap3 := join(t, r, "l", "ana", map[string]string{"c": "blue"}, tab3)
	if snap3.Revision != 3 || snap3.Members[0].Attrs["c"] != "blue" {
		t.Fatalf("third tab with new attributes: snapshot %+v, want revision 3 with c=blue", snap3)
	}
	if ev := a3.Result().Events; len(ev) == 0 || ev[len(ev)-1].Revision != 3 || ev[len(ev)-1].Reason != lobby.ReasonUpdated {
		t.Fatalf("third tab's join events %+v, want the update at revision 3 last", ev)
	}
	for name, s := range map[string]*fakeSink{"tab1": tab1, "tab2": tab2} {
		s.waitRevision(t, 3)
		got, _ := s.snapshot()
		if d := got[len(got)-1]; d.Event == nil || d.Event.Reason != lobby.ReasonUpdated || d.Event.Subject != "ana" {
			t.Fatalf("%s: last delivery %s, want 3:updated:ana", name, describe(got))
		}
	}
	got, _ := tab3.snapshot()
	if len(got) != 0 {
		t.Fatalf("third tab got %s; its join's snapshot already shows revision 3", describe(got))
	}
}

// A tab superseded by a newer one (in another process) is told End, and no
// other sink is.
func TestRoomsSupersedeIsRoutedToTheOldTab(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	p := lobby.DefaultPolicy()
	p.MaxConnectionsPerPlayer = 1
	a := newService(t, mem, clock, lobby.WithPolicy(p))
	b := newService(t, mem, clock, lobby.WithPolicy(p))
	runService(t, a)
	runService(t, b)
	ra, rb := newRooms(t, a), newRooms(t, b)

	old, bo := newSink(), newSink()
	aOld, _ := join(t, ra, "l", "ana", nil, old)
	_, _ = join(t, ra, "l", "bo", nil, bo)
	fresh := newSink()
	aNew, _ := join(t, rb, "l", "ana", nil, fresh)

	e := old.waitEnded(t)
	if e.Player != "ana" || e.Gen != aOld.Gen() || e.Cause != lobby.EndSuperseded {
		t.Fatalf("old tab ended with %+v, want ana's generation %d superseded", e, aOld.Gen())
	}
	if n := ra.Attached("l"); n != 1 {
		t.Fatalf("Attached in a after the supersede: %d, want 1 (bo)", n)
	}
	if _, err := aOld.Heartbeat(context.Background()); !errors.Is(err, lobby.ErrDetached) {
		t.Fatalf("Heartbeat of the ended tab: %v, want ErrDetached", err)
	}
	// The new tab and bo keep going and never hear of an end.
	must(t)(b.Update(context.Background(), "l", "bo", map[string]string{"x": "1"}))
	fresh.waitRevision(t, 3)
	bo.waitRevision(t, 3)
	for name, s := range map[string]*fakeSink{"new tab": fresh, "bo": bo} {
		if _, ended := s.snapshot(); len(ended) > 0 {
			t.Errorf("%s was told End: %v", name, ended)
		}
	}
	if res := must(t)(aNew.Heartbeat(context.Background())); res.Outcome != lobby.OutcomeApplied {
		t.Fatalf("Heartbeat of the new tab: %v", res.Outcome)
	}
}

// A kick reaches every sink as an event, and only the kicked player's
// sinks are told End, after the event.
func TestRoomsKickIsRoutedToTheKickedOnly(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	svc := newService(t, memstore.New(), clock)
	runService(t, svc)
	r := newRooms(t, svc)

	ana, bo1, bo2, cy := newSink(), newSink(), newSink(), newSink()
	join(t, r, "l", "ana", nil, ana)
	join(t, r, "l", "bo", nil, bo1)
	join(t, r, "l", "bo", nil, bo2) // a second tab of bo
	join(t, r, "l", "cy", nil, cy)
	must(t)(svc.Kick(ctx, "l", "ana", "bo", 0))

	for name, s := range map[string]*fakeSink{"bo tab 1": bo1, "bo tab 2": bo2} {
		e := s.waitEnded(t)
		if e.Player != "bo" || e.Cause != lobby.EndKicked {
			t.Fatalf("%s ended with %+v", name, e)
		}
		got, _ := s.snapshot()
		if d := got[len(got)-1]; d.Event == nil || d.Event.Reason != lobby.ReasonKicked {
			t.Fatalf("%s: the kick's event must come before End: %s", name, describe(got))
		}
	}
	for name, s := range map[string]*fakeSink{"ana": ana, "cy": cy} {
		s.waitRevision(t, 4)
		if _, ended := s.snapshot(); len(ended) > 0 {
			t.Errorf("%s was told End: %v", name, ended)
		}
	}
	if n := r.Attached("l"); n != 2 {
		t.Fatalf("Attached after the kick: %d, want 2", n)
	}
}

// A sink whose Send is stuck holds back nobody: the lobby commits and the
// other sink gets every revision. When it comes unstuck it gets what it
// had plus a State for what its queue could not hold, ending at the
// newest revision, never older and never twice.
func TestRoomsSlowSink(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	svc := newService(t, memstore.New(), clock)
	runService(t, svc)
	const queue = 2
	r := newRooms(t, svc, lobby.SinkQueue(queue))

	slow := &fakeSink{gate: make(chan struct{}), notify: make(chan struct{}, 1)}
	fast := newSink()
	_, snapSlow := join(t, r, "l", "slow", nil, slow)
	_, snapFast := join(t, r, "l", "fast", nil, fast)
	// The fast sink takes each revision before the next commit: it is
	// never behind, the slow one ever more.
	for i := range 8 {
		res := must(t)(svc.Update(ctx, "l", "fast", map[string]string{"n": fmt.Sprint(i)}))
		fast.waitRevision(t, res.Revision)
	}
	got, _ := fast.snapshot()
	checkOrder(t, "fast", snapFast.Revision, got, false)

	close(slow.gate)
	slow.waitRevision(t, 10)
	got, _ = slow.snapshot()
	checkOrder(t, "slow", snapSlow.Revision, got, true)
	states := 0
	for _, d := range got {
		if d.State != nil {
			states++
			if d.State.Members[1].Attrs["n"] == "" {
				t.Errorf("state at %d does not show fast's attributes: %+v", d.Revision, d.State)
			}
		}
	}
	// 9 revisions came while one Send was stuck: the one in flight, at
	// most queue-1 events and then a state.
	if states == 0 || len(got) > 1+queue {
		t.Fatalf("slow sink got %s, want at most %d deliveries ending in a state", describe(got), 1+queue)
	}
}

// Disconnect through the Attachment: the member turns reconnecting, its
// own sink is not told End, and the Attachment is done.
func TestRoomsDisconnectAndLeave(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	svc := newService(t, memstore.New(), clock)
	runService(t, svc)
	r := newRooms(t, svc)

	ana, bo := newSink(), newSink()
	aa, _ := join(t, r, "l", "ana", nil, ana)
	ab, _ := join(t, r, "l", "bo", nil, bo)
	if res := must(t)(ab.Heartbeat(ctx)); res.Outcome != lobby.OutcomeApplied {
		t.Fatalf("Heartbeat: %v", res.Outcome)
	}
	res := must(t)(ab.Disconnect(ctx))
	if len(res.Events) != 1 || res.Events[0].Reason != lobby.ReasonDisconnected {
		t.Fatalf("Disconnect: %+v", res)
	}
	ana.waitRevision(t, 3)
	for _, f := range []func(context.Context) (lobby.Result, error){ab.Heartbeat, ab.Disconnect, ab.Leave} {
		if _, err := f(ctx); !errors.Is(err, lobby.ErrDetached) {
			t.Fatalf("after Disconnect: %v, want ErrDetached", err)
		}
	}
	if n := r.Attached("l"); n != 1 {
		t.Fatalf("Attached after bo's Disconnect: %d, want 1", n)
	}
	res = must(t)(aa.Leave(ctx))
	if len(res.Events) != 1 || res.Events[0].Reason != lobby.ReasonLeft {
		t.Fatalf("Leave: %+v", res)
	}
	if n := r.Attached("l"); n != 0 {
		t.Fatalf("Attached after ana left: %d, want 0", n)
	}
	for name, s := range map[string]*fakeSink{"ana": ana, "bo": bo} {
		if _, ended := s.snapshot(); len(ended) > 0 {
			t.Errorf("%s was told End for its own close: %v", name, ended)
		}
	}
}

// A connection that timed out while nobody in this process watched the
// stretch (here: its heartbeat reported after the deadline) is reported
// stale by Heartbeat, and the Attachment detaches itself.
func TestRoomsStaleHeartbeatDetaches(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	svc := newService(t, memstore.New(), clock)
	r := newRooms(t, svc)
	s := newSink()
	a, _ := join(t, r, "l", "ana", nil, s)
	clock.Advance(svc.Policy().HeartbeatTTL + time.Second)
	// No Run: nothing applied the deadline; the heartbeat judges it.
	res := must(t)(a.Heartbeat(ctx))
	if res.Outcome != lobby.OutcomeStale {
		t.Fatalf("Heartbeat after the deadline: %v, want stale", res.Outcome)
	}
	if n := r.Attached("l"); n != 0 {
		t.Fatalf("Attached after a stale heartbeat: %d, want 0", n)
	}
	if _, err := a.Heartbeat(ctx); !errors.Is(err, lobby.ErrDetached) {
		t.Fatalf("second Heartbeat: %v, want ErrDetached", err)
	}
}

func TestRoomsBadInput(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0)
	svc := newService(t, memstore.New(), clock, lobby.WithPolicy(func() lobby.Policy {
		p := lobby.DefaultPolicy()
		p.MaxMembers = 1
		return p
	}()))
	if _, err := lobby.NewRooms(nil); !errors.Is(err, lobby.ErrInvalidOption) {
		t.Errorf("NewRooms(nil): %v", err)
	}
	if _, err := lobby.NewRooms(svc, lobby.SinkQueue(0)); !errors.Is(err, lobby.ErrInvalidOption) {
		t.Errorf("SinkQueue(0): %v", err)
	}
	if _, err := lobby.NewRooms(svc, nil); !errors.Is(err, lobby.ErrInvalidOption) {
		t.Errorf("nil option: %v", err)
	}
	r := newRooms(t, svc)
	ctx := context.Background()
	if _, _, err := r.Join(ctx, "l", "ana", nil, nil); !errors.Is(err, lobby.ErrInvalidOption) {
		t.Errorf("nil sink: %v", err)
	}
	if _, _, err := r.Join(ctx, "", "ana", nil, newSink()); !errors.Is(err, lobby.ErrInvalidID) {
		t.Errorf("empty lobby ID: %v", err)
	}
	if _, _, err := r.Join(ctx, "l", "", nil, newSink()); !errors.Is(err, lobby.ErrInvalidID) {
		t.Errorf("empty player: %v", err)
	}
	join(t, r, "l", "ana", nil, newSink())
	refused := newSink()
	if _, _, err := r.Join(ctx, "l", "bo", nil, refused); !errors.Is(err, lobby.ErrLobbyFull) {
		t.Fatalf("join of a full lobby: %v", err)
	}
	if n := r.Attached("l"); n != 1 {
		t.Fatalf("Attached after a refused join: %d, want 1", n)
	}
	if got, ended := refused.snapshot(); len(got)+len(ended) > 0 {
		t.Fatalf("the refused join's sink was called: %v %v", got, ended)
	}
}

// A connection that times out while its player keeps another tab: only the
// timed-out tab's sink is told End, by generation, not by player.
func TestRoomsTimeoutIsRoutedByGeneration(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	svc := newService(t, memstore.New(), clock)
	runService(t, svc)
	r := newRooms(t, svc)
	ttl := svc.Policy().HeartbeatTTL

	tab1, tab2 := newSink(), newSink()
	a1, _ := join(t, r, "l", "ana", nil, tab1)
	a2, _ := join(t, r, "l", "ana", nil, tab2)
	clock.Advance(ttl / 2)
	if res := must(t)(a2.Heartbeat(ctx)); res.Outcome != lobby.OutcomeApplied {
		t.Fatalf("Heartbeat of tab 2: %v", res.Outcome)
	}
	clock.Advance(ttl/2 + time.Second) // past tab 1's deadline only
	e := tab1.waitEnded(t)
	if e.Player != "ana" || e.Gen != a1.Gen() || e.Cause != lobby.EndTimedOut {
		t.Fatalf("tab 1 ended with %+v, want generation %d timed out", e, a1.Gen())
	}
	if res := must(t)(a2.Heartbeat(ctx)); res.Outcome != lobby.OutcomeApplied {
		t.Fatalf("Heartbeat of tab 2 after tab 1 timed out: %v", res.Outcome)
	}
	if _, ended := tab2.snapshot(); len(ended) > 0 {
		t.Fatalf("tab 2 was told End: %v", ended)
	}
	if n := r.Attached("l"); n != 1 {
		t.Fatalf("Attached: %d, want 1", n)
	}
}

// SinkFuncs calls its functions, and a nil one ignores what it is given.
func TestSinkFuncs(t *testing.T) {
	var got []string
	f := lobby.SinkFuncs{
		OnDelivery: func(_ context.Context, d lobby.Delivery) { got = append(got, fmt.Sprint("delivery ", d.Revision)) },
		OnEnd:      func(e lobby.Ended) { got = append(got, "end "+e.Cause.String()) },
	}
	f.Send(context.Background(), lobby.Delivery{Revision: 3})
	f.End(lobby.Ended{Cause: lobby.EndKicked})
	if fmt.Sprint(got) != "[delivery 3 end kicked]" {
		t.Fatalf("got %v", got)
	}
	var empty lobby.SinkFuncs
	empty.Send(context.Background(), lobby.Delivery{})
	empty.End(lobby.Ended{})
}
