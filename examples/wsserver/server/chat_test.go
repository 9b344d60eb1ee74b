package server_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Typing indicators reach the room and never touch the lobby; chat gets a
// server-assigned ID and the sender from the ticket; read receipts are
// idempotent per (user, message); a socket that attaches gets the history
// with its receipts.
func TestTypingChatAndReceipts(t *testing.T) {
	e := newEnv(t, nil)
	const room = "chatty"
	alice := e.join(room, "alice")
	bob := e.join(room, "bob")
	alice.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })
	bob.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })
	rev := e.snapshot(room).Revision

	bob.send(map[string]any{"type": "typing.set", "typing": true})
	if m := alice.waitType("typing"); m.UserID != "bob" || !m.Typing {
		t.Fatalf("typing: alice got %s, want bob typing", m.raw)
	}
	if got := e.snapshot(room).Revision; got != rev {
		t.Errorf("revision after typing = %d, want %d (typing never touches the lobby)", got, rev)
	}

	alice.send(map[string]string{"type": "chat.send", "text": "hello <b>bob</b>", "clientMsgId": "c1"})
	got := bob.waitType("chat.message")
	if got.UserID != "alice" || got.Text != "hello <b>bob</b>" || got.MessageID == "" {
		t.Fatalf("chat: bob got %s, want alice's text with a message ID", got.raw)
	}
	echo := alice.waitType("chat.message")
	if echo.MessageID != got.MessageID {
		t.Errorf("the sender's echo has ID %q, bob's copy %q", echo.MessageID, got.MessageID)
	}

	// bob reads twice (two tabs would do the same); alice hears of it once.
	bob.send(map[string]string{"type": "message.read", "messageId": got.MessageID})
	bob.send(map[string]string{"type": "message.read", "messageId": got.MessageID})
	bob.roundTrip() // both reads are handled
	var receipts []string
	for _, m := range alice.roundTrip() {
		if m.Type == "message.read" {
			receipts = append(receipts, m.UserID+" read "+m.MessageID)
		}
	}
	if diff := cmp.Diff([]string{"bob read " + got.MessageID}, receipts); diff != "" {
		t.Errorf("receipts alice got (-want +got):\n%s", diff)
	}
	// Reading one's own message is a no-op.
	alice.send(map[string]string{"type": "message.read", "messageId": got.MessageID})
	for _, m := range alice.roundTrip() {
		if m.Type == "message.read" {
			t.Errorf("own-message receipt was broadcast: %s", m.raw)
		}
	}

	carol := e.join(room, "carol")
	hist := carol.waitType("chat.history")
	if len(hist.Messages) != 1 || hist.Messages[0].MessageID != got.MessageID ||
		!cmp.Equal(hist.Messages[0].ReadBy, []string{"bob"}) {
		t.Errorf("carol's history: %s, want alice's message read by bob", hist.raw)
	}
	ts := carol.waitType("typing.state")
	if !cmp.Equal(ts.UserIDs, []string{"bob"}) {
		t.Errorf("carol's typing state: %s, want bob typing", ts.raw)
	}

	// When bob's last socket goes, the others learn he stopped typing.
	bob.conn.CloseNow()
	if m := alice.waitType("typing"); m.UserID != "bob" || m.Typing {
		t.Errorf("after bob left: %s, want bob not typing", m.raw)
	}
}

// The history keeps only the newest ChatHistory messages.
func TestChatHistoryBounded(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) { c.ChatHistory = 3 })
	alice := e.join("r", "alice")
	for _, s := range []string{"one", "two", "three", "four", "five"} {
		alice.send(map[string]string{"type": "chat.send", "text": s})
	}
	var ids []string
	for _, m := range alice.roundTrip() {
		if m.Type == "chat.message" {
			ids = append(ids, m.MessageID)
		}
	}
	if len(ids) != 5 {
		t.Fatalf("alice got %d echoes of her 5 messages", len(ids))
	}
	bob := e.join("r", "bob")
	hist := bob.waitType("chat.history")
	var texts []string
	for _, m := range hist.Messages {
		texts = append(texts, m.Text)
	}
	if diff := cmp.Diff([]string{"three", "four", "five"}, texts); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	// A receipt for a message that fell out of the history is refused.
	bob.send(map[string]string{"type": "message.read", "messageId": ids[0]})
	if m := bob.waitType("error"); m.Code != "unknown_message" {
		t.Errorf("receipt for an evicted message: %s, want unknown_message", m.raw)
	}
}

// Clients of other styles are understood: alternative field names for the
// typing flag, chat text, client message ID and transfer target, and the
// typing list both as a change and as a full state.
func TestClientFieldAliases(t *testing.T) {
	e := newEnv(t, nil)
	alice := e.join("r", "alice")
	bob := e.join("r", "bob")
	bob.waitState("both", func(m msg) bool { return players(m) == "alice,bob" })

	bob.send(map[string]any{"type": "typing.set", "isTyping": true})
	if m := alice.waitType("typing"); m.UserID != "bob" || !m.Typing || !cmp.Equal(m.UserIDs, []string{"bob"}) {
		t.Errorf("typing via isTyping: %s, want bob typing", m.raw)
	}
	if m := alice.waitType("typing.state"); !cmp.Equal(m.UserIDs, []string{"bob"}) {
		t.Errorf("typing.state after the change: %s, want [bob]", m.raw)
	}

	bob.send(map[string]any{"type": "chat.send", "body": "via body", "clientMessageId": "b-1"})
	m := alice.waitType("chat.message")
	var echo struct{ ClientMsgID string }
	_ = json.Unmarshal([]byte(m.raw), &echo)
	if m.Text != "via body" || echo.ClientMsgID != "b-1" {
		t.Errorf("chat via body: %s, want the text and clientMsgId b-1", m.raw)
	}

	alice.send(map[string]any{"type": "host.transfer", "targetId": "bob"})
	if m := bob.waitState("bob hosting", func(m msg) bool { return m.host() == "bob" }); m.Reason != "host_transferred" {
		t.Errorf("transfer via targetId: %s", m.raw)
	}
}
