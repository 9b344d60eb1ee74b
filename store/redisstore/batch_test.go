package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/internal/adaptertest"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
)

// batchCases check WriteBatch on the shared server with one shard and with
// several (TestWriteBatch) and on a Cluster (TestCluster). Batches racing
// on the same lobbies are storetest's BatchConcurrent, which the
// conformance runs (one shard, several, Cluster) include.
var batchCases = []struct {
	name string
	f    func(t *testing.T, newStore storeFactory)
}{
	{"ConflictIsolation", testBatchConflictIsolation},
	{"InvalidRefusedAlone", testBatchInvalid},
	{"SameIDInOrder", testBatchSameID},
	{"DoneContext", testBatchDoneContext},
	{"Notifies", testBatchNotifies},
	{"Large", testBatchLarge},
}

func TestWriteBatch(t *testing.T) {
	for _, n := range shardCounts {
		t.Run(fmt.Sprintf("shards=%d", n), func(t *testing.T) {
			for _, c := range batchCases {
				t.Run(c.name, func(t *testing.T) {
					c.f(t, func(t *testing.T, opts ...redisstore.Option) *redisstore.Store {
						return newStore(t, append([]redisstore.Option{redisstore.WithShards(n)}, opts...)...)
					})
				})
			}
		})
	}
}

func versionOf(t *testing.T, s store.Store, id string) uint64 {
	t.Helper()
	rec, err := s.Load(t.Context(), id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load(%q): %v", id, err)
	}
	return rec.Version
}

// testBatchConflictIsolation: a stale write conflicts alone, the others
// commit, and each outcome is at its write's index.
func testBatchConflictIsolation(t *testing.T, newStore storeFactory) {
	s := newStore(t)
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c"} {
		mustWrite(t, s, store.Write{ID: id, Data: []byte(id + "1")})
	}
	ws := []store.Write{
		{ID: "c", Expected: 1, Data: []byte("c2"), Effects: []byte("e"), At: t0},
		{ID: "a", Expected: 0, Data: []byte("stale")},
		{ID: "b", Expected: 1, Data: []byte("b2"), Deadline: t0},
		{ID: "new", Expected: 0, Data: []byte("n1")},
		{ID: "b", Expected: 1, Data: []byte("stale")},
	}
	adaptertest.CheckOutcomes(t, s.WriteBatch(ctx, ws), []string{"ok", "conflict", "ok", "ok", "conflict"})
	for id, want := range map[string]string{"a": "a1", "b": "b2", "c": "c2", "new": "n1"} {
		rec, err := s.Load(ctx, id)
		if err != nil || string(rec.Data) != want {
			t.Errorf("Load(%q) = %q, %v; want %q", id, rec.Data, err, want)
		}
	}
	if rec, _ := s.Load(ctx, "b"); !rec.Deadline.Equal(t0) || rec.Version != 2 {
		t.Errorf("b = version %d, deadline %v; want 2, %v", rec.Version, rec.Deadline, t0)
	}
	if es := readLog(t, s, "c", 0, 10); len(es) != 1 || es[0].Version != 2 {
		t.Errorf("ReadLog(c) = %+v; want the entry at 2", es)
	}
}

// testBatchInvalid: invalid writes get ErrInvalid, are not sent, and the
// writes around them commit.
func testBatchInvalid(t *testing.T, newStore storeFactory) {
	s := newStore(t)
	ws := []store.Write{
		{ID: "ok1", Data: []byte("x")},
		{ID: "", Data: []byte("x")},
		{ID: "max", Expected: math.MaxUint64},
		{ID: "ok2", Effects: []byte("e"), At: t0},
	}
	adaptertest.CheckOutcomes(t, s.WriteBatch(t.Context(), ws), []string{"ok", "invalid", "invalid", "ok"})
	for id, want := range map[string]uint64{"ok1": 1, "ok2": 1, "max": 0} {
		if got := versionOf(t, s, id); got != want {
			t.Errorf("version of %q = %d, want %d", id, got, want)
		}
	}
}

