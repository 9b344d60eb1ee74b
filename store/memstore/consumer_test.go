package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

func claim(t *testing.T, s *memstore.Store, name string, now time.Time, limit int) []store.Cursor {
	t.Helper()
	got, err := s.ClaimLog(context.Background(), name, now, limit, time.Minute)
	if err != nil {
		t.Fatalf("ClaimLog(%s) = %v", name, err)
	}
	return got
}

func commit(t *testing.T, s *memstore.Store, name, id string, after uint64) {
	t.Helper()
	if err := s.CommitLog(context.Background(), name, id, after); err != nil {
		t.Fatalf("CommitLog(%s, %s, %d) = %v", name, id, after, err)
	}
}

// A consumer sees writes that commit after its registration and none
// before; its cursor for a lobby starts just before the first entry it is
// due to see.
func TestConsumerStartsAtThePresent(t *testing.T) {
	s := memstore.New()
	w := writer{t, s}
	w.write("old", t0, []byte("before"))
	w.write("both", t0, []byte("before"))
	if err := s.RegisterConsumer(context.Background(), "relay"); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, "relay", t0, 10); got != nil {
		t.Fatalf("ClaimLog before any write since registering = %v, want nothing", got)
	}
	w.write("both", t0, nil) // no entry: no work
	w.write("both", t0, []byte("after"))
	w.write("new", t0, []byte("after"))
	got := claim(t, s, "relay", t0, 10)
	want := []store.Cursor{{Lobby: "both", After: 2}, {Lobby: "new", After: 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("ClaimLog = %v, want %v", got, want)
	}
	// Registering again changes nothing, and so does a first ClaimLog of
	// another name for this one.
	if err := s.RegisterConsumer(context.Background(), "relay"); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, "audit", t0, 10); got != nil {
		t.Fatalf("first ClaimLog of a new name = %v, want nothing", got)
	}
	w.write("old", t0, []byte("later"))
	if got := claim(t, s, "audit", t0, 10); !slices.Equal(got, []store.Cursor{{Lobby: "old", After: 1}}) {
		t.Fatalf("audit's ClaimLog = %v, want [old 1]", got)
	}
}

// Committing moves the cursor forward only and releases the claim; the
// lobby comes back only with entries after the cursor, including one
// written between ClaimLog and CommitLog.
func TestConsumerCommit(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	w := writer{t, s}
	if err := s.CommitLog(ctx, "relay", "a", 1); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("CommitLog of an unregistered name = %v, want ErrInvalid", err)
	}
	if err := s.RegisterConsumer(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	w.write("a", t0, []byte("1"))
	w.write("a", t0, []byte("2"))
	if got := claim(t, s, "relay", t0, 10); !slices.Equal(got, []store.Cursor{{Lobby: "a", After: 0}}) {
		t.Fatalf("ClaimLog = %v, want [a 0]", got)
	}
	w.write("a", t0, []byte("3")) // between ClaimLog and CommitLog
	commit(t, s, "relay", "a", 2)
	if got := claim(t, s, "relay", t0, 10); !slices.Equal(got, []store.Cursor{{Lobby: "a", After: 2}}) {
		t.Fatalf("ClaimLog after committing 2 of 3 = %v, want [a 2]", got)
	}
	commit(t, s, "relay", "a", 1) // backward: changes nothing but the claim
	if got := claim(t, s, "relay", t0, 10); !slices.Equal(got, []store.Cursor{{Lobby: "a", After: 2}}) {
		t.Fatalf("ClaimLog after a backward commit = %v, want [a 2]", got)
	}
	commit(t, s, "relay", "a", 3)
	if got := claim(t, s, "relay", t0, 10); got != nil {
		t.Fatalf("ClaimLog after committing everything = %v, want nothing", got)
	}
	// A commit beyond the head holds: entries up to it are not work.
	commit(t, s, "relay", "a", 5)
	w.write("a", t0, []byte("4"))
	if got := claim(t, s, "relay", t0, 10); got != nil {
		t.Fatalf("ClaimLog after writing 4 with the cursor at 5 = %v, want nothing", got)
	}
	w.write("a", t0, []byte("5"))
	w.write("a", t0, []byte("6"))
	if got := claim(t, s, "relay", t0, 10); !slices.Equal(got, []store.Cursor{{Lobby: "a", After: 5}}) {
		t.Fatalf("ClaimLog = %v, want [a 5]", got)
	}
	// Committing a lobby the consumer has no cursor for changes nothing.
	commit(t, s, "relay", "unknown", 9)
	w.write("unknown", t0, []byte("1"))
	if got := claim(t, s, "relay", t0.Add(time.Hour), 10); !slices.Equal(got, []store.Cursor{{Lobby: "a", After: 5}, {Lobby: "unknown", After: 0}}) {
		t.Fatalf("ClaimLog = %v, want a (its claim expired), then unknown at 0", got)
	}
	for _, c := range []struct {
		name, id string
	}{{"", "a"}, {"relay", ""}} {
		if err := s.CommitLog(ctx, c.name, c.id, 1); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CommitLog(%q, %q) = %v, want ErrInvalid", c.name, c.id, err)
		}
	}
	for _, c := range []struct {
		name  string
		limit int
		hold  time.Duration
	}{{"", 1, time.Second}, {"x", 0, time.Second}, {"x", 1, 0}, {"x", 1, -time.Second}} {
		if _, err := s.ClaimLog(ctx, c.name, t0, c.limit, c.hold); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ClaimLog(%q, limit %d, hold %v) = %v, want ErrInvalid", c.name, c.limit, c.hold, err)
		}
	}
	if err := s.RegisterConsumer(ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("RegisterConsumer(\"\") = %v, want ErrInvalid", err)
	}
}

