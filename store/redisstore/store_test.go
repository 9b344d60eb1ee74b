package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
)

// These tests cover what is particular to Redis; the contract as a whole is
// checked by storetest (conformance_test.go).

var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	cmpopts.EquateEmpty(),
}

var t0 = time.Date(2031, time.March, 14, 15, 9, 26, 535897932, time.UTC)

// shardCounts are the layouts every server test runs with: everything in
// one slot, and spread over several.
var shardCounts = []int{1, 5}

func forShards(t *testing.T, f func(t *testing.T, s *redisstore.Store)) {
	for _, n := range shardCounts {
		t.Run(fmt.Sprintf("shards=%d", n), func(t *testing.T) {
			f(t, newStore(t, redisstore.WithShards(n)))
		})
	}
}

func mustWrite(t *testing.T, s store.Store, w store.Write) {
	t.Helper()
	if err := s.Write(t.Context(), w); err != nil {
		t.Fatalf("Write(%q, expected %d) = %v, want nil", w.ID, w.Expected, err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	var c rueidis.Client = struct{ rueidis.Client }{} // never called by New
	tests := []struct {
		name string
		opts []redisstore.Option
	}{
		{"empty prefix", []redisstore.Option{redisstore.WithPrefix("")}},
		{"open brace", []redisstore.Option{redisstore.WithPrefix("app{1")}},
		{"close brace", []redisstore.Option{redisstore.WithPrefix("app}")}},
		{"zero shards", []redisstore.Option{redisstore.WithShards(0)}},
		{"too many shards", []redisstore.Option{redisstore.WithShards(redisstore.MaxShards + 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := redisstore.New(c, tt.opts...); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("New = %v, want %v", err, store.ErrInvalid)
			}
		})
	}
	if _, err := redisstore.New(nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("New(nil) = %v, want %v", err, store.ErrInvalid)
	}
	if _, err := redisstore.New(c, redisstore.WithPrefix("app:eu-1"), redisstore.WithShards(redisstore.MaxShards)); err != nil {
		t.Errorf("New with valid options = %v, want nil", err)
	}
}

// TestDeadlineNanosecondExact writes deadlines one nanosecond apart in 2031,
// where a float64 score would merge them, and checks that they round-trip
// and that Due tells them apart.
func TestDeadlineNanosecondExact(t *testing.T) {
	a, b := t0, t0.Add(time.Nanosecond)
	if float64(a.UnixNano()) != float64(b.UnixNano()) {
		t.Fatalf("test premise: %v and %v should collide as float64 nanoseconds", a, b)
	}
	forShards(t, func(t *testing.T, s *redisstore.Store) {
		// "z" gets the earlier deadline, so ID order alone would be wrong.
		mustWrite(t, s, store.Write{ID: "z", Deadline: a})
		mustWrite(t, s, store.Write{ID: "a", Deadline: b})
		mustWrite(t, s, store.Write{ID: "m", Deadline: b})
		for id, want := range map[string]time.Time{"z": a, "a": b} {
			r, err := s.Load(t.Context(), id)
			if err != nil || !r.Deadline.Equal(want) {
				t.Errorf("Load(%q) = deadline %v, %v; want %v, nil", id, r.Deadline, err, want)
			}
		}
		got, err := s.Due(t.Context(), a, 10)
		if d := cmp.Diff([]store.Due{{ID: "z", Deadline: a}}, got, cmpOpts); err != nil || d != "" {
			t.Errorf("Due(a) = %v, diff (-want +got):\n%s", err, d)
		}
		got, err = s.Due(t.Context(), b, 10)
		want := []store.Due{{ID: "z", Deadline: a}, {ID: "a", Deadline: b}, {ID: "m", Deadline: b}}
		if d := cmp.Diff(want, got, cmpOpts); err != nil || d != "" {
			t.Errorf("Due(b) = %v, diff (-want +got):\n%s", err, d)
		}
	})
}

// crc16 is Redis Cluster's key hash (CRC-16/XMODEM).
func crc16(b string) uint16 {
	var crc uint16
	for i := 0; i < len(b); i++ {
		crc ^= uint16(b[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot is the Cluster slot of a key, honouring hash tags.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % 16384
}

// TestKeyLayout checks the documented key names, and that everything a
// write to one lobby touches is in one Cluster slot, whatever its ID holds.
func TestKeyLayout(t *testing.T) {
	if got := crc16("123456789"); got != 0x31c3 {
		t.Fatalf("crc16 check value = %#x, want 0x31c3", got)
	}
	c := sharedClient(t)
	prefix := newPrefix()
	s, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithShards(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { purge(t, c, prefix) })

	ids := []string{"plain", "{braced}", "}x{", "a:b/c*?[d] e"}
	for _, id := range ids {
		mustWrite(t, s, store.Write{ID: id, Deadline: t0, Events: []store.Event{{Lobby: id, Seq: 1}}})
	}
	keys := scanKeys(t, t.Context(), c, prefix)
	slots := map[string]uint16{} // shard tag -> slot
	var recs []string
	for _, k := range keys {
		tag, rest, ok := strings.Cut(k, "}")
		if !ok || !strings.HasPrefix(tag, "{"+prefix+":") {
			t.Errorf("key %q does not start with {%s:k}", k, prefix)
			continue
		}
		if slot(k) != crc16(tag[1:])%16384 {
			t.Errorf("key %q is not in the slot of its shard tag %q", k, tag[1:])
		}
		slots[tag] = slot(k)
		switch {
		case strings.HasPrefix(rest, ":r:"):
			recs = append(recs, rest[3:])
		case rest == ":due" || rest == ":out" || rest == ":ix":
		default:
			t.Errorf("unexpected key %q", k)
		}
	}
	slices.Sort(recs)
	want := slices.Clone(ids)
	slices.Sort(want)
	if d := cmp.Diff(want, recs); d != "" {
		t.Errorf("record keys (-want +got):\n%s", d)
	}
}

func TestPrefixesAreIsolated(t *testing.T) {
	a := newStore(t)
	b := newStore(t)
	mustWrite(t, a, store.Write{ID: "x", Data: []byte("a"), Deadline: t0, Events: []store.Event{{Lobby: "x", Seq: 1}}})
	if _, err := b.Load(t.Context(), "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Load in another prefix = %v, want %v", err, store.ErrNotFound)
	}
	if d, err := b.Due(t.Context(), t0, 10); err != nil || len(d) != 0 {
		t.Errorf("Due in another prefix = %v, %v; want nothing", d, err)
	}
	if p, err := b.Pending(t.Context(), 10); err != nil || len(p) != 0 {
		t.Errorf("Pending in another prefix = %v, %v; want nothing", p, err)
	}
	mustWrite(t, b, store.Write{ID: "x", Data: []byte("b")})
	r, err := a.Load(t.Context(), "x")
	if err != nil || string(r.Data) != "a" || r.Version != 1 {
		t.Errorf("Load after a write in another prefix = %+v, %v; want data a, version 1", r, err)
	}
}

// TestHeartbeatIsOneRoundTrip checks that a write without events is one
// EVALSHA, once the server has the script.
func TestHeartbeatIsOneRoundTrip(t *testing.T) {
	cc := &counting{Client: sharedClient(t)}
	prefix := newPrefix()
	s, err := redisstore.New(cc, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { purge(t, cc.Client, prefix) })
	mustWrite(t, s, store.Write{ID: "l", Data: []byte("v1"), Deadline: t0})
	cc.take()
	for v := uint64(1); v <= 3; v++ {
		mustWrite(t, s, store.Write{ID: "l", Expected: v, Data: []byte("v"), Deadline: t0.Add(time.Duration(v) * time.Second)})
		if d := cmp.Diff([]string{"EVALSHA"}, cc.take()); d != "" {
			t.Fatalf("commands of heartbeat %d (-want +got):\n%s", v, d)
		}
	}
}

// TestClaimSharedByWorkers runs several sweepers against the same due
// lobbies at once: every lobby must be handed to exactly one of them.
func TestClaimSharedByWorkers(t *testing.T) {
	forShards(t, func(t *testing.T, s *redisstore.Store) {
		const lobbies, workers = 120, 4
		var want []string
		for i := range lobbies {
			id := fmt.Sprintf("lobby-%03d", i)
			want = append(want, id)
			mustWrite(t, s, store.Write{ID: id, Deadline: t0.Add(time.Duration(i%7) * time.Nanosecond)})
		}
		now := t0.Add(time.Second)
		var (
			mu  sync.Mutex
			got []string
			wg  sync.WaitGroup
		)
		start := make(chan struct{})
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					d, err := s.Claim(context.Background(), now, 7, time.Minute)
					if err != nil {
						t.Errorf("Claim = %v", err)
						return
					}
					if len(d) == 0 {
						return
					}
					mu.Lock()
					for _, x := range d {
						got = append(got, x.ID)
					}
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		slices.Sort(got)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("lobbies claimed over all workers (-want +got):\n%s", d)
		}
		// All are held now; a Write releases one, and the hold ends.
		var c store.Claimer = s
		if d, err := c.Claim(t.Context(), now, 10, time.Minute); err != nil || len(d) != 0 {
			t.Errorf("Claim while all are held = %v, %v; want none", d, err)
		}
		mustWrite(t, s, store.Write{ID: "lobby-005", Expected: 1, Deadline: t0})
		wantOne := []store.Due{{ID: "lobby-005", Deadline: t0}}
		if d, err := c.Claim(t.Context(), now, 10, time.Minute); err != nil || cmp.Diff(wantOne, d, cmpOpts) != "" {
			t.Errorf("Claim after a Write = %v, %v; want %v", d, err, wantOne)
		}
		if d, err := c.Claim(t.Context(), now.Add(time.Minute), lobbies+1, time.Minute); err != nil || len(d) != lobbies {
			t.Errorf("Claim after the hold = %d lobbies, %v; want %d", len(d), err, lobbies)
		}
	})
}

// TestPendingKeepsLobbyOrder interleaves writes of many lobbies and checks
// that Pending returns each lobby's events in order, also across shards.
func TestPendingKeepsLobbyOrder(t *testing.T) {
	forShards(t, func(t *testing.T, s *redisstore.Store) {
		const lobbies, rounds = 9, 6
		var all []store.Event
		for r := range rounds {
			for l := range lobbies {
				id := fmt.Sprintf("l%d", l)
				evs := []store.Event{
					{Lobby: id, Seq: uint64(2 * r), Data: []byte(fmt.Sprint(r))},
					{Lobby: id, Seq: uint64(2*r + 1)},
				}
				all = append(all, evs...)
				mustWrite(t, s, store.Write{ID: id, Expected: uint64(r), Events: evs})
			}
		}
		got, err := s.Pending(t.Context(), len(all)+1)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(all) {
			t.Fatalf("Pending returned %d events, want %d", len(got), len(all))
		}
		next := map[string]uint64{}
		for _, e := range got {
			if e.Seq != next[e.Lobby] {
				t.Fatalf("lobby %s: event seq %d came when %d was next; Pending: %v", e.Lobby, e.Seq, next[e.Lobby], got)
			}
			next[e.Lobby]++
		}
		// Ack half in one call (several shards and batches), then the rest.
		if err := s.Ack(t.Context(), all[:len(all)/2]); err != nil {
			t.Fatal(err)
		}
		rest, err := s.Pending(t.Context(), len(all))
		if err != nil {
			t.Fatal(err)
		}
		wantRest := slices.Clone(all[len(all)/2:])
		sortEvents(rest)
		sortEvents(wantRest)
		if d := cmp.Diff(wantRest, rest, cmpOpts); d != "" {
			t.Errorf("Pending after acking half (-want +got):\n%s", d)
		}
	})
}

func sortEvents(e []store.Event) {
	slices.SortFunc(e, func(a, b store.Event) int {
		if c := strings.Compare(a.Lobby, b.Lobby); c != 0 {
			return c
		}
		return int(a.Seq) - int(b.Seq)
	})
}

// TestAckLargeBatch acks more events than one script handles.
func TestAckLargeBatch(t *testing.T) {
	s := newStore(t)
	var evs []store.Event
	for i := range 1300 {
		evs = append(evs, store.Event{Lobby: "big", Seq: uint64(i)})
	}
	mustWrite(t, s, store.Write{ID: "big", Events: evs})
	if err := s.Ack(t.Context(), evs[:1299]); err != nil {
		t.Fatal(err)
	}
	got, err := s.Pending(t.Context(), 10)
	if d := cmp.Diff(evs[1299:], got, cmpOpts); err != nil || d != "" {
		t.Errorf("Pending after Ack = %v, diff (-want +got):\n%s", err, d)
	}
}

// TestNotifyAcrossClients checks that a write through another client (as
// from another process) wakes a Notify channel, and that the channel closes
// with its context.
func TestNotifyAcrossClients(t *testing.T) {
	c := sharedClient(t)
	prefix := newPrefix()
	t.Cleanup(func() { purge(t, c, prefix) })
	watcher, err := redisstore.New(c, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	other, err := newClient(os.Getenv(addrEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	writer, err := redisstore.New(other, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	strangerPrefix := newPrefix()
	t.Cleanup(func() { purge(t, c, strangerPrefix) })
	stranger, err := redisstore.New(other, redisstore.WithPrefix(strangerPrefix))
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	ch, err := watcher.Notify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A write under another prefix, then one under ours: the first value
	// must come from ours, since nothing under ours happened before. Only
	// writes that append events notify.
	withEvent := store.Write{ID: "x", Events: []store.Event{{Lobby: "x", Seq: 1, Data: []byte("e")}}}
	mustWrite(t, stranger, withEvent)
	mustWrite(t, writer, withEvent)
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatal("Notify channel closed, want a value")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s of a write")
	}
	// A heartbeat-like write (no events) does not notify; the next write
	// with events does.
	mustWrite(t, writer, store.Write{ID: "x", Expected: 1})
	mustWrite(t, writer, store.Write{ID: "x", Expected: 2, Events: []store.Event{{Lobby: "x", Seq: 2, Data: []byte("e")}}})
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s of a write with events")
	}
	cancel()
	for range ch { // drain until closed
	}
	if _, err := watcher.Notify(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Notify(done ctx) = %v, want %v", err, context.Canceled)
	}
}

// TestCorruptRecord checks that bytes this package did not write are
// reported, not misread or panicked on.
func TestCorruptRecord(t *testing.T) {
	c := sharedClient(t)
	prefix := newPrefix()
	t.Cleanup(func() { purge(t, c, prefix) })
	s, err := redisstore.New(c, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	key := "{" + prefix + ":0}:r:"
	for id, fields := range map[string][]string{
		"badversion":  {"v", "x1", "d", ""},
		"baddeadline": {"v", "1", "d", "", "t", "tomorrow"},
	} {
		cmd := c.B().Hset().Key(key + id).FieldValue()
		for i := 0; i < len(fields); i += 2 {
			cmd = cmd.FieldValue(fields[i], fields[i+1])
		}
		if err := c.Do(t.Context(), cmd.Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(t.Context(), id); !errors.Is(err, redisstore.ErrCorrupt) {
			t.Errorf("Load(%q) = %v, want %v", id, err, redisstore.ErrCorrupt)
		}
	}
}

// TestOutboxClockSteppedBack checks the write script's way out when a
// shard's outbox already holds an entry ID later than the server's clock (a
// clock stepped back, a failover to a node that is behind): the write still
// commits, after that entry.
func TestOutboxClockSteppedBack(t *testing.T) {
	c := sharedClient(t)
	prefix := newPrefix()
	t.Cleanup(func() { purge(t, c, prefix) })
	s, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithShards(3))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, store.Write{ID: "x", Events: []store.Event{{Lobby: "x", Seq: 1}}})
	var out string
	for _, k := range scanKeys(t, t.Context(), c, prefix) {
		if strings.HasSuffix(k, "}:out") {
			out = k
		}
	}
	if out == "" {
		t.Fatal("no outbox stream after a write with an event")
	}
	// An event of x stamped far in the future (year 2286 in microseconds).
	future := c.B().Xadd().Key(out).Id("9999999999999999-0").FieldValue().FieldValue("l", "x").FieldValue("s", "2").FieldValue("d", "").Build()
	if err := c.Do(t.Context(), future).Error(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, store.Write{ID: "x", Expected: 1, Events: []store.Event{{Lobby: "x", Seq: 3}, {Lobby: "x", Seq: 4}}})
	got, err := s.Pending(t.Context(), 10)
	want := []store.Event{{Lobby: "x", Seq: 1}, {Lobby: "x", Seq: 2}, {Lobby: "x", Seq: 3}, {Lobby: "x", Seq: 4}}
	if d := cmp.Diff(want, got, cmpOpts); err != nil || d != "" {
		t.Errorf("Pending = %v, diff (-want +got):\n%s", err, d)
	}
}

// TestAckBookkeeping checks how Ack finds outbox entries: across a write of
// thousands of events, after the lobby was deleted (pending events stay
// ackable), and for a seq a caller reused (one Ack removes every entry of
// it). Once everything is acknowledged, nothing of the outbox is left but
// the empty stream.
func TestAckBookkeeping(t *testing.T) {
	for _, shards := range shardCounts {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			testAckBookkeeping(t, shards)
		})
	}
}

func testAckBookkeeping(t *testing.T, shards int) {
	c := sharedClient(t)
	prefix := newPrefix()
	t.Cleanup(func() { purge(t, c, prefix) })
	s, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.WithShards(shards))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var first []store.Event
	for i := range 2500 {
		first = append(first, store.Event{Lobby: "x", Seq: uint64(i + 1), Data: []byte(strconv.Itoa(i + 1))})
	}
	// 2500 events, with seq 1500 (second chunk) written twice.
	first = append(first, store.Event{Lobby: "x", Seq: 1500, Data: []byte("again")})
	mustWrite(t, s, store.Write{ID: "x", Data: []byte("one"), Deadline: t0, Events: first})
	// Seq 2 reused by a later write, and one more event.
	second := []store.Event{{Lobby: "x", Seq: 2, Data: []byte("2 again")}, {Lobby: "x", Seq: 2501}}
	mustWrite(t, s, store.Write{ID: "x", Expected: 1, Data: []byte("two"), Events: second})
	if err := s.Delete(ctx, "x", 2, 7); err != nil {
		t.Fatal(err)
	}

	all, err := s.Pending(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(append(slices.Clone(first), second...), all, cmpOpts); d != "" {
		t.Fatalf("Pending after the writes and the delete (-want +got):\n%s", d)
	}
	// Acking seq 2 and 1500 once removes both of their entries; unknown
	// events (seq 9999, lobby y) are skipped.
	if err := s.Ack(ctx, []store.Event{{Lobby: "x", Seq: 2}, {Lobby: "x", Seq: 1500}, {Lobby: "x", Seq: 9999}, {Lobby: "y", Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	var want []store.Event
	for _, e := range all {
		if e.Seq != 2 && e.Seq != 1500 {
			want = append(want, e)
		}
	}
	got, err := s.Pending(ctx, 5000)
	if d := cmp.Diff(want, got, cmpOpts); err != nil || d != "" {
		t.Fatalf("Pending after acking seqs 2 and 1500 = %v, diff (-want +got):\n%s", err, d)
	}
	if r, err := s.Load(ctx, "x"); !errors.Is(err, store.ErrNotFound) || r.Version != 7 {
		t.Errorf("Load of the tombstone = %+v, %v; want floor 7, %v", r, err, store.ErrNotFound)
	}

	if err := s.Ack(ctx, got); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Pending(ctx, 10); err != nil || len(p) != 0 {
		t.Errorf("Pending after acking everything = %v, %v; want none", p, err)
	}
	var rec, out string
	keys := scanKeys(t, ctx, c, prefix)
	for _, k := range keys {
		switch {
		case strings.HasSuffix(k, "}:r:x"):
			rec = k
		case strings.HasSuffix(k, "}:out"):
			out = k
		}
	}
	slices.Sort(keys)
	wantKeys := []string{out, rec}
	slices.Sort(wantKeys)
	if d := cmp.Diff(wantKeys, keys); rec == "" || out == "" || d != "" {
		t.Errorf("keys after every ack (-want +got):\n%s", d)
	}
	if n, err := c.Do(ctx, c.B().Xlen().Key(out).Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("XLEN %s after every ack = %d, %v; want 0", out, n, err)
	}
	fields, err := c.Do(ctx, c.B().Hkeys().Key(rec).Build()).AsStrSlice()
	slices.Sort(fields)
	if d := cmp.Diff([]string{"f", "v"}, fields); err != nil || d != "" {
		t.Errorf("fields of the tombstone %q = %v, diff (-want +got):\n%s", rec, err, d)
	}
}