// testBatchSameID: writes to one lobby apply in the given order,
// interleaved with other lobbies.
func testBatchSameID(t *testing.T, newStore storeFactory) {
	s := newStore(t)
	ws := []store.Write{
		{ID: "x", Expected: 0, Data: []byte("x1")},
		{ID: "y", Expected: 0, Data: []byte("y1")},
		{ID: "x", Expected: 1, Data: []byte("x2"), Effects: []byte("e2"), At: t0},
		{ID: "a", Expected: 0, Data: []byte("a1")},
		{ID: "x", Expected: 2, Data: []byte("x3")},
		{ID: "x", Expected: 2, Data: []byte("late")},
		{ID: "x", Expected: 3, Data: []byte("x4"), Effects: []byte("e4"), At: t0},
	}
	adaptertest.CheckOutcomes(t, s.WriteBatch(t.Context(), ws), []string{"ok", "ok", "ok", "ok", "ok", "conflict", "ok"})
	rec, err := s.Load(t.Context(), "x")
	if err != nil || rec.Version != 4 || string(rec.Data) != "x4" {
		t.Fatalf("Load(x) = %+v, %v; want version 4 with x4", rec, err)
	}
	es := readLog(t, s, "x", 0, 10)
	if len(es) != 2 || es[0].Version != 2 || string(es[0].Data) != "e2" || es[1].Version != 4 || string(es[1].Data) != "e4" {
		t.Errorf("ReadLog(x) = %+v; want e2 at 2 and e4 at 4", es)
	}
}

// testBatchDoneContext: a context done before the call writes nothing and
// reports the context's error for every write.
func testBatchDoneContext(t *testing.T, newStore storeFactory) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i, err := range s.WriteBatch(ctx, []store.Write{{ID: "a"}, {ID: "b", Effects: []byte("e")}}) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("outcome %d = %v, want context.Canceled", i, err)
		}
	}
	if v := versionOf(t, s, "a"); v != 0 {
		t.Errorf("a at version %d, want 0", v)
	}
}

// testBatchNotifies: a subscriber hears a Change for every batched write
// with an entry.
func testBatchNotifies(t *testing.T, newStore storeFactory) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	adaptertest.CheckBatchNotifies(t, ctx, s, t0)
}

// testBatchLarge: a batch of 500 writes, with a chain of writes to one
// lobby among them, commits.
func testBatchLarge(t *testing.T, newStore storeFactory) {
	s := newStore(t)
	var ws []store.Write
	for i := range 495 {
		w := store.Write{ID: fmt.Sprintf("w%03d", i), Data: []byte("d")}
		if i%3 == 0 {
			w.Effects, w.At = []byte("e"), t0
		}
		ws = append(ws, w)
		if i%99 == 0 {
			ws = append(ws, store.Write{ID: "chain", Expected: uint64(i / 99), At: t0, Effects: []byte{byte(i)}})
		}
	}
	for i, err := range s.WriteBatch(t.Context(), ws) {
		if err != nil {
			t.Errorf("write %d (%q): %v", i, ws[i].ID, err)
		}
	}
	for _, w := range ws {
		if w.ID != "chain" && versionOf(t, s, w.ID) != 1 {
			t.Errorf("%q not at version 1", w.ID)
		}
	}
	if v := versionOf(t, s, "chain"); v != 5 {
		t.Errorf("chain at version %d, want 5", v)
	}
}

// multiCounter counts DoMulti calls and their commands, and can replace the
// script hash of chosen EVALSHA commands with one the server does not know.
type multiCounter struct {
	rueidis.Client
	mu      sync.Mutex
	calls   int
	cmds    int
	unknown map[int]bool // indexes of commands, within one DoMulti, to break
}

