package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// A member sends every kind of bad message. Each is refused with an error
// to that socket alone; the socket stays open, the lobby does not move,
// and the other member receives nothing at all.
func TestMaliciousPayloads(t *testing.T) {
	e := newEnv(t, nil)
	const room = "hostile"
	alice := e.join(room, "alice") // host
	mallory := e.join(room, "mallory")
	alice.waitState("both", func(m msg) bool { return players(m) == "alice,mallory" })
	mallory.waitState("both", func(m msg) bool { return players(m) == "alice,mallory" })
	alice.roundTrip()
	mallory.roundTrip()
	before := e.snapshot(room)

	text := func(s string) []byte { return []byte(s) }
	tests := []struct {
		name     string
		typ      websocket.MessageType
		frame    []byte
		wantCode string
	}{
		{"not JSON", websocket.MessageText, text(`hello`), "bad_json"},
		{"JSON array", websocket.MessageText, text(`[{"type":"ping"}]`), "bad_json"},
		{"JSON number", websocket.MessageText, text(`42`), "bad_json"},
		{"JSON null", websocket.MessageText, text(`null`), "bad_json"},
		{"JSON string", websocket.MessageText, text(`"chat.send"`), "bad_json"},
		{"empty frame", websocket.MessageText, text(``), "bad_json"},
		{"truncated object", websocket.MessageText, text(`{"type":"chat.send","text":"hi"`), "bad_json"},
		{"two objects", websocket.MessageText, text(`{"type":"ping"}{"type":"leave"}`), "bad_json"},
		{"type not a string", websocket.MessageText, text(`{"type":5}`), "bad_json"},
		{"missing type", websocket.MessageText, text(`{"text":"hi"}`), "missing_type"},
		{"unknown type", websocket.MessageText, text(`{"type":"admin.kick","to":"alice"}`), "unknown_type"},
		{"server message type", websocket.MessageText, text(`{"type":"lobby.state","version":99,"playerIds":["mallory"]}`), "unknown_type"},
		{"names a host", websocket.MessageText, text(`{"type":"chat.send","text":"hi","hostId":"mallory"}`), "forbidden_field"},
		{"names a host on a state", websocket.MessageText, text(`{"type":"lobby.state","hostId":"mallory"}`), "forbidden_field"},
		{"claims another user", websocket.MessageText, text(`{"type":"chat.send","text":"hi","userId":"alice"}`), "impersonation"},
		{"claims another sender", websocket.MessageText, text(`{"type":"message.read","messageId":"x","from":"alice"}`), "impersonation"},
		{"claims another player", websocket.MessageText, text(`{"type":"leave","playerId":"alice"}`), "impersonation"},
		{"another room", websocket.MessageText, text(`{"type":"chat.send","text":"hi","roomId":"elsewhere"}`), "wrong_room"},
		{"transfer by a non-host", websocket.MessageText, text(`{"type":"host.transfer","to":"mallory"}`), "not_host"},
		{"transfer without target", websocket.MessageText, text(`{"type":"host.transfer"}`), "bad_field"},
		{"transfer to conflicting targets", websocket.MessageText, text(`{"type":"host.transfer","to":"a","newHostId":"b"}`), "bad_field"},
		{"transfer to an invalid ID", websocket.MessageText, text(`{"type":"host.transfer","to":"` + strings.Repeat("x", 200) + `"}`), "bad_field"},
		{"typing without flag", websocket.MessageText, text(`{"type":"typing.set"}`), "bad_field"},
		{"typing flag not a bool", websocket.MessageText, text(`{"type":"typing.set","typing":"yes"}`), "bad_json"},
		{"empty chat", websocket.MessageText, text(`{"type":"chat.send","text":"  \n "}`), "text_empty"},
		{"chat without text", websocket.MessageText, text(`{"type":"chat.send"}`), "text_empty"},
		{"chat too long", websocket.MessageText, text(`{"type":"chat.send","text":"` + strings.Repeat("a", 2001) + `"}`), "text_too_long"},
		{"read of an unknown message", websocket.MessageText, text(`{"type":"message.read","messageId":"nope"}`), "unknown_message"},
		{"read without message", websocket.MessageText, text(`{"type":"message.read"}`), "bad_field"},
		{"invalid UTF-8", websocket.MessageText, []byte("{\"type\":\"chat.send\",\"text\":\"\xff\xfe\"}"), "bad_utf8"},
		{"binary frame", websocket.MessageBinary, text(`{"type":"ping"}`), "unsupported"},
		{"oversized frame", websocket.MessageText, text(`{"type":"chat.send","text":"` + strings.Repeat("a", 20<<10) + `"}`), "too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mallory.sendRaw(tt.typ, tt.frame)
			m := mallory.next()
			if m.Type != "error" || m.Code != tt.wantCode {
				t.Fatalf("reply %s, want an error with code %q", m.raw, tt.wantCode)
			}
		})
	}

	// mallory's socket still works,
	if got := mallory.roundTrip(); len(got) != 0 {
		t.Errorf("mallory received more than the errors: %v", got)
	}
	// alice heard nothing of it,
	if got := alice.roundTrip(); len(got) != 0 {
		t.Errorf("alice received messages during the attack: %v", got)
	}
	// and the lobby did not move.
	after := e.snapshot(room)
	if after.Revision != before.Revision || after.Host != "alice" {
		t.Errorf("lobby after the attack: revision %d host %q, want revision %d host alice", after.Revision, after.Host, before.Revision)
	}

	// Fields naming the socket's own user and room are fine.
	mallory.send(map[string]string{"type": "chat.send", "text": "hi", "userId": "mallory", "roomId": room})
	if m := alice.waitType("chat.message"); m.UserID != "mallory" || m.Text != "hi" {
		t.Errorf("chat naming the sender itself: alice got %s", m.raw)
	}
}

