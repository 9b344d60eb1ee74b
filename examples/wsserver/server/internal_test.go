package server

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
)

func TestDecodeClientMsg(t *testing.T) {
	tests := []struct {
		name, in string
		wantType string
		wantCode string
	}{
		{"ping", `{"type":"ping"}`, "ping", ""},
		{"whitespace around", " \n{\"type\":\"ping\"}\n ", "ping", ""},
		{"own identity", `{"type":"chat.send","text":"x","roomId":"r","userId":"u","from":"u"}`, "chat.send", ""},
		{"unknown fields ignored", `{"type":"ping","ts":12,"id":"abc"}`, "ping", ""},
		{"null host is no host", `{"type":"ping","hostId":null}`, "ping", ""},
		{"another room", `{"type":"ping","roomId":"x"}`, "", CodeWrongRoom},
		{"another user", `{"type":"ping","senderId":"x"}`, "", CodeImpersonation},
		{"a host", `{"type":"ping","hostId":"u"}`, "", CodeForbiddenField},
		{"no type", `{}`, "", CodeMissingType},
		{"empty type", `{"type":""}`, "", CodeMissingType},
		{"array", `[]`, "", CodeBadJSON},
		{"garbage after", `{"type":"ping"}x`, "", CodeBadJSON},
		{"bad UTF-8", "{\"type\":\"\xc3\"}", "", CodeBadUTF8},
		{"wrong field type", `{"type":"chat.send","text":7}`, "", CodeBadJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ref := decodeClientMsg([]byte(tt.in), "r", "u")
			gotCode := ""
			if ref != nil {
				gotCode = ref.code
			}
			if gotCode != tt.wantCode || (ref == nil && m.Type != tt.wantType) {
				t.Errorf("decode(%q) = type %q, refusal %q; want type %q, refusal %q", tt.in, m.Type, gotCode, tt.wantType, tt.wantCode)
			}
		})
	}
}

// No input makes the decoder panic, and whatever it accepts names no other
// user, room or host.
func FuzzDecodeClientMsg(f *testing.F) {
	for _, s := range []string{`{"type":"ping"}`, `{"type":"chat.send","text":"hi","userId":"u"}`, `{"type":"host.transfer","to":"v"}`, `[`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, ref := decodeClientMsg(data, "r", "u")
		if ref != nil {
			return
		}
		if m.Type == "" {
			t.Fatalf("accepted a message without a type: %q", data)
		}
		for _, f := range []*string{m.UserID, m.PlayerID, m.SenderID, m.From} {
			if f != nil && *f != "u" {
				t.Fatalf("accepted a message naming user %q: %q", *f, data)
			}
		}
		if (m.RoomID != nil && *m.RoomID != "r") || m.HostID != nil {
			t.Fatalf("accepted a message naming a room or host: %q", data)
		}
	})
}

func TestEncodeEvent(t *testing.T) {
	e := lobby.Event{
		Lobby: "r", Revision: 7, Host: "bob", PrevHost: "alice", Reason: lobby.ReasonLeaseExpired, Subject: "alice",
		Members: []lobby.MemberView{{Player: "bob", JoinSeq: 2, Status: lobby.StatusOnline}, {Player: "carol", JoinSeq: 3, Status: lobby.StatusReconnecting}},
		At:      time.Date(2030, 1, 1, 0, 0, 8, 0, time.UTC),
	}
	var got map[string]any
	if err := json.Unmarshal(encodeEvent(&e), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": "lobby.state", "version": 7.0, "hostId": "bob", "playerIds": []any{"bob", "carol"}, "roomId": "r",
		"members": []any{
			map[string]any{"userId": "bob", "joinSeq": 2.0, "status": "online", "host": true},
			map[string]any{"userId": "carol", "joinSeq": 3.0, "status": "reconnecting", "host": false},
		},
		"reason": "lease_expired", "subjectId": "alice", "previousHostId": "alice", "at": "2030-01-01T00:00:08Z",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("encodeEvent (-want +got):\n%s", diff)
	}

	snap := lobby.Snapshot{Lobby: "r", Revision: 0}
	got = nil
	if err := json.Unmarshal(encodeSnapshot(&snap), &got); err != nil {
		t.Fatal(err)
	}
	want = map[string]any{"type": "lobby.state", "version": 0.0, "hostId": nil, "playerIds": []any{}, "roomId": "r", "members": []any{}, "reason": "snapshot"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("encodeSnapshot of an empty lobby (-want +got):\n%s", diff)
	}
}

