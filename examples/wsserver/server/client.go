package server

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// client is one attached socket.
//
// A goroutine of its own (Server.serve) runs readLoop. Broadcasters (the
// lobby's deliveries through lobby.Rooms, other sockets' handlers) append
// messages to its queue; nothing that
// enqueues ever blocks: a full queue closes the socket. A writer goroutine
// runs only while there is something to write (queued messages, a ping, a
// close): it is started by whoever gives it work and ends when the queue is
// empty, so an idle socket costs no goroutine, no channel and no stack for
// writing. A ping waits for its pong on a goroutine of its own, for the
// round trip, while the writer goes on writing.
type client struct {
	s      *Server
	room   *room
	roomID string
	user   string
	// class is the client class the grace advice counts it in, from its
	// User-Agent: mobile, desktop or unknown.
	class string
	// conn, raw (the connection under it, read side) and out (its write
	// side) are set once the upgrade is complete, before serving starts.
	conn *websocket.Conn
	raw  *frameMeter
	out  *sockWriter

	// ping fires every PingInterval on Clock and asks the writer for a
	// ping. It is armed with the client, before the join, so that a fake
	// clock advanced after the join always finds it.
	ping clockwork.Timer
	// ctx is cancelled to abort a read or write in progress: at once when
	// the socket is torn down, CloseTimeout after a kick for a failure.
	ctx    context.Context
	cancel context.CancelFunc
	// pingCtx ends when the read loop ends: a ping in progress then stops
	// waiting for a pong that cannot come.
	pingCtx    context.Context
	pingCancel context.CancelFunc
	// writerDone is closed when the writer has closed the socket after a
	// kick.
	writerDone chan struct{}

	mu sync.Mutex
	// att is the socket's place in the lobby (its connection generation
	// and its deliveries), set once its join succeeded.
	att   *lobby.Attachment
	ready bool // receives chat, receipts and typing
	// queue holds the messages waiting for the writer, oldest first;
	// inflight counts those the writer took and is writing. Together they
	// are bounded by Config.SendQueue; queued is their size in bytes,
	// bounded by Config.SendQueueBytes. spare is the writer's last batch,
	// kept for reuse.
	queue    [][]byte
	spare    [][]byte
	inflight int
	queued   int
	pingDue  bool
	// pinging is set while a ping waits for its pong (see pingOnce).
	pinging bool
	// serving is set once the socket is upgraded: a writer may run.
	// writing is set while one runs (at most one does).
	serving bool
	writing bool
	kicked  bool
	hard    bool // the kick was for a failure: no flush, short close
	// gone is set when the peer is gone (see drop): the socket is closed
	// without a close frame and without the flush.
	gone        bool
	abort       *time.Timer
	closeCode   websocket.StatusCode
	closeReason string

	beatMu   sync.Mutex
	lastBeat time.Time

	// Owned by the handler goroutine. msgNoticed and typingNoticed are
	// set once a rate_limited notice went out for the budget, until the
	// budget is whole again (see overRate).
	msgLimit, typingLimit     limiter
	msgNoticed, typingNoticed bool
}

func newClient(s *Server, room, user string) *client {
	ctx, cancel := context.WithCancel(context.Background())
	pingCtx, pingCancel := context.WithCancel(ctx)
	c := &client{
		s:           s,
		roomID:      room,
		user:        user,
		ctx:         ctx,
		cancel:      cancel,
		pingCtx:     pingCtx,
		pingCancel:  pingCancel,
		writerDone:  make(chan struct{}),
		msgLimit:    newLimiter(s.clock, s.cfg.MessageRate, s.cfg.MessageBurst),
		typingLimit: newLimiter(s.clock, s.cfg.TypingRate, s.cfg.TypingBurst),
	}
	c.mu.Lock()
	c.ping = s.clock.AfterFunc(s.cfg.PingInterval, c.pingTimer)
	c.mu.Unlock()
	return c
}

// pingTimer asks the writer for a ping and arms the next one.
func (c *client) pingTimer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kicked {
		return
	}
	c.pingDue = true
	c.ping.Reset(c.s.cfg.PingInterval)
	c.wakeLocked()
}