// Claims are exclusive per name for overlapping holds, judged by the now
// arguments; different names do not affect each other; lobbies with work
// come oldest first, a claimed one counting from its claim.
func TestConsumerClaims(t *testing.T) {
	s := memstore.New()
	w := writer{t, s}
	for _, name := range []string{"relay", "audit"} {
		if err := s.RegisterConsumer(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"c", "a", "b"} {
		w.write(id, t0, []byte(id))
	}
	cursors := func(ids ...string) []store.Cursor {
		var c []store.Cursor
		for _, id := range ids {
			c = append(c, store.Cursor{Lobby: id})
		}
		return c
	}
	if got := claim(t, s, "relay", t0, 2); !slices.Equal(got, cursors("c", "a")) {
		t.Fatalf("relay's first claim = %v, want c, a", got)
	}
	if got := claim(t, s, "relay", t0.Add(59*time.Second), 10); !slices.Equal(got, cursors("b")) {
		t.Fatalf("relay's second claim = %v, want b", got)
	}
	if got := claim(t, s, "audit", t0, 10); !slices.Equal(got, cursors("c", "a", "b")) {
		t.Fatalf("audit's claim = %v, want all three", got)
	}
	// A call with an earlier now still sees the claims.
	if got := claim(t, s, "relay", t0.Add(-time.Hour), 10); got != nil {
		t.Fatalf("relay's claim at an earlier now = %v, want nothing", got)
	}
	// At t0+60s the first claims end, the second's does not.
	if got := claim(t, s, "relay", t0.Add(time.Minute), 10); !slices.Equal(got, cursors("c", "a")) {
		t.Fatalf("relay's claim at t0+60s = %v, want c, a", got)
	}
	// A commit releases at once; the others still have work.
	commit(t, s, "relay", "b", 1)
	w.write("a", t0, []byte("a2"))
	commit(t, s, "audit", "a", 2)
	if got := claim(t, s, "relay", t0.Add(time.Minute), 10); got != nil {
		t.Fatalf("relay's claim after committing b = %v, want nothing", got)
	}
	if got := claim(t, s, "audit", t0.Add(time.Minute), 10); !slices.Equal(got, cursors("c", "b")) {
		t.Fatalf("audit's claim = %v, want c, b (a committed)", got)
	}
}

// Several claimers of one name, with holds that all overlap, never get the
// same lobby twice, and between them get every lobby with work; writes
// racing with the claims and commits are never lost.
func TestConsumerConcurrentClaimers(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	if err := s.RegisterConsumer(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	const lobbies, rounds = 200, 5
	ids := make([]string, lobbies)
	for i := range ids {
		ids[i] = fmt.Sprintf("l%03d", i)
	}
	w := writer{t, s}
	for _, id := range ids {
		w.write(id, t0, []byte("x"))
	}
	var mu sync.Mutex
	claimedBy := map[string]int{}
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := s.ClaimLog(ctx, "relay", t0, 7, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, cur := range got {
					if prev, ok := claimedBy[cur.Lobby]; ok {
						t.Errorf("claimers %d and %d both hold %s", prev, c, cur.Lobby)
					}
					claimedBy[cur.Lobby] = c
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(claimedBy) != lobbies {
		t.Fatalf("claimers got %d lobbies, want %d", len(claimedBy), lobbies)
	}

	// Writers append while consumers claim, read and commit what they
	// read; once the writers stop and the consumers drain, every entry was
	// read.
	s = memstore.New()
	if err := s.RegisterConsumer(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	var writers sync.WaitGroup
	for g := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for r := range rounds {
				for i := g; i < lobbies; i += 4 {
					if err := s.Write(ctx, store.Write{ID: ids[i], Expected: uint64(r), At: t0, Effects: []byte("x")}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { writers.Wait(); close(done) }()
	var readMu sync.Mutex
	read := map[string][]uint64{}
	consume := func(now time.Time) int {
		got, err := s.ClaimLog(ctx, "relay", now, 10, time.Hour)
		if err != nil {
			t.Error(err)
			return 0
		}
		for _, cur := range got {
			entries, err := s.ReadLog(ctx, cur.Lobby, cur.After, 100)
			if err != nil {
				t.Error(err)
				return 0
			}
			readMu.Lock()
			for _, e := range entries {
				read[cur.Lobby] = append(read[cur.Lobby], e.Version)
			}
			readMu.Unlock()
			after := cur.After
			if len(entries) > 0 {
				after = entries[len(entries)-1].Version
			}
			if err := s.CommitLog(ctx, "relay", cur.Lobby, after); err != nil {
				t.Error(err)
			}
		}
		return len(got)
	}
	var consumers sync.WaitGroup
	for range 4 {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			for {
				select {
				case <-done:
					return
				default:
					consume(t0)
				}
			}
		}()
	}
	consumers.Wait()
	for consume(t0) > 0 {
	}
	for _, id := range ids {
		if want := []uint64{1, 2, 3, 4, 5}; !slices.Equal(read[id], want) {
			t.Fatalf("%s: read %v, want %v (each entry once, in order)", id, read[id], want)
		}
	}
}

// A consumer slower than the retention learns that it missed entries,
// also when the lobby's tombstone folded away meanwhile.
func TestConsumerOutlivedByRetention(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.WithRetention(store.Retention{Entries: 2, Age: time.Minute}))
	w := writer{t, s}
	if err := s.RegisterConsumer(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		w.write("a", t0, []byte("a"))
	}
	got := claim(t, s, "relay", t0, 10)
	if !slices.Equal(got, []store.Cursor{{Lobby: "a", After: 0}}) {
		t.Fatalf("ClaimLog = %v, want [a 0]", got)
	}
	compacted(t, s, "a", 0, 2)
	commit(t, s, "relay", "a", 2)
	if got := positions(t, s, "a", 2); !slices.Equal(got, []uint64{3, 4}) {
		t.Fatalf("ReadLog(a, 2) = %v", got)
	}

	// b is deleted and its whole log trimmed before the consumer looks.
	w.write("b", t0, []byte("b"))
	w.delete("b", 0)
	if n, err := s.TrimLog(ctx, t0.Add(time.Hour), 100); err != nil || n != 3 {
		t.Fatalf("TrimLog = %d, %v; want 3", n, err)
	}
	got = claim(t, s, "relay", t0.Add(time.Hour), 10)
	if !slices.Equal(got, []store.Cursor{{Lobby: "a", After: 2}, {Lobby: "b", After: 0}}) {
		t.Fatalf("ClaimLog = %v, want a at 2, b at 0", got)
	}
	r, _ := s.Load(ctx, "b")
	compacted(t, s, "b", 0, r.Version)
	commit(t, s, "relay", "b", r.Version)
	commit(t, s, "relay", "a", 2) // nothing left to read, but a's entries went too
	got = claim(t, s, "relay", t0.Add(2*time.Hour), 10)
	if !slices.Equal(got, []store.Cursor{{Lobby: "a", After: 2}}) {
		t.Fatalf("ClaimLog = %v, want only a, at 2", got)
	}
	compacted(t, s, "a", 2, 4)
	commit(t, s, "relay", "a", 4)
	if got := claim(t, s, "relay", t0.Add(3*time.Hour), 10); got != nil {
		t.Fatalf("ClaimLog after everything was committed = %v", got)
	}

	// A folded lobby created again before its consumer caught up: the
	// consumer's old cursor carries on and reports the compaction.
	v1 := w.write("c", t0.Add(3*time.Hour), []byte("c"))
	w.delete("c", 0)
	if _, err := s.TrimLog(ctx, t0.Add(5*time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	v := w.write("c", t0.Add(5*time.Hour), []byte("c again"))
	got = claim(t, s, "relay", t0.Add(5*time.Hour), 10)
	if !slices.Equal(got, []store.Cursor{{Lobby: "c", After: v1 - 1}}) {
		t.Fatalf("ClaimLog = %v, want c at %d", got, v1-1)
	}
	var ce *store.CompactedError
	if _, err := s.ReadLog(ctx, "c", v1-1, 10); !errors.As(err, &ce) || ce.Trimmed != v-1 {
		t.Fatalf("ReadLog(c, %d) = %v; want compaction up to %d", v1-1, err, v-1)
	}
	if got := positions(t, s, "c", ce.Trimmed); !slices.Equal(got, []uint64{v}) {
		t.Fatalf("ReadLog(c, %d) = %v, want [%d]", ce.Trimmed, got, v)
	}
	commit(t, s, "relay", "c", v)
	if got := claim(t, s, "relay", t0.Add(6*time.Hour), 10); got != nil {
		t.Fatalf("ClaimLog after committing c = %v", got)
	}
}

// Every Write with an entry adds a Change to every live feed, after the
// entry is readable; writes without entries add none; a feed whose context
// is done gets nothing more.
func TestSubscribe(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	w := writer{t, s}
	w.write("before", t0, []byte("x"))
	fctx, cancel := context.WithCancel(ctx)
	f1, err := s.Subscribe(fctx)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.write("a", t0, []byte("1"))
	w.write("a", t0, nil)
	w.write("a", t0, []byte("3"))
	w.write("b", t0, []byte("1"))
	for i, f := range []*store.Feed{f1, f2} {
		<-f.Ready()
		got, lost := f.Take()
		want := []store.Change{{Lobby: "a", Version: 3}, {Lobby: "b", Version: 1}}
		slices.SortFunc(got, func(x, y store.Change) int { return int(x.Version) - int(y.Version) })
		slices.Reverse(got)
		if lost || !slices.Equal(got, want) {
			t.Fatalf("feed %d: Take = %v, lost %v; want %v", i+1, got, lost, want)
		}
	}
	cancel()
	w.write("c", t0, []byte("1"))
	if got, lost := f1.Take(); got != nil || lost {
		t.Fatalf("cancelled feed: Take = %v, %v; want nothing", got, lost)
	}
	if got, _ := f2.Take(); !slices.Equal(got, []store.Change{{Lobby: "c", Version: 1}}) {
		t.Fatalf("live feed: Take = %v, want [c 1]", got)
	}
	if _, err := s.Subscribe(fctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Subscribe with a done context = %v, want %v", err, context.Canceled)
	}

	// Concurrently: a reader that reads the log of every change it takes
	// always finds the entry there.
	f3, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range uint64(200) {
				if err := s.Write(ctx, store.Write{ID: fmt.Sprint("w", g), Expected: v, Effects: []byte("e")}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(stop) }()
	last := map[string]uint64{}
	check := func() {
		got, lost := f3.Take()
		if lost {
			t.Error("memstore lost a feed of 4 lobbies")
		}
		for _, c := range got {
			heads, err := s.LogHeads(ctx, []string{c.Lobby})
			if err != nil || heads[0] < c.Version {
				t.Errorf("change %v taken, head %v (%v)", c, heads, err)
			}
			last[c.Lobby] = c.Version
		}
	}
	for running := true; running; {
		select {
		case <-f3.Ready():
			check()
		case <-stop:
			running = false
		}
	}
	check()
	for g := range 4 {
		if id := fmt.Sprint("w", g); last[id] != 200 {
			t.Errorf("%s: last change taken %d, want 200", id, last[id])
		}
	}
}
