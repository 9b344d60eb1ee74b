package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// checkRoundTrip: what Write stores, Load returns exactly — every byte value
// in Data, empty and nil data, and deadlines to the nanosecond across zones,
// monotonic readings and both sides of the Unix epoch.
func checkRoundTrip(h *harness) {
	const id = "lobby-roundtrip"
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	steps := []struct {
		data     []byte
		deadline time.Time
	}{
		{all, t0},
		{[]byte("second"), t0.In(time.FixedZone("UTC+5:30", 5*3600+1800)).Add(time.Nanosecond)},
		{nil, time.Now().Add(time.Hour)}, // carries a monotonic reading
		{[]byte{}, time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{[]byte{0}, time.Unix(0, 0)}, // the epoch is a deadline, not "none"
		{[]byte{0xff, 0xfe, 0x00, 0xc3}, time.Date(2199, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{[]byte("no deadline"), time.Time{}},
		{bytes.Repeat([]byte("x"), 1000), t0.Add(-time.Nanosecond)},
	}
	for i, st := range steps {
		h.write(store.Write{ID: id, Expected: uint64(i), Data: st.data, Deadline: st.deadline})
		h.expectRecord(store.Record{ID: id, Version: uint64(i) + 1, Data: st.data, Deadline: st.deadline})
	}

	// Deadlines in the due index round-trip the same way.
	d := time.Date(2031, 1, 1, 0, 0, 0, 1, time.FixedZone("west", -7*3600))
	h.write(store.Write{ID: id, Expected: uint64(len(steps)), Data: []byte("d"), Deadline: d})
	h.expectDue(later, 10, []store.Due{{ID: id, Deadline: d}})
}

// checkLoadMissing: an ID never written is ErrNotFound with floor 0, also
// when a longer or shorter ID exists.
func checkLoadMissing(h *harness) {
	if f := h.loadMissing("never-written", nil); f != 0 {
		h.t.Fatalf("Load(never-written) floor = %d, want 0", f)
	}
	h.write(store.Write{ID: "never", Data: []byte("x")})
	h.write(store.Write{ID: "never-written-either", Data: []byte("x")})
	if f := h.loadMissing("never-written", nil); f != 0 {
		h.t.Fatalf("Load(never-written) floor = %d after writing its neighbours, want 0", f)
	}
}

// checkCreateExisting: Write with Expected 0 to a lobby that exists is a
// conflict and changes nothing.
func checkCreateExisting(h *harness) {
	const id = "lobby-create"
	h.write(store.Write{ID: id, Data: []byte("first"), Deadline: t0, Events: []store.Event{ev(id, 1, "created")}})
	before := h.state(id)
	h.writeErr(store.Write{
		ID: id, Data: []byte("second"), Deadline: t0.Add(-time.Hour),
		Events: []store.Event{ev(id, 1, "created again")},
	}, store.ErrConflict)
	h.unchanged(before, "a second create")
}

// checkWriteStaleVersion: a Write whose Expected is not the stored version
// is ErrConflict and changes nothing: not the record, not the due index, not
// the outbox.
func checkWriteStaleVersion(h *harness) {
	const id, other = "lobby-stale", "lobby-bystander"
	for v := range uint64(3) {
		h.write(store.Write{
			ID: id, Expected: v, Data: fmt.Appendf(nil, "v%d", v+1), Deadline: t0.Add(time.Duration(v) * time.Second),
			Events: []store.Event{ev(id, v+1, fmt.Sprintf("e%d", v+1))},
		})
	}
	h.write(store.Write{ID: other, Data: []byte("b"), Deadline: t0.Add(time.Minute)})
	before := h.state(id, other)
	for _, expected := range []uint64{0, 1, 2, 4, 5, 1 << 40} {
		h.writeErr(store.Write{
			ID: id, Expected: expected, Data: []byte("stale"), Deadline: t0.Add(-time.Hour),
			Events: []store.Event{ev(id, 4, "stale")},
		}, store.ErrConflict)
		h.writeErr(store.Write{ID: id, Expected: expected, Data: []byte("stale, no deadline")}, store.ErrConflict)
	}
	h.unchanged(before, "stale writes")
	// The right version still works afterwards.
	h.write(store.Write{ID: id, Expected: 3, Data: []byte("v4")})
	h.expectRecord(store.Record{ID: id, Version: 4, Data: []byte("v4")})
}

// checkReadAfterWrite: every Load sees the latest Write or Delete, on two
// interleaved lobbies, each read just before the change so that a read cache
// that misses an invalidation serves what was replaced.
func checkReadAfterWrite(h *harness) {
	ids := []string{"raw-a", "raw-b"}
	version := map[string]uint64{}
	exists := map[string]bool{}
	tomb := map[string][]byte{} // what a Delete left, nil for never written
	for i := range 12 {
		id := ids[i%2]
		if exists[id] {
			h.load(id)
		} else {
			h.loadMissing(id, tomb[id])
		}
		data := fmt.Appendf(nil, "%s#%d", id, i)
		dl := t0.Add(time.Duration(i) * time.Second)
		h.write(store.Write{ID: id, Expected: version[id], Data: data, Deadline: dl})
		version[id]++
		exists[id] = true
		h.expectRecord(store.Record{ID: id, Version: version[id], Data: data, Deadline: dl})
		if i == 8 {
			if err := h.s.Delete(h.ctx, id, version[id], 0); err != nil {
				h.t.Fatalf("Delete(%q, %d, 0) = %v, want nil", id, version[id], err)
			}
			exists[id] = false
			tomb[id] = data
			f := h.loadMissing(id, data)
			if f < version[id] {
				h.t.Fatalf("Load(%q) after Delete: floor %d, want >= %d", id, f, version[id])
			}
			version[id] = f
		}
	}
	h.expectDue(later, 10, []store.Due{
		{ID: "raw-a", Deadline: t0.Add(10 * time.Second)},
		{ID: "raw-b", Deadline: t0.Add(11 * time.Second)},
	})
}

// checkInvalid: arguments that break the contract are ErrInvalid and write
// nothing.
func checkInvalid(h *harness) {
	const id = "lobby-invalid"
	h.write(store.Write{ID: id, Data: []byte("v1"), Deadline: t0, Events: []store.Event{ev(id, 1, "e1")}})
	before := h.state(id, "lobby-invalid-new")

	bad := []struct {
		name string
		w    store.Write
	}{
		{"empty ID", store.Write{ID: "", Data: []byte("x"), Deadline: t0}},
		{"empty ID with an event", store.Write{ID: "", Events: []store.Event{ev("", 1, "x")}}},
		{"event of another lobby", store.Write{ID: id, Expected: 1, Data: []byte("x"), Events: []store.Event{ev("other", 2, "x")}}},
		{"event with an empty lobby", store.Write{ID: id, Expected: 1, Data: []byte("x"), Events: []store.Event{ev("", 2, "x")}}},
		{"second event of another lobby", store.Write{ID: id, Expected: 1, Data: []byte("x"), Deadline: t0.Add(-time.Hour),
			Events: []store.Event{ev(id, 2, "ok"), ev(id+"x", 3, "x")}}},
		{"new lobby, event of a prefix", store.Write{ID: "lobby-invalid-new", Data: []byte("x"), Deadline: t0,
			Events: []store.Event{ev("lobby-invalid-new", 1, "ok"), ev("lobby-invalid", 2, "x")}}},
		{"an Expected version without a successor", store.Write{ID: "lobby-invalid-new", Expected: math.MaxUint64, Data: []byte("x"), Deadline: t0,
			Events: []store.Event{ev("lobby-invalid-new", 1, "x")}}},
	}
	for _, b := range bad {
		if err := h.s.Write(h.ctx, b.w); !errors.Is(err, store.ErrInvalid) {
			h.t.Errorf("Write with %s = %s, want %v", b.name, describe(err), store.ErrInvalid)
		}
	}
	for _, limit := range []int{0, -1} {
		if _, err := h.s.Due(h.ctx, later, limit); !errors.Is(err, store.ErrInvalid) {
			h.t.Errorf("Due(later, %d) = %s, want %v", limit, describe(err), store.ErrInvalid)
		}
		if _, err := h.s.Pending(h.ctx, limit); !errors.Is(err, store.ErrInvalid) {
			h.t.Errorf("Pending(%d) = %s, want %v", limit, describe(err), store.ErrInvalid)
		}
		if c, ok := h.s.(store.Claimer); ok {
			if _, err := c.Claim(h.ctx, later, limit, time.Minute); !errors.Is(err, store.ErrInvalid) {
				h.t.Errorf("Claim(later, %d, 1m) = %s, want %v", limit, describe(err), store.ErrInvalid)
			}
			hold := time.Duration(limit) // 0 and -1ns
			if _, err := c.Claim(h.ctx, later, 10, hold); !errors.Is(err, store.ErrInvalid) {
				h.t.Errorf("Claim(later, 10, %v) = %s, want %v", hold, describe(err), store.ErrInvalid)
			}
		}
	}
	// The empty ID never has a record: either answer is acceptable.
	if _, err := h.s.Load(h.ctx, ""); !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("Load(\"\") = %s, want %v or %v", describe(err), store.ErrInvalid, store.ErrNotFound)
	}
	if err := h.s.Delete(h.ctx, "", 0, 0); !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("Delete(\"\", 0, 0) = %s, want %v or %v", describe(err), store.ErrInvalid, store.ErrNotFound)
	}
	h.unchanged(before, "invalid calls")
}

// checkAliasing: the caller owns every slice it passes and every slice it
// gets back; changing them afterwards changes nothing stored.
func checkAliasing(h *harness) {
	const id, id2 = "lobby-alias", "lobby-alias-2"
	buf := []byte("original")
	events := []store.Event{ev(id, 1, "event-one"), ev(id, 2, "event-two")}
	h.write(store.Write{ID: id, Data: buf, Deadline: t0, Events: events})

	// What was passed in.
	copy(buf, "XXXXXXXX")
	events[0].Data[0] = 'X'
	events[1] = ev("elsewhere", 99, "replaced")
	h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("original"), Deadline: t0})
	wantEvents := []store.Event{ev(id, 1, "event-one"), ev(id, 2, "event-two")}
	h.expectPending(wantEvents)

	// The same buffer reused for the next write, to another lobby.
	copy(buf, "reused!!")
	h.write(store.Write{ID: id2, Data: buf, Deadline: t0})
	copy(buf, "YYYYYYYY")
	h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("original"), Deadline: t0})
	h.expectRecord(store.Record{ID: id2, Version: 1, Data: []byte("reused!!"), Deadline: t0})

	// What came back: scribble over the whole capacity of returned slices.
	scribble := func(b []byte) {
		b = b[:cap(b)]
		for i := range b {
			b[i] = '#'
		}
	}
	r1 := h.load(id)
	r2 := h.load(id)
	scribble(r1.Data)
	if string(r2.Data) != "original" {
		h.t.Fatalf("two Loads share their Data: after changing the first, the second holds %q", r2.Data)
	}
	h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("original"), Deadline: t0})

	p := h.pending(10)
	for i := range p {
		scribble(p[i].Data)
		p[i].Seq += 1000
		p[i].Lobby = "changed"
	}
	h.expectPending(wantEvents)

	d := h.due(later, 10)
	for i := range d {
		d[i].ID = "changed"
		d[i].Deadline = time.Time{}
	}
	h.expectDue(later, 10, []store.Due{{ID: id, Deadline: t0}, {ID: id2, Deadline: t0}})

	// Several slices returned by one call share no memory: scribbling
	// over one, up to its capacity, leaves the others as they were.
	h.write(store.Write{ID: id, Expected: 1, Data: []byte("two"), Events: []store.Event{ev(id, 3, "three"), ev(id, 4, "four")}})
	p = h.pending(10)
	if len(p) != 4 {
		h.t.Fatalf("Pending = %d events, want 4", len(p))
	}
	wantAll := append(slices.Clone(wantEvents), ev(id, 3, "three"), ev(id, 4, "four"))
	for i := range p {
		scribble(p[i].Data)
		for j := i + 1; j < len(p); j++ {
			if string(p[j].Data) != string(wantAll[j].Data) {
				h.t.Fatalf("changing the Data of event %d returned by Pending (up to its capacity) changed event %d of the same call to %q, want %q",
					i, j, p[j].Data, wantAll[j].Data)
			}
		}
	}
	h.ack(wantAll...)
	checkAliasingInputs(h)
}

