package store

import "sync"

// Change names a write that appended to a lobby's log: the lobby and the
// position of the entry.
type Change struct {
	Lobby   string
	Version uint64
}

// DefaultFeedLobbies is the number of distinct lobbies a Feed from
// NewFeed(0) holds before it gives up naming them and marks itself lost.
const DefaultFeedLobbies = 4096

// Feed is one subscriber's view of change notifications (see Notifier). The
// store adds to it, the reader takes from it; neither waits for the other.
//
// Changes to one lobby coalesce: a Feed keeps, per lobby, only the highest
// position added since the last Take. If more distinct lobbies pile up than
// the Feed holds, it drops them all and marks itself lost, which tells the
// reader to check the heads of its lobbies instead. A Feed is safe for
// concurrent use.
type Feed struct {
	mu      sync.Mutex
	pending map[string]uint64
	lost    bool
	max     int
	ready   chan struct{}
}

// NewFeed returns an empty Feed that holds up to maxLobbies distinct lobbies
// (DefaultFeedLobbies if maxLobbies <= 0). Stores call it in Subscribe.
func NewFeed(maxLobbies int) *Feed {
	if maxLobbies <= 0 {
		maxLobbies = DefaultFeedLobbies
	}
	return &Feed{pending: make(map[string]uint64), max: maxLobbies, ready: make(chan struct{}, 1)}
}

// Add records a change. Stores call it after the write is visible.
func (f *Feed) Add(c Change) {
	f.mu.Lock()
	if v, ok := f.pending[c.Lobby]; ok {
		if c.Version > v {
			f.pending[c.Lobby] = c.Version
		}
	} else if !f.lost {
		if len(f.pending) >= f.max {
			clear(f.pending)
			f.lost = true
		} else {
			f.pending[c.Lobby] = c.Version
		}
	}
	f.mu.Unlock()
	f.wake()
}

// Lose marks the feed lost: some change may not have been added. Stores
// call it when delivery may have failed (a dropped connection to the
// database, a subscription reconnecting).
func (f *Feed) Lose() {
	f.mu.Lock()
	clear(f.pending)
	f.lost = true
	f.mu.Unlock()
	f.wake()
}

func (f *Feed) wake() {
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

// Ready returns a channel that receives a value when there may be
// something to Take. Values coalesce; after receiving one, call Take.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Take returns the changes added since the last Take (one per lobby, with
// the highest position added, in no particular order) and whether the feed
// was lost since then. When lost is true the changes are incomplete: check
// the heads of every lobby you follow.
func (f *Feed) Take() (changes []Change, lost bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) > 0 {
		changes = make([]Change, 0, len(f.pending))
		for id, v := range f.pending {
			changes = append(changes, Change{Lobby: id, Version: v})
		}
		clear(f.pending)
	}
	lost, f.lost = f.lost, false
	return changes, lost
}
