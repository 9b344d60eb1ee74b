package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// The checks of the optional store.BatchWriter. Each one skips, saying so,
// when the store does not offer WriteBatch: a store without it is
// complete, the capability only saves round trips.

// batchWriter returns the store as a store.BatchWriter, or skips the check
// when it is not one.
func (h *harness) batchWriter() store.BatchWriter {
	h.t.Helper()
	b, ok := h.s.(store.BatchWriter)
	if !ok {
		h.t.Skip("the store does not implement the optional store.BatchWriter; nothing to check")
	}
	return b
}

// writeBatch calls WriteBatch(ctx, ws) and fails unless it returns
// promptly, without panicking, one outcome per write.
func (h *harness) writeBatch(b store.BatchWriter, ctx context.Context, ws []store.Write) []error {
	h.t.Helper()
	var (
		errs     []error
		panicked any
	)
	within(h.t, fmt.Sprintf("WriteBatch of %d writes", len(ws)), func() {
		defer func() { panicked = recover() }()
		errs = b.WriteBatch(ctx, ws)
	})
	if panicked != nil {
		h.t.Fatalf("WriteBatch of %d writes panicked: %v", len(ws), panicked)
	}
	if len(errs) != len(ws) {
		h.t.Fatalf("WriteBatch of %d writes returned %d outcomes (%v), want exactly one per write, in the order of the writes",
			len(ws), len(errs), errs)
	}
	return errs
}

// expectOutcomes fails unless errs[i] is nil where want[i] is nil and
// wraps want[i] elsewhere, listing every outcome against its write.
func (h *harness) expectOutcomes(what string, ws []store.Write, errs, want []error) {
	h.t.Helper()
	bad := false
	var lines []string
	for i := range want {
		ok := (want[i] == nil && errs[i] == nil) || (want[i] != nil && errors.Is(errs[i], want[i]))
		mark := "  "
		if !ok {
			bad, mark = true, "✗ "
		}
		wantText := "nil"
		if want[i] != nil {
			wantText = want[i].Error()
		}
		lines = append(lines, fmt.Sprintf("%s%d: Write{ID %q, Expected %d}: got %s, want %s",
			mark, i, ws[i].ID, ws[i].Expected, describe(errs[i]), wantText))
	}
	if bad {
		h.t.Fatalf("%s: the outcomes do not line up with the writes (errs[i] belongs to ws[i]):\n%s", what, strings.Join(lines, "\n"))
	}
}

// allNil is len(ws) nil outcomes.
func allNil(ws []store.Write) []error { return make([]error, len(ws)) }

