package server

import (
	"sort"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// hub holds the rooms that have (or recently had) sockets in this process.
//
// Lock order: hub.mu, then room.mu, then client.mu; room.encMu, then
// client.mu. Nothing holding one of them calls the lobby Service.
type hub struct {
	s     *Server
	mu    sync.Mutex
	rooms map[string]*room
	m     *metrics
	// empty receives the IDs of lobbies whose last member was removed, for
	// Server.Run to reclaim. Sends never block; a full channel drops IDs
	// (an unreclaimed empty lobby costs memory, nothing else).
	empty chan string
}

func newHub(s *Server) *hub {
	return &hub{s: s, rooms: map[string]*room{}, m: s.metrics, empty: make(chan string, 1024)}
}

// room is one lobby's local sockets, chat history, read receipts and typing
// indicators.
type room struct {
	id    string
	clock clockwork.Clock

	mu         sync.Mutex
	clients    map[*client]struct{}
	emptySince time.Time // zero while the room has clients
	historyCap int
	// historyBytes bounds the encoded chat.history (Config.ChatHistoryBytes);
	// chatBytes is the encoded size of the entries in chat, commas between
	// them included.
	historyBytes int
	chatBytes    int
	readersCap   int          // read receipts kept per message
	chat         []*chatEntry // oldest first
	chatByID     map[string]*chatEntry
	// history is the chat.history message every socket gets on attach,
	// encoded once per change of the history and shared by all of them;
	// nil when the history changed since.
	history []byte
	typing  map[string]time.Time // user → until
	// classes is the client class of each user's latest socket here,
	// for the Service's grace advice (lobby.WithClientClass).
	classes map[string]string

	// encMu guards enc, the room's latest lobby.state encodings, shared
	// by its sockets (see encode), and encNext, the slot to fill next.
	encMu   sync.Mutex
	enc     [encodedSlots]encodedState
	encNext int
}

type chatEntry struct {
	msg    chatMsg
	readBy map[string]struct{}
	order  []string // readers in the order they read
	// enc is the entry as chat.history lists it, receipts included.
	enc []byte
}

// encode sets e.enc from the message and its receipts.
func (e *chatEntry) encode() {
	m := e.msg
	m.Type, m.RoomID = "", ""
	m.ReadBy = e.order
	e.enc = mustJSON(m)
}

// historyOverhead bounds what chat.history holds besides its entries: the
// type, the room ID (128 bytes, each escaped to at most six) and the
// brackets.
const historyOverhead = 1024

// maxEntryBytes is the most one chat message can take in chat.history:
// text of maxChat bytes, a sender of 128 and a clientMsgId of 64, readers
// receipts of 128-byte IDs, every byte escaped to six (\u003c), plus the
// field names, the server's message ID and the time.
func maxEntryBytes(maxChat, readers int) int {
	const id, clientID, fixed = 6*128 + 2, 6*64 + 2, 256
	return fixed + id + clientID + 6*maxChat + 2 + readers*(id+1)
}

// attach registers c in its room, creating the room if needed.
func (h *hub) attach(id string, c *client) *room {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rooms[id]
	if r == nil {
		r = &room{
			id:           id,
			clock:        h.s.clock,
			clients:      map[*client]struct{}{},
			historyCap:   h.s.cfg.ChatHistory,
			historyBytes: h.s.cfg.ChatHistoryBytes,
			readersCap:   h.s.cfg.ReadersPerMessage,
			chatByID:     map[string]*chatEntry{},
			typing:       map[string]time.Time{},
			classes:      map[string]string{},
		}
		h.rooms[id] = r
	}
	r.mu.Lock()
	r.clients[c] = struct{}{}
	r.classes[c.user] = c.class
	r.emptySince = time.Time{}
	r.mu.Unlock()
	return r
}

// clientClass names the class of player's client in lobby id, from its
// latest socket on this server: "unknown" if this server has none.
func (h *hub) clientClass(id, player string) string {
	r := h.get(id)
	if r == nil {
		return "unknown"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.classes[player]; ok {
		return c
	}
	return "unknown"
}

func (h *hub) get(id string) *room {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rooms[id]
}

// clients returns every socket of every room.
func (h *hub) allClients() []*client {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*client
	for _, r := range h.rooms {
		r.mu.Lock()
		for c := range r.clients {
			out = append(out, c)
		}
		r.mu.Unlock()
	}
	return out
}

// sweep forgets rooms that have had no socket for linger, and typing
// indicators that ran out.
func (h *hub) sweep(now time.Time, linger time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, r := range h.rooms {
		r.mu.Lock()
		if len(r.clients) == 0 && !r.emptySince.IsZero() && now.Sub(r.emptySince) >= linger {
			delete(h.rooms, id)
		}
		for u, until := range r.typing {
			if !now.Before(until) {
				delete(r.typing, u)
			}
		}
		r.mu.Unlock()
	}
}

// detach removes c. If c was its user's last socket here and the user was
// typing, the others learn that the user stopped.
func (r *room) detach(c *client, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.clients, c)
	if len(r.clients) == 0 {
		r.emptySince = now
	}
	if _, typing := r.typing[c.user]; typing {
		for o := range r.clients {
			if o.user == c.user {
				return
			}
		}
		delete(r.typing, c.user)
		r.announceTypingLocked(c.user, false, now)
	}
}

// broadcastLocked sends msg to every ready socket of the room. Lossy
// messages are dropped for sockets whose queue is filling up.
func (r *room) broadcastLocked(msg []byte, lossy bool) {
	for c := range r.clients {
		c.enqueueReady(msg, lossy)
	}
}

// ready sends c the chat history and the typing state and lets it receive
// chat, receipts and typing from now on; done under the room lock, so that
// c sees every chat message exactly once (in the history or after it).
func (r *room) ready(c *client, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := typingStateMsg{Type: TypeTypingState, RoomID: r.id, UserIDs: r.typingNowLocked(now)}
	c.markReady(r.historyLocked(), mustJSON(ts))
}

// historyLocked returns the chat.history message, encoding it if the
// history changed since it was last encoded. Its bytes are what
// encoding/json makes of a chatHistoryMsg.
func (r *room) historyLocked() []byte {
	if r.history != nil {
		return r.history
	}
	b := make([]byte, 0, historyOverhead+r.chatBytes)
	b = append(b, `{"type":`...)
	b = appendJSONString(b, TypeChatHistory)
	b = append(b, `,"roomId":`...)
	b = appendJSONString(b, r.id)
	b = append(b, `,"messages":[`...)
	for i, e := range r.chat {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.enc...)
	}
	r.history = append(b, ']', '}')
	return r.history
}

