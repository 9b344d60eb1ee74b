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
	h.write(store.Write{ID: id, Data: []byte("first"), Deadline: t0, Effects: []byte("created")})
	before := h.state(id)
	h.writeErr(store.Write{
		ID: id, Data: []byte("second"), Deadline: t0.Add(-time.Hour), Effects: []byte("created again"),
	}, store.ErrConflict)
	h.unchanged(before, "a second create")
}

// checkWriteStaleVersion: a Write whose Expected is not the stored version
// is ErrConflict and changes nothing: not the record, not the due index, not
// the log.
func checkWriteStaleVersion(h *harness) {
	const id, other = "lobby-stale", "lobby-bystander"
	for v := range uint64(3) {
		h.write(store.Write{
			ID: id, Expected: v, Data: fmt.Appendf(nil, "v%d", v+1), Deadline: t0.Add(time.Duration(v) * time.Second),
			Effects: fmt.Appendf(nil, "e%d", v+1),
		})
	}
	h.write(store.Write{ID: other, Data: []byte("b"), Deadline: t0.Add(time.Minute)})
	before := h.state(id, other)
	for _, expected := range []uint64{0, 1, 2, 4, 5, 1 << 40} {
		h.writeErr(store.Write{
			ID: id, Expected: expected, Data: []byte("stale"), Deadline: t0.Add(-time.Hour),
			Effects: []byte("stale"),
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
		// Effects, so that the Delete below leaves a tombstone.
		h.write(store.Write{ID: id, Expected: version[id], Data: data, Deadline: dl, Effects: data})
		version[id]++
		exists[id] = true
		h.expectRecord(store.Record{ID: id, Version: version[id], Data: data, Deadline: dl})
		if i == 8 {
			if err := h.s.Delete(h.ctx, store.Deletion{ID: id, Expected: version[id]}); err != nil {
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
	h.write(store.Write{ID: id, Data: []byte("v1"), Deadline: t0, Effects: []byte("e1")})
	if err := h.s.RegisterConsumer(h.ctx, "invalid-reader"); err != nil {
		h.t.Fatalf("RegisterConsumer(invalid-reader) = %v, want nil", err)
	}
	before := h.state(id, "lobby-invalid-new")

	bad := []struct {
		name string
		w    store.Write
	}{
		{"empty ID", store.Write{ID: "", Data: []byte("x"), Deadline: t0, At: t0}},
		{"empty ID with effects", store.Write{ID: "", Effects: []byte("x"), At: t0}},
		{"an Expected version without a successor", store.Write{ID: "lobby-invalid-new", Expected: math.MaxUint64, Data: []byte("x"), Deadline: t0,
			At: t0, Effects: []byte("x")}},
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
		if _, err := h.s.ReadLog(h.ctx, id, 0, limit); !errors.Is(err, store.ErrInvalid) {
			h.t.Errorf("ReadLog(%q, 0, %d) = %s, want %v", id, limit, describe(err), store.ErrInvalid)
		}
		if _, err := h.s.TrimLog(h.ctx, later, limit); !errors.Is(err, store.ErrInvalid) {
			h.t.Errorf("TrimLog(later, %d) = %s, want %v", limit, describe(err), store.ErrInvalid)
		}
		if _, err := h.s.ClaimLog(h.ctx, "invalid-reader", later, limit, time.Minute); !errors.Is(err, store.ErrInvalid) {
			h.t.Errorf("ClaimLog(invalid-reader, later, %d, 1m) = %s, want %v", limit, describe(err), store.ErrInvalid)
		}
		hold := time.Duration(limit) // 0 and -1ns
		if _, err := h.s.ClaimLog(h.ctx, "invalid-reader", later, 10, hold); !errors.Is(err, store.ErrInvalid) {
			h.t.Errorf("ClaimLog(invalid-reader, later, 10, %v) = %s, want %v", hold, describe(err), store.ErrInvalid)
		}
		if c, ok := h.s.(store.Claimer); ok {
			if _, err := c.Claim(h.ctx, later, limit, time.Minute); !errors.Is(err, store.ErrInvalid) {
				h.t.Errorf("Claim(later, %d, 1m) = %s, want %v", limit, describe(err), store.ErrInvalid)
			}
			if _, err := c.Claim(h.ctx, later, 10, hold); !errors.Is(err, store.ErrInvalid) {
				h.t.Errorf("Claim(later, 10, %v) = %s, want %v", hold, describe(err), store.ErrInvalid)
			}
		}
	}
	// Consumer names follow the rules of IDs: the empty name is invalid.
	if _, err := h.s.ClaimLog(h.ctx, "", later, 10, time.Minute); !errors.Is(err, store.ErrInvalid) {
		h.t.Errorf("ClaimLog(\"\", later, 10, 1m) = %s, want %v", describe(err), store.ErrInvalid)
	}
	if err := h.s.RegisterConsumer(h.ctx, ""); !errors.Is(err, store.ErrInvalid) {
		h.t.Errorf("RegisterConsumer(\"\") = %s, want %v", describe(err), store.ErrInvalid)
	}
	// CommitLog of a name never registered is invalid, and registers
	// nothing: asking again gives the same answer.
	for range 2 {
		if err := h.s.CommitLog(h.ctx, "never-registered", id, 1); !errors.Is(err, store.ErrInvalid) {
			h.t.Errorf("CommitLog(never-registered, %q, 1) = %s, want %v", id, describe(err), store.ErrInvalid)
		}
	}
	// The empty ID never has a record: either answer is acceptable.
	if _, err := h.s.Load(h.ctx, ""); !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("Load(\"\") = %s, want %v or %v", describe(err), store.ErrInvalid, store.ErrNotFound)
	}
	if err := h.s.Delete(h.ctx, store.Deletion{ID: "", Expected: 0}); !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("Delete(\"\", 0, 0) = %s, want %v or %v", describe(err), store.ErrInvalid, store.ErrNotFound)
	}
	h.unchanged(before, "invalid calls")
	// The registered consumer registered before the refused calls has
	// nothing to do: they appended nothing.
	if got, err := h.s.ClaimLog(h.ctx, "invalid-reader", later, 10, time.Minute); err != nil || len(got) != 0 {
		h.t.Errorf("ClaimLog(invalid-reader) after refused writes = %v, %s; want no lobbies", got, describe(err))
	}
}

// checkAliasing: the caller owns every slice it passes and every slice it
// gets back; changing them afterwards changes nothing stored.
func checkAliasing(h *harness) {
	const id, id2 = "lobby-alias", "lobby-alias-2"
	buf := []byte("original")
	effects := []byte("effects-one")
	h.write(store.Write{ID: id, Data: buf, Deadline: t0, Effects: effects})

	// What was passed in.
	copy(buf, "XXXXXXXX")
	copy(effects, "XXXXXXXXXXX")
	h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("original"), Deadline: t0})
	wantLog := []store.Entry{entry(id, 1, "effects-one")}
	h.expectLog(id, 0, wantLog)

	// The same buffers reused for the next write, to another lobby.
	copy(buf, "reused!!")
	copy(effects, "reused-effs")
	h.write(store.Write{ID: id2, Data: buf, Deadline: t0, Effects: effects})
	copy(buf, "YYYYYYYY")
	copy(effects, "YYYYYYYYYYY")
	h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("original"), Deadline: t0})
	h.expectRecord(store.Record{ID: id2, Version: 1, Data: []byte("reused!!"), Deadline: t0})
	h.expectLog(id, 0, wantLog)
	h.expectLog(id2, 0, []store.Entry{entry(id2, 1, "reused-effs")})

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

	got := h.readLog(id, 0, 10)
	for i := range got {
		scribble(got[i].Data)
		got[i].Version += 1000
		got[i].Lobby = "changed"
	}
	h.expectLog(id, 0, wantLog)

	d := h.due(later, 10)
	for i := range d {
		d[i].ID = "changed"
		d[i].Deadline = time.Time{}
	}
	h.expectDue(later, 10, []store.Due{{ID: id, Deadline: t0}, {ID: id2, Deadline: t0}})

	// Several slices returned by one call share no memory: scribbling
	// over one, up to its capacity, leaves the others as they were.
	h.write(store.Write{ID: id, Expected: 1, Data: []byte("two"), Effects: []byte("two")})
	h.write(store.Write{ID: id, Expected: 2, Data: []byte("three"), Effects: []byte("three")})
	wantAll := append(slices.Clone(wantLog), entry(id, 2, "two"), entry(id, 3, "three"))
	got = h.readLog(id, 0, 10)
	if len(got) != len(wantAll) {
		h.t.Fatalf("ReadLog(%q, 0, 10) = %d entries, want %d", id, len(got), len(wantAll))
	}
	for i := range got {
		scribble(got[i].Data)
		for j := i + 1; j < len(got); j++ {
			if string(got[j].Data) != string(wantAll[j].Data) {
				h.t.Fatalf("changing the Data of entry %d returned by ReadLog (up to its capacity) changed entry %d of the same call to %q, want %q",
					i, j, got[j].Data, wantAll[j].Data)
			}
		}
	}
	h.expectLog(id, 0, wantAll)
	checkAliasingInputs(h)
}

