package server

import (
	"context"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// deadlines remembers the reconnect deadline of each reconnecting member
// of the rooms this process serves, so that lobby.state can carry it (a
// page counts down to it).
//
// lobby.MemberView has no reconnect deadline. The server works it out: a
// disconnected or timed_out event starts its subject's deadline at the
// event's time plus the grace (the server configures no per-lobby
// overrides, so the policy's grace is the one in force); a reconnecting
// member the server has not seen start its grace (it attached before this
// process started, or on another process) is read from the lobby's stored
// record.
type deadlines struct {
	s  *Server
	mu sync.Mutex
	m  map[string]map[string]time.Time // room → player → deadline
}

// of returns the reconnect deadline of every reconnecting member in
// members, the view of room after event e (nil for a snapshot). A deadline
// it cannot find is left out.
func (d *deadlines) of(ctx context.Context, room string, members []lobby.MemberView, e *lobby.Event) map[string]time.Time {
	out := map[string]time.Time{}
	missing := false
	d.mu.Lock()
	known := d.m[room]
	if known == nil {
		known = map[string]time.Time{}
	}
	listed := make(map[string]bool, len(members))
	for _, mv := range members {
		listed[mv.Player] = true
		switch {
		case mv.Status != lobby.StatusReconnecting:
			delete(known, mv.Player)
		case e != nil && mv.Player == e.Subject && (e.Reason == lobby.ReasonDisconnected || e.Reason == lobby.ReasonTimedOut):
			known[mv.Player] = e.At.Add(d.s.cfg.Policy.Grace)
			out[mv.Player] = known[mv.Player]
		default:
			if at, ok := known[mv.Player]; ok {
				out[mv.Player] = at
			} else {
				missing = true
			}
		}
	}
	for p := range known {
		if !listed[p] {
			delete(known, p)
		}
	}
	d.store(room, known)
	d.mu.Unlock()
	if !missing {
		return out
	}
	rec, err := d.s.cfg.Store.Load(ctx, room)
	if err != nil {
		return out
	}
	st, err := lobby.DecodeState(rec.Data)
	if err != nil {
		return out
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	known = d.m[room]
	if known == nil {
		known = map[string]time.Time{}
	}
	for _, mv := range members {
		if _, ok := out[mv.Player]; ok || mv.Status != lobby.StatusReconnecting {
			continue
		}
		if m := st.Member(mv.Player); m != nil && !m.ReconnectBy.IsZero() {
			out[mv.Player] = m.ReconnectBy
			known[mv.Player] = m.ReconnectBy
		}
	}
	d.store(room, known)
	return out
}

func (d *deadlines) store(room string, known map[string]time.Time) {
	if len(known) == 0 {
		delete(d.m, room)
		return
	}
	if d.m == nil {
		d.m = map[string]map[string]time.Time{}
	}
	d.m[room] = known
}