// checkAliasingInputs: a store neither writes into a caller's buffers (not
// even between their length and their capacity) nor reorders or changes
// the events passed to Write or Ack.
func checkAliasingInputs(h *harness) {
	const id = "lobby-alias-in"
	// Buffers with spare capacity, filled with a pattern the store must
	// leave alone.
	spare := func(s string) []byte {
		b := make([]byte, len(s)+64)
		copy(b[copy(b, s):], strings.Repeat("~", 64))
		return b[:len(s)]
	}
	intact := func(what string, b []byte, s string) {
		h.t.Helper()
		full := b[:cap(b)]
		want := s + strings.Repeat("~", 64)
		if string(full) != want {
			h.t.Fatalf("%s: the caller's buffer holds %q up to its capacity after the call, want %q: the store wrote into it", what, full, want)
		}
	}
	data := spare("record")
	events := []store.Event{
		{Lobby: id, Seq: 2, Data: spare("second")},
		{Lobby: id, Seq: 1, Data: spare("first")}, // Seq out of order: the store must not sort
		{Lobby: id, Seq: 3, Data: nil},
	}
	eventsCap := append(events[:3:3], store.Event{}) // spare capacity in the slice of events too
	eventsCap[3] = store.Event{Lobby: "sentinel", Seq: 99, Data: []byte("sentinel")}
	events = eventsCap[:3]
	h.write(store.Write{ID: id, Data: data, Deadline: t0, Events: events})
	intact("Write.Data", data, "record")
	intact("Write.Events[0].Data", events[0].Data, "second")
	intact("Write.Events[1].Data", events[1].Data, "first")
	wantIn := []store.Event{{Lobby: id, Seq: 2, Data: []byte("second")}, {Lobby: id, Seq: 1, Data: []byte("first")}, {Lobby: id, Seq: 3}}
	if d := diff(wantIn, events); d != "" {
		h.t.Fatalf("Write changed the caller's events (-before +after):\n%s", d)
	}
	if d := diff(store.Event{Lobby: "sentinel", Seq: 99, Data: []byte("sentinel")}, eventsCap[3]); d != "" {
		h.t.Fatalf("Write wrote past the length of the caller's Events (-before +after):\n%s", d)
	}
	h.expectPending(wantIn)

	// Ack's slice: neither reordered nor changed, not even its Data.
	acks := []store.Event{{Lobby: id, Seq: 3, Data: spare("x")}, {Lobby: "unknown", Seq: 1}, {Lobby: id, Seq: 2}}
	h.ack(acks...)
	wantAcks := []store.Event{{Lobby: id, Seq: 3, Data: []byte("x")}, {Lobby: "unknown", Seq: 1}, {Lobby: id, Seq: 2}}
	if d := diff(wantAcks, acks); d != "" {
		h.t.Fatalf("Ack changed the caller's events (-before +after):\n%s", d)
	}
	intact("Ack's events[0].Data", acks[0].Data, "x")
	// What Ack was given is not kept: changing it now acknowledges nothing.
	acks[0].Seq, acks[1] = 1, store.Event{Lobby: id, Seq: 1}
	h.expectPending(wantIn[1:2])

	// A Load's Data with spare capacity is the caller's: appending to it
	// and writing it back does not change the stored record in between.
	r := h.load(id)
	grown := append(r.Data, "-grown"...)
	h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("record"), Deadline: t0})
	h.write(store.Write{ID: id, Expected: 1, Data: grown, Deadline: t0})
	h.expectRecord(store.Record{ID: id, Version: 2, Data: []byte("record-grown"), Deadline: t0})
}

