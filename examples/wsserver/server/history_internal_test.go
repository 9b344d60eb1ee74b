package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func newTestRoom(historyCap, historyBytes, readers int) *room {
	return &room{
		id:           "r<",
		clients:      map[*client]struct{}{},
		historyCap:   historyCap,
		historyBytes: historyBytes,
		readersCap:   readers,
		chatByID:     map[string]*chatEntry{},
		typing:       map[string]time.Time{},
	}
}

// wantHistory is the chat.history encoding/json makes of the room's
// history.
func wantHistory(r *room) []byte {
	h := chatHistoryMsg{Type: TypeChatHistory, RoomID: r.id, Messages: []chatMsg{}}
	for _, e := range r.chat {
		m := e.msg
		m.Type, m.RoomID = "", ""
		m.ReadBy = append([]string(nil), e.order...)
		h.Messages = append(h.Messages, m)
	}
	return mustJSON(h)
}

// The chat history is encoded once per change and the same bytes go to
// every socket that attaches meanwhile; a message or a receipt makes a new
// encoding, byte for byte what encoding/json makes of it.
func TestHistoryEncodedOncePerChange(t *testing.T) {
	r := newTestRoom(100, DefaultChatHistoryBytes, 64)
	first := r.historyLocked()
	if diff := cmp.Diff(string(wantHistory(r)), string(first)); diff != "" {
		t.Fatalf("empty history (-want +got):\n%s", diff)
	}
	for i := range 3 {
		r.addChat(chatMsg{Type: TypeChatMessage, RoomID: r.id, MessageID: fmt.Sprint("m", i), UserID: "a&b", Text: "<hi>\u2028", Time: "t", ClientMsgID: "c"})
	}
	a, b := r.historyLocked(), r.historyLocked()
	if &a[0] != &b[0] {
		t.Errorf("two joiners with no change between them got two encodings")
	}
	if diff := cmp.Diff(string(wantHistory(r)), string(a)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if !r.markRead("bob", "m1", "t2") {
		t.Fatal("markRead of a message in the history: not found")
	}
	c := r.historyLocked()
	if &c[0] == &a[0] {
		t.Errorf("a receipt did not make a new encoding")
	}
	if diff := cmp.Diff(string(wantHistory(r)), string(c)); diff != "" {
		t.Errorf("history after a receipt (-want +got):\n%s", diff)
	}
}

// The history is bounded by its encoded size: JSON escaping (every '<' is
// six bytes) and receipts count, the oldest messages go first, and the
// newest always stays.
func TestHistoryBoundedByEncodedSize(t *testing.T) {
	const limit = 16 << 10
	r := newTestRoom(100, limit, 8)
	text := strings.Repeat("<", 500) // 3000 bytes encoded
	user := strings.Repeat("<", 128)
	for i := range 20 {
		r.addChat(chatMsg{MessageID: fmt.Sprint("m", i), UserID: user, Text: text, Time: "t"})
		if got := len(r.historyLocked()); got > limit {
			t.Fatalf("after %d messages the history is %d bytes encoded, over the %d allowed", i+1, got, limit)
		}
	}
	if n := len(r.chat); n == 0 || n >= 20 || r.chat[n-1].msg.MessageID != "m19" {
		t.Fatalf("history holds %d messages, the newest %q; want fewer than 20 ending with m19", n, r.chat[n-1].msg.MessageID)
	}
	if diff := cmp.Diff(string(wantHistory(r)), string(r.historyLocked())); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	// Receipts with long IDs grow the entries: older messages make room.
	before := len(r.chat)
	newest := r.chat[len(r.chat)-1].msg.MessageID
	for i := range 8 {
		r.markRead(strings.Repeat(">", 120)+fmt.Sprint(i), newest, "t")
	}
	if got := len(r.historyLocked()); got > limit {
		t.Errorf("after receipts the history is %d bytes encoded, over the %d allowed", got, limit)
	}
	if len(r.chat) >= before {
		t.Errorf("receipts added %d bytes and no older message was dropped (%d messages)", 8*120*6, len(r.chat))
	}
	if _, ok := r.chatByID["m0"]; ok {
		t.Errorf("a dropped message can still be read")
	}
	var h chatHistoryMsg
	if err := json.Unmarshal(r.historyLocked(), &h); err != nil || h.Messages[len(h.Messages)-1].MessageID != newest {
		t.Errorf("history does not decode to one ending with %s: %v", newest, err)
	}
}

// A history of one message at its largest fits the smallest history
// bound Config accepts.
func TestLargestMessageFitsTheSmallestBound(t *testing.T) {
	cfg := Config{Authenticator: HeaderAuthenticator{}, MaxChatBytes: 1000, ReadersPerMessage: 4}
	cfg.ChatHistoryBytes = 1 // refused, with the smallest bound in the error
	if err := cfg.fill(); err == nil {
		t.Fatal("a one-byte history bound was accepted")
	}
	limit := maxEntryBytes(1000, 4) + historyOverhead
	cfg = Config{Authenticator: HeaderAuthenticator{}, MaxChatBytes: 1000, ReadersPerMessage: 4, ChatHistoryBytes: limit}
	if err := cfg.fill(); err != nil {
		t.Fatalf("the smallest history bound: %v", err)
	}
	r := newTestRoom(100, limit, 4)
	r.id = strings.Repeat("<", 128)
	worst := func(i int) chatMsg {
		return chatMsg{MessageID: fmt.Sprintf("abcdefgh-%020d", i), UserID: strings.Repeat("<", 128),
			Text: strings.Repeat("<", 1000), Time: "2030-01-02T03:04:05.123456789Z", ClientMsgID: strings.Repeat("<", 64)}
	}
	for i := range 3 {
		r.addChat(worst(i))
		for j := range 4 {
			r.markRead(strings.Repeat(">", 127)+fmt.Sprint(j), worst(i).MessageID, "t")
		}
		if got := len(r.historyLocked()); got > limit || len(r.chat) != 1 {
			t.Fatalf("history of %d messages, %d bytes encoded; want the newest alone, within %d", len(r.chat), got, limit)
		}
	}
}

// A corked write of the tail of the shared payload is kept by reference
// and written from the payload itself; other writes are copied.
func TestSockWriterSharesPayloads(t *testing.T) {
	conn := &recordingSlices{}
	w := newSockWriter(conn, 0)
	payload := []byte(strings.Repeat("x", 1000))
	w.cork()
	w.share(payload)
	head := append([]byte("hdr"), payload[:100]...)
	_, _ = w.Write(head)
	_, _ = w.Write(payload[100:])
	w.share(nil)
	_, _ = w.Write([]byte("small"))
	head[0] = 'H' // the library reuses its buffer: the copy must not change
	if err := w.uncork(); err != nil {
		t.Fatal(err)
	}
	if len(conn.writes) != 3 {
		t.Fatalf("%d writes, want the copied head, the shared tail and the copied rest", len(conn.writes))
	}
	if string(conn.writes[0]) != "hdr"+string(payload[:100]) || string(conn.writes[2]) != "small" {
		t.Errorf("copied writes %q and %q", conn.writes[0][:8], conn.writes[2])
	}
	if tail := conn.writes[1]; len(tail) != 900 || &tail[0] != &payload[100] {
		t.Errorf("the payload's tail was copied (or cut): %d bytes", len(tail))
	}
}