// A frame beyond the hard limit closes that socket (1009); nobody else is
// disturbed and the host does not change.
func TestHugeFrameClosesOnlyThatSocket(t *testing.T) {
	e := newEnv(t, nil)
	alice := e.join("r", "alice")
	mallory := e.join("r", "mallory")
	alice.waitState("both", func(m msg) bool { return players(m) == "alice,mallory" })
	mallory.sendRaw(websocket.MessageText, []byte(`{"type":"chat.send","text":"`+strings.Repeat("a", 100<<10)+`"}`))
	if code := mallory.waitClosed(); code != websocket.StatusMessageTooBig {
		t.Fatalf("huge frame: socket closed with %d, want 1009", code)
	}
	m := alice.waitState("mallory reconnecting", func(m msg) bool { return hasMember(m, "mallory", "reconnecting") })
	if m.host() != "alice" {
		t.Errorf("host after mallory's huge frame: %q, want alice", m.host())
	}
	if got := alice.roundTrip(); len(got) != 0 {
		t.Errorf("alice got unexpected messages: %v", got)
	}
}

// Each socket may send a limited number of messages; the excess is refused,
// and the rest of the room does not notice.
func TestRateLimit(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) { c.MessageBurst = 3; c.TypingBurst = 1 })
	alice := e.join("r", "alice")
	alice.waitType("typing.state") // the last attach message
	for range 5 {
		alice.send(map[string]string{"type": "ping"})
	}
	// Three pongs and one notice for the two dropped pings: refusals cost
	// no more than what was accepted.
	expectReplies(t, alice, 3, 1)
	e.waitMetric(`wsserver_client_messages_refused_total{code="rate_limited"}`, 2) // all read
	e.clock.Advance(time.Minute)                                                   // refills the bucket
	for _, m := range alice.drain() {
		t.Errorf("after the burst's replies: %s", m.raw)
	}
	alice.send(map[string]any{"type": "typing.set", "typing": true})
	alice.send(map[string]any{"type": "typing.set", "typing": false})
	m := alice.waitType("error")
	if m.Code != "rate_limited" || m.RequestType != "typing.set" {
		t.Fatalf("second typing update with a typing burst of 1: %s, want rate_limited", m.raw)
	}
}

// expectReplies reads the replies to a burst of app pings: it wants pongs
// pongs and limited rate_limited errors, in any order, and nothing else.
func expectReplies(t *testing.T, c *wsClient, pongs, limited int) {
	t.Helper()
	var gotPongs, gotLimited int
	for gotPongs < pongs || gotLimited < limited {
		switch m := c.next(); {
		case m.Type == "pong":
			gotPongs++
		case m.Type == "error" && m.Code == "rate_limited":
			gotLimited++
		default:
			t.Fatalf("after %d pongs and %d rate_limited: unexpected %s", gotPongs, gotLimited, m.raw)
		}
		if gotPongs > pongs || gotLimited > limited {
			t.Fatalf("%d pongs and %d rate_limited, want %d and %d", gotPongs, gotLimited, pongs, limited)
		}
	}
}