// checkLargeRecord: records of a 1,000-member lobby (about 100 KiB) and
// large events round-trip, and a record that shrinks keeps no stale tail.
func checkLargeRecord(h *harness) {
	const id = "lobby-large"
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	sizes := []int{100 << 10, 256 << 10, 10, 100<<10 + 1, 0, 150 << 10}
	var want []store.Event
	for i, n := range sizes {
		data := random(n)
		var events []store.Event
		if i%2 == 0 {
			events = []store.Event{
				{Lobby: id, Seq: uint64(2*i + 1), Data: random(64 << 10)},
				{Lobby: id, Seq: uint64(2*i + 2), Data: random(1)},
			}
			want = append(want, events...)
		}
		dl := t0.Add(time.Duration(i) * time.Millisecond)
		h.write(store.Write{ID: id, Expected: uint64(i), Data: data, Deadline: dl, Events: events})
		h.expectRecord(store.Record{ID: id, Version: uint64(i + 1), Data: data, Deadline: dl})
	}
	h.expectPending(want)
}

// opaqueIDs are lobby IDs that break stores which build keys, patterns or
// paths by concatenation, or compare text with a collation.
func opaqueIDs() []string {
	return []string{
		"a", "A", "a:", ":a", "a:b", "a::b", "ab", "a b", " a", "a ", " ",
		"a/b", "a/", "/", "{a}", "{a", "a}", "{", "}", ":", "a*", "*", "a?",
		"[a]", "a\\b", "'", "\"", "a;b", "a%b", "a\tb", "a\nb", "é", "e\u0301",
		"日本語", "🎲", "Z", "z", strings.Repeat("x", 128), strings.Repeat("x", 127),
		// NUL is valid UTF-8, and lobby IDs may hold it.
		"a\x00", "a\x00b", "\x00",
	}
}