// checkBatchOutcomes (store.BatchWriter only): a batch mixing a new lobby,
// updates, a stale version and invalid writes returns one outcome per
// write in their order: nil where the write committed, ErrConflict and
// ErrInvalid where it did not. The committed writes show in Load, Due,
// ReadLog and LogHeads exactly as the same Writes would; the others
// changed nothing.
func checkBatchOutcomes(h *harness) {
	b := h.batchWriter()
	const (
		fresh = "batch-new"
		upd   = "batch-update"
		stale = "batch-stale"
		good  = "batch-good"
		maxed = "batch-max"
		last  = "batch-last"
	)
	h.write(store.Write{ID: upd, Data: []byte("u1"), Deadline: t0, Effects: []byte("u1")})
	h.write(store.Write{ID: stale, Data: []byte("s1"), Deadline: t0.Add(time.Minute), Effects: []byte("s1")})
	h.write(store.Write{ID: stale, Expected: 1, Data: []byte("s2"), Deadline: t0.Add(time.Minute), Effects: []byte("s2")})
	h.write(store.Write{ID: good, Data: []byte("g1"), Deadline: t0.Add(2 * time.Minute)})

	at := t0.Add(time.Hour + 1500*time.Microsecond)
	ws := []store.Write{
		{ID: fresh, Expected: h.loadMissing(fresh, nil), Data: []byte("n1"), Deadline: t0.Add(time.Second), At: at, Effects: []byte("n1")},
		{ID: upd, Expected: 1, Data: []byte("u2"), Deadline: t0.Add(-time.Hour), At: at, Effects: []byte("u2")}, // deadline moves earlier
		{ID: stale, Expected: 1, Data: []byte("stale"), Deadline: t0.Add(-2 * time.Hour), At: at, Effects: []byte("stale")},
		{ID: "", Data: []byte("no ID"), Deadline: t0, At: at, Effects: []byte("no ID")},
		{ID: maxed, Expected: math.MaxUint64, Data: []byte("max"), Deadline: t0, At: at, Effects: []byte("max")},
		{ID: good, Expected: 1, Data: []byte("g2"), At: at}, // deadline cleared, no entry
		{ID: last, Expected: h.loadMissing(last, nil), Data: []byte("l1"), Deadline: t0.Add(3 * time.Second), At: at, Effects: []byte{}},
	}
	errs := h.writeBatch(b, h.ctx, ws)
	h.expectOutcomes("WriteBatch", ws, errs, []error{nil, nil, store.ErrConflict, store.ErrInvalid, store.ErrInvalid, nil, nil})

	// The committed writes, as Write would have left them.
	h.expectRecord(store.Record{ID: fresh, Version: 1, Data: []byte("n1"), Deadline: t0.Add(time.Second)})
	h.expectRecord(store.Record{ID: upd, Version: 2, Data: []byte("u2"), Deadline: t0.Add(-time.Hour)})
	h.expectRecord(store.Record{ID: good, Version: 2, Data: []byte("g2")})
	h.expectRecord(store.Record{ID: last, Version: 1, Data: []byte("l1"), Deadline: t0.Add(3 * time.Second)})
	h.expectLog(fresh, 0, []store.Entry{entry(fresh, 1, "n1")})
	h.expectLog(upd, 0, []store.Entry{entry(upd, 1, "u1"), entry(upd, 2, "u2")})
	h.expectLog(good, 0, nil)
	h.expectLog(last, 0, []store.Entry{entry(last, 1, "")})
	for _, id := range []string{fresh, upd, last} {
		got := h.readLog(id, 0, 10)
		if e := got[len(got)-1]; !sameAt(at, e.At) {
			h.t.Fatalf("the entry of %q at %d appended by WriteBatch has At %v, written as %v: want the same instant to the microsecond",
				id, e.Version, e.At, at)
		}
	}
	// The refused writes changed nothing.
	h.expectRecord(store.Record{ID: stale, Version: 2, Data: []byte("s2"), Deadline: t0.Add(time.Minute)})
	h.expectLog(stale, 0, []store.Entry{entry(stale, 1, "s1"), entry(stale, 2, "s2")})
	h.loadMissing(maxed, nil)
	h.expectLog(maxed, 0, nil)
	// The due index moved with the records, and only with them.
	h.expectDue(later, 100, []store.Due{
		{ID: upd, Deadline: t0.Add(-time.Hour)},
		{ID: fresh, Deadline: t0.Add(time.Second)},
		{ID: last, Deadline: t0.Add(3 * time.Second)},
		{ID: stale, Deadline: t0.Add(time.Minute)},
	})
	if d := diff([]uint64{1, 2, 2, 0, 1, 0}, h.heads(fresh, upd, stale, good, last, maxed)); d != "" {
		h.t.Fatalf("LogHeads after WriteBatch (-want +got):\n%s", d)
	}
}