// checkAliasingInputs: a store neither writes into a caller's buffers (not
// even between their length and their capacity) nor reorders or keeps the
// IDs passed to LogHeads.
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
	data, effects := spare("record"), spare("effects")
	h.write(store.Write{ID: id, Data: data, Deadline: t0, Effects: effects})
	intact("Write.Data", data, "record")
	intact("Write.Effects", effects, "effects")
	h.expectLog(id, 0, []store.Entry{entry(id, 1, "effects")})

	// LogHeads' IDs: neither reordered nor changed, nor written past
	// their length.
	idsCap := []string{"lobby-alias-in", "b-unknown", "a-unknown", "sentinel"}
	ids := idsCap[:3]
	heads := h.heads(ids...)
	if d := diff([]string{"lobby-alias-in", "b-unknown", "a-unknown", "sentinel"}, idsCap); d != "" {
		h.t.Fatalf("LogHeads changed the caller's IDs (-before +after):\n%s", d)
	}
	if d := diff([]uint64{1, 0, 0}, heads); d != "" {
		h.t.Fatalf("LogHeads(%q) (-want +got):\n%s", ids, d)
	}

	// A Load's Data with spare capacity is the caller's: appending to it
	// and writing it back does not change the stored record in between.
	r := h.load(id)
	grown := append(r.Data, "-grown"...)
	h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("record"), Deadline: t0})
	h.write(store.Write{ID: id, Expected: 1, Data: grown, Deadline: t0})
	h.expectRecord(store.Record{ID: id, Version: 2, Data: []byte("record-grown"), Deadline: t0})

	// The same for an entry's Data.
	e := h.readLog(id, 0, 1)
	if len(e) != 1 {
		h.t.Fatalf("ReadLog(%q, 0, 1) = %d entries, want 1", id, len(e))
	}
	_ = append(e[0].Data, "-grown"...)
	h.expectLog(id, 0, []store.Entry{entry(id, 1, "effects")})
}

