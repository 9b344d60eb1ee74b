package server

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
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
		Lobby: "r", Revision: 7, Term: 3, Host: "bob", PrevHost: "alice", Reason: lobby.ReasonLeaseExpired, Subject: "alice",
		Members: []lobby.MemberView{{Player: "bob", JoinSeq: 2, Status: lobby.StatusOnline}, {Player: "carol", JoinSeq: 3, Status: lobby.StatusReconnecting,
			ReconnectDeadline: time.Date(2030, 1, 1, 0, 0, 12, 0, time.UTC), Attrs: map[string]string{"team": "red"}}},
		At: time.Date(2030, 1, 1, 0, 0, 8, 0, time.UTC),
	}
	var got map[string]any
	now := time.Date(2030, 1, 1, 0, 0, 9, 0, time.UTC)
	if err := json.Unmarshal(encodeEvent(&e, now), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": "lobby.state", "version": 7.0, "term": 3.0, "hostId": "bob", "playerIds": []any{"bob", "carol"}, "roomId": "r",
		"members": []any{
			map[string]any{"userId": "bob", "joinSeq": 2.0, "status": "online", "host": true},
			map[string]any{"userId": "carol", "joinSeq": 3.0, "status": "reconnecting", "host": false, "reconnectBy": "2030-01-01T00:00:12Z",
				"reconnect_deadline": "2030-01-01T00:00:12Z", "attrs": map[string]any{"team": "red"}},
		},
		"locked": false, "overrides": map[string]any{},
		"reason": "lease_expired", "subjectId": "alice", "previousHostId": "alice", "at": "2030-01-01T00:00:08Z",
		"serverTime": "2030-01-01T00:00:09Z",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("encodeEvent (-want +got):\n%s", diff)
	}

	snap := lobby.Snapshot{Lobby: "r", Revision: 0}
	got = nil
	if err := json.Unmarshal(encodeSnapshot(&snap, now), &got); err != nil {
		t.Fatal(err)
	}
	want = map[string]any{"type": "lobby.state", "version": 0.0, "term": 0.0, "hostId": nil, "playerIds": []any{}, "roomId": "r", "members": []any{}, "reason": "snapshot",
		"locked": false, "overrides": map[string]any{},
		"serverTime": "2030-01-01T00:00:09Z"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("encodeSnapshot of an empty lobby (-want +got):\n%s", diff)
	}
}

func TestMemoryTickets(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	m, err := NewMemoryTickets(clock, time.Minute, 3, 0)
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
	// The table is full (a, b, c): a fourth ticket is issued all the same,
	// and the oldest is forgotten.
	d, err := m.Issue(ctx, "room", "dave")
	if err != nil {
		t.Fatalf("a ticket with the table full: %v, want the oldest shed instead", err)
	}
	if _, err := m.Redeem(ctx, a.Value); !errors.Is(err, ErrTicketUnknown) {
		t.Errorf("Redeem of the shed ticket: %v, want ErrTicketUnknown", err)
	}
	if n := m.Len(); n != 3 {
		t.Errorf("remembered tickets with the table full = %d, want 3", n)
	}
	clock.Advance(time.Nanosecond) // b's lifetime is over
	if _, err := m.Redeem(ctx, b.Value); !errors.Is(err, ErrTicketExpired) {
		t.Errorf("Redeem at the expiry: %v, want ErrTicketExpired", err)
	}
	if _, err := m.Issue(ctx, "room", "erin"); err != nil { // prunes b
		t.Errorf("Issue after expiries: %v", err)
	}
	if n := m.Len(); n != 3 {
		t.Errorf("remembered tickets after pruning = %d, want 3 (carol, dave, erin)", n)
	}
	for _, tk := range []Ticket{c, d} {
		if _, err := m.Redeem(ctx, tk.Value); err != nil {
			t.Errorf("%s's ticket inside its lifetime: %v", tk.User, err)
		}
	}
	if _, err := NewMemoryTickets(clock, 0, 0, 0); err == nil {
		t.Error("NewMemoryTickets with a zero TTL succeeded")
	}
}

