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

// checkMaxWrite: writes at the size limit of package store are stored
// whole: a record whose Data alone is store.MaxWriteBytes, then ones that
// share the budget with their Effects, then Effects alone, each compared
// byte for byte (a store that cuts long values short fails here).
func checkMaxWrite(h *harness) {
	const id = "lobby-max-write"
	rng := rand.NewChaCha8([32]byte{'m', 'a', 'x'})
	const mib = 1 << 20
	steps := []struct{ data, effects int }{
		{store.MaxWriteBytes, -1},
		{store.MaxWriteBytes - 5*mib, 5 * mib},
		{3*mib + 7, 2 * mib},
		{10, store.MaxWriteBytes - 10},
		{0, store.MaxWriteBytes},
		{store.MaxWriteBytes, 0},
	}
	var want []store.Entry
	for i, st := range steps {
		data := randomBytes(rng, st.data)
		var effects []byte
		if st.effects >= 0 {
			effects = randomBytes(rng, st.effects)
			want = append(want, store.Entry{Lobby: id, Version: uint64(i + 1), Data: effects})
		}
		dl := t0.Add(time.Duration(i) * time.Second)
		h.write(store.Write{ID: id, Expected: uint64(i), Data: data, Deadline: dl, Effects: effects})
		h.expectRecord(store.Record{ID: id, Version: uint64(i + 1), Data: data, Deadline: dl})
	}
	got := h.readLog(id, 0, len(want)+10)
	if len(got) != len(want) {
		h.t.Fatalf("ReadLog after %d writes with large Effects: %d entries", len(want), len(got))
	}
	for i := range want {
		if got[i].Lobby != want[i].Lobby || got[i].Version != want[i].Version || string(got[i].Data) != string(want[i].Data) {
			h.t.Fatalf("entry %d: %q position %d with %d bytes of data, want %q position %d with %d bytes (equal: %v)",
				i, got[i].Lobby, got[i].Version, len(got[i].Data), want[i].Lobby, want[i].Version, len(want[i].Data),
				string(got[i].Data) == string(want[i].Data))
		}
	}
}

// checkDigitIDs: IDs that end in digits and are prefixes of each other
// (room1, room12, room123) name different lobbies, and so do their logs
// and consumers' cursors, although a key built by concatenating two names
// would name two of them at once: ("relay", "12") and ("relay1", "2") both
// read "relay12".
func checkDigitIDs(h *harness) {
	ids := []string{"room1", "room12", "room123", "room1-2", "room", "1", "12", "2", "23"}
	h.register("relay")
	h.register("relay1")
	dl := func(id string) time.Time { return t0.Add(time.Duration(len(id)) * time.Second) }
	for _, id := range ids {
		for v := range uint64(3) {
			h.write(store.Write{ID: id, Expected: v, Data: []byte("data of " + id), Deadline: dl(id), Effects: []byte(id + "/" + fmt.Sprint(v+1))})
		}
	}
	for _, id := range ids {
		h.expectLog(id, 0, []store.Entry{entry(id, 1, id+"/1"), entry(id, 2, id+"/2"), entry(id, 3, id+"/3")})
		h.expectRecord(store.Record{ID: id, Version: 3, Data: []byte("data of " + id), Deadline: dl(id)})
	}

	// relay reads "12" only; relay1 then still has everything.
	h.commitLog("relay", "12", 3)
	all := map[string][]uint64{}
	for _, id := range ids {
		all[id] = []uint64{1, 2, 3}
	}
	if d := diff(all, h.drain("relay1")); d != "" {
		h.t.Fatalf("consumer relay1 after relay committed lobby 12 (-want +got positions):\n%s", d)
	}
	delete(all, "12")
	if d := diff(all, h.drain("relay")); d != "" {
		h.t.Fatalf("consumer relay after committing lobby 12 (-want +got positions):\n%s", d)
	}

	// Deleting one leaves its neighbours, their floors, deadlines and logs.
	h.delete("room12", 3, 40)
	if f := h.loadMissing("room12", []byte("data of room12")); f < 40 {
		h.t.Fatalf("Load(room12) after Delete(room12, 3, 40): floor %d, want >= 40", f)
	}
	for _, id := range []string{"room1", "room123", "12", "1"} {
		h.expectRecord(store.Record{ID: id, Version: 3, Data: []byte("data of " + id), Deadline: dl(id)})
	}
	if f := h.loadMissing("room1234", nil); f != 0 {
		h.t.Fatalf("Load(room1234), never written: floor %d, want 0", f)
	}
	var wantDue []store.Due
	for _, id := range ids {
		if id != "room12" {
			wantDue = append(wantDue, store.Due{ID: id, Deadline: dl(id)})
		}
	}
	sortDue(wantDue)
	h.expectDue(later, 100, wantDue)
	h.write(store.Write{ID: "room1", Expected: 3, Data: []byte("data of room1"), Deadline: dl("room1"), Effects: []byte("room1/4")})
	h.expectLog("room12", 0, []store.Entry{entry("room12", 1, "room12/1"), entry("room12", 2, "room12/2"), entry("room12", 3, "room12/3")})
	if d := diff([]uint64{4, 3, 3, 0}, h.heads("room1", "room12", "room123", "room1234")); d != "" {
		h.t.Fatalf("LogHeads of neighbours (-want +got):\n%s", d)
	}
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
			At: t0, Effects: []byte(fmt.Sprint("effects ", i))}
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
	for i, id := range ids {
		if !accepted[id] {
			if _, err := h.s.Load(h.ctx, id); !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrInvalid) {
				h.t.Errorf("Load(%q), whose Write was refused = %s, want %v or %v", id, describe(err), store.ErrNotFound, store.ErrInvalid)
			}
			continue
		}
		h.expectRecord(store.Record{ID: id, Version: 1, Data: []byte(fmt.Sprint("data ", i)), Deadline: t0.Add(time.Duration(i) * time.Second)})
		wantDue = append(wantDue, store.Due{ID: id, Deadline: t0.Add(time.Duration(i) * time.Second)})
		h.expectLog(id, 0, []store.Entry{entry(id, 1, fmt.Sprint("effects ", i))})
	}
	sortDue(wantDue)
	h.expectDue(later, 100, wantDue)
}
