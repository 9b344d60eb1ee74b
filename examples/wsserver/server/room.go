package server

import (
	"sort"
	"sync"
	"time"
)

// hub holds the rooms that have (or recently had) sockets in this process.
//
// Lock order: room.watchMu, then hub.mu, then room.mu, then client.mu.
// Nothing holding hub.mu, room.mu or client.mu calls the lobby Service.
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
	id string

	mu         sync.Mutex
	clients    map[*client]struct{}
	byGen      map[uint64]*client
	emptySince time.Time // zero while the room has clients
	historyCap int
	readersCap int          // read receipts kept per message
	chat       []*chatEntry // oldest first
	chatByID   map[string]*chatEntry
	typing     map[string]time.Time // user → until
	// classes is the client class of each user's latest socket here,
	// for the Service's grace advice (lobby.WithClientClass).
	classes map[string]string

	// lastRev and lastState are the latest lobby.state the room's watcher
	// encoded, for a joining socket that needs the same revision.
	lastRev   uint64
	lastState []byte

	// watchMu serialises opening and closing the room's watcher; watch
	// is set while the room has local sockets (see watch.go).
	watchMu sync.Mutex
	watch   *roomWatch
}

type chatEntry struct {
	msg    chatMsg
	readBy map[string]struct{}
	order  []string // readers in the order they read
}

// attach registers c in its room, creating the room if needed.
func (h *hub) attach(id string, c *client) *room {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rooms[id]
	if r == nil {
		r = &room{
			id:         id,
			clients:    map[*client]struct{}{},
			byGen:      map[uint64]*client{},
			historyCap: h.s.cfg.ChatHistory,
			readersCap: h.s.cfg.ReadersPerMessage,
			chatByID:   map[string]*chatEntry{},
			typing:     map[string]time.Time{},
			classes:    map[string]string{},
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
// typing, the others learn that the user stopped. The room's watcher is
// closed with its last socket.
func (r *room) detach(c *client, now time.Time) {
	r.remove(c, now)
	r.closeWatch()
}

func (r *room) remove(c *client, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.clients, c)
	if gen := c.generation(); gen != 0 && r.byGen[gen] == c {
		delete(r.byGen, gen)
	}
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

func (r *room) setGen(c *client, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.clients[c]; ok {
		r.byGen[gen] = c
	}
}

// wantsState reports whether some socket of the room would take a state
// at rev, so that nobody encodes one for nobody.
func (r *room) wantsState(rev uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.clients {
		if c.wantsState(rev) {
			return true
		}
	}
	return false
}

// broadcastState offers a lobby state to every socket of the room; each
// socket takes it only if it is newer than what it has. All of them share
// the one encoding.
func (r *room) broadcastState(rev uint64, payload []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastRev, r.lastState = rev, payload
	for c := range r.clients {
		c.offerState(rev, payload)
	}
}

// encoded returns the room's latest encoded lobby.state if it is of
// revision rev, else nil.
func (r *room) encoded(rev uint64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastState != nil && r.lastRev == rev {
		return r.lastState
	}
	return nil
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
	hist := chatHistoryMsg{Type: TypeChatHistory, RoomID: r.id, Messages: make([]chatMsg, 0, len(r.chat))}
	for _, e := range r.chat {
		m := e.msg
		m.Type, m.RoomID = "", ""
		m.ReadBy = append([]string(nil), e.order...)
		hist.Messages = append(hist.Messages, m)
	}
	ts := typingStateMsg{Type: TypeTypingState, RoomID: r.id, UserIDs: r.typingNowLocked(now)}
	c.markReady(mustJSON(hist), mustJSON(ts))
}

// addChat appends a chat message to the history and sends it to the room.
func (r *room) addChat(m chatMsg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := &chatEntry{msg: m, readBy: map[string]struct{}{}}
	r.chat = append(r.chat, e)
	r.chatByID[m.MessageID] = e
	if len(r.chat) > r.historyCap {
		old := r.chat[0]
		r.chat[0] = nil
		r.chat = r.chat[1:]
		delete(r.chatByID, old.msg.MessageID)
	}
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