// Of many concurrent redemptions of one ticket exactly one succeeds.
// One user holds at most its share of unused tickets; redeeming or
// expiry gives places back, and Collect forgets expired tickets without an
// Issue.
func TestMemoryTicketsPerUser(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	m, err := NewMemoryTickets(clock, time.Minute, 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	a1, _ := m.Issue(ctx, "room", "alice")
	if _, err := m.Issue(ctx, "room", "alice"); err != nil {
		t.Fatalf("alice's second ticket: %v", err)
	}
	if _, err := m.Issue(ctx, "other-room", "alice"); !errors.Is(err, ErrUserTickets) {
		t.Fatalf("alice's third unused ticket: %v, want ErrUserTickets", err)
	}
	if _, err := m.Issue(ctx, "room", "bob"); err != nil {
		t.Fatalf("bob's ticket while alice is at her cap: %v", err)
	}
	if _, err := m.Redeem(ctx, a1.Value); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Issue(ctx, "room", "alice"); err != nil {
		t.Fatalf("alice's ticket after redeeming one: %v", err)
	}
	clock.Advance(time.Minute)
	m.Collect(clock.Now())
	if n := m.Len(); n != 0 {
		t.Errorf("tickets remembered after Collect past every expiry: %d, want 0", n)
	}
	for range 2 {
		if _, err := m.Issue(ctx, "room", "alice"); err != nil {
			t.Fatalf("alice's tickets after hers expired: %v", err)
		}
	}
	if _, err := NewMemoryTickets(clock, time.Minute, 0, -1); err == nil {
		t.Error("NewMemoryTickets with a negative per-user limit succeeded")
	}
}

func TestMemoryTicketsRedeemOnce(t *testing.T) {
	ctx := context.Background()
	m, _ := NewMemoryTickets(clockwork.NewFakeClock(), time.Minute, 0, 0)
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

// The limiter reads the server's clock: time that does not pass refills
// nothing, and a wait ends when the clock reaches the token.
func TestLimiterOnClock(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Unix(1000, 0))
	l := newLimiter(clock, 2, 3) // 2 per second, burst 3
	var got []bool
	for range 4 {
		got = append(got, l.allow())
	}
	clock.Advance(400 * time.Millisecond) // 0.8 token
	got = append(got, l.allow())
	clock.Advance(100 * time.Millisecond) // 1 token
	got = append(got, l.allow())
	clock.Advance(10 * time.Second) // refilled to the burst, not beyond
	got = append(got, l.allow(), l.allow(), l.allow(), l.allow())
	want := []bool{true, true, true, false, false, true, true, true, true, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allow (-want +got):\n%s", diff)
	}

	waited := make(chan error, 1)
	go func() { waited <- l.wait(nil) }()
	if err := clock.BlockUntilContext(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		t.Fatalf("wait returned %v with an empty bucket and no time passing", err)
	default:
	}
	clock.Advance(500 * time.Millisecond)
	if err := <-waited; err != nil {
		t.Fatalf("wait: %v", err)
	}
	stop := make(chan struct{})
	go func() { waited <- l.wait(stop) }()
	if err := clock.BlockUntilContext(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	close(stop)
	if err := <-waited; err == nil {
		t.Fatal("wait after stop: nil error, want net.ErrClosed")
	}
}

// frameHeader reads the header lengths of RFC 6455 frames, and says when
// it has not seen the whole header yet.
func TestFrameHeader(t *testing.T) {
	tests := []struct {
		in       []byte
		hlen     int
		payload  int64
		complete bool
	}{
		{[]byte{0x89}, 0, 0, false},
		{[]byte{0x89, 0x80, 1, 2, 3}, 0, 0, false},
		{[]byte{0x89, 0x80, 1, 2, 3, 4}, 6, 0, true},
		{[]byte{0x81, 0x85, 1, 2, 3, 4, 'h'}, 6, 5, true},
		{[]byte{0x82, 0x80 | 126, 0x01, 0x00, 1, 2, 3, 4}, 8, 256, true},
		{[]byte{0x82, 0x80 | 127, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3, 4}, 14, 65536, true},
		{[]byte{0x82, 0x80 | 127, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4}, 14, math.MaxInt64, true},
		{[]byte{0x81, 0x05, 'h'}, 2, 5, true}, // unmasked: the library refuses it, the meter just counts
	}
	for _, tt := range tests {
		hlen, payload, complete := frameHeader(tt.in)
		if hlen != tt.hlen || payload != tt.payload || complete != tt.complete {
			t.Errorf("frameHeader(% x) = %d, %d, %v; want %d, %d, %v", tt.in, hlen, payload, complete, tt.hlen, tt.payload, tt.complete)
		}
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

// A room encodes each delivery once for all its sockets: the same change
// (and the same whole-lobby state) gives the same bytes, shared; an event
// and a state of one revision are told apart.
func TestRoomEncodesOncePerChange(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	r := &room{id: "r", clock: clock}
	ev := func(rev uint64) lobby.Delivery {
		return lobby.Delivery{Lobby: "r", Revision: rev, Event: &lobby.Event{Lobby: "r", Revision: rev, Reason: lobby.ReasonJoined, Members: []lobby.MemberView{}}}
	}
	st := func(rev uint64) lobby.Delivery {
		return lobby.Delivery{Lobby: "r", Revision: rev, State: &lobby.Snapshot{Lobby: "r", Revision: rev, Members: []lobby.MemberView{}}}
	}
	a := r.encode(ev(3))
	clock.Advance(time.Second) // a later encoding would show a later serverTime
	if b := r.encode(ev(3)); &a[0] != &b[0] {
		t.Errorf("revision 3 encoded twice: %s, %s", a, b)
	}
	s := r.encode(st(3))
	if !strings.Contains(string(s), `"reason":"snapshot"`) || !strings.Contains(string(a), `"reason":"joined"`) {
		t.Errorf("event %s and state %s of revision 3 not told apart", a, s)
	}
	for rev := uint64(4); rev < 4+encodedSlots; rev++ {
		r.encode(ev(rev))
	}
	if b := r.encode(ev(3)); &a[0] == &b[0] {
		t.Errorf("revision 3 still shared after %d newer encodings: the room keeps more than it says", encodedSlots)
	}
	if diff := cmp.Diff(string(encodeEvent(ev(9).Event, clock.Now())), string(r.encode(ev(9)))); diff != "" {
		t.Errorf("shared encoding differs from encodeEvent (-want +got):\n%s", diff)
	}
}
