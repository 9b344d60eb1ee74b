package main

import (
	"encoding/json"
	"sort"
	"sync"
	"time"
)

// room is one lobby. Everything in it is guarded by mu; refs by srv.mu.
type room struct {
	id  string
	srv *server

	mu      sync.Mutex
	version uint64
	nextSeq uint64
	host    string // "" when nobody hosts
	members map[string]*member
	socks   map[*sock]bool
	refs    int
}

// member is a player in a room.
type member struct {
	user    string
	joinSeq uint64
	sockets int         // open sockets; 0 means reconnecting
	expiry  *time.Timer // set while reconnecting
	// lastBeat is the member's newest sign of life (a pong or an app
	// heartbeat). Nothing reads it: it stands for the heartbeat the
	// example server records in its lobby, so that each costs the same
	// room lock here.
	lastBeat time.Time
}

// heartbeat notes a sign of life from one of m's sockets.
func (rm *room) heartbeat(m *member) {
	m.lastBeat = time.Now()
}

// join adds user (or brings it back online) and broadcasts the change.
func (rm *room) join(user string) *member {
	m := rm.members[user]
	switch {
	case m == nil:
		rm.nextSeq++
		m = &member{user: user, joinSeq: rm.nextSeq}
		rm.members[user] = m
		if rm.host == "" {
			rm.host = user
		}
		m.sockets = 1
		rm.commit("joined", user)
	case m.sockets == 0:
		m.expiry.Stop()
		m.expiry = nil
		m.sockets = 1
		rm.commit("reconnected", user)
	default:
		m.sockets++ // another tab: nothing anybody can see changes
	}
	return m
}

// socketClosed notes that one of m's sockets closed; with its last one m
// turns reconnecting until it comes back or the grace runs out.
func (rm *room) socketClosed(m *member) {
	m.sockets--
	if m.sockets > 0 {
		return
	}
	rm.commit("disconnected", m.user)
	m.expiry = time.AfterFunc(rm.srv.grace, func() { rm.expire(m) })
}

// expire removes m if it is still reconnecting; if it hosted, the online
// member with the lowest joinSeq becomes host.
func (rm *room) expire(m *member) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if rm.members[m.user] != m || m.sockets > 0 {
		return // it came back (and the timer could not be stopped in time)
	}
	delete(rm.members, m.user)
	if rm.host == m.user {
		rm.host = ""
		var best *member
		for _, o := range rm.members {
			if o.sockets > 0 && (best == nil || o.joinSeq < best.joinSeq) {
				best = o
			}
		}
		if best != nil {
			rm.host = best.user
		}
	}
	rm.commit("lease_expired", m.user)
	rm.srv.forget(rm, 0)
}

// commit bumps the version and sends the state to every socket.
func (rm *room) commit(reason, subject string) {
	rm.version++
	msg := rm.state(reason, subject)
	for sk := range rm.socks {
		sk.send(msg)
	}
}

// memberJSON and stateJSON are the wire form of a lobby.state message.
type memberJSON struct {
	UserID  string `json:"userId"`
	JoinSeq uint64 `json:"joinSeq"`
	Status  string `json:"status"`
	Host    bool   `json:"host"`
}

type stateJSON struct {
	Type      string       `json:"type"`
	Version   uint64       `json:"version"`
	HostID    *string      `json:"hostId"`
	PlayerIDs []string     `json:"playerIds"`
	RoomID    string       `json:"roomId"`
	Members   []memberJSON `json:"members"`
	Reason    string       `json:"reason"`
	SubjectID *string      `json:"subjectId,omitempty"`
}

// state encodes the room as a lobby.state message; members in join order.
func (rm *room) state(reason, subject string) []byte {
	st := stateJSON{Type: "lobby.state", Version: rm.version, RoomID: rm.id, Reason: reason,
		PlayerIDs: []string{}, Members: []memberJSON{}}
	if rm.host != "" {
		st.HostID = &rm.host
	}
	if subject != "" {
		st.SubjectID = &subject
	}
	for _, m := range rm.sortedMembers() {
		status := "online"
		if m.sockets == 0 {
			status = "reconnecting"
		}
		st.PlayerIDs = append(st.PlayerIDs, m.user)
		st.Members = append(st.Members, memberJSON{UserID: m.user, JoinSeq: m.joinSeq, Status: status, Host: m.user == rm.host})
	}
	b, _ := json.Marshal(st) // cannot fail: strings, numbers and bools
	return b
}

// sortedMembers returns the members in join order.
func (rm *room) sortedMembers() []*member {
	ms := make([]*member, 0, len(rm.members))
	for _, m := range rm.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].joinSeq < ms[j].joinSeq })
	return ms
}
