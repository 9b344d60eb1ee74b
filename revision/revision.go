// Package revision is the client side of lobby revisions: a Tracker that
// keeps the highest revision seen, drops anything older, and tells the
// caller when it skipped some, so that out-of-order or duplicated delivery
// can never roll a view backward.
//
// A lobby's revision grows by exactly one on every change a client can see
// (the host, or who is in the lobby and whether they are online). Each event
// carries the whole member view, so applying a newer event is always safe;
// a gap only means some intermediate changes were not observed, and a client
// that cares about them (a history pane, say) should fetch a snapshot.
package revision

import "sync"

// Verdict is what a Tracker decided about one revision.
type Verdict uint8

const (
	// Stale: the revision is not newer than the highest seen. Drop it.
	Stale Verdict = iota
	// Next: the revision is the first seen, or exactly one above the highest
	// seen. Apply it.
	Next
	// Gap: the revision is more than one above the highest seen. Apply it;
	// the revisions in between were missed (fetch a snapshot if they
	// matter).
	Gap
)

func (v Verdict) String() string {
	switch v {
	case Stale:
		return "stale"
	case Next:
		return "next"
	case Gap:
		return "gap"
	}
	return "Verdict(?)"
}

// Accepted reports whether the revision should be applied (Next or Gap).
func (v Verdict) Accepted() bool { return v == Next || v == Gap }

// Tracker follows one lobby's revisions. The zero Tracker has seen nothing;
// it is safe for concurrent use.
type Tracker struct {
	mu      sync.Mutex
	highest uint64
	seen    bool
}

// Observe judges rev against the highest revision seen and, if it is newer,
// makes it the highest. It never moves backward.
func (t *Tracker) Observe(rev uint64) Verdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case !t.seen:
		t.seen, t.highest = true, rev
		return Next
	case rev <= t.highest:
		return Stale
	case rev == t.highest+1:
		t.highest = rev
		return Next
	default:
		t.highest = rev
		return Gap
	}
}

// Highest returns the highest revision observed, and false if none was.
func (t *Tracker) Highest() (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.highest, t.seen
}
