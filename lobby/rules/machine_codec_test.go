package rules

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// busyLobby builds a lobby with every kind of member: online with several
// tabs, reconnecting, with attributes, plus an empty-hosted history.
func busyLobby(t *testing.T) *State {
	r := newRun(t, testPolicy())
	r.do(Join("p-17", map[string]string{"role": "captain", "team": "red"}))
	g := r.join("p-23")
	r.join("p-23")
	r.join("ünï-cødé")
	r.advance(time.Second)
	r.do(Disconnect("p-23", g))
	g41 := r.join("p-41")
	r.advance(time.Second)
	r.do(Disconnect("p-41", g41))
	return r.s
}

// configuredLobby is busyLobby locked, configured and with blocks in force.
func configuredLobby(t *testing.T) *State {
	s := busyLobby(t)
	m, _ := NewMachine(testPolicy())
	now := s.Updated.Add(time.Second)
	for _, cmd := range []Command{
		Configure(Overrides{}.WithGrace(3 * time.Second).WithHeartbeatTTL(0).WithMaxMembers(0).WithMaxConnectionsPerPlayer(2)),
		Join("p-9", nil),
		Join("p-10", nil),
		Kick("", "p-9", time.Minute),
		Kick("", "p-10", time.Hour),
		Lock(""),
		Update("p-17", map[string]string{"role": "captain", "team": "blue"}),
	} {
		if _, err := m.Apply(s, cmd, now); err != nil {
			t.Fatalf("%v: %v", cmd.Op, err)
		}
	}
	return s
}

func TestStateRoundTrip(t *testing.T) {
	for name, s := range map[string]*State{
		"new":        NewState("lobby-x", 0),
		"floor":      NewState("lobby-y", 41),
		"busy":       busyLobby(t),
		"configured": configuredLobby(t),
	} {
		t.Run(name, func(t *testing.T) {
			data := EncodeState(s)
			got, err := DecodeState(data)
			if err != nil {
				t.Fatalf("DecodeState: %v", err)
			}
			if diff := cmp.Diff(s, got, cmpState); diff != "" {
				t.Fatalf("round trip (-want +got):\n%s", diff)
			}
			// The decoded state shares nothing with the input bytes.
			for i := range data {
				data[i] = 0
			}
			if diff := cmp.Diff(s, got, cmpState); diff != "" {
				t.Fatalf("decoded state aliases its input:\n%s", diff)
			}
		})
	}
}

// eventsOfEveryReason returns events of every reason, with attributes,
// reconnect deadlines, a lock and overrides among them.
func eventsOfEveryReason(t *testing.T) []Event {
	r := newRun(t, testPolicy())
	r.do(Join("p-1", map[string]string{"role": "captain"}))
	g := r.join("p-2")
	r.do(Configure(Overrides{}.WithGrace(2 * time.Second).WithMaxMembers(5)))
	r.do(Lock("p-1"))
	r.do(Disconnect("p-2", g))
	r.do(Join("p-2", nil))
	r.do(Update("p-2", map[string]string{"team": "red"}))
	r.do(TransferHost("p-1", "p-2"))
	r.do(Unlock(""))
	r.join("p-3")
	r.do(Kick("p-2", "p-3", time.Minute))
	r.do(Leave("p-1"))
	r.join("p-4")
	r.advance(16 * time.Second) // every connection times out
	r.do(Tick())
	r.advance(3 * time.Second) // and every grace runs out
	r.do(Tick())
	seen := map[Reason]bool{}
	for _, e := range r.events {
		seen[e.Reason] = true
	}
	for _, want := range reasons[1:] {
		if !seen[want] {
			t.Fatalf("no %s event among %v", want, r.reasonsSince(0))
		}
	}
	return r.events
}