func (c *client) attachment() *lobby.Attachment {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.att
}

// enqueue queues a message for this socket alone.
func (c *client) enqueue(msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.enqueueLocked(msg, false)
}

// enqueueReady queues a room message if c is ready for room messages.
func (c *client) enqueueReady(msg []byte, lossy bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ready {
		c.enqueueLocked(msg, lossy)
	}
}

// markReady queues the attach-time room messages and makes c ready.
func (c *client) markReady(msgs ...[]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.enqueueLocked(m, false)
	}
	c.ready = true
}

func (c *client) enqueueLocked(msg []byte, lossy bool) {
	if c.kicked {
		return
	}
	n := len(c.queue) + c.inflight
	bytes := c.queued + len(msg)
	if lossy && (n >= c.s.cfg.SendQueue/2 || bytes > c.s.cfg.SendQueueBytes/2) {
		c.s.metrics.typingDropped.Inc()
		return
	}
	if n >= c.s.cfg.SendQueue || bytes > c.s.cfg.SendQueueBytes {
		// A socket that does not take what it is sent is closed, whether
		// it falls behind by many small messages or by a few large ones:
		// nothing it is sent waits for it, and what it holds is bounded.
		c.s.metrics.slowConsumers.Inc()
		c.kickLocked(CloseSlowConsumer, "send queue overflow", true)
		return
	}
	if c.queue == nil && c.spare != nil {
		c.queue, c.spare = c.spare, nil
	}
	c.queue = append(c.queue, msg)
	c.queued = bytes
	c.wakeLocked()
}

// wakeLocked starts a writer if there is work for one and none runs.
func (c *client) wakeLocked() {
	if c.serving && !c.writing && (len(c.queue) > 0 || c.pingDue || c.kicked) {
		c.writing = true
		go c.writeLoop()
	}
}

// startServing lets writers run, once the socket is upgraded; what was
// queued before goes out now.
func (c *client) startServing() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.serving = true
	c.wakeLocked()
}

// kick asks the writer to close the socket with code and reason. A soft
// kick lets the writer flush what is queued first. A hard kick (a failure:
// slow consumer, ping timeout) skips the queue; the write in progress and
// the close frame get CloseTimeout, then the connection is cut. Only the
// first kick counts.
func (c *client) kick(code websocket.StatusCode, reason string, hard bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kickLocked(code, reason, hard)
}

func (c *client) kickLocked(code websocket.StatusCode, reason string, hard bool) {
	if c.kicked {
		return
	}
	c.kicked, c.hard, c.closeCode, c.closeReason = true, hard, code, reason
	if hard {
		c.abort = time.AfterFunc(c.s.cfg.CloseTimeout, c.cutOff)
	}
	c.wakeLocked()
}

// drop marks the socket closed because its peer is gone: the client's
// close frame arrived (the library answered it and closed the connection)
// or the connection ended under the reader (EOF, reset). Nothing can reach
// that client any more, so nothing more is queued for it, no close
// handshake is tried and no writer is started for one: the lobby's turn of
// the member to reconnecting goes first, and finish closes the connection
// after it. A socket kicked before is left to its kick. drop reports
// whether the caller must close the connection and writerDone itself (no
// writer runs; none will start).
func (c *client) drop(code websocket.StatusCode, reason string) (own bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kicked {
		return false
	}
	c.kicked, c.hard, c.gone, c.closeCode, c.closeReason = true, true, true, code, reason
	// Queued messages are dropped: the connection is dead. A writer in
	// the middle of a batch finds the kick on its next turn and closes
	// the connection (closeConn, gone) instead of writing more.
	clear(c.queue)
	c.queue, c.queued = nil, 0
	if c.writing {
		return false
	}
	c.writing = true // no writer starts from now on
	return true
}

