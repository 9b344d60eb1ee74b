package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lobbyhost/lobbyhost/store"
)

// randomBytes returns n bytes drawn from rng.
func randomBytes(rng *rand.ChaCha8, n int) []byte {
	b := make([]byte, n)
	_, _ = rng.Read(b) // ChaCha8.Read never fails
	return b
}

// checkMaxWrite: writes at the size limits of package store are stored
// whole: a record whose Data alone is store.MaxWriteBytes, then one that
// shares the budget with events of 1 MiB, then records that shrink, each
// compared byte for byte (a store that cuts long values short fails here).
func checkMaxWrite(h *harness) {
	const id = "lobby-max-write"
	rng := rand.NewChaCha8([32]byte{'m', 'a', 'x'})
	const mib = 1 << 20
	steps := []struct {
		data   int
		events []int
	}{
		{store.MaxWriteBytes, nil},
		{store.MaxWriteBytes - 4*mib, []int{mib, mib, mib, mib - 1, 1}},
		{3*mib + 7, []int{2 * mib}},
		{10, nil},
		{store.MaxWriteBytes, nil},
	}
	var want []store.Event
	seq := uint64(0)
	for i, st := range steps {
		data := randomBytes(rng, st.data)
		var events []store.Event
		for _, n := range st.events {
			seq++
			events = append(events, store.Event{Lobby: id, Seq: seq, Data: randomBytes(rng, n)})
		}
		want = append(want, events...)
		dl := t0.Add(time.Duration(i) * time.Second)
		h.write(store.Write{ID: id, Expected: uint64(i), Data: data, Deadline: dl, Events: events})
		h.expectRecord(store.Record{ID: id, Version: uint64(i + 1), Data: data, Deadline: dl})
	}
	got := h.pending(len(want) + 10)
	if len(got) != len(want) {
		h.t.Fatalf("Pending after writes with %d large events: %d events", len(want), len(got))
	}
	for i := range want {
		if got[i].Lobby != want[i].Lobby || got[i].Seq != want[i].Seq || string(got[i].Data) != string(want[i].Data) {
			h.t.Fatalf("Pending event %d: %q seq %d with %d bytes of data, want %q seq %d with %d bytes (equal: %v)",
				i, got[i].Lobby, got[i].Seq, len(got[i].Data), want[i].Lobby, want[i].Seq, len(want[i].Data),
				string(got[i].Data) == string(want[i].Data))
		}
	}
}

// checkManyEvents: a Write with store.MaxWriteEvents events (a catch-up
// over many overdue deadlines writes hundreds at once) stores every one of
// them, in order, on creation and on update; Pending's limit cuts a prefix
// of them.
func checkManyEvents(h *harness) {
	const id = "lobby-many-events"
	var all []store.Event
	batch := func(from uint64) []store.Event {
		var events []store.Event
		for i := range uint64(store.MaxWriteEvents) {
			events = append(events, ev(id, from+i, fmt.Sprintf("event %d", from+i)))
		}
		return events
	}
	first := batch(1)
	h.write(store.Write{ID: id, Data: []byte("created"), Deadline: t0, Events: first})
	all = append(all, first...)
	second := batch(uint64(len(all)) + 1)
	h.write(store.Write{ID: id, Expected: 1, Data: []byte("updated"), Deadline: t0, Events: second})
	all = append(all, second...)
	h.expectRecord(store.Record{ID: id, Version: 2, Data: []byte("updated"), Deadline: t0})

	got := h.pending(len(all) + 10)
	if len(got) != len(all) {
		h.t.Fatalf("two Writes of %d events each: Pending shows %d events, want %d", store.MaxWriteEvents, len(got), len(all))
	}
	if d := diff(all, got); d != "" {
		h.t.Fatalf("Pending after two Writes of %d events (-want +got):\n%s", store.MaxWriteEvents, d)
	}
	if d := diff(all[:store.MaxWriteEvents+1], h.pending(store.MaxWriteEvents+1)); d != "" {
		h.t.Fatalf("Pending(%d) is not a prefix (-want +got):\n%s", store.MaxWriteEvents+1, d)
	}
	h.ack(first...)
	h.expectPending(second)
}