// resizedLocked records that an entry's encoding changed from old bytes
// to e.enc, and drops the oldest messages while the history holds more
// than ChatHistory of them or its encoding would exceed ChatHistoryBytes.
// The newest always stays: Config checks that one message at its largest
// fits.
func (r *room) resizedLocked(old int, e *chatEntry) {
	r.chatBytes += len(e.enc) - old
	r.history = nil
	for len(r.chat) > 1 && (len(r.chat) > r.historyCap || historyOverhead+r.chatBytes > r.historyBytes) {
		drop := r.chat[0]
		r.chat[0] = nil
		r.chat = r.chat[1:]
		delete(r.chatByID, drop.msg.MessageID)
		r.chatBytes -= len(drop.enc) + 1 // and the comma after it
	}
}

// addChat appends a chat message to the history and sends it to the room.
func (r *room) addChat(m chatMsg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := &chatEntry{msg: m, readBy: map[string]struct{}{}}
	e.encode()
	r.chat = append(r.chat, e)
	r.chatByID[m.MessageID] = e
	sep := 0
	if len(r.chat) > 1 {
		sep = 1
	}
	r.chatBytes += sep
	r.resizedLocked(0, e)
	r.broadcastLocked(mustJSON(m), false)
}

// markRead records that user read message id. It reports whether the
// message is known; a repeated receipt (same user, same message), a
// receipt for one's own message and one beyond the readers kept per
// message (Config.ReadersPerMessage) change nothing and send nothing.
func (r *room) markRead(user, id string, at string) (found bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.chatByID[id]
	if e == nil {
		return false
	}
	if _, dup := e.readBy[user]; dup || e.msg.UserID == user || len(e.order) >= r.readersCap {
		return true
	}
	e.readBy[user] = struct{}{}
	e.order = append(e.order, user)
	old := len(e.enc)
	e.encode()
	r.resizedLocked(old, e)
	r.broadcastLocked(mustJSON(readMsg{Type: TypeMessageRead, RoomID: r.id, MessageID: id, UserID: user, Time: at}), false)
	return true
}

// setTyping records and announces a typing indicator: a typing message
// (the change, with everybody typing) and a typing.state (the list alone),
// so that clients of either style follow. It never touches the lobby: it is
// lossy, for display only.
func (r *room) setTyping(user string, typing bool, now time.Time, ttl time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if typing {
		r.typing[user] = now.Add(ttl)
	} else {
		delete(r.typing, user)
	}
	r.announceTypingLocked(user, typing, now)
}

func (r *room) typingNowLocked(now time.Time) []string {
	users := []string{}
	for u, until := range r.typing {
		if now.Before(until) {
			users = append(users, u)
		}
	}
	sort.Strings(users)
	return users
}

func (r *room) announceTypingLocked(user string, typing bool, now time.Time) {
	users := r.typingNowLocked(now)
	r.broadcastLocked(mustJSON(typingMsg{Type: TypeTyping, RoomID: r.id, UserID: user, Typing: typing, UserIDs: users}), true)
	r.broadcastLocked(mustJSON(typingStateMsg{Type: TypeTypingState, RoomID: r.id, UserIDs: users}), true)
}