func TestEventRoundTrip(t *testing.T) {
	for _, e := range eventsOfEveryReason(t) {
		got, err := DecodeEvent(EncodeEvent(&e))
		if err != nil {
			t.Fatalf("DecodeEvent: %v", err)
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	}
}

func TestDecodeRejectsCorruption(t *testing.T) {
	good := EncodeState(busyLobby(t))
	mutate := func(f func(s *State)) []byte {
		s := busyLobby(t)
		f(s)
		return EncodeState(s)
	}
	tests := map[string][]byte{
		"empty":            nil,
		"wrong magic":      append([]byte("XXX"), good[3:]...),
		"unknown format":   append(append([]byte{}, good[:3]...), append([]byte{9}, good[4:]...)...),
		"truncated":        good[:len(good)-3],
		"trailing bytes":   append(append([]byte{}, good...), 0),
		"host not member":  mutate(func(s *State) { s.Host = "ghost" }),
		"duplicate player": mutate(func(s *State) { s.Members[1].Player = s.Members[0].Player }),
		"seq out of order": mutate(func(s *State) {
			s.Members[0].JoinSeq, s.Members[1].JoinSeq = s.Members[1].JoinSeq, s.Members[0].JoinSeq
		}),
		"seq not issued": mutate(func(s *State) { s.Members[len(s.Members)-1].JoinSeq = s.NextJoinSeq }),
		"gen not issued": mutate(func(s *State) { s.NextGen = 1 }),
		"duplicate gen": mutate(func(s *State) {
			s.Members[2].Conns[0].Gen = s.Members[0].Conns[0].Gen
		}),
		"online with reconnect deadline": mutate(func(s *State) { s.Members[0].ReconnectBy = s.Updated.Add(time.Second) }),
		"reconnecting without deadline": mutate(func(s *State) {
			for i := range s.Members {
				if len(s.Members[i].Conns) == 0 {
					s.Members[i].ReconnectBy = time.Time{}
				}
			}
		}),
		"deadline in the past":    mutate(func(s *State) { s.Members[0].Conns[0].Deadline = s.Updated }),
		"invalid lobby ID":        mutate(func(s *State) { s.ID = "" }),
		"zero counters":           mutate(func(s *State) { s.NextJoinSeq = 0 }),
		"zero grace override":     mutate(func(s *State) { s.Overrides = Overrides{}.WithGrace(0) }),
		"negative member cap":     mutate(func(s *State) { s.Overrides = Overrides{}.WithMaxMembers(-1) }),
		"block of a member":       mutate(func(s *State) { s.Blocks = NewBlocks(Block{s.Members[0].Player, s.Updated.Add(time.Hour)}) }),
		"block already ended":     mutate(func(s *State) { s.Blocks = NewBlocks(Block{"gone", s.Updated}) }),
		"block of a bad ID":       mutate(func(s *State) { s.Blocks = NewBlocks(Block{"", s.Updated.Add(time.Hour)}) }),
		"member's lock, unlocked": mutate(func(s *State) { s.LockedBy = s.Host }),
		"member's lock, no members": mutate(func(s *State) {
			s.Locked, s.LockedBy, s.Members, s.Host, s.Term = true, "p-17", nil, "", 0
		}),
		"locked by a bad ID": mutate(func(s *State) { s.Locked, s.LockedBy = true, "\xff" }),
		"lock byte out of range": func() []byte {
			s := busyLobby(t)
			s.Locked = true
			data := EncodeState(s)
			i := 4 + 1 + len(s.ID) // magic, format, ID
			i += uvarintLen(s.Revision) + uvarintLen(s.NextJoinSeq) + uvarintLen(s.NextGen)
			i += 1 + uvarintLen(uint64(zigzag(s.Updated.UnixNano())))
			i += 1 + len(s.Host) + uvarintLen(s.Term)
			if data[i] != 1 {
				t.Fatalf("lock byte not at %d", i)
			}
			data[i] = 2
			return data
		}(),
		"blocks out of order": func() []byte {
			s := configuredLobby(t)
			data := EncodeState(s)
			// Swap the two blocks' IDs (same length) so the order breaks.
			i := strings.Index(string(data), "\x04p-10")
			j := strings.Index(string(data), "\x03p-9")
			if i < 0 || j < 0 || j < i {
				t.Fatalf("blocks not found in %x", data)
			}
			out := append([]byte{}, data[:i]...)
			out = append(out, data[j:j+4]...)
			out = append(out, data[j+4:]...)
			return out
		}(),
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeState(data); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeState = %v, want ErrCorrupt", err)
			}
		})
	}
	if _, err := DecodeEvent(good); !errors.Is(err, ErrCorrupt) {
		t.Errorf("DecodeEvent(lobby bytes) = %v, want ErrCorrupt", err)
	}

	// The encoding cannot even hold a value for a setting that is not
	// overridden; Validate refuses one in memory.
	unset := busyLobby(t)
	unset.Overrides = Overrides{MaxMembers: 3}
	if err := unset.Validate(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Validate with a value for an unset override = %v, want ErrCorrupt", err)
	}

	events := eventsOfEveryReason(t)
	badEvents := map[string]func(e *Event){
		"no subject":             func(e *Event) { e.Reason, e.Subject = ReasonKicked, "" },
		"bad overrides":          func(e *Event) { e.Overrides = Overrides{}.WithHeartbeatTTL(-time.Second) },
		"online with a deadline": func(e *Event) { e.Members[0].Status, e.Members[0].ReconnectDeadline = StatusOnline, e.At },
		"reconnecting without":   func(e *Event) { e.Members[0].Status, e.Members[0].ReconnectDeadline = StatusReconnecting, time.Time{} },
		"empty attribute key":    func(e *Event) { e.Members[0].Attrs = map[string]string{"": "x"} },
		"too many attributes":    func(e *Event) { e.Members[0].Attrs = manyAttrs(MaxAttrs + 1) },
	}
	for name, f := range badEvents {
		e := events[2]
		e.Members = slices.Clone(e.Members)
		f(&e)
		if _, err := DecodeEvent(EncodeEvent(&e)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("event with %s: %v, want ErrCorrupt", name, err)
		}
	}
	// A format 2 event cannot carry a reason format 2 did not have.
	old, err := os.ReadFile("testdata/format2-event.bin")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(old), "\x07\x0c")
	if i < 0 {
		t.Fatalf("reason not found in %x", old)
	}
	old[i] = firstV3Reason
	if _, err := DecodeEvent(old); !errors.Is(err, ErrCorrupt) {
		t.Errorf("format 2 event with a format 3 reason: %v, want ErrCorrupt", err)
	}
}