// checkBatchSameLobby (store.BatchWriter only): writes to one lobby in one
// batch apply in the order given, as successive Writes would: chained
// Expected versions all commit, the same Expected twice commits the first
// and refuses the second, and a refused write does not stop a later one.
func checkBatchSameLobby(h *harness) {
	b := h.batchWriter()
	const id, other = "batch-chain", "batch-chain-other"
	ws := []store.Write{
		{ID: id, Expected: 0, Data: []byte("c1"), Deadline: t0.Add(3 * time.Second), At: t0, Effects: []byte("c1")},
		{ID: other, Expected: 0, Data: []byte("o1"), At: t0, Effects: []byte("o1")},
		{ID: id, Expected: 1, Data: []byte("c2"), Deadline: t0.Add(2 * time.Second), At: t0, Effects: []byte("c2")},
		{ID: id, Expected: 2, Data: []byte("c3"), Deadline: t0.Add(time.Second), At: t0, Effects: []byte("c3")},
		{ID: other, Expected: 1, Data: []byte("o2"), At: t0},
	}
	h.expectOutcomes("WriteBatch creating a lobby and writing it twice more, interleaved with another", ws, h.writeBatch(b, h.ctx, ws), allNil(ws))
	h.expectRecord(store.Record{ID: id, Version: 3, Data: []byte("c3"), Deadline: t0.Add(time.Second)})
	h.expectLog(id, 0, []store.Entry{entry(id, 1, "c1"), entry(id, 2, "c2"), entry(id, 3, "c3")})
	h.expectRecord(store.Record{ID: other, Version: 2, Data: []byte("o2")})
	h.expectLog(other, 0, []store.Entry{entry(other, 1, "o1")})
	h.expectDue(later, 10, []store.Due{{ID: id, Deadline: t0.Add(time.Second)}})

	// The same Expected twice: the first commits, the second conflicts.
	ws = []store.Write{
		{ID: id, Expected: 3, Data: []byte("first"), Deadline: t0.Add(5 * time.Second), At: t0, Effects: []byte("first")},
		{ID: id, Expected: 3, Data: []byte("second"), Deadline: t0.Add(6 * time.Second), At: t0, Effects: []byte("second")},
	}
	h.expectOutcomes("WriteBatch with two writes expecting the same version", ws, h.writeBatch(b, h.ctx, ws), []error{nil, store.ErrConflict})
	h.expectRecord(store.Record{ID: id, Version: 4, Data: []byte("first"), Deadline: t0.Add(5 * time.Second)})
	h.expectLog(id, 3, []store.Entry{entry(id, 4, "first")})
	h.expectDue(later, 10, []store.Due{{ID: id, Deadline: t0.Add(5 * time.Second)}})

	// A stale write, then the right one: the conflict stops nothing.
	ws = []store.Write{
		{ID: id, Expected: 3, Data: []byte("stale"), At: t0, Effects: []byte("stale")},
		{ID: id, Expected: 4, Data: []byte("fifth"), At: t0, Effects: []byte("fifth")},
		{ID: id, Expected: 4, Data: []byte("again"), At: t0, Effects: []byte("again")},
		{ID: id, Expected: 5, Data: []byte("sixth"), Deadline: t0, At: t0},
	}
	h.expectOutcomes("WriteBatch of a stale write followed by chained ones", ws, h.writeBatch(b, h.ctx, ws),
		[]error{store.ErrConflict, nil, store.ErrConflict, nil})
	h.expectRecord(store.Record{ID: id, Version: 6, Data: []byte("sixth"), Deadline: t0})
	h.expectLog(id, 3, []store.Entry{entry(id, 4, "first"), entry(id, 5, "fifth")})
}

// checkBatchEmpty (store.BatchWriter only): an empty or nil batch returns
// no outcome, writes nothing and does not panic, also with a done context.
func checkBatchEmpty(h *harness) {
	b := h.batchWriter()
	const id = "batch-empty"
	h.write(store.Write{ID: id, Data: []byte("x"), Deadline: t0, Effects: []byte("x")})
	before := h.state(id)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		what string
		ctx  context.Context
		ws   []store.Write
	}{
		{"an empty batch", h.ctx, []store.Write{}},
		{"a nil batch", h.ctx, nil},
		{"an empty batch with a cancelled context", cancelled, []store.Write{}},
	} {
		h.t.Logf("WriteBatch of %s", c.what)
		h.writeBatch(b, c.ctx, c.ws) // fails unless len(errs) == 0
	}
	h.unchanged(before, "WriteBatch of an empty batch")
}

