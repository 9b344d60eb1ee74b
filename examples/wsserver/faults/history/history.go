// Package history checks what every client of a fault campaign saw, and
// every action a host took on a fenced resource, against the guarantees of
// the lobby: one host per term, terms and revisions that never go back,
// revisions that mean the same thing on every socket, a fence that never
// takes an older term, bounded ghosts after a process is lost, processes
// that stop serving once cut off from the store, and convergence after a
// fault heals.
//
// The checker is pure: it reads a History and returns a Report. It never
// looks at a clock.
package history

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Member is one member of a lobby as a state shows it.
type Member struct {
	ID     string
	Online bool
}

// State is one lobby.state a socket received.
type State struct {
	Revision uint64
	Term     uint64
	Host     string // "" when the lobby has no host
	Members  []Member
	// Full marks a state the server sent as a full snapshot: the one kind
	// of state after which a socket's revisions may jump.
	Full    bool
	Reason  string
	Subject string
	At      time.Time // when the client received it
}

// online reports whether player is shown online in s.
func (s State) online(player string) bool {
	for _, m := range s.Members {
		if m.ID == player {
			return m.Online
		}
	}
	return false
}

// content is what must be identical on every socket that saw a revision.
func (s State) content() string {
	var b strings.Builder
	fmt.Fprintf(&b, "term %d host %q members", s.Term, s.Host)
	for _, m := range s.Members {
		st := "reconnecting"
		if m.Online {
			st = "online"
		}
		fmt.Fprintf(&b, " %s/%s", m.ID, st)
	}
	return b.String()
}

// Socket is one client socket and everything it received.
type Socket struct {
	ID     int
	Lobby  string
	Player string
	Proc   int       // the server process it was attached to
	Opened time.Time // when it attached
	States []State
	Closed time.Time // zero: still open when the history ended
	Code   int       // its close code, if closed
}

// openAt reports whether the socket was attached at t.
func (s Socket) openAt(t time.Time) bool {
	return !s.Opened.After(t) && (s.Closed.IsZero() || s.Closed.After(t))
}

// Action is one host-only action offered to the fenced resource, in the
// order the resource judged them.
type Action struct {
	Lobby    string
	Player   string
	Term     uint64 // the term the actor stamped it with
	At       time.Time
	Accepted bool
}

// Fault kinds, as an Outage names them.
const (
	StoreCut  = "store-cut"  // the process cannot reach the store; its clients reach it
	ClientCut = "client-cut" // its clients cannot reach the process; it reaches the store
	Pause     = "pause"      // SIGSTOP, then SIGCONT
	Kill      = "kill"       // kill -9
)

// Outage is a fault that took one process away from its players from
// From until To (the heal; for a kill, when it was started again or the
// end of the campaign).
type Outage struct {
	Proc     int
	Kind     string
	From, To time.Time
}

// Convergence is the harness's check, after a fault healed, that every
// socket of a lobby showed the lobby's current revision.
type Convergence struct {
	Lobby       string
	HealedAt    time.Time
	ConvergedAt time.Time // zero: never within the harness's wait
	Detail      string    // what still differed, when it did not converge
}

// History is everything one campaign recorded.
type History struct {
	Sockets      []Socket
	Actions      []Action
	Outages      []Outage
	Convergences []Convergence
	End          time.Time
}

// Bounds are the stated limits the checks hold the history to.
type Bounds struct {
	// Ghost: no member may still be shown online (on a socket of another
	// process) longer than this after its process was lost.
	Ghost time.Duration
	// StopServing: a process cut off from the store must have closed its
	// sockets this long after the cut (and a paused one this long after it
	// resumed).
	StopServing time.Duration
	// Converge: every socket of a lobby shows its current revision this
	// long after a heal.
	Converge time.Duration
}

// Check names, as a Violation carries them.
const (
	CheckHostPerTerm  = "one host per term"
	CheckTermOrder    = "terms never decrease"
	CheckRevisions    = "revisions +1 or a marked full state"
	CheckSameRevision = "a revision is the same everywhere"
	CheckFence        = "fence never accepts an older term"
	CheckFenceHost    = "only a term's host acts with it"
	CheckGhost        = "ghost bound"
	CheckStopServing  = "a cut-off process stops serving"
	CheckConverge     = "convergence after heal"
)

