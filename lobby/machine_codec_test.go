package lobby

import (
	"errors"
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

func TestStateRoundTrip(t *testing.T) {
	for name, s := range map[string]*State{
		"new":   NewState("lobby-x", 0),
		"floor": NewState("lobby-y", 41),
		"busy":  busyLobby(t),
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

func TestEventRoundTrip(t *testing.T) {
	r := newRun(t, testPolicy())
	r.join("p-1")
	r.join("p-2")
	r.do(Leave("p-1"))
	for _, e := range r.events {
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
		"deadline in the past": mutate(func(s *State) { s.Members[0].Conns[0].Deadline = s.Updated }),
		"invalid lobby ID":     mutate(func(s *State) { s.ID = "" }),
		"zero counters":        mutate(func(s *State) { s.NextJoinSeq = 0 }),
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
}

// FuzzDecodeState: any input either decodes to a valid state that encodes
// back to the same bytes, or fails with ErrCorrupt. Never a panic.
func FuzzDecodeState(f *testing.F) {
	f.Add(EncodeState(NewState("l", 0)))
	f.Add(EncodeState(busyLobby(&testing.T{})))
	f.Add([]byte("LHS\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeState(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if again := EncodeState(s); string(again) != string(data) {
			t.Fatalf("decode→encode is not the identity:\n in %x\nout %x", data, again)
		}
		// A decoded state is safe to run commands on.
		m, _ := NewMachine(DefaultPolicy())
		now := s.Updated
		if now.IsZero() {
			now = t0
		}
		if _, err := m.Apply(s, Tick(), now.Add(time.Hour)); err != nil {
			t.Fatalf("Tick on a decoded state: %v", err)
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Tick broke a decoded state: %v", err)
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	r := newRun(&testing.T{}, testPolicy())
	r.join("a")
	r.join("b")
	r.do(Leave("a"))
	for _, e := range r.events {
		f.Add(EncodeEvent(&e))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEvent(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if again := EncodeEvent(&e); string(again) != string(data) {
			t.Fatalf("decode→encode is not the identity:\n in %x\nout %x", data, again)
		}
	})
}