// checkOpaqueIDs: IDs are bytes. None of opaqueIDs collides with another in
// records, the due index or the outbox, and ties sort in byte order.
func checkOpaqueIDs(h *harness) {
	ids := opaqueIDs()
	var wantDue []store.Due
	var wantEvents []store.Event
	for i, id := range ids {
		// Every second ID shares a deadline with its neighbour, so ties
		// between unrelated IDs are ordered by bytes.
		dl := t0.Add(time.Duration(i/2) * time.Second)
		e := ev(id, 7, "event of "+id)
		h.write(store.Write{ID: id, Data: []byte("data of " + id), Deadline: dl, Events: []store.Event{e}})
		wantDue = append(wantDue, store.Due{ID: id, Deadline: dl})
		wantEvents = append(wantEvents, e)
	}
	for i, id := range ids {
		h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("data of " + id), Deadline: t0.Add(time.Duration(i/2) * time.Second)})
	}
	sortDue(wantDue)
	h.expectDue(later, len(ids)+10, wantDue)
	h.expectPending(wantEvents)

	// Deleting one leaves its prefixes and extensions alone.
	if err := h.s.Delete(h.ctx, "a", 1, 0); err != nil {
		h.t.Fatalf("Delete(\"a\", 1, 0) = %v, want nil", err)
	}
	h.loadMissing("a", []byte("data of a"))
	for _, id := range []string{"a:", "ab", "a ", "A", "a*", "a?", "[a]", "{a}"} {
		h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("data of " + id), Deadline: deadlineOf(wantDue, id)})
	}
	if got := len(h.due(later, len(ids)+10)); got != len(ids)-1 {
		h.t.Fatalf("Due after deleting one of %d lobbies: %d lobbies, want %d", len(ids), got, len(ids)-1)
	}
}

func deadlineOf(d []store.Due, id string) time.Time {
	for _, x := range d {
		if x.ID == id {
			return x.Deadline
		}
	}
	return time.Time{}
}