// Violation is one broken guarantee.
type Violation struct {
	Check  string
	Lobby  string
	Detail string
}

func (v Violation) String() string { return v.Check + ": " + v.Lobby + ": " + v.Detail }

// Ghost is one member shown online after its process was lost.
type Ghost struct {
	Lobby, Player string
	Proc          int
	Kind          string
	From          time.Time // when the fault began
	For           time.Duration
	Resolved      bool // false: still shown online when the fault healed or the history ended
}

// Report is what Check found.
type Report struct {
	Violations []Violation
	Sockets    int
	States     int
	Accepted   int // fenced actions accepted
	Refused    int // fenced actions refused (a stale term, correctly turned away)
	Ghosts     []Ghost
	WorstGhost time.Duration
	// Unwitnessed: lost members that no socket of a process that stayed
	// up watched until they were shown gone or the fault healed.
	Unwitnessed   int
	WorstConverge time.Duration
}

// OK reports whether no check failed.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Count returns how many violations each check had.
func (r Report) Count() map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Check]++
	}
	return m
}

// Check runs every check over h.
func Check(h History, b Bounds) Report {
	var r Report
	r.Sockets = len(h.Sockets)
	for _, s := range h.Sockets {
		r.States += len(s.States)
	}
	add := func(check, lobby, format string, args ...any) {
		r.Violations = append(r.Violations, Violation{Check: check, Lobby: lobby, Detail: fmt.Sprintf(format, args...)})
	}
	checkStreams(h, add)
	hosts := checkTerms(h, add)
	checkFence(h, hosts, add, &r)
	checkGhosts(h, b, add, &r)
	checkStopServing(h, b, add)
	for _, c := range h.Convergences {
		if c.ConvergedAt.IsZero() {
			add(CheckConverge, c.Lobby, "did not converge after the heal at %s: %s", stamp(c.HealedAt), c.Detail)
			continue
		}
		d := c.ConvergedAt.Sub(c.HealedAt)
		r.WorstConverge = max(r.WorstConverge, d)
		if d > b.Converge {
			add(CheckConverge, c.Lobby, "converged %v after the heal at %s, over the bound %v", d, stamp(c.HealedAt), b.Converge)
		}
	}
	return r
}

func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// checkStreams: each socket's revisions rise by one, or jump to a full
// state; and every revision reads the same on every socket.
func checkStreams(h History, add func(check, lobby, format string, args ...any)) {
	seen := map[string]map[uint64]string{} // lobby → revision → content
	where := map[string]map[uint64]int{}   // lobby → revision → first socket
	for _, s := range h.Sockets {
		for i, st := range s.States {
			if i > 0 {
				prev := s.States[i-1]
				switch {
				case st.Revision <= prev.Revision:
					add(CheckRevisions, s.Lobby, "socket %d (%s on process %d): revision %d after %d", s.ID, s.Player, s.Proc, st.Revision, prev.Revision)
				case st.Revision != prev.Revision+1 && !st.Full:
					add(CheckRevisions, s.Lobby, "socket %d (%s on process %d): revision %d after %d, a gap not marked as a full state", s.ID, s.Player, s.Proc, st.Revision, prev.Revision)
				}
			}
			m := seen[s.Lobby]
			if m == nil {
				m, where[s.Lobby] = map[uint64]string{}, map[uint64]int{}
				seen[s.Lobby] = m
			}
			c := st.content()
			if prev, ok := m[st.Revision]; !ok {
				m[st.Revision], where[s.Lobby][st.Revision] = c, s.ID
			} else if prev != c {
				add(CheckSameRevision, s.Lobby, "revision %d is %q on socket %d but %q on socket %d", st.Revision, c, s.ID, prev, where[s.Lobby][st.Revision])
			}
		}
	}
}