// readEnded starts the socket's teardown once its read loop ended with
// err, and reports whether the caller closes the connection and writerDone
// (see drop) after telling the lobby.
func (c *client) readEnded(err error) (own bool) {
	switch {
	case c.raw.unmasked.Load():
		// The library stopped reading at a client frame without a mask,
		// and sent nothing: the client is told it broke the protocol.
		c.kick(websocket.StatusProtocolError, "client frames must be masked", false)
	case websocket.CloseStatus(err) != -1:
		// The client's close frame: the library answered it and closed
		// the connection.
		own = c.drop(websocket.StatusNormalClosure, "")
	case peerGone(err):
		own = c.drop(websocket.StatusAbnormalClosure, "connection lost")
	}
	c.kick(websocket.StatusNormalClosure, "", false)
	return own
}

// peerGone reports whether a read error means the connection ended under
// the reader: the client's end closed or reset it without a close frame.
func peerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// cutOff aborts whatever read or write is in progress on the socket.
func (c *client) cutOff() {
	c.cancel()
	c.mu.Lock()
	out := c.out
	c.mu.Unlock()
	if out != nil {
		out.abort()
	}
}

func (c *client) closeStatus() (websocket.StatusCode, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeCode, c.closeReason, c.hard
}

// stop releases the client's timers and aborts whatever is still running.
func (c *client) stop() {
	c.mu.Lock()
	if c.abort != nil {
		c.abort.Stop()
	}
	c.ping.Stop()
	c.mu.Unlock()
	c.cancel()
}