// checkDigitIDs: IDs that end in digits and are prefixes of each other
// (room1, room12, room123) name different lobbies, and so do their events,
// although a key built by concatenating an ID and a number would name two
// of them at once: ("room1", 23) and ("room12", 3) both read "room123".
func checkDigitIDs(h *harness) {
	ids := []string{"room1", "room12", "room123", "room1-2", "room", "1", "12"}
	// Each lobby is written to version 3 with events of Seq 1, 2, 3 and
	// 23, so the concatenations of ID and Seq (and of ID and version)
	// coincide across lobbies.
	var want []store.Event
	for _, id := range ids {
		for v := range uint64(3) {
			events := []store.Event{ev(id, v+1, id+"/"+fmt.Sprint(v+1))}
			if v == 2 {
				events = append(events, ev(id, 23, id+"/23"))
			}
			h.write(store.Write{ID: id, Expected: v, Data: []byte("data of " + id), Deadline: t0.Add(time.Duration(len(id)) * time.Second), Events: events})
		}
	}
	for _, id := range ids {
		want = append(want, ev(id, 1, id+"/1"), ev(id, 2, id+"/2"), ev(id, 3, id+"/3"), ev(id, 23, id+"/23"))
	}
	h.expectPending(want)
	for _, id := range ids {
		h.expectRecord(store.Record{ID: id, Version: 3, Data: []byte("data of " + id), Deadline: t0.Add(time.Duration(len(id)) * time.Second)})
	}

	// Acknowledging ("room1", 23) and ("1", 23) leaves ("room12", 3) and
	// ("12", 3) pending.
	h.ack(ev("room1", 23, ""), ev("1", 23, ""))
	var rest []store.Event
	for _, e := range want {
		if (e.Lobby == "room1" || e.Lobby == "1") && e.Seq == 23 {
			continue
		}
		rest = append(rest, e)
	}
	h.expectPending(rest)

	// Deleting one leaves its neighbours, their floors and deadlines.
	h.delete("room12", 3, 40)
	if f := h.loadMissing("room12", []byte("data of room12")); f < 40 {
		h.t.Fatalf("Load(room12) after Delete(room12, 3, 40): floor %d, want >= 40", f)
	}
	for _, id := range []string{"room1", "room123", "12", "1"} {
		h.expectRecord(store.Record{ID: id, Version: 3, Data: []byte("data of " + id), Deadline: t0.Add(time.Duration(len(id)) * time.Second)})
	}
	if f := h.loadMissing("room1234", nil); f != 0 {
		h.t.Fatalf("Load(room1234), never written: floor %d, want 0", f)
	}
	var wantDue []store.Due
	for _, id := range ids {
		if id != "room12" {
			wantDue = append(wantDue, store.Due{ID: id, Deadline: t0.Add(time.Duration(len(id)) * time.Second)})
		}
	}
	sortDue(wantDue)
	h.expectDue(later, 100, wantDue)
	h.expectPending(rest)
}

// checkIDLimits: IDs beyond the set every store must handle (longer than
// store.MaxIDLen bytes, or invalid UTF-8) are either refused with
// store.ErrInvalid, writing nothing, or kept exactly: never cut to a length
// or re-encoded so that they meet another ID.
func checkIDLimits(h *harness) {
	base := strings.Repeat("L", store.MaxIDLen)
	ids := []string{
		base,                          // the longest every store handles
		base + "x",                    // one byte more: its first MaxIDLen bytes are base
		base + "y",                    // differs from the previous only past MaxIDLen
		strings.Repeat("L", 1000),     // long
		"bad\xff",                     // invalid UTF-8
		"bad\xfe",                     // another invalid byte at the same place
		"bad\ufffd",                   // what a re-encoding would turn them into
		"bad",                         // what dropping invalid bytes would leave
		"caf\xc3",                     // a cut multi-byte sequence
		"caf",                         //
		"\xed\xa0\x80",                // an encoded surrogate
		base[:store.MaxIDLen-1] + "é", // 129 bytes, valid UTF-8
	}
	accepted := map[string]bool{}
	for i, id := range ids {
		w := store.Write{ID: id, Data: []byte(fmt.Sprint("data ", i)), Deadline: t0.Add(time.Duration(i) * time.Second),
			Events: []store.Event{ev(id, 1, fmt.Sprint("event ", i))}}
		err := h.s.Write(h.ctx, w)
		mustAccept := len(id) <= store.MaxIDLen && utf8.ValidString(id)
		switch {
		case err == nil:
			accepted[id] = true
		case errors.Is(err, store.ErrInvalid) && !mustAccept:
		case mustAccept:
			h.t.Fatalf("Write(%q) of %d bytes of valid UTF-8 = %v, want nil", id, len(id), err)
		default:
			h.t.Fatalf("Write(%q) = %v, want nil or %v", id, err, store.ErrInvalid)
		}
	}
	var wantDue []store.Due
	var wantEvents []store.Event
	for i, id := range ids {
		if !accepted[id] {
			if _, err := h.s.Load(h.ctx, id); !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrInvalid) {
				h.t.Errorf("Load(%q), whose Write was refused = %s, want %v or %v", id, describe(err), store.ErrNotFound, store.ErrInvalid)
			}
			continue
		}
		h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte(fmt.Sprint("data ", i)), Deadline: t0.Add(time.Duration(i) * time.Second)})
		wantDue = append(wantDue, store.Due{ID: id, Deadline: t0.Add(time.Duration(i) * time.Second)})
		wantEvents = append(wantEvents, ev(id, 1, fmt.Sprint("event ", i)))
	}
	sortDue(wantDue)
	h.expectDue(later, 100, wantDue)
	h.expectPending(wantEvents)
}
