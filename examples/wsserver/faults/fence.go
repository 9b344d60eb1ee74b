package faults

import (
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/faults/history"
)

// Fence is the fenced resource: a stand-in for another system that accepts
// host-only actions. It keeps the highest term it has accepted per lobby
// and refuses an action stamped with an older one. It records every action
// it judged, in the order it judged them.
type Fence struct {
	// Unchecked makes it accept every action whatever its term: a resource
	// without fencing, to show that the checker notices.
	Unchecked bool

	mu      sync.Mutex
	highest map[string]uint64
	log     []history.Action
}

// Act offers an action by player in lobby, stamped with term, and reports
// whether it was accepted.
func (f *Fence) Act(lobby, player string, term uint64, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.highest == nil {
		f.highest = map[string]uint64{}
	}
	hi, seen := f.highest[lobby]
	ok := f.Unchecked || !seen || term >= hi
	if ok && term > hi {
		f.highest[lobby] = term
	}
	f.log = append(f.log, history.Action{Lobby: lobby, Player: player, Term: term, At: now, Accepted: ok})
	return ok
}

// Log returns every action judged so far.
func (f *Fence) Log() []history.Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]history.Action(nil), f.log...)
}
