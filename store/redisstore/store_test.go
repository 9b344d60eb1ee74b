package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
		mustWrite(t, s, store.Write{ID: id, Deadline: t0, At: t0, Effects: []byte("e")})
	}
	// A consumer, and a deleted lobby that leaves no tombstone, add the
	// other kinds of key.
	if err := s.RegisterConsumer(t.Context(), "relay:{x}"); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		mustWrite(t, s, store.Write{ID: id, Expected: 1, Deadline: t0, At: t0, Effects: []byte("e")})
	}
	mustWrite(t, s, store.Write{ID: "gone", Deadline: t0})
	if err := s.Delete(t.Context(), store.Deletion{ID: "gone", Expected: 1, Floor: 5, At: t0}); err != nil {
		t.Fatal(err)
	}
	// A tombstone kept to a time adds the keep index.
	mustWrite(t, s, store.Write{ID: "kept", Expected: 5, Deadline: t0})
	if err := s.Delete(t.Context(), store.Deletion{ID: "kept", Expected: 6, At: t0, Keep: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, "kept") // its record key holds the tombstone
	keys := scanKeys(t, t.Context(), c, prefix)
	slots := map[string]uint16{} // shard tag -> slot
	var recs, logs []string
	kinds := map[string]bool{}
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
			kinds["r"] = true
		case strings.HasPrefix(rest, ":l:"):
			logs = append(logs, rest[3:])
			kinds["l"] = true
		case rest == ":c:relay:{x}" || rest == ":q:relay:{x}":
			kinds[rest[1:2]] = true
		case rest == ":due" || rest == ":age" || rest == ":floor" || rest == ":floorat" || rest == ":keep" || rest == ":names":
			kinds[rest[1:]] = true
		default:
			t.Errorf("unexpected key %q", k)
		}
	}
	slices.Sort(recs)
	slices.Sort(logs)
	want := slices.Clone(ids)
	slices.Sort(want)
	if d := cmp.Diff(want, recs); d != "" {
		t.Errorf("record keys (-want +got):\n%s", d)
	}
	want = slices.DeleteFunc(want, func(id string) bool { return id == "kept" }) // no entries, no log
	if d := cmp.Diff(want, logs); d != "" {
		t.Errorf("log keys (-want +got):\n%s", d)
	}
	for _, kind := range []string{"r", "l", "c", "q", "due", "age", "floor", "floorat", "keep", "names"} {
		if !kinds[kind] {
			t.Errorf("no key of kind %q among %q", kind, keys)
		}
	}
}

func TestPrefixesAreIsolated(t *testing.T) {
	a := newStore(t)
	b := newStore(t)
	mustWrite(t, a, store.Write{ID: "x", Data: []byte("a"), Deadline: t0, At: t0, Effects: []byte("e")})
	if _, err := b.Load(t.Context(), "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Load in another prefix = %v, want %v", err, store.ErrNotFound)
	}
	if d, err := b.Due(t.Context(), t0, 10); err != nil || len(d) != 0 {
		t.Errorf("Due in another prefix = %v, %v; want nothing", d, err)
	}
	if es, err := b.ReadLog(t.Context(), "x", 0, 10); err != nil || len(es) != 0 {
		t.Errorf("ReadLog in another prefix = %v, %v; want nothing", es, err)
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