// writeLoop sends what is queued, in batches of one write each, and starts
// the pings asked for, until there is nothing left to do; after a kick it
// closes the socket instead.
func (c *client) writeLoop() {
	for {
		c.mu.Lock()
		if c.kicked { // a kick wins over what is queued
			c.mu.Unlock()
			c.closeConn()
			close(c.writerDone) // writing stays set: no writer runs again
			return
		}
		batch, ping := c.queue, c.pingDue
		c.queue, c.inflight, c.pingDue = nil, len(batch), false
		if ping && !c.pinging {
			// The pong is waited for on a goroutine of its own, so that
			// writing goes on meanwhile: a busy room keeps a socket's queue
			// moving through a round trip. One ping at a time; its timeout
			// closes a socket whose pong never comes.
			c.pinging = true
			go c.pingOnce()
		}
		if len(batch) == 0 {
			c.writing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if len(batch) > 0 {
			size := 0
			for _, m := range batch {
				size += len(m)
			}
			err := c.writeBatch(batch)
			clear(batch)
			c.mu.Lock()
			c.inflight = 0
			c.queued -= size
			if cap(batch) <= 32 {
				c.spare = batch[:0]
			}
			c.mu.Unlock()
			if err != nil {
				c.writeFailed()
				continue
			}
		}
	}
}

// pingOnce pings the socket and waits for the pong, at most PingTimeout;
// the pong is a heartbeat, its absence closes the socket
// (ClosePingTimeout). The ping frame goes out through the library's
// writer, in the writer's batch if one is being collected.
func (c *client) pingOnce() {
	ctx, cancel := context.WithTimeout(c.pingCtx, c.s.cfg.PingTimeout)
	err := c.conn.Ping(ctx)
	cancel()
	c.mu.Lock()
	c.pinging = false
	kicked := c.kicked
	c.mu.Unlock()
	switch {
	case kicked: // closing anyway: no heartbeat, no other close code
	case err != nil:
		c.kick(ClosePingTimeout, "ping timeout", true)
	default:
		c.heartbeat()
	}
}

// writeFailed tears down a socket whose write failed: no close frame can
// follow.
func (c *client) writeFailed() {
	c.kick(websocket.StatusAbnormalClosure, "write failed", true)
	c.conn.CloseNow()
}

// writeBatch sends msgs in one write to the connection (see sockWriter).
// Each write is bounded by WriteTimeout, and by CloseTimeout after a kick
// for a failure.
func (c *client) writeBatch(msgs [][]byte) error {
	c.out.cork()
	defer c.out.share(nil)
	for _, m := range msgs {
		// Queued messages are never changed once made, and shared with
		// other sockets: the cork keeps their payloads by reference.
		c.out.share(m)
		// The library only hands the frame to the cork: nothing here
		// waits on the network, so no context deadline is needed.
		if err := c.conn.Write(context.Background(), websocket.MessageText, m); err != nil {
			c.out.uncork()
			return err
		}
	}
	return c.out.uncork()
}

// closeConn sends the kick's close code in a close frame and closes the
// socket. After a soft kick it first flushes what is queued. The close
// handshake gets CloseTimeout; then the connection is cut, so a client
// that does not answer costs no more than that.
func (c *client) closeConn() {
	code, reason, hard := c.closeStatus()
	c.mu.Lock()
	gone := c.gone
	c.mu.Unlock()
	if gone || c.ctx.Err() != nil {
		c.conn.CloseNow()
		return
	}
	if hard {
		// The 101 may still be corked (see upgradeWriter): it goes out
		// before the close frame.
		if c.out.uncork() != nil {
			c.conn.CloseNow()
			return
		}
	} else {
		c.mu.Lock()
		rest := c.queue
		c.queue, c.queued = nil, 0
		c.mu.Unlock()
		if len(rest) > 0 && c.writeBatch(rest) != nil {
			c.conn.CloseNow()
			return
		}
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = c.conn.Close(code, reason)
	}()
	t := time.NewTimer(c.s.cfg.CloseTimeout)
	defer t.Stop()
	select {
	case <-closed:
		return
	case <-t.C:
	case <-c.ctx.Done():
	}
	// The library's Close is stuck on a peer that neither reads nor
	// answers: cut the connection under it.
	_ = c.raw.Close()
	<-closed
}

// readLoop reads client messages until the socket fails or closes, and
// returns the error that ended it. Every frame has passed the frame budget
// (frameMeter) before the library sees it; every data message, whatever
// its kind or size, then spends the message budget.
func (c *client) readLoop() error {
	for {
		typ, r, err := c.conn.Reader(c.ctx)
		if err != nil {
			return err
		}
		bp := c.s.readBufs.Get().(*[]byte)
		n, err := io.ReadFull(r, *bp)
		tooLarge := false
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			// The whole frame fits.
		case err != nil:
			c.s.readBufs.Put(bp)
			return err // includes a frame over MaxFrameBytes: the library closed with 1009
		default:
			// More than MaxMessageBytes: skip the rest of the frame.
			if _, err := io.Copy(io.Discard, r); err != nil {
				c.s.readBufs.Put(bp)
				return err
			}
			tooLarge = true
		}
		if c.msgNoticed && c.msgLimit.full() {
			c.msgNoticed = false // the burst is over
		}
		if !c.msgLimit.allow() {
			c.s.readBufs.Put(bp)
			c.overRate("", &c.msgNoticed)
			continue
		}
		switch {
		case tooLarge:
			c.refuse(refuse(CodeTooLarge, "message exceeds the size limit"))
		case typ != websocket.MessageText:
			c.refuse(refuse(CodeUnsupported, "binary messages are not supported"))
		default:
			c.handle((*bp)[:n])
		}
		c.s.readBufs.Put(bp)
	}
}

// overRate drops a message over one of the socket's budgets. The first of
// a burst is answered with one rate_limited error; the rest of the burst
// is dropped without a word. A burst ends only when the sender has stayed
// within the rate long enough for the budget to refill completely, so a
// sender that keeps over the rate gets one notice however long it keeps
// on, and refusals never cost the server more than a reply per burst.
// noticed is the budget's flag.
func (c *client) overRate(requestType string, noticed *bool) {
	c.s.metrics.clientRefused.WithLabelValues(CodeRateLimited).Inc()
	if *noticed {
		return
	}
	*noticed = true
	c.enqueue(encodeError(CodeRateLimited, "too many messages: further ones are dropped without reply until the rate falls", requestType))
}

func (c *client) refuse(r *refusal) {
	c.s.metrics.clientRefused.WithLabelValues(r.code).Inc()
	c.enqueue(encodeError(r.code, r.msg, r.requestType))
}