// checkBatchAliasing (store.BatchWriter only): WriteBatch keeps none of
// the caller's slices: once it returned, the caller may change the writes'
// Data and Effects, and the batch itself, without changing what Load and
// ReadLog return; and it writes into none of them, not even between their
// length and their capacity, nor reorders the batch.
func checkBatchAliasing(h *harness) {
	b := h.batchWriter()
	const a, c = "batch-alias-a", "batch-alias-b"
	const pad = "~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~"
	spare := func(s string) []byte {
		buf := make([]byte, len(s)+len(pad))
		copy(buf[copy(buf, s):], pad)
		return buf[:len(s)]
	}
	intact := func(what string, buf []byte, s string) {
		h.t.Helper()
		if got := string(buf[:cap(buf)]); got != s+pad {
			h.t.Fatalf("%s: the caller's buffer holds %q up to its capacity after WriteBatch, want %q: the store wrote into it", what, got, s+pad)
		}
	}
	scribble := func(bufs ...[]byte) {
		for _, buf := range bufs {
			buf = buf[:cap(buf)]
			for i := range buf {
				buf[i] = '#'
			}
		}
	}
	dataA, effA, dataC, effC := spare("data-a"), spare("effects-a"), spare("data-c"), spare("effects-c")
	ws := []store.Write{
		{ID: a, Data: dataA, Deadline: t0, At: t0, Effects: effA},
		{ID: c, Data: dataC, Deadline: t0.Add(time.Second), At: t0, Effects: effC},
	}
	sent := slices.Clone(ws)
	h.expectOutcomes("WriteBatch", ws, h.writeBatch(b, h.ctx, ws), allNil(ws))
	intact("Data of write 0", dataA, "data-a")
	intact("Effects of write 0", effA, "effects-a")
	intact("Data of write 1", dataC, "data-c")
	intact("Effects of write 1", effC, "effects-c")
	if d := diff(sent, ws); d != "" {
		h.t.Fatalf("WriteBatch changed the caller's batch (-before +after):\n%s", d)
	}

	// The caller reuses everything.
	scribble(dataA, effA, dataC, effC)
	ws[0].ID, ws[1].Expected = "changed", 99
	h.expectRecord(store.Record{ID: a, Version: 1, Data: []byte("data-a"), Deadline: t0})
	h.expectRecord(store.Record{ID: c, Version: 1, Data: []byte("data-c"), Deadline: t0.Add(time.Second)})
	h.expectLog(a, 0, []store.Entry{entry(a, 1, "effects-a")})
	h.expectLog(c, 0, []store.Entry{entry(c, 1, "effects-c")})

	// The same buffers in the next batch, changed again after it.
	copy(dataA, "data-2")
	copy(effA, "effects-2")
	ws = []store.Write{{ID: a, Expected: 1, Data: dataA[:6], At: t0, Effects: effA[:9]}}
	h.expectOutcomes("WriteBatch reusing the buffers", ws, h.writeBatch(b, h.ctx, ws), allNil(ws))
	scribble(dataA, effA)
	h.expectRecord(store.Record{ID: a, Version: 2, Data: []byte("data-2")})
	h.expectLog(a, 0, []store.Entry{entry(a, 1, "effects-a"), entry(a, 2, "effects-2")})
	h.expectRecord(store.Record{ID: c, Version: 1, Data: []byte("data-c"), Deadline: t0.Add(time.Second)})
}

// checkBatchContextCancelled (store.BatchWriter only): with a cancelled or
// expired context WriteBatch returns promptly, every outcome is the
// context's error, and nothing is written, as for every method: no lobby
// of the batch shows its record, deadline or entry, not even in part.
func checkBatchContextCancelled(h *harness) {
	b := h.batchWriter()
	const id, fresh = "batch-ctx", "batch-ctx-new"
	h.write(store.Write{ID: id, Data: []byte("v1"), Deadline: t0, Effects: []byte("e1")})
	ids := []string{id, fresh}
	ws := []store.Write{
		{ID: id, Expected: 1, Data: []byte("v2"), Deadline: t0.Add(-time.Hour), At: t0, Effects: []byte("e2")},
		{ID: fresh, Data: []byte("new"), Deadline: t0, At: t0, Effects: []byte("e")},
		{ID: id, Expected: 2, Data: []byte("v3"), At: t0, Effects: []byte("e3")},
	}
	for i := range 20 {
		more := fmt.Sprintf("batch-ctx-%02d", i)
		ids = append(ids, more)
		ws = append(ws, store.Write{ID: more, Data: []byte(more), Deadline: t0.Add(time.Duration(i) * time.Second), At: t0, Effects: []byte(more)})
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelled, context.Canceled},
		{"expired", expired, context.DeadlineExceeded},
	} {
		before := h.state(ids...)
		errs := h.writeBatch(b, c.ctx, ws)
		var committed []string
		for i, err := range errs {
			switch {
			case err == nil:
				committed = append(committed, fmt.Sprintf("%d (%s)", i, ws[i].ID))
			case !errors.Is(err, c.want):
				h.t.Errorf("WriteBatch with a %s context: outcome %d (%s) = %s, want %v", c.name, i, ws[i].ID, describe(err), c.want)
			}
		}
		if committed != nil {
			h.t.Errorf("WriteBatch with a %s context reported writes %s as committed: a done context writes nothing",
				c.name, strings.Join(committed, ", "))
		}
		h.unchanged(before, "WriteBatch with a "+c.name+" context")
	}
}

