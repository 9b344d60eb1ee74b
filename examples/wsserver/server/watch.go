package server

import (
	"context"
	"errors"
	"time"

	"github.com/coder/websocket"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// Delivery to sockets follows the lobby's effects log. A room with local
// sockets holds one lobby.Watcher, opened before its first socket's join and
// closed when its last socket detaches. The room's delivery goroutine takes
// each Change in order and hands it to the room's sockets: one lobby.state
// per revision, and a close for every socket whose connection generation
// the commit ended. Commits of this process reach the watcher without a
// store read; commits of other processes reach it through the store's
// change notifications, which the Service's Run listens to, at the cost of
// one log read for the lobby that changed. Rooms that did not change cost
// nothing.

// roomWatch is the watcher of a room and its delivery goroutine.
type roomWatch struct {
	w      *lobby.Watcher
	cancel context.CancelFunc
	done   chan struct{}
}

// watchRetry is how long the delivery goroutine waits after a failed log
// read before it tries again.
const watchRetry = 250 * time.Millisecond

// openWatch makes sure the room has a watcher. Call it after the socket is
// in r.clients and before its join, so that the join and everything after
// it reach the watcher (a join never needs a snapshot to be seen).
func (r *room) openWatch(s *Server) error {
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	if r.watch != nil {
		return nil
	}
	// The Watcher lives as long as ctx: until closeWatch cancels it.
	ctx, cancel := context.WithCancel(context.Background())
	// after 0: the first Change is a snapshot of the room now, which
	// sockets that already have it (by revision) ignore.
	w, err := s.svc.Watch(ctx, r.id, 0)
	if err != nil {
		cancel()
		return err
	}
	rw := &roomWatch{w: w, cancel: cancel, done: make(chan struct{})}
	r.watch = rw
	go r.deliver(ctx, s, rw)
	return nil
}

// closeWatch closes the room's watcher if no socket is left in the room.
func (r *room) closeWatch() {
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	if r.watch == nil {
		return
	}
	r.mu.Lock()
	n := len(r.clients)
	r.mu.Unlock()
	if n > 0 {
		return
	}
	rw := r.watch
	r.watch = nil
	rw.cancel()
	rw.w.Close()
}

// deliver reads rw's Changes until it is closed and fans them out.
func (r *room) deliver(ctx context.Context, s *Server, rw *roomWatch) {
	defer close(rw.done)
	for {
		ch, err := rw.w.Next(ctx)
		switch {
		case err == nil:
		case ctx.Err() != nil || errors.Is(err, lobby.ErrWatchClosed):
			return
		default:
			s.log.Warn("room watch failed", "room", r.id, "err", err)
			t := time.NewTimer(watchRetry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		r.apply(s, &ch)
	}
}

// apply hands one Change to the room's sockets.
func (r *room) apply(s *Server, ch *lobby.Change) {
	now := s.clock.Now()
	if ch.Snapshot != nil {
		if r.wantsState(ch.Snapshot.Revision) {
			r.broadcastState(ch.Snapshot.Revision, encodeSnapshot(ch.Snapshot, now))
		}
		return
	}
	for i := range ch.Events {
		e := &ch.Events[i]
		if r.wantsState(e.Revision) {
			r.broadcastState(e.Revision, encodeEvent(e, now))
		}
	}
	for _, e := range ch.Ended {
		r.endGeneration(e)
	}
}

// endGeneration closes the socket holding generation e.Gen, if this
// process has it, with the close code of e's cause.
func (r *room) endGeneration(e lobby.Ended) {
	r.mu.Lock()
	c := r.byGen[e.Gen]
	r.mu.Unlock()
	if c == nil || c.user != e.Player {
		return
	}
	switch e.Cause {
	case lobby.EndKicked:
		c.kick(CloseKicked, "removed from the lobby by the host", false)
	case lobby.EndTimedOut:
		c.kick(CloseRejoin, "heartbeat deadline passed; rejoin", false)
	case lobby.EndSuperseded:
		c.kick(CloseSuperseded, "superseded by a newer connection", false)
	case lobby.EndLeft:
		c.kick(CloseLeft, "left the lobby", false)
	default:
		c.kick(websocket.StatusNormalClosure, "connection ended", false)
	}
}