// checkTerms: one host per (lobby, term), and terms ordered like the
// revisions. It returns each lobby's host of each term.
func checkTerms(h History, add func(check, lobby, format string, args ...any)) map[string]map[uint64]map[string]bool {
	first := map[string]map[uint64]string{}
	hosts := map[string]map[uint64]map[string]bool{}
	type rt struct{ rev, term uint64 }
	byLobby := map[string][]rt{}
	for _, s := range h.Sockets {
		for _, st := range s.States {
			m := first[s.Lobby]
			if m == nil {
				m, hosts[s.Lobby] = map[uint64]string{}, map[uint64]map[string]bool{}
				first[s.Lobby] = m
			}
			hs := hosts[s.Lobby][st.Term]
			if hs == nil {
				hs = map[string]bool{}
				hosts[s.Lobby][st.Term] = hs
			}
			if prev, ok := m[st.Term]; !ok {
				m[st.Term] = st.Host
			} else if prev != st.Host && !hs[st.Host] {
				add(CheckHostPerTerm, s.Lobby, "term %d has host %q (socket %d, revision %d) and %q", st.Term, st.Host, s.ID, st.Revision, prev)
			}
			hs[st.Host] = true
			byLobby[s.Lobby] = append(byLobby[s.Lobby], rt{st.Revision, st.Term})
		}
	}
	lobbies := make([]string, 0, len(byLobby))
	for l := range byLobby {
		lobbies = append(lobbies, l)
	}
	sort.Strings(lobbies)
	for _, l := range lobbies {
		xs := byLobby[l]
		slices.SortFunc(xs, func(a, b rt) int {
			if a.rev != b.rev {
				return cmpU(a.rev, b.rev)
			}
			return cmpU(a.term, b.term)
		})
		for i := 1; i < len(xs); i++ {
			if xs[i].term < xs[i-1].term {
				add(CheckTermOrder, l, "revision %d has term %d, below term %d at revision %d", xs[i].rev, xs[i].term, xs[i-1].term, xs[i-1].rev)
			}
		}
	}
	return hosts
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkFence: in the order the resource judged them, no accepted action
// carries a term below one accepted before it; and an action is stamped
// only with a term its actor hosted.
func checkFence(h History, hosts map[string]map[uint64]map[string]bool, add func(check, lobby, format string, args ...any), r *Report) {
	highest := map[string]uint64{}
	for _, a := range h.Actions {
		if !a.Accepted {
			r.Refused++
			continue
		}
		r.Accepted++
		if hi, ok := highest[a.Lobby]; ok && a.Term < hi {
			add(CheckFence, a.Lobby, "accepted %s's action stamped with term %d at %s after term %d", a.Player, a.Term, stamp(a.At), hi)
		}
		highest[a.Lobby] = max(highest[a.Lobby], a.Term)
		if hs, ok := hosts[a.Lobby][a.Term]; ok && !hs[a.Player] {
			add(CheckFenceHost, a.Lobby, "%s acted with term %d at %s, which it never hosted", a.Player, a.Term, stamp(a.At))
		}
	}
}

// checkGhosts: for every lost process, each member whose every socket was
// on it must stop being shown online elsewhere within the bound, unless it
// came back on another process first.
func checkGhosts(h History, b Bounds, add func(check, lobby, format string, args ...any), r *Report) {
	for _, o := range h.Outages {
		end := o.To
		if end.IsZero() || end.After(h.End) {
			end = h.End
		}
		type key struct{ lobby, player string }
		lost := map[key]bool{}
		for _, s := range h.Sockets {
			if s.Proc == o.Proc && s.openAt(o.From) {
				lost[key{s.Lobby, s.Player}] = true
			}
		}
		for _, s := range h.Sockets {
			if s.Proc != o.Proc && s.openAt(o.From) {
				delete(lost, key{s.Lobby, s.Player}) // still held elsewhere
			}
		}
		keys := make([]key, 0, len(lost))
		for k := range lost {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b key) int { return strings.Compare(a.lobby+"\x00"+a.player, b.lobby+"\x00"+b.player) })
		for _, k := range keys {
			var gone time.Time  // when it was first shown not online, or came back elsewhere
			var upper time.Time // it was gone by then at the latest
			watched := false    // a witness watched it until the heal without being out itself
			for _, s := range h.Sockets {
				if s.Lobby != k.lobby || s.Proc == o.Proc {
					continue
				}
				if s.Player == k.player && s.Opened.After(o.From) && len(s.States) > 0 {
					if t := s.States[0].At; gone.IsZero() || t.Before(gone) {
						gone = t // back on another process
					}
					continue
				}
				// Any socket of a process that is up shows what its users
				// see: the first state after the fault that shows the
				// member no longer online, on a socket whose previous
				// state showed it online, ends the ghost. A socket that
				// never showed it online only bounds the ghost from above
				// (it was gone by then, since when is unknown). A state a
				// process delivered while out itself tells nothing.
				wasOnline := false
				for _, st := range s.States {
					if st.At.Before(o.From) {
						wasOnline = st.online(k.player)
						continue
					}
					if st.At.After(end) {
						break
					}
					if outAt(h.Outages, s.Proc, st.At) {
						continue
					}
					if st.online(k.player) {
						wasOnline = true
						continue
					}
					if wasOnline {
						if gone.IsZero() || st.At.Before(gone) {
							gone = st.At
						}
					} else if upper.IsZero() || st.At.Before(upper) {
						upper = st.At
					}
					break
				}
				// A socket open from the fault to the heal, on a process
				// that stayed up, watched the whole outage: if it never
				// showed the member gone, the member was a ghost all along.
				if s.openAt(o.From) && !outAt(h.Outages, s.Proc, o.From) &&
					nextOut(h.Outages, s.Proc, o.From, end).IsZero() && (s.Closed.IsZero() || !s.Closed.Before(end)) {
					watched = true
				}
			}
			resolved := !gone.IsZero() && !gone.After(end)
			if !upper.IsZero() && (!resolved || upper.Before(gone)) {
				if upper.Sub(o.From) > b.Ghost {
					// Gone by a moment past the bound, but nobody saw
					// when: it cannot be judged.
					r.Unwitnessed++
					continue
				}
				gone, resolved = upper, true
			}
			if !resolved && !watched {
				r.Unwitnessed++
				continue
			}
			g := Ghost{Lobby: k.lobby, Player: k.player, Proc: o.Proc, Kind: o.Kind, From: o.From, Resolved: resolved}
			if g.Resolved {
				g.For = gone.Sub(o.From)
			} else {
				g.For = end.Sub(o.From)
			}
			r.Ghosts = append(r.Ghosts, g)
			r.WorstGhost = max(r.WorstGhost, g.For)
			if g.For > b.Ghost {
				how := "until it was shown gone"
				if !g.Resolved {
					how = "and was still shown online when the fault healed or the run ended"
				}
				add(CheckGhost, k.lobby, "%s stayed online for %v after process %d's %s at %s, %s (bound %v)",
					k.player, g.For.Round(time.Millisecond), o.Proc, o.Kind, stamp(o.From), how, b.Ghost)
			}
		}
	}
}