func (c *multiCounter) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.mu.Lock()
	c.calls++
	c.cmds += len(cmds)
	for i := range cmds {
		if c.unknown[i] {
			args := append([]string(nil), cmds[i].Commands()...)
			args[1] = "0000000000000000000000000000000000000000"
			cmds[i] = c.B().Arbitrary(args[0]).Args(args[1:]...).Build()
		}
	}
	c.mu.Unlock()
	return c.Client.DoMulti(ctx, cmds...)
}

// TestWriteBatchOnePipeline: a batch is one DoMulti of one EVALSHA per
// valid write.
func TestWriteBatchOnePipeline(t *testing.T) {
	cc := &multiCounter{Client: sharedClient(t)}
	prefix := newPrefix()
	s, err := redisstore.New(cc, redisstore.WithPrefix(prefix), redisstore.WithShards(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { purge(t, cc.Client, prefix) })
	mustWrite(t, s, store.Write{ID: "warm"}) // loads the script
	ws := make([]store.Write, 16)
	for i := range ws {
		ws[i] = store.Write{ID: fmt.Sprintf("l%d", i)}
		if i%2 == 0 {
			ws[i].Effects = []byte("e")
		}
	}
	ws = append(ws, store.Write{})
	errs := s.WriteBatch(t.Context(), ws)
	for i, err := range errs[:16] {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	if cc.calls != 1 || cc.cmds != 16 {
		t.Errorf("%d DoMulti calls with %d commands, want 1 with 16", cc.calls, cc.cmds)
	}
}

// TestWriteBatchNoScript: a write whose EVALSHA meets NOSCRIPT runs again
// alone, and so does the later write to the same lobby that conflicted
// because of it; writes to other lobbies keep their pipelined outcome.
func TestWriteBatchNoScript(t *testing.T) {
	cc := &multiCounter{Client: sharedClient(t), unknown: map[int]bool{0: true}}
	prefix := newPrefix()
	s, err := redisstore.New(cc, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { purge(t, cc.Client, prefix) })
	mustWrite(t, s, store.Write{ID: "y"})
	ws := []store.Write{
		{ID: "x", Data: []byte("x1")},
		{ID: "y", Expected: 1, Data: []byte("y2")},
		{ID: "x", Expected: 1, Data: []byte("x2"), Effects: []byte("e"), At: t0},
		{ID: "y", Expected: 1, Data: []byte("stale")},
	}
	adaptertest.CheckOutcomes(t, s.WriteBatch(t.Context(), ws), []string{"ok", "ok", "ok", "conflict"})
	if rec, err := s.Load(t.Context(), "x"); err != nil || rec.Version != 2 || string(rec.Data) != "x2" {
		t.Errorf("Load(x) = %+v, %v; want version 2 with x2", rec, err)
	}
}

// cancelling cancels the call's context just before a DoMulti, so the
// pipeline never gets its replies.
type cancelling struct {
	rueidis.Client
	cancel context.CancelFunc
}

func (c *cancelling) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.cancel()
	return c.Client.DoMulti(ctx, cmds...)
}

// TestWriteBatchCancelledInFlight: writes whose replies never came report an
// unknown outcome (neither conflict nor invalid) matching the context's
// error; an invalid write still reports ErrInvalid.
func TestWriteBatchCancelledInFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cc := &cancelling{Client: sharedClient(t), cancel: cancel}
	prefix := newPrefix()
	s, err := redisstore.New(cc, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { purge(t, cc.Client, prefix) })
	errs := s.WriteBatch(ctx, []store.Write{{ID: "a"}, {}, {ID: "b", Effects: []byte("e")}})
	adaptertest.CheckOutcomes(t, errs, []string{"other", "invalid", "other"})
	for _, i := range []int{0, 2} {
		if !errors.Is(errs[i], context.Canceled) {
			t.Errorf("outcome %d = %v, want it to match context.Canceled", i, errs[i])
		}
	}
}