func (c *client) handle(data []byte) {
	now := c.s.clock.Now()
	m, ref := decodeClientMsg(data, c.roomID, c.user)
	if ref != nil {
		c.refuse(ref)
		return
	}
	c.s.metrics.clientMessages.WithLabelValues(messageLabel(m.Type)).Inc()
	withType := func(r *refusal) *refusal { r.requestType = m.Type; return r }
	switch m.Type {
	case TypeHeartbeat:
	case TypePing:
		c.heartbeat()
		c.enqueue(mustJSON(struct {
			Type string `json:"type"`
		}{TypePong}))
		return
	case TypeTypingSet:
		typing := m.typing()
		if typing == nil {
			c.refuse(withType(refuse(CodeBadField, `"typing" (true or false) is required`)))
			return
		}
		if c.typingNoticed && c.typingLimit.full() {
			c.typingNoticed = false
		}
		if !c.typingLimit.allow() {
			c.overRate(m.Type, &c.typingNoticed)
			return
		}
		c.room.setTyping(c.user, *typing, now, c.s.cfg.TypingTTL)
	case TypeChatSend:
		if r := c.chat(m, now); r != nil {
			c.refuse(withType(r))
			return
		}
	case TypeMessageRead:
		if m.MessageID == "" || len(m.MessageID) > 64 {
			c.refuse(withType(refuse(CodeBadField, `"messageId" is required`)))
			return
		}
		if !c.room.markRead(c.user, m.MessageID, formatTime(now)) {
			c.refuse(withType(refuse(CodeUnknownMessage, "no such message in this room's history")))
			return
		}
	case TypeHostTransfer:
		to, r := m.transferTarget()
		if r != nil {
			c.refuse(withType(r))
			return
		}
		if r := c.transfer(to); r != nil {
			c.refuse(withType(r))
			return
		}
	case TypeLeave:
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		_, err := c.s.svc.Leave(ctx, c.roomID, c.user)
		cancel()
		if err != nil {
			c.s.log.Warn("leave failed", "room", c.roomID, "player", c.s.svc.Pseudonym(c.user), "err", err)
			c.refuse(withType(refuse(CodeInternal, "leave failed")))
		}
		// The lobby ended every connection of the user; their
		// Attachments close their sockets (CloseLeft), on every process.
		return
	case TypeKick:
		target, block, r := m.kickTarget()
		if r != nil {
			c.refuse(withType(r))
			return
		}
		if r := c.hostCommand("kick", func(ctx context.Context) error {
			_, err := c.s.svc.Kick(ctx, c.roomID, c.user, target, block)
			return err
		}); r != nil {
			c.refuse(withType(r))
			return
		}
	case TypeLock:
		if m.Locked == nil {
			c.refuse(withType(refuse(CodeBadField, `"locked" (true or false) is required`)))
			return
		}
		locked := *m.Locked
		if r := c.hostCommand("lock", func(ctx context.Context) error {
			lock := c.s.svc.Unlock
			if locked {
				lock = c.s.svc.Lock
			}
			_, err := lock(ctx, c.roomID, c.user)
			return err
		}); r != nil {
			c.refuse(withType(r))
			return
		}
	default:
		c.refuse(withType(refuse(CodeUnknownType, "unknown message type")))
		return
	}
	c.heartbeat()
}

func (c *client) chat(m clientMsg, now time.Time) *refusal {
	text := m.text()
	if text == nil || strings.TrimSpace(*text) == "" {
		return refuse(CodeTextEmpty, `"text" must not be empty`)
	}
	if len(*text) > c.s.cfg.MaxChatBytes {
		return refuse(CodeTextTooLong, "chat text is too long")
	}
	if len(m.clientID()) > 64 {
		return refuse(CodeBadField, `"clientMsgId" is longer than 64 bytes`)
	}
	c.room.addChat(chatMsg{
		Type:        TypeChatMessage,
		RoomID:      c.roomID,
		MessageID:   c.s.nextMessageID(),
		UserID:      c.user,
		Text:        *text,
		Time:        formatTime(now),
		ClientMsgID: m.clientID(),
	})
	return nil
}

