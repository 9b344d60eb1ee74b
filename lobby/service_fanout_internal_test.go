package lobby

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// hookStore runs hooks inside a Service's Load and after its Write, to
// place another process's commit at an exact point of a transaction.
type hookStore struct {
	store.Store
	mu        sync.Mutex
	afterLoad func()
	afterOK   func(w store.Write)
}

func (h *hookStore) Load(ctx context.Context, id string) (store.Record, error) {
	rec, err := h.Store.Load(ctx, id)
	h.mu.Lock()
	f := h.afterLoad
	h.afterLoad = nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return rec, err
}

func (h *hookStore) Write(ctx context.Context, w store.Write) error {
	err := h.Store.Write(ctx, w)
	if err == nil {
		h.mu.Lock()
		f := h.afterOK
		h.afterOK = nil
		h.mu.Unlock()
		if f != nil {
			f(w)
		}
	}
	return err
}

// hooked returns a Service over a hookStore on mem (keeping mem's change
// notifications, without batching, so every write goes through Write) and
// a second Service straight on mem: another process. Both run.
func hooked(t *testing.T, opts ...Option) (*Service, *hookStore, *Service) {
	t.Helper()
	mem := memstore.New()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	hs := &hookStore{Store: mem}
	n, _ := store.Store(mem).(store.Notifier)
	c, _ := store.Store(mem).(store.Claimer)
	opts = append([]Option{WithClock(clock), WithoutCache()}, opts...)
	a, err := NewService(store.Compose(hs, c, n, nil), opts...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewService(mem, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Service{a, b} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return a, hs, b
}

// eventually waits (yielding) until ok holds; a synchronisation point, not
// a timing assertion: the hang guard only stops a broken build.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened", what)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// early returns how many Changes pending Attachments of r's room id hold.
func early(r *Rooms, id string) int {
	r.mu.Lock()
	rm := r.rooms[id]
	r.mu.Unlock()
	if rm == nil {
		return 0
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	n := 0
	for a := range rm.atts {
		if a.pending {
			n += len(a.early)
		}
	}
	return n
}

// recorder is a Sink that keeps what it gets.
type recorder struct {
	mu    sync.Mutex
	got   []Delivery
	ended []Ended
}

func (r *recorder) Send(_ context.Context, d Delivery) {
	r.mu.Lock()
	r.got = append(r.got, d)
	r.mu.Unlock()
}

func (r *recorder) End(e Ended) {
	r.mu.Lock()
	r.ended = append(r.ended, e)
	r.mu.Unlock()
}

func (r *recorder) revisions() (revs []uint64, ended int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.got {
		revs = append(revs, d.Revision)
	}
	return revs, len(r.ended)
}

// Another process commits right after the join's write, before Join
// returns, and this process's watch hands that commit (and the join's own)
// to the room while the join is still in flight. The new socket gets the
// join's snapshot, then the other commit once, and not the join's event.
func TestRoomsCommitWhileJoinInFlight(t *testing.T) {
	ctx := context.Background()
	a, hs, b := hooked(t)
	r, err := NewRooms(a)
	if err != nil {
		t.Fatal(err)
	}
	first := &recorder{}
	if _, _, err := r.Join(ctx, "l", "ana", nil, first); err != nil {
		t.Fatal(err)
	}
	hs.mu.Lock()
	hs.afterOK = func(store.Write) {
		if _, err := b.Update(ctx, "l", "ana", map[string]string{"x": "1"}); err != nil {
			t.Error(err)
		}
		// The room's watch reads both commits from the log while the
		// join has not returned.
		eventually(t, "the room holding both commits for the joining socket", func() bool { return early(r, "l") >= 2 })
	}
	hs.mu.Unlock()
	second := &recorder{}
	att, snap, err := r.Join(ctx, "l", "bo", nil, second)
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	if snap.Revision != 2 {
		t.Fatalf("bo's snapshot at %d, want 2 (its join)", snap.Revision)
	}
	eventually(t, "bo getting revision 3", func() bool { revs, _ := second.revisions(); return len(revs) > 0 })
	if revs, _ := second.revisions(); fmt.Sprint(revs) != "[3]" {
		t.Fatalf("bo got revisions %v, want [3]", revs)
	}
	eventually(t, "ana getting revision 3", func() bool { revs, _ := first.revisions(); return len(revs) == 2 })
	if revs, _ := first.revisions(); fmt.Sprint(revs) != "[2 3]" {
		t.Fatalf("ana got revisions %v, want [2 3]", revs)
	}
}

// Another process commits after the room's watch is open and before the
// join reads the lobby: the join sees that commit in its snapshot, and the
// socket is handed nothing the snapshot already shows.
func TestRoomsCommitBeforeJoinReads(t *testing.T) {
	ctx := context.Background()
	a, hs, b := hooked(t)
	r, err := NewRooms(a)
	if err != nil {
		t.Fatal(err)
	}
	hs.mu.Lock()
	hs.afterLoad = func() {
		if _, err := b.Join(ctx, "l", "cy", nil); err != nil {
			t.Error(err)
		}
	}
	hs.mu.Unlock()
	s := &recorder{}
	att, snap, err := r.Join(ctx, "l", "ana", nil, s)
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	// cy's join made the load stale: the join retried on top of it.
	if snap.Revision != 2 || len(snap.Members) != 2 || snap.Host != "cy" {
		t.Fatalf("snapshot %+v, want revision 2 with cy hosting", snap)
	}
	if _, err := b.Update(ctx, "l", "cy", map[string]string{"x": "1"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "revision 3", func() bool { revs, _ := s.revisions(); return len(revs) > 0 })
	if revs, _ := s.revisions(); fmt.Sprint(revs) != "[3]" {
		t.Fatalf("revisions %v, want [3]", revs)
	}
}

// The joining player is kicked in another process before its Join returns:
// the socket is told End, after the kick's event, although the Attachment
// was not yet handed to the transport when the kick arrived.
func TestRoomsEndedWhileJoinInFlight(t *testing.T) {
	ctx := context.Background()
	a, hs, b := hooked(t)
	r, err := NewRooms(a)
	if err != nil {
		t.Fatal(err)
	}
	host := &recorder{}
	if _, _, err := r.Join(ctx, "l", "ana", nil, host); err != nil {
		t.Fatal(err)
	}
	hs.mu.Lock()
	hs.afterOK = func(store.Write) {
		if _, err := b.Kick(ctx, "l", "ana", "bo", 0); err != nil {
			t.Error(err)
		}
		eventually(t, "the room holding the kick for the joining socket", func() bool { return early(r, "l") >= 2 })
	}
	hs.mu.Unlock()
	s := &recorder{}
	att, _, err := r.Join(ctx, "l", "bo", nil, s)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "bo told End", func() bool { _, n := s.revisions(); return n == 1 })
	s.mu.Lock()
	e, got := s.ended[0], fmt.Sprint(len(s.got))
	s.mu.Unlock()
	if e.Player != "bo" || e.Gen != att.Gen() || e.Cause != EndKicked || got != "1" {
		t.Fatalf("bo ended %+v after %s deliveries, want its generation %d kicked after the kick's event", e, got, att.Gen())
	}
	if n := r.Attached("l"); n != 1 {
		t.Fatalf("Attached %d, want 1 (ana)", n)
	}
}

// However many sockets of a lobby this process holds, and however their
// joins race, the lobby is watched once; after the last detaches, not at
// all.
func TestRoomsWatchOncePerLobby(t *testing.T) {
	ctx := context.Background()
	a, _, b := hooked(t)
	r, err := NewRooms(a)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	atts := make([]*Attachment, 6)
	sinks := make([]*recorder, 6)
	for i := range atts {
		sinks[i] = &recorder{}
		wg.Go(func() {
			att, _, err := r.Join(ctx, "l", fmt.Sprintf("p%d", i%3), nil, sinks[i])
			if err != nil {
				t.Error(err)
				return
			}
			atts[i] = att
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	lw := a.hub.lookup("l")
	if lw == nil {
		t.Fatal("nobody watches the lobby")
	}
	lw.mu.Lock()
	n := len(lw.watchers)
	lw.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d watchers for 6 sockets, want 1", n)
	}
	res, err := b.Update(ctx, "l", "p0", map[string]string{"x": "1"})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sinks {
		eventually(t, fmt.Sprintf("socket %d at revision %d", i, res.Revision), func() bool {
			revs, _ := s.revisions()
			return len(revs) > 0 && revs[len(revs)-1] == res.Revision
		})
	}
	for _, att := range atts {
		att.Close()
	}
	if lw := a.hub.lookup("l"); lw != nil {
		t.Fatal("the lobby is still watched after its last socket detached")
	}
	if n := r.Attached("l"); n != 0 {
		t.Fatalf("Attached %d after every Close", n)
	}
}

// An Attachment's sender runs only while it has something to deliver:
// once its Sink took every delivery, no goroutine is left for it, and the
// next change starts one again.
func TestRoomsIdleAttachmentHasNoSender(t *testing.T) {
	ctx := context.Background()
	a, _, b := hooked(t)
	r, err := NewRooms(a)
	if err != nil {
		t.Fatal(err)
	}
	sinks := make([]*recorder, 3)
	atts := make([]*Attachment, 3)
	for i := range atts {
		sinks[i] = &recorder{}
		if atts[i], _, err = r.Join(ctx, "l", fmt.Sprintf("p%d", i), nil, sinks[i]); err != nil {
			t.Fatal(err)
		}
		defer atts[i].Close()
	}
	sending := func(att *Attachment) bool {
		att.mu.Lock()
		defer att.mu.Unlock()
		return att.sending
	}
	for round := range 2 {
		res, err := b.Update(ctx, "l", "p0", map[string]string{"round": fmt.Sprint(round)})
		if err != nil {
			t.Fatal(err)
		}
		for i, att := range atts {
			eventually(t, fmt.Sprintf("round %d: socket %d at revision %d", round, i, res.Revision), func() bool {
				revs, _ := sinks[i].revisions()
				return len(revs) > 0 && revs[len(revs)-1] == res.Revision
			})
			eventually(t, fmt.Sprintf("round %d: socket %d's sender ends", round, i), func() bool { return !sending(att) })
		}
	}
}

// starter is a recorder that is also a Starter: Start records the first
// state and waits for release, so that the test commits while it runs.
type starter struct {
	recorder
	started chan Snapshot
	release chan struct{}
	order   []string // "start", then one "send" per delivery
}

func (s *starter) Start(a *Attachment, first Snapshot) {
	s.mu.Lock()
	s.order = append(s.order, "start")
	s.mu.Unlock()
	s.started <- first
	<-s.release
}

func (s *starter) Send(ctx context.Context, d Delivery) {
	s.mu.Lock()
	s.order = append(s.order, "send")
	s.mu.Unlock()
	s.recorder.Send(ctx, d)
}

// A Starter is told Start before any Send, and a commit made while Start
// runs reaches it afterwards, once: no transport needs to hold deliveries
// back behind the first state it renders.
func TestRoomsStarterComesFirst(t *testing.T) {
	ctx := context.Background()
	a, _, b := hooked(t)
	r, err := NewRooms(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Join(ctx, "l", "bo", nil); err != nil {
		t.Fatal(err)
	}
	s := &starter{started: make(chan Snapshot, 1), release: make(chan struct{})}
	type joined struct {
		att  *Attachment
		snap Snapshot
		err  error
	}
	done := make(chan joined, 1)
	go func() {
		att, snap, err := r.Join(ctx, "l", "ana", nil, s)
		done <- joined{att, snap, err}
	}()
	first := <-s.started
	if first.Revision != 2 || len(first.Members) != 2 {
		t.Fatalf("Start's snapshot %+v, want revision 2 with bo and ana", first)
	}
	// This Service commits while Start runs: the room hands the change
	// out at once, and the Attachment keeps it until Start returns.
	if _, err := a.Update(ctx, "l", "bo", map[string]string{"x": "1"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the update handed to the joining Attachment", func() bool {
		r.mu.Lock()
		rm := r.rooms["l"]
		r.mu.Unlock()
		rm.mu.Lock()
		defer rm.mu.Unlock()
		for att := range rm.atts {
			if len(att.early) > 0 {
				return true
			}
		}
		return false
	})
	if revs, _ := s.revisions(); len(revs) != 0 {
		t.Fatalf("Send called with %v while Start ran", revs)
	}
	close(s.release)
	j := <-done
	if j.err != nil {
		t.Fatal(j.err)
	}
	defer j.att.Close()
	if j.snap.Revision != first.Revision {
		t.Fatalf("Join returned revision %d, Start was given %d", j.snap.Revision, first.Revision)
	}
	eventually(t, "revision 3", func() bool { revs, _ := s.revisions(); return len(revs) > 0 })
	s.mu.Lock()
	order := fmt.Sprint(s.order)
	s.mu.Unlock()
	if revs, _ := s.revisions(); fmt.Sprint(revs) != "[3]" || order != "[start send]" {
		t.Fatalf("revisions %v, calls %s; want [3] after start", revs, order)
	}
}