// checkBatchConcurrent (store.BatchWriter only): senders racing batches
// (and one sender racing plain Writes) on the same lobbies with the same
// Expected versions get exactly one commit per lobby and version across
// all of them; the losers conflict, and their conflicts fail no other
// write of their batch. At rest the records, the due index and the logs
// hold exactly the winners' writes.
func checkBatchConcurrent(h *harness) {
	b := h.batchWriter()
	lobbies := []string{"batch-race-a", "batch-race-b", "batch-race-c", "batch-race-d"}
	const senders, rounds = 6, 25
	own := func(g int) string { return fmt.Sprintf("batch-race-own-%d", g) }
	for _, id := range lobbies {
		h.write(store.Write{ID: id, Data: []byte("start")})
	}
	tag := func(r, g int) string { return fmt.Sprintf("r%02d-g%d", r, g) }
	deadline := func(r, g int) time.Time { return t0.Add(time.Duration(r*senders+g) * time.Millisecond) }
	winners := map[string][]int{} // lobby → winning sender per round

	for r := range rounds {
		base := uint64(r + 1)
		batches := make([][]store.Write, senders)
		outcomes := make([][]error, senders)
		for g := range senders {
			var ws []store.Write
			for j := range lobbies {
				id := lobbies[(j+g)%len(lobbies)] // each sender in its own order
				ws = append(ws, store.Write{ID: id, Expected: base, Data: []byte(tag(r, g)), Deadline: deadline(r, g), At: t0, Effects: []byte(tag(r, g))})
			}
			// A lobby of the sender's own, which nobody else writes.
			ws = append(ws, store.Write{ID: own(g), Expected: uint64(r), Data: []byte(tag(r, g)), At: t0, Effects: []byte(tag(r, g))})
			batches[g] = ws
		}
		release := make(chan struct{})
		var wg sync.WaitGroup
		for g := range senders {
			wg.Go(func() {
				<-release
				if g == 0 { // one sender writes one by one
					errs := make([]error, len(batches[g]))
					for i, w := range batches[g] {
						errs[i] = h.s.Write(h.ctx, w)
					}
					outcomes[g] = errs
					return
				}
				outcomes[g] = b.WriteBatch(h.ctx, batches[g])
			})
		}
		close(release)
		h.wait(&wg, fmt.Sprintf("round %d's senders", r))

		won := map[string][]int{}
		for g := range senders {
			ws, errs := batches[g], outcomes[g]
			if len(errs) != len(ws) {
				h.t.Fatalf("round %d: WriteBatch of %d writes returned %d outcomes", r, len(ws), len(errs))
			}
			for i, err := range errs {
				switch {
				case err == nil:
					won[ws[i].ID] = append(won[ws[i].ID], g)
				case ws[i].ID == own(g):
					h.t.Fatalf("round %d: sender %d's write to its own lobby %q (Expected %d) = %v, want nil: nobody else writes it",
						r, g, ws[i].ID, ws[i].Expected, err)
				case !errors.Is(err, store.ErrConflict):
					h.t.Fatalf("round %d: sender %d's losing write to %q (Expected %d) = %v, want %v", r, g, ws[i].ID, base, err, store.ErrConflict)
				}
			}
		}
		for _, id := range lobbies {
			if len(won[id]) != 1 {
				h.t.Fatalf("round %d: %d writes expecting version %d of %q committed (senders %v; sender 0 uses Write), want exactly one",
					r, len(won[id]), base, id, won[id])
			}
			g := won[id][0]
			winners[id] = append(winners[id], g)
			h.expectRecord(store.Record{ID: id, Version: base + 1, Data: []byte(tag(r, g)), Deadline: deadline(r, g)})
		}
	}

	var due []store.Due
	for _, id := range lobbies {
		want := []store.Entry{}
		for r, g := range winners[id] {
			want = append(want, entry(id, uint64(r+2), tag(r, g)))
		}
		h.expectLog(id, 0, want)
		due = append(due, store.Due{ID: id, Deadline: deadline(rounds-1, winners[id][rounds-1])})
	}
	for g := range senders {
		h.expectRecord(store.Record{ID: own(g), Version: rounds, Data: []byte(tag(rounds-1, g))})
	}
	sortDue(due)
	h.expectDue(later, 100, due)
}

