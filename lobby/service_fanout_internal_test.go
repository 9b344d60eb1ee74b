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

// The first socket of a lobby in this process: another process commits
// after the join's write and before the join's watch starts, and its
// notification reaches this process in between. The watch must still
// hand that commit out, without waiting for a later one.
func TestRoomsFirstJoinKeepsEarlierNotification(t *testing.T) {
	ctx := context.Background()
	a, hs, b := hooked(t)
	r, err := NewRooms(a)
	if err != nil {
		t.Fatal(err)
	}
	// A Watcher of another lobby tells when a's Run has taken the
	// notifications b's commits produced: the feed is in commit order.
	probe, err := a.Watch(ctx, "probe", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	hs.mu.Lock()
	hs.afterOK = func(store.Write) {
		if _, err := b.Join(ctx, "l", "bo", nil); err != nil {
			t.Error(err)
		}
		if _, err := b.Join(ctx, "probe", "x", nil); err != nil {
			t.Error(err)
		}
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for {
			ch, err := probe.Next(c)
			if err == ErrNotRunning {
				<-probe.Ready()
				continue
			}
			if err != nil {
				t.Errorf("probe: %v", err)
				return
			}
			if ch.Revision == 1 {
				return
			}
		}
	}
	hs.mu.Unlock()
	s := &recorder{}
	att, snap, err := r.Join(ctx, "l", "ana", nil, s)
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	if snap.Revision != 1 {
		t.Fatalf("ana's snapshot at %d, want 1 (its join)", snap.Revision)
	}
	eventually(t, "bo's join (revision 2) reaching ana's socket", func() bool { revs, _ := s.revisions(); return len(revs) > 0 })
	if revs, _ := s.revisions(); fmt.Sprint(revs) != "[2]" {
		t.Fatalf("ana got revisions %v, want [2]", revs)
	}
}