func uvarintLen(v uint64) int { return len(binary.AppendUvarint(nil, v)) }

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// FuzzDecodeState: any input either decodes to a valid state that encodes
// back to the same bytes (an older format: to the current format, which
// decodes to the same state), or fails with ErrCorrupt. Never a panic.
func FuzzDecodeState(f *testing.F) {
	f.Add(EncodeState(NewState("l", 0)))
	f.Add(EncodeState(busyLobby(&testing.T{})))
	f.Add(EncodeState(configuredLobby(&testing.T{})))
	f.Add([]byte("LHS\x01"))
	f.Add([]byte("LHS\x02"))
	f.Add([]byte("LHS\x03"))
	f.Add([]byte("LHS\x04"))
	f.Add([]byte("LHS\x05"))
	f.Add(EncodeState(sessionLobby(&testing.T{})))
	for _, name := range []string{"format1-state.bin", "format2-state.bin", "format3-state.bin", "format4-state.bin"} {
		old, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(old)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeState(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again := EncodeState(s)
		if data[3] < formatCurrent {
			// An older format re-encodes in the current one, to the same state.
			s2, err := DecodeState(again)
			if err != nil {
				t.Fatalf("re-encoded format %d state does not decode: %v", data[3], err)
			}
			if diff := cmp.Diff(s, s2, cmpState); diff != "" {
				t.Fatalf("format %d state changed by re-encoding:\n%s", data[3], diff)
			}
		} else if string(again) != string(data) {
			t.Fatalf("decode→encode is not the identity:\n in %x\nout %x", data, again)
		}
		// A decoded state is safe to run commands on.
		m, _ := NewMachine(DefaultPolicy())
		now := s.Updated
		if now.IsZero() {
			now = t0
		}
		ended := SessionDeadlines{}
		for _, id := range s.Sessions() {
			ended[id] = now.Add(time.Minute)
		}
		if _, err := m.Apply(s, Tick().WithSessionDeadlines(ended), now.Add(time.Hour)); err != nil {
			t.Fatalf("Tick on a decoded state: %v", err)
		}
		if got := s.Sessions(); got != nil {
			t.Fatalf("sessions %v still hold connections after they ended", got)
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Tick broke a decoded state: %v", err)
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	for _, e := range eventsOfEveryReason(&testing.T{}) {
		f.Add(EncodeEvent(&e))
	}
	for _, name := range []string{"format1-event.bin", "format2-event.bin"} {
		old, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(old)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEvent(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again := EncodeEvent(&e)
		if data[3] < formatCurrent {
			e2, err := DecodeEvent(again)
			if err != nil {
				t.Fatalf("re-encoded format %d event does not decode: %v", data[3], err)
			}
			if diff := cmp.Diff(e, e2, cmpState); diff != "" {
				t.Fatalf("format %d event changed by re-encoding:\n%s", data[3], diff)
			}
		} else if string(again) != string(data) {
			t.Fatalf("decode→encode is not the identity:\n in %x\nout %x", data, again)
		}
	})
}

// TestFormat1StillDecodes: records and events written before the host term
// (format 1, committed under testdata by the previous encoder) still decode,
// at term 0, and encode again in the current format.
func TestFormat1StillDecodes(t *testing.T) {
	data, err := os.ReadFile("testdata/format1-state.bin")
	if err != nil {
		t.Fatal(err)
	}
	if data[3] != formatV1 {
		t.Fatalf("fixture is format %d, want 1", data[3])
	}
	s, err := DecodeState(data)
	if err != nil {
		t.Fatalf("format 1 state: %v", err)
	}
	if s.ID != "lobby-1" || s.Host != "ünï-cødé" || len(s.Members) != 3 || s.Term != 0 || s.Members[0].Attrs["role"] != "captain" {
		t.Fatalf("format 1 state decoded as %+v", s)
	}
	again, err := DecodeState(EncodeState(s))
	if err != nil || EncodeState(s)[3] != formatCurrent {
		t.Fatalf("re-encoded: %v", err)
	}
	if diff := cmp.Diff(s, again, cmpState); diff != "" {
		t.Fatalf("format 1 state does not survive re-encoding:\n%s", diff)
	}
	// It goes on from term 0: the next change of host is term 1.
	m, _ := NewMachine(testPolicy())
	res, err := m.Apply(s, TransferHost("ünï-cødé", "p-17"), s.Updated.Add(time.Second))
	if err != nil || len(res.Events) != 1 || res.Events[0].Term != 1 {
		t.Fatalf("transfer on a format 1 lobby: %+v, %v; want one event at term 1", res, err)
	}

	data, err = os.ReadFile("testdata/format1-event.bin")
	if err != nil {
		t.Fatal(err)
	}
	e, err := DecodeEvent(data)
	if err != nil {
		t.Fatalf("format 1 event: %v", err)
	}
	if e.Reason != ReasonHostTransferred || e.Host != "ünï-cødé" || e.PrevHost != "p-17" || e.Term != 0 || e.Revision == 0 {
		t.Fatalf("format 1 event decoded as %+v", e)
	}
}

func TestTermAboveRevisionIsCorrupt(t *testing.T) {
	s := busyLobby(t)
	s.Term = s.Revision + 1
	if _, err := DecodeState(EncodeState(s)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("term above revision: %v, want ErrCorrupt", err)
	}
}

// TestFormat2StillDecodes: records and events written with the host term
// but before locks, overrides, blocks and the richer member view (format 2,
// committed under testdata by that encoder) still decode, with none of the
// newer data, and go on from where they were.
func TestFormat2StillDecodes(t *testing.T) {
	data, err := os.ReadFile("testdata/format2-state.bin")
	if err != nil {
		t.Fatal(err)
	}
	if data[3] != formatV2 {
		t.Fatalf("fixture is format %d, want 2", data[3])
	}
	s, err := DecodeState(data)
	if err != nil {
		t.Fatalf("format 2 state: %v", err)
	}
	if s.ID != "lobby-1" || s.Host != "ünï-cødé" || s.Term != 2 || s.Revision != 6 || len(s.Members) != 4 ||
		s.Members[0].Attrs["team"] != "red" || s.Members[3].Status() != StatusReconnecting {
		t.Fatalf("format 2 state decoded as %+v", s)
	}
	again, err := DecodeState(EncodeState(s))
	if err != nil {
		t.Fatalf("re-encoded: %v", err)
	}
	if diff := cmp.Diff(s, again, cmpState); diff != "" {
		t.Fatalf("format 2 state does not survive re-encoding:\n%s", diff)
	}
	m, _ := NewMachine(testPolicy())
	res, err := m.Apply(s, TransferHost("ünï-cødé", "p-17"), s.Updated.Add(time.Second))
	if err != nil || len(res.Events) != 1 || res.Events[0].Term != 3 || res.Events[0].Revision != 7 {
		t.Fatalf("transfer on a format 2 lobby: %+v, %v; want one event at revision 7, term 3", res, err)
	}

	data, err = os.ReadFile("testdata/format2-event.bin")
	if err != nil {
		t.Fatal(err)
	}
	if data[3] != formatV2 {
		t.Fatalf("fixture is format %d, want 2", data[3])
	}
	e, err := DecodeEvent(data)
	if err != nil {
		t.Fatalf("format 2 event: %v", err)
	}
	if e.Reason != ReasonHostTransferred || e.Host != "ünï-cødé" || e.PrevHost != "p-17" || e.Term != 2 || e.Revision != 4 || len(e.Members) != 3 {
		t.Fatalf("format 2 event decoded as %+v", e)
	}
	if _, err := DecodeEvent(EncodeEvent(&e)); err != nil {
		t.Fatalf("re-encoded format 2 event: %v", err)
	}
}

// TestFormat3StillDecodes: records written with locks, overrides and blocks
// but before the lock recorded who set it (format 3, committed under
// testdata by that encoder) still decode. Their lock counts as the
// server's: it stays when the lobby empties, as it did when it was set.
func TestFormat3StillDecodes(t *testing.T) {
	data, err := os.ReadFile("testdata/format3-state.bin")
	if err != nil {
		t.Fatal(err)
	}
	if data[3] != formatV3 {
		t.Fatalf("fixture is format %d, want 3", data[3])
	}
	s, err := DecodeState(data)
	if err != nil {
		t.Fatalf("format 3 state: %v", err)
	}
	if s.ID != "lobby-1" || s.Host != "p-17" || !s.Locked || s.LockedBy != "" || s.Blocks.Len() != 2 ||
		s.Overrides.Grace != 3*time.Second || len(s.Members) != 4 {
		t.Fatalf("format 3 state decoded as %+v", s)
	}
	again, err := DecodeState(EncodeState(s))
	if err != nil || EncodeState(s)[3] != formatCurrent {
		t.Fatalf("re-encoded: %v", err)
	}
	if diff := cmp.Diff(s, again, cmpState); diff != "" {
		t.Fatalf("format 3 state does not survive re-encoding:\n%s", diff)
	}
	m, _ := NewMachine(testPolicy())
	now := s.Updated.Add(time.Second)
	for _, p := range []string{"p-23", "ünï-cødé", "p-41"} {
		if _, err := m.Apply(s, Kick("p-17", p, 0), now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Apply(s, Leave("p-17"), now); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(s, Join("p-17", nil), now); !errors.Is(err, ErrLocked) {
		t.Fatalf("join after a format 3 lobby emptied: %v, want ErrLocked", err)
	}
}

// TestFormat3HasNoBlockBoundOverride: the override of the bound on blocks
// came with format 4; a format 3 record or event that claims it is corrupt.
func TestFormat3HasNoBlockBoundOverride(t *testing.T) {
	s := configuredLobby(t)
	s.Overrides = s.Overrides.WithMaxBlocks(5)
	if _, err := DecodeState(EncodeState(s)); err != nil {
		t.Fatalf("format 4 record with a block bound: %v", err)
	}
	e := eventsOfEveryReason(t)[0]
	e.Overrides = Overrides{}.WithMaxBlocks(5)
	if _, err := DecodeEvent(EncodeEvent(&e)); err != nil {
		t.Fatalf("format 4 event with a block bound: %v", err)
	}
	// Format 3 put no lock owner in a record: drop it from a format 4
	// record, then relabel.
	s.LockedBy = ""
	rec := appendState(nil, s, formatV4)
	i := bytes.Index(rec, []byte{1, 0, byte(s.Overrides.Set)}) // locked, no owner, overrides
	if i < 0 {
		t.Fatalf("lock and overrides not found in %x", rec)
	}
	old := append(slices.Clone(rec[:i+1]), rec[i+2:]...)
	old[3] = formatV3
	if _, err := DecodeState(old); !errors.Is(err, ErrCorrupt) {
		t.Errorf("format 3 record with a block bound: %v, want ErrCorrupt", err)
	}
	ev := EncodeEvent(&e)
	ev[3] = formatV3
	if _, err := DecodeEvent(ev); !errors.Is(err, ErrCorrupt) {
		t.Errorf("format 3 event with a block bound: %v, want ErrCorrupt", err)
	}
	// Without the bound, the same relabelled record decodes.
	s.Overrides = Overrides{}.WithGrace(time.Second)
	rec = appendState(nil, s, formatV4)
	i = bytes.Index(rec, []byte{1, 0, byte(s.Overrides.Set)})
	old = append(slices.Clone(rec[:i+1]), rec[i+2:]...)
	old[3] = formatV3
	if _, err := DecodeState(old); err != nil {
		t.Errorf("format 3 record relabelled: %v", err)
	}
}