// checkBatchSubscribe (store.BatchWriter and store.Notifier only): a
// batched write with Effects adds a Change for its lobby and entry, as a
// Write does, once it is visible; a refused one adds none that names an
// entry.
func checkBatchSubscribe(h *harness) {
	b := h.batchWriter()
	n, ok := h.s.(store.Notifier)
	if !ok {
		h.t.Skip("the store does not implement the optional store.Notifier; nothing to check for batched writes")
	}
	s := h.subscribe(n, h.ctx)
	const a, bare, refused, d = "batch-sub-a", "batch-sub-bare", "batch-sub-refused", "batch-sub-d"
	h.write(store.Write{ID: bare, Data: []byte("1")})
	ws := []store.Write{
		{ID: a, Data: []byte("a1"), At: t0, Effects: []byte("a1")},
		{ID: bare, Expected: 1, Data: []byte("2"), At: t0}, // no entry, so no Change
		{ID: a, Expected: 1, Data: []byte("a2"), At: t0, Effects: []byte("a2")},
		{ID: refused, Expected: 5, Data: []byte("x"), At: t0, Effects: []byte("x")},
		{ID: d, Data: []byte("d1"), At: t0, Effects: []byte("d1")},
	}
	h.expectOutcomes("WriteBatch", ws, h.writeBatch(b, h.ctx, ws), []error{nil, nil, nil, store.ErrConflict, nil})
	s.await(a, 2, "a batch writing it twice with Effects")
	s.await(d, 1, "a batch writing it with Effects")
}

// checkBatchLarge (store.BatchWriter only): a batch of 500 writes of 1 KiB
// each, 400 lobbies created and 100 of them written again further on in
// the same batch, commits every write, whole.
func checkBatchLarge(h *harness) {
	b := h.batchWriter()
	const created, again = 400, 100
	id := func(i int) string { return fmt.Sprintf("batch-large-%03d", i) }
	data := func(n int) []byte {
		return append(fmt.Appendf(nil, "%04d:", n), strings.Repeat(string(rune('a'+n%26)), 1019)...)
	}
	var ws []store.Write
	for i := range created {
		ws = append(ws, store.Write{ID: id(i), Data: data(i), Deadline: t0.Add(time.Duration(i) * time.Millisecond), At: t0, Effects: counter(i)})
	}
	for i := range again {
		ws = append(ws, store.Write{ID: id(i * 4), Expected: 1, Data: data(1000 + i), Deadline: t0.Add(-time.Duration(i+1) * time.Millisecond),
			At: t0, Effects: counter(1000 + i)})
	}
	errs := h.writeBatch(b, h.ctx, ws)
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("%d (%s): %v", i, ws[i].ID, err))
		}
	}
	if failed != nil {
		h.t.Fatalf("WriteBatch of %d writes: %d failed, want none; the first: %s", len(ws), len(failed), strings.Join(failed[:min(len(failed), 5)], "; "))
	}

	ids := make([]string, created)
	wantHeads := make([]uint64, created)
	var due []store.Due
	for i := range created {
		ids[i] = id(i)
		rec := store.Record{ID: id(i), Version: 1, Data: data(i), Deadline: t0.Add(time.Duration(i) * time.Millisecond)}
		if i%4 == 0 && i/4 < again {
			rec.Version, rec.Data, rec.Deadline = 2, data(1000+i/4), t0.Add(-time.Duration(i/4+1)*time.Millisecond)
		}
		h.expectRecord(rec)
		wantHeads[i] = rec.Version
		due = append(due, store.Due{ID: rec.ID, Deadline: rec.Deadline})
	}
	if d := diff(wantHeads, h.heads(ids...)); d != "" {
		h.t.Fatalf("LogHeads after a batch of %d writes (-want +got):\n%s", len(ws), d)
	}
	h.expectLog(id(4), 0, []store.Entry{
		{Lobby: id(4), Version: 1, Data: counter(4)},
		{Lobby: id(4), Version: 2, Data: counter(1001)},
	})
	sortDue(due)
	h.expectDue(later, 1000, due)
}