func TestMemoryTickets(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	m, err := NewMemoryTickets(clock, time.Minute, 3)
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Issue(ctx, "room", "alice")
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Redeem(ctx, a.Value)
	if err != nil || got.Room != "room" || got.User != "alice" {
		t.Fatalf("Redeem = %+v, %v; want alice's ticket for room", got, err)
	}
	if _, err := m.Redeem(ctx, a.Value); !errors.Is(err, ErrTicketUsed) {
		t.Errorf("second Redeem: %v, want ErrTicketUsed", err)
	}
	if _, err := m.Redeem(ctx, "nope"); !errors.Is(err, ErrTicketUnknown) {
		t.Errorf("Redeem of an unknown ticket: %v, want ErrTicketUnknown", err)
	}

	b, _ := m.Issue(ctx, "room", "bob")
	clock.Advance(time.Minute - time.Nanosecond)
	c, _ := m.Issue(ctx, "room", "carol")
	if _, err := m.Issue(ctx, "room", "dave"); !errors.Is(err, ErrTooManyTickets) {
		t.Errorf("fourth outstanding ticket: %v, want ErrTooManyTickets", err)
	}
	clock.Advance(time.Nanosecond) // a's and b's lifetime is over
	if _, err := m.Redeem(ctx, b.Value); !errors.Is(err, ErrTicketExpired) {
		t.Errorf("Redeem at the expiry: %v, want ErrTicketExpired", err)
	}
	if _, err := m.Issue(ctx, "room", "dave"); err != nil { // prunes a and b
		t.Errorf("Issue after expiries: %v", err)
	}
	if n := m.Len(); n != 2 {
		t.Errorf("remembered tickets after pruning = %d, want 2 (carol, dave)", n)
	}
	if _, err := m.Redeem(ctx, c.Value); err != nil {
		t.Errorf("carol's ticket inside its lifetime: %v", err)
	}
	if _, err := NewMemoryTickets(clock, 0, 0); err == nil {
		t.Error("NewMemoryTickets with a zero TTL succeeded")
	}
}

// Of many concurrent redemptions of one ticket exactly one succeeds.
func TestMemoryTicketsRedeemOnce(t *testing.T) {
	ctx := context.Background()
	m, _ := NewMemoryTickets(clockwork.NewFakeClock(), time.Minute, 0)
	tk, _ := m.Issue(ctx, "r", "u")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Redeem(ctx, tk.Value); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d successful redemptions of one ticket, want 1", wins)
	}
}

func TestBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBucket(2, 3) // 2 per second, burst 3
	var got []bool
	for range 4 {
		got = append(got, b.allow(t0))
	}
	got = append(got, b.allow(t0.Add(400*time.Millisecond))) // 0.8 token
	got = append(got, b.allow(t0.Add(500*time.Millisecond))) // 1 token
	got = append(got, b.allow(t0.Add(10*time.Second)))       // refilled to the burst, not beyond
	got = append(got, b.allow(t0.Add(10*time.Second)), b.allow(t0.Add(10*time.Second)), b.allow(t0.Add(10*time.Second)))
	got = append(got, b.allow(t0.Add(5*time.Second))) // a clock reading from the past adds nothing
	want := []bool{true, true, true, false, false, true, true, true, true, false, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allow (-want +got):\n%s", diff)
	}
}

func TestRoomFromPath(t *testing.T) {
	tests := []struct {
		in         string
		room, rest string
		ok, socket bool
	}{
		{"/rooms/a/socket", "a", "socket", true, true},
		{"/rooms/a%2Fb/ws", "a/b", "ws", true, true},
		{"/rooms/%C3%A4", "ä", "", true, false},
		{"/rooms/a/socket-ticket", "a", "socket-ticket", true, false},
		{"/ws", "", "", false, true},
		{"/other", "", "", false, false},
	}
	for _, tt := range tests {
		room, rest, ok := roomFromPath(tt.in)
		if room != tt.room || rest != tt.rest || ok != tt.ok || isSocketPath(tt.in) != tt.socket {
			t.Errorf("roomFromPath(%q) = %q, %q, %v (socket path %v); want %q, %q, %v (%v)",
				tt.in, room, rest, ok, isSocketPath(tt.in), tt.room, tt.rest, tt.ok, tt.socket)
		}
	}
}

// A socket never receives a lobby state older than, or as old as, one it
// already has, whichever path (join result, relay, peer refresh) offers it.
func TestOfferStateKeepsRevisionOrder(t *testing.T) {
	c := &client{send: make(chan []byte, 16), done: make(chan struct{})}
	r := &room{clients: map[*client]struct{}{c: {}}}
	for _, rev := range []uint64{5, 3, 5, 6} {
		c.offerState(rev, []byte{byte(rev)})
	}
	r.broadcastState(4, func() []byte { t.Error("encoded a state nobody wants"); return nil })
	r.broadcastState(6, func() []byte { t.Error("encoded a state nobody wants"); return nil })
	r.broadcastState(7, func() []byte { return []byte{7} })
	close(c.send)
	var got []byte
	for m := range c.send {
		got = append(got, m...)
	}
	if diff := cmp.Diff([]byte{5, 6, 7}, got); diff != "" {
		t.Errorf("states queued (-want +got):\n%s", diff)
	}
}