// checkLargeRecord: records of a 1,000-member lobby (about 100 KiB) and
// large entries round-trip, and a record that shrinks keeps no stale tail.
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
	var want []store.Entry
	for i, n := range sizes {
		data := random(n)
		var effects []byte
		switch i % 3 {
		case 0:
			effects = random(64 << 10)
		case 1:
			effects = random(1)
		}
		if effects != nil {
			want = append(want, store.Entry{Lobby: id, Version: uint64(i + 1), Data: effects})
		}
		dl := t0.Add(time.Duration(i) * time.Millisecond)
		h.write(store.Write{ID: id, Expected: uint64(i), Data: data, Deadline: dl, Effects: effects})
		h.expectRecord(store.Record{ID: id, Version: uint64(i + 1), Data: data, Deadline: dl})
	}
	h.expectLog(id, 0, want)
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
// records, the due index, the log or consumers' cursors, ties sort in byte
// order, and consumer names are bytes too.
func checkOpaqueIDs(h *harness) {
	ids := opaqueIDs()
	// Consumer names follow the rules of IDs: these are distinct consumers.
	names := []string{"a", "A", "a:", ":a", "a\x00", "é", "e\u0301", strings.Repeat("x", 128)}
	for _, name := range names {
		h.register(name)
	}
	var wantDue []store.Due
	for i, id := range ids {
		// Every second ID shares a deadline with its neighbour, so ties
		// between unrelated IDs are ordered by bytes.
		dl := t0.Add(time.Duration(i/2) * time.Second)
		h.write(store.Write{ID: id, Data: []byte("data of " + id), Deadline: dl, Effects: []byte("effects of " + id)})
		wantDue = append(wantDue, store.Due{ID: id, Deadline: dl})
	}
	for i, id := range ids {
		h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("data of " + id), Deadline: t0.Add(time.Duration(i/2) * time.Second)})
	}
	sortDue(wantDue)
	h.expectDue(later, len(ids)+10, wantDue)
	wantHeads := make([]uint64, len(ids))
	for i, id := range ids {
		h.expectLog(id, 0, []store.Entry{entry(id, 1, "effects of "+id)})
		wantHeads[i] = 1
	}
	if d := diff(wantHeads, h.heads(ids...)); d != "" {
		h.t.Fatalf("LogHeads of %d lobbies with one entry each (-want +got):\n%s", len(ids), d)
	}

	// Each consumer sees every lobby's entry, whatever the others did.
	all := map[string][]uint64{}
	for _, id := range ids {
		all[id] = []uint64{1}
	}
	for _, name := range names {
		if d := diff(all, h.drain(name)); d != "" {
			h.t.Fatalf("consumer %q after the consumers before it drained (-want +got positions):\n%s", name, d)
		}
	}

	// Deleting one leaves its prefixes and extensions alone.
	if err := h.s.Delete(h.ctx, store.Deletion{ID: "a", Expected: 1}); err != nil {
		h.t.Fatalf("Delete(\"a\", 1, 0) = %v, want nil", err)
	}
	h.loadMissing("a", []byte("data of a"))
	for _, id := range []string{"a:", "ab", "a ", "A", "a*", "a?", "[a]", "{a}"} {
		h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte("data of " + id), Deadline: deadlineOf(wantDue, id)})
		h.expectLog(id, 0, []store.Entry{entry(id, 1, "effects of "+id)})
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