// outAt reports whether proc was out (in an outage) at t.
func outAt(outages []Outage, proc int, t time.Time) bool {
	for _, o := range outages {
		if o.Proc == proc && !o.From.After(t) && o.To.After(t) {
			return true
		}
	}
	return false
}

// nextOut returns when proc's first outage after from (and before to)
// began, or zero.
func nextOut(outages []Outage, proc int, from, to time.Time) time.Time {
	var first time.Time
	for _, o := range outages {
		if o.Proc == proc && o.From.After(from) && o.From.Before(to) && (first.IsZero() || o.From.Before(first)) {
			first = o.From
		}
	}
	return first
}

// checkStopServing: a process cut off from the store past the bound must
// have closed every socket it held; a paused one must close them within
// the bound of resuming (its session ended while it slept).
func checkStopServing(h History, b Bounds, add func(check, lobby, format string, args ...any)) {
	for _, o := range h.Outages {
		var by time.Time
		switch o.Kind {
		case StoreCut:
			by = o.From.Add(b.StopServing)
			if o.To.Before(by) {
				continue // healed before it had to stop
			}
		case Pause:
			if o.To.Sub(o.From) <= b.StopServing {
				continue // woke before its session could have ended
			}
			by = o.To.Add(b.StopServing)
		default:
			continue
		}
		if by.After(h.End) {
			continue
		}
		for _, s := range h.Sockets {
			if s.Proc != o.Proc || !s.openAt(o.From) {
				continue
			}
			if s.Closed.IsZero() || s.Closed.After(by) {
				open := "still open at the end"
				if !s.Closed.IsZero() {
					open = fmt.Sprintf("closed only %v after", s.Closed.Sub(o.From).Round(time.Millisecond))
				}
				add(CheckStopServing, s.Lobby, "socket %d (%s) on process %d: %s from %s, %s (it should have closed by %s)",
					s.ID, s.Player, o.Proc, o.Kind, stamp(o.From), open, stamp(by))
			}
		}
	}
}