// hostCommand runs a host-only lobby command with the socket's user as the
// actor: the lobby judges it against its current host, whatever the page
// showed. Its new state reaches everybody through their Attachments.
func (c *client) hostCommand(op string, do func(ctx context.Context) error) *refusal {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	err := do(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lobby.ErrNotHost):
		return refuse(CodeNotHost, "only the current host can "+op)
	case errors.Is(err, lobby.ErrNotMember):
		return refuse(CodeNotMember, "the target is not a member of this lobby")
	case errors.Is(err, lobby.ErrInvalidID), errors.Is(err, lobby.ErrInvalidCommand):
		return refuse(CodeBadField, "invalid "+op+" request")
	default:
		c.s.log.Warn(op+" failed", "room", c.roomID, "player", c.s.svc.Pseudonym(c.user), "err", err)
		return refuse(CodeInternal, op+" failed")
	}
}

func (c *client) transfer(to string) *refusal {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	_, err := c.s.svc.TransferHost(ctx, c.roomID, c.user, to)
	switch {
	case err == nil:
		return nil // the new state reaches everybody through their Attachments
	case errors.Is(err, lobby.ErrNotHost):
		return refuse(CodeNotHost, "only the current host can transfer the host role")
	case errors.Is(err, lobby.ErrNotMember):
		return refuse(CodeNotMember, "the target is not a member of this lobby")
	case errors.Is(err, lobby.ErrNotEligible):
		return refuse(CodeNotEligible, "the target cannot host now")
	case errors.Is(err, lobby.ErrInvalidID):
		return refuse(CodeBadField, "invalid target")
	default:
		c.s.log.Warn("host transfer failed", "room", c.roomID, "player", c.s.svc.Pseudonym(c.user), "err", err)
		return refuse(CodeInternal, "host transfer failed")
	}
}

// heartbeat reports the socket alive to the lobby, at most once per
// heartbeat period. A stale outcome means the lobby ended this socket's
// generation: the client must rejoin.
func (c *client) heartbeat() {
	att := c.attachment()
	if att == nil {
		return
	}
	now := c.s.clock.Now()
	c.beatMu.Lock()
	if !c.lastBeat.IsZero() && now.Sub(c.lastBeat) < c.s.heartbeatEvery {
		c.beatMu.Unlock()
		return
	}
	c.lastBeat = now
	c.beatMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	var res lobby.Result
	var err error
	// Usually on the writer after a pong: a short-lived goroutine.
	c.s.warm.run(func() { res, err = att.Heartbeat(ctx) })
	if errors.Is(err, lobby.ErrDetached) {
		return // the connection ended: the socket is closing already
	}
	if err != nil {
		c.s.log.Warn("heartbeat failed", "room", c.roomID, "player", c.s.svc.Pseudonym(c.user), "err", err)
		c.beatMu.Lock()
		c.lastBeat = time.Time{} // try again at the next chance
		c.beatMu.Unlock()
		return
	}
	if res.Outcome == lobby.OutcomeStale {
		if c.superseded(ctx) {
			c.kick(CloseSuperseded, "superseded by a newer connection", false)
			return
		}
		c.kick(CloseRejoin, "connection ended; rejoin", false)
	}
}

// superseded guesses why the lobby ended this socket's generation without
// this process hearing of it (another process committed it): with a tab
// cap, a member that is online on another connection was superseded by it.
// Telling that tab to rejoin would make it supersede the other in turn,
// and two pages would take turns for ever.
func (c *client) superseded(ctx context.Context) bool {
	if c.s.cfg.Policy.MaxConnectionsPerPlayer == 0 {
		return false
	}
	snap, err := c.s.svc.Snapshot(ctx, c.roomID)
	if err != nil {
		return false
	}
	for _, m := range snap.Members {
		if m.Player == c.user {
			return m.Status == lobby.StatusOnline
		}
	}
	return false
}

func (c *client) setLastBeat(t time.Time) {
	c.beatMu.Lock()
	c.lastBeat = t
	c.beatMu.Unlock()
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// messageLabel bounds the metric label to the known client types.
func messageLabel(t string) string {
	switch t {
	case TypeHeartbeat, TypePing, TypeTypingSet, TypeChatSend, TypeMessageRead, TypeHostTransfer, TypeLeave, TypeKick, TypeLock:
		return t
	}
	return "other"
}
