package lobby

import (
	"container/heap"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby/rules"

	"github.com/lobbyhost/lobbyhost/store"
)

// A Service on a store with sessions (store.Sessions) keeps its
// connections' liveness in its own memory and only its own liveness in the
// store: Run opens a session (a record with a deadline, renewed about every
// third of the session TTL), and a Join through the Service records the new
// generation as held by that session, with no stored heartbeat deadline.
// Heartbeat then moves the generation's deadline in memory, without a store
// call; when it passes, Run commits the generation's end as of that
// deadline (rules.TimeOut). If the process dies, or loses the store for
// longer than the session TTL, the session's deadline passes and any
// process ends its connections as of that deadline, one transition per
// lobby.
//
// liveness is that memory: the session, the generations it holds here, and
// the deadlines of other processes' sessions as last read.
type liveness struct {
	s  *Service
	ss store.Sessions
	// own: this Service opens sessions (Run); without it the Service
	// still judges other processes' session-held generations.
	own bool
	ttl time.Duration
	// pace is how often the session is renewed and expired sessions are
	// looked for: a third of the session TTL (of the heartbeat TTL, or
	// DefaultSessionTTL, for a Service without a session of its own).
	pace time.Duration

	mu       sync.Mutex
	id       string    // the session joins go through; "" for none
	deadline time.Time // its deadline as last renewed
	draining bool
	lobbies  map[string]*heldLobby
	gens     map[heldRef]*heldGen
	due      heldHeap // held generations with a deadline, earliest first
	seen     map[string]time.Time
	// closed are the other processes' sessions this Service found over
	// and ended in the store (see deadlines).
	closed map[string]bool
	// given are this Service's sessions it gave up (see lose), with
	// their deadlines, kept a while: a join that chose one of them
	// before it ended may be judged after.
	given map[string]time.Time
	// lost are told of the generations of a session that ended under
	// this Service (Rooms closes their sockets).
	lost []func(lobby string, ended []Ended)

	poke chan struct{} // wakes the expiry loop
}

// heldLobby is one lobby in which this Service's session holds generations.
type heldLobby struct {
	id   string
	gens []*heldGen
	// known is the lobby version at which gens were last checked against
	// the lobby; heard the highest version another process is known to
	// have committed (math.MaxUint64: unknown, after lost notifications).
	// Heartbeats stay in memory only while heard <= known.
	known, heard uint64
	rev          uint64        // the lobby's revision at known
	ttl          time.Duration // the heartbeat TTL in force in the lobby
	// writing is the version this Service's write in flight would make
	// (0: none); noted a notification of that version that came
	// meanwhile, another process's commit if the write fails.
	writing, noted uint64
}

// heldRef finds a held generation: generations are unique per lobby.
type heldRef struct {
	lobby string
	gen   uint64
}

// heldGen is a generation this Service's session holds. It is small: a
// process holds one per socket.
type heldGen struct {
	hl      *heldLobby
	player  string
	gen     uint64
	session string
	// deadline is its heartbeat deadline (Unix ns; 0: none, heartbeats
	// off); due is when the expiry loop next looks at it (its deadline,
	// or a retry after a failed commit); index is its place in the heap
	// (-1: not in it).
	deadline, due int64
	index         int32
	// lost: its session ended under this Service; a heartbeat is told
	// it is stale, without a store call.
	lost bool
}

type heldHeap []*heldGen

func (h heldHeap) Len() int           { return len(h) }
func (h heldHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h heldHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = int32(i), int32(j)
}
func (h *heldHeap) Push(x any) {
	g := x.(*heldGen)
	g.index = int32(len(*h))
	*h = append(*h, g)
}
func (h *heldHeap) Pop() any {
	old := *h
	g := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	g.index = -1
	return g
}

// DefaultSessionTTL is the session TTL when the policy's heartbeat TTL is
// zero (otherwise the session TTL defaults to it).
const DefaultSessionTTL = 15 * time.Second

func newLiveness(s *Service) *liveness {
	ss, ok := s.st.(store.Sessions)
	if !ok {
		return nil
	}
	ttl := s.cfg.sessionTTL
	if !s.cfg.sessionSet {
		ttl = s.m.Policy().HeartbeatTTL
		if ttl <= 0 {
			ttl = DefaultSessionTTL
		}
	}
	pace := ttl / 3
	if ttl <= 0 {
		pace = s.m.Policy().HeartbeatTTL / 3
		if pace <= 0 {
			pace = DefaultSessionTTL / 3
		}
	}
	return &liveness{
		s: s, ss: ss, own: ttl > 0, ttl: ttl, pace: pace,
		lobbies: make(map[string]*heldLobby),
		gens:    make(map[heldRef]*heldGen),
		seen:    make(map[string]time.Time),
		closed:  make(map[string]bool),
		given:   make(map[string]time.Time),
		poke:    make(chan struct{}, 1),
	}
}

// session returns the session a join at now goes through, or "".
func (l *liveness) session(now time.Time) string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Not within the skew margin of its deadline either: a join whose
	// write is slow to land must not name a session already over.
	if l.id == "" || l.draining || !now.Add(l.skewMargin()).Before(l.deadline) {
		return ""
	}
	return l.id
}

// deadlines returns the session deadlines a transition of st at now must
// be judged with: those of the sessions st holds that have ended by then,
// and of this Service's own sessions that have (a join chose its session
// before it was judged, and must not go through one that ended
// meanwhile). A session seen alive until D is alive at every t < D
// (deadlines only move forward); the others are read from the store in
// one call.
func (l *liveness) deadlines(ctx context.Context, st *rules.State, now time.Time) (rules.SessionDeadlines, error) {
	if now.Before(st.Updated) {
		now = st.Updated
	}
	// The common case allocates nothing: every session the lobby holds
	// is known to be alive.
	var ask []string
	var out rules.SessionDeadlines
	l.mu.Lock()
	holdsOwn := false
	for i := range st.Members {
		for _, c := range st.Members[i].Conns {
			id := c.Session
			if id == "" {
				continue
			}
			d, ok := l.seen[id]
			if id == l.id {
				d, ok, holdsOwn = l.deadline, true, true
			}
			if (!ok || !now.Before(d)) && !slices.Contains(ask, id) {
				ask = append(ask, id)
			}
		}
	}
	if l.id != "" && !now.Before(l.deadline) && !holdsOwn {
		ask = append(ask, l.id)
	}
	for id, d := range l.given {
		// Over for this Service, whatever the store says (a renewal
		// whose outcome it never learnt): only a join through it reads
		// it here, since the lobby does not hold it.
		if !heldBy(st, id) {
			if out == nil {
				out = make(rules.SessionDeadlines)
			}
			if now.Before(d) {
				d = now
			}
			out[id] = d
		}
	}
	l.mu.Unlock()
	if len(ask) == 0 {
		return out, nil
	}
	got, err := l.ss.SessionDeadlines(ctx, ask)
	if err != nil {
		return nil, fmt.Errorf("lobby %q: session deadlines: %w", st.ID, err)
	}
	if len(got) != len(ask) {
		return nil, fmt.Errorf("lobby %q: session deadlines: %d for %d sessions", st.ID, len(got), len(ask))
	}
	var closing []store.SessionDeadline
	l.mu.Lock()
	for i, id := range ask {
		d := got[i]
		if d.IsZero() {
			// The store forgot it: it ended, and held no lobby when it
			// was forgotten, but a write judged while it was alive can
			// land after. Its deadline as last known here is when it
			// ended, rather than the lobby's last transition time.
			switch known, ok := l.given[id]; {
			case id == l.id:
				d = l.deadline
			case ok:
				d = known
			default:
				d = l.seen[id]
			}
		} else {
			l.seen[id] = d
		}
		if !now.Before(d) {
			if out == nil {
				out = make(rules.SessionDeadlines, len(ask))
			}
			out[id] = d // zero: the store forgot it, so it ended
			if !got[i].IsZero() && id != l.id && !l.closed[id] {
				closing = append(closing, store.SessionDeadline{ID: id, Deadline: d})
			}
		}
	}
	l.mu.Unlock()
	// A session found over is ended in the store before any lobby
	// commits its end, so that no renewal can extend it afterwards (one
	// judged before the deadline but slow to arrive): every lobby then
	// ends it at the same deadline, whoever judges it.
	for _, c := range closing {
		if err := l.ss.EndSession(ctx, c.ID, c.Deadline); err != nil {
			return nil, fmt.Errorf("lobby %q: end session %q: %w", st.ID, c.ID, err)
		}
		l.mu.Lock()
		l.closed[c.ID] = true
		l.mu.Unlock()
	}
	return out, nil
}

// committed is called, under lobby id's lock, with the lobby as stored at
// version after a transaction: a join through this Service's session
// starts being held here, and held generations the lobby no longer has
// (ended by a commit of this Service or, seen in the state, of another)
// stop being held.
func (l *liveness) committed(id string, st *rules.State, version uint64, cmd rules.Command, res Result, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	hl := l.lobbies[id]
	joined := cmd.Op == rules.OpJoin && cmd.Session != "" && cmd.Session == l.id && res.Gen != 0
	// A join through the session whose write committed but reported a
	// failure left a connection this Service never learnt of: it is
	// taken in here, the first time the Service sees it, so that it times
	// out like the others instead of living as long as the session.
	adopt := l.id != "" && heldBy(st, l.id)
	if hl == nil && !joined && !adopt {
		return
	}
	if hl == nil {
		hl = &heldLobby{id: id}
		l.lobbies[id] = hl
	}
	if version >= hl.known {
		hl.known, hl.rev = version, st.Revision
		if hl.heard <= version || hl.heard == math.MaxUint64 {
			hl.heard = version
		}
	}
	hl.ttl = st.Overrides.Apply(l.s.m.Policy()).HeartbeatTTL
	kept := hl.gens[:0]
	for _, g := range hl.gens {
		if g.lost || holds(st, g.player, g.gen, g.session) {
			kept = append(kept, g)
		} else {
			l.forget(g)
		}
	}
	clear(hl.gens[len(kept):])
	hl.gens = kept
	if joined {
		g := &heldGen{hl: hl, player: cmd.Player, gen: res.Gen, session: cmd.Session, index: -1}
		hl.gens = append(hl.gens, g)
		l.gens[heldRef{id, res.Gen}] = g
		l.arm(g, hl.ttl, now)
	}
	if adopt {
		for i := range st.Members {
			mem := &st.Members[i]
			for _, c := range mem.Conns {
				if c.Session != l.id || l.gens[heldRef{id, c.Gen}] != nil {
					continue
				}
				g := &heldGen{hl: hl, player: mem.Player, gen: c.Gen, session: l.id, index: -1}
				hl.gens = append(hl.gens, g)
				l.gens[heldRef{id, c.Gen}] = g
				l.arm(g, hl.ttl, now)
			}
		}
	}
	if len(hl.gens) == 0 {
		delete(l.lobbies, id)
	} else {
		l.lobbies[id] = hl
	}
}

// heldBy reports whether st has a connection held by session.
func heldBy(st *rules.State, session string) bool {
	for i := range st.Members {
		for _, c := range st.Members[i].Conns {
			if c.Session == session {
				return true
			}
		}
	}
	return false
}

// holds reports whether st has generation gen of player live and held by
// session.
func holds(st *rules.State, player string, gen uint64, session string) bool {
	mem := st.Member(player)
	if mem == nil {
		return false
	}
	for _, c := range mem.Conns {
		if c.Gen == gen {
			return c.Session == session
		}
	}
	return false
}

// find returns the held generation gen of player in lobby id, or nil;
// l.mu is held.
func (l *liveness) find(id, player string, gen uint64) *heldGen {
	if g := l.gens[heldRef{id, gen}]; g != nil && g.player == player {
		return g
	}
	return nil
}

// arm sets g's heartbeat deadline to now + ttl (none for a zero ttl).
// l.mu is held.
func (l *liveness) arm(g *heldGen, ttl time.Duration, now time.Time) {
	if ttl <= 0 {
		g.deadline, g.due = 0, 0
		if g.index >= 0 {
			heap.Remove(&l.due, int(g.index))
		}
		return
	}
	g.deadline = now.Add(ttl).UnixNano()
	g.due = g.deadline
	l.schedule(g)
}

// schedule puts g in the heap at g.due, or moves it there; l.mu is held.
func (l *liveness) schedule(g *heldGen) {
	if g.index >= 0 {
		heap.Fix(&l.due, int(g.index))
	} else {
		heap.Push(&l.due, g)
	}
	if l.due[0] == g {
		poke(l.poke)
	}
}

// forget removes g from the index and the heap, not from its lobby's
// list; l.mu is held.
func (l *liveness) forget(g *heldGen) {
	if g.index >= 0 {
		heap.Remove(&l.due, int(g.index))
	}
	delete(l.gens, heldRef{g.hl.id, g.gen})
}

// drop stops holding g; l.mu is held.
func (l *liveness) drop(g *heldGen) {
	if l.gens[heldRef{g.hl.id, g.gen}] != g {
		return // dropped already
	}
	l.forget(g)
	hl := g.hl
	if i := slices.Index(hl.gens, g); i >= 0 {
		hl.gens = slices.Delete(hl.gens, i, i+1)
	}
	if len(hl.gens) == 0 && l.lobbies[hl.id] == hl {
		delete(l.lobbies, hl.id)
	}
}

// heard notes that another process committed version of lobby id. A
// notification of this Service's own write in flight is held back until
// the write's outcome is known (see wrote).
func (l *liveness) heard(id string, version uint64) {
	l.mu.Lock()
	if hl := l.lobbies[id]; hl != nil && version > hl.known && version > hl.heard {
		if version == hl.writing {
			hl.noted = version
		} else {
			hl.heard = version
		}
	}
	l.mu.Unlock()
}

// writing is called, under lobby id's lock, before this Service writes
// version of it.
func (l *liveness) writing(id string, version uint64) {
	l.mu.Lock()
	if hl := l.lobbies[id]; hl != nil {
		hl.writing, hl.noted = version, 0
	}
	l.mu.Unlock()
}

// wrote ends the write announced by writing: if it failed, a notification
// of its version was another process's commit.
func (l *liveness) wrote(id string, committed bool) {
	l.mu.Lock()
	if hl := l.lobbies[id]; hl != nil {
		switch {
		case committed && hl.writing > hl.known:
			// committed, under the same lock, checks the generations.
			if hl.heard <= hl.known {
				hl.heard = hl.writing
			}
			hl.known = hl.writing
		case !committed && hl.noted > hl.heard:
			hl.heard = hl.noted
		}
		hl.writing, hl.noted = 0, 0
	}
	l.mu.Unlock()
}

// heardAll: notifications may have been lost, so every held lobby is
// checked against the store at its next heartbeat.
func (l *liveness) heardAll() {
	l.mu.Lock()
	for _, hl := range l.lobbies {
		hl.heard = math.MaxUint64
	}
	l.mu.Unlock()
}

// heldLobbies returns the IDs of the lobbies this Service holds
// generations in.
func (l *liveness) heldLobbies() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, 0, len(l.lobbies))
	for id := range l.lobbies {
		ids = append(ids, id)
	}
	return ids
}

// beat is the memory-only heartbeat. done reports that it answered; if
// not, the heartbeat goes to the store. expired: the generation's own
// deadline has passed, and the caller commits its end. over names this
// Service's session when it ran out before its renewal (a paused process,
// or one cut off from the store): the others may have ended its
// connections already, so the caller gives them all up.
func (l *liveness) beat(id, player string, gen uint64, now time.Time) (res Result, done, expired bool, over string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.find(id, player, gen)
	switch {
	case g == nil:
		return
	case g.lost:
		l.drop(g)
		return Result{Outcome: OutcomeStale, Revision: g.hl.rev}, true, false, "", time.Time{}
	case g.session == l.id && !now.Before(l.deadline):
		return Result{Outcome: OutcomeStale, Revision: g.hl.rev}, true, false, l.id, l.deadline
	case g.deadline != 0 && now.UnixNano() >= g.deadline:
		expired = true
		return
	case g.hl.heard > g.hl.known:
		return // another process committed since
	}
	res = Result{Outcome: OutcomeApplied, Revision: g.hl.rev}
	if g.deadline != 0 {
		res.Slack = time.Duration(g.deadline - now.UnixNano())
	}
	l.arm(g, g.hl.ttl, now)
	return res, true, false, "", time.Time{}
}

// touch moves a held generation's deadline after a heartbeat the store
// judged live.
func (l *liveness) touch(id, player string, gen uint64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.find(id, player, gen); g != nil && !g.lost {
		l.arm(g, g.hl.ttl, now)
	}
}

// Heartbeat keeps generation gen of player alive. A generation that has
// ended (closed, timed out, superseded, or never issued) is reported as
// OutcomeStale: the transport should close that socket and have the client
// join again.
//
// A generation held by this Service's session (see WithSessionTTL) is
// kept alive in memory, without a store call, while no other process has
// committed to the lobby since this Service last read it; otherwise, and
// for any other generation, the heartbeat is judged against the store. A
// heartbeat after the generation's own deadline commits its end (it timed
// out at that deadline) and reports OutcomeStale. After this Service's
// session ended (Run could not renew it in time), every generation it held
// is reported stale.
func (s *Service) Heartbeat(ctx context.Context, id, player string, gen uint64) (Result, error) {
	if s.live != nil && rules.CheckID("lobby ID", id) == nil {
		now := s.clock.Now()
		res, done, expired, over, at := s.live.beat(id, player, gen, now)
		if over != "" {
			s.live.lose(over, at)
		}
		if done {
			s.observeLocal(ctx, id, rules.Heartbeat(player, gen), res, now)
			return res, nil
		}
		if expired {
			s.live.timeOut(ctx, id, player, gen)
			return Result{Outcome: OutcomeStale}, nil
		}
	}
	res, err := s.Do(ctx, id, rules.Heartbeat(player, gen))
	if err == nil && res.Outcome == OutcomeApplied && s.live != nil {
		s.live.touch(id, player, gen, s.clock.Now())
	}
	return res, err
}

// observeLocal tells the Observer and the advice book of a command answered
// from memory.
func (s *Service) observeLocal(ctx context.Context, id string, cmd rules.Command, res Result, now time.Time) {
	if s.advice != nil {
		s.advice.record(id, cmd, res)
	}
	if s.cfg.observer != nil {
		s.cfg.observer.Observe(ctx, Observation{Lobby: id, Command: cmd, Result: res, At: now})
	}
}

// timeOut commits the end of a held generation as of its deadline. It
// reports whether the generation is settled (ended, or no longer held);
// false: the commit failed, try again later.
func (l *liveness) timeOut(ctx context.Context, id, player string, gen uint64) bool {
	l.mu.Lock()
	var at int64
	if g := l.find(id, player, gen); g != nil {
		at = g.deadline
	}
	l.mu.Unlock()
	if at == 0 {
		return true
	}
	_, err := l.s.transact(ctx, id, txn{cmd: rules.TimeOut(player, gen), at: time.Unix(0, at), internal: true})
	if err != nil {
		if ctx.Err() == nil {
			l.s.log.Warn("lobby time-out failed", "lobby", id, "player", l.s.Pseudonym(player), "gen", gen, "err", err)
		}
		return false
	}
	return true
}

// expireLoop commits the ends of held generations whose deadlines pass,
// each as of its deadline, until ctx is done. It also gives the session up
// at its deadline if no renewal came by then, even while the session loop
// is stuck on a store that does not answer.
func (l *liveness) expireLoop(ctx context.Context) {
	failures := 0
	for {
		now := l.s.clock.Now()
		l.mu.Lock()
		id, deadline := l.id, l.deadline
		l.mu.Unlock()
		if id != "" && !now.Before(deadline) {
			l.lose(id, deadline)
		}
		worked, failed, next := l.expireDue(ctx, now, failures+1)
		if ctx.Err() != nil {
			return
		}
		if worked {
			failures = 0
			if failed {
				failures++
			}
			continue
		}
		target := now.Add(l.s.cfg.resync)
		if next != 0 && next < target.UnixNano() {
			target = time.Unix(0, next)
		}
		if id != "" && deadline.Before(target) {
			target = deadline
		}
		if !l.s.waitUntil(ctx, target, l.poke) {
			return
		}
	}
}

// expireDue is one pass of the expiry loop: it commits the time-outs of
// the held generations whose deadlines have passed by now, each as of its
// deadline, and puts those whose commit failed back for a retry after
// backoff(attempt). worked: it had time-outs to commit; failed: some
// failed; next is the earliest deadline left (Unix ns; 0: none).
func (l *liveness) expireDue(ctx context.Context, now time.Time, attempt int) (worked, failed bool, next int64) {
	var todo []*heldGen
	l.mu.Lock()
	for len(l.due) > 0 && l.due[0].due <= now.UnixNano() {
		g := heap.Pop(&l.due).(*heldGen)
		if g.lost {
			// Nothing to commit: the session's deadline ends it.
			l.drop(g)
			continue
		}
		todo = append(todo, g)
	}
	if len(l.due) > 0 {
		next = l.due[0].due
	}
	l.mu.Unlock()
	if len(todo) == 0 {
		return false, false, next
	}
	bad := l.timeOuts(ctx, todo)
	if len(bad) == 0 || ctx.Err() != nil {
		return true, false, next
	}
	retry := l.s.clock.Now().Add(backoff(attempt)).UnixNano()
	l.mu.Lock()
	for _, g := range bad {
		if l.gens[heldRef{g.hl.id, g.gen}] == g && g.index < 0 && !g.lost {
			g.due = retry
			l.schedule(g)
		}
	}
	l.mu.Unlock()
	return true, true, next
}

// timeOuts commits the time-outs of gens, a few at once, and returns those
// that failed. (A generation's lobby, player and number never change.)
func (l *liveness) timeOuts(ctx context.Context, gens []*heldGen) []*heldGen {
	var mu sync.Mutex
	var failed []*heldGen
	l.s.inParallel(len(gens), func(i int) {
		if g := gens[i]; ctx.Err() == nil && !l.timeOut(ctx, g.hl.id, g.player, g.gen) {
			mu.Lock()
			failed = append(failed, g)
			mu.Unlock()
		}
	})
	return failed
}

// newSessionID is 128 random bits in hex.
func newSessionID() (string, error) {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lobby: session ID: %w", err)
	}
	return "s-" + hex.EncodeToString(b[:]), nil
}

// sessionLoop opens this Service's session, renews it about every third of
// its TTL, and applies the sessions of other processes (and its own past
// ones) whose deadlines have passed, until ctx is done. A Service without a
// session of its own still applies the others' at that pace: a fleet in
// the middle of a rolling upgrade must not leave a dead process's players
// online.
func (l *liveness) sessionLoop(ctx context.Context) {
	failures := 0
	for {
		now := l.s.clock.Now()
		wait := l.renewOnce(ctx, now)
		if ctx.Err() != nil {
			return
		}
		actx, cancel := context.WithTimeout(ctx, max(l.pace, time.Second))
		if err := l.applyExpired(actx); err != nil && ctx.Err() == nil {
			l.s.log.Warn("lobby expired sessions not applied", "err", err)
		}
		cancel()
		if wait < 0 {
			failures++
			wait = backoff(failures)
			l.mu.Lock()
			if l.id != "" {
				// Keep trying before the deadline, and once at it.
				wait = max(min(wait, l.deadline.Sub(now)), time.Millisecond)
			}
			l.mu.Unlock()
		} else {
			failures = 0
		}
		// From the time the renewal was judged at, so that renewals keep
		// their pace however long each one took.
		if !l.s.waitUntil(ctx, now.Add(wait), nil) {
			return
		}
	}
}

// renewOnce opens or renews the session at now. It returns how long after
// now to renew next, or a negative duration after a failure.
func (l *liveness) renewOnce(ctx context.Context, now time.Time) time.Duration {
	l.mu.Lock()
	id, deadline, draining := l.id, l.deadline, l.draining
	l.mu.Unlock()
	if draining || !l.own {
		return l.pace
	}
	if id != "" && !now.Before(deadline) {
		// Past its deadline without a renewal: over, whatever the store
		// says (others may have ended its connections already).
		l.lose(id, deadline)
		id = ""
	}
	next := now.Add(l.ttl)
	if id == "" {
		nid, err := newSessionID()
		if err == nil {
			err = l.ss.OpenSession(ctx, nid, next)
		}
		if err != nil {
			if ctx.Err() == nil {
				l.s.log.Warn("lobby session could not be opened", "err", err)
			}
			return -1
		}
		l.mu.Lock()
		if !l.draining {
			l.id, l.deadline = nid, next
		}
		l.mu.Unlock()
		l.s.log.Info("lobby session opened", "session", nid, "deadline", next)
		return l.pace
	}
	// The renewal is judged as of now + the skew margin: a session is
	// renewed only while its deadline is that far ahead of this clock,
	// so that a process whose clock runs a little ahead cannot have
	// found it over already, and one that takes until then to reach the
	// store could only succeed too late to be trusted.
	margin := l.skewMargin()
	rctx, cancel := context.WithTimeout(ctx, max(deadline.Sub(now)-margin, time.Millisecond))
	err := l.ss.RenewSession(rctx, id, now.Add(margin), next)
	cancel()
	switch {
	case err == nil:
		l.mu.Lock()
		if l.id == id && next.After(l.deadline) {
			l.deadline = next
		}
		l.mu.Unlock()
		return l.pace
	case errors.Is(err, store.ErrSessionEnded):
		l.s.log.Warn("lobby session ended before its renewal; its connections are over", "session", id, "deadline", deadline)
		l.lose(id, deadline)
		return 0 // open the next one at once
	default:
		if ctx.Err() == nil {
			l.s.log.Warn("lobby session renewal failed", "session", id, "deadline", deadline, "err", err)
		}
		if !l.s.clock.Now().Before(deadline) {
			l.lose(id, deadline)
		}
		return -1
	}
}

// skewMargin is how far ahead of this clock a session's deadline must be
// for a renewal to be tried: a sixth of the session TTL, which leaves the
// renewal made every third of it, and its retries, well clear.
func (l *liveness) skewMargin() time.Duration {
	return l.ttl / 6
}

// lose ends session id under this Service: every generation it held here
// is over as of deadline (the others end them in the store), so their
// sockets must rejoin. Rooms closes them at once; a Heartbeat on any of
// them is told OutcomeStale.
func (l *liveness) lose(id string, deadline time.Time) {
	l.mu.Lock()
	if l.id == id {
		l.id = ""
	}
	l.given[id] = deadline
	ended := map[string][]Ended{}
	retain := l.s.clock.Now().Add(max(l.ttl, l.s.m.Policy().HeartbeatTTL)).UnixNano()
	for lid, hl := range l.lobbies {
		for _, g := range hl.gens {
			if g.session != id || g.lost {
				continue
			}
			g.lost = true
			ended[lid] = append(ended[lid], Ended{Player: g.player, Gen: g.gen, Cause: rules.EndTimedOut, At: deadline})
			// Kept a while for the heartbeats that ask about it.
			g.due = retain
			l.schedule(g)
		}
	}
	hooks := l.lost
	l.mu.Unlock()
	poke(l.poke)
	for lid, e := range ended {
		for _, f := range hooks {
			f(lid, e)
		}
	}
}

// applyExpired ends, in every lobby they hold, the generations of the
// sessions whose deadlines have passed: one transition per lobby.
func (l *liveness) applyExpired(ctx context.Context) error {
	const batch = 64
	var errs []error
	now := l.s.clock.Now()
	for range 16 { // a bounded pass; the next renewal goes on
		expired, err := l.ss.ExpiredSessions(ctx, now, batch)
		if err != nil {
			return fmt.Errorf("lobby: expired sessions: %w", err)
		}
		progress := false
		for _, e := range expired {
			l.mu.Lock()
			if !e.Deadline.IsZero() {
				l.seen[e.ID] = e.Deadline
			}
			l.mu.Unlock()
			after := ""
			for {
				ids, err := l.ss.SessionLobbies(ctx, e.ID, after, batch)
				if err != nil {
					return errors.Join(append(errs, fmt.Errorf("lobby: lobbies of session %q: %w", e.ID, err))...)
				}
				for _, id := range ids {
					if _, err := l.s.transact(ctx, id, txn{cmd: rules.Tick(), internal: true}); err != nil {
						if ctx.Err() != nil {
							return ctx.Err()
						}
						errs = append(errs, fmt.Errorf("lobby %q: %w", id, err))
						continue
					}
					progress = true
				}
				if len(ids) < batch {
					break
				}
				after = ids[len(ids)-1]
			}
		}
		if len(expired) < batch || !progress {
			break
		}
	}
	l.prune(now)
	return errors.Join(errs...)
}

// prune forgets other sessions' deadlines long past.
func (l *liveness) prune(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, d := range l.seen {
		if d.Before(now.Add(-time.Minute)) {
			delete(l.seen, id)
			delete(l.closed, id)
		}
	}
	for id, d := range l.given {
		if d.Before(now.Add(-time.Minute)) {
			delete(l.given, id)
		}
	}
}

// Drain is the first step of a planned shutdown of this process: it ends,
// in one transition per lobby, every connection its session holds, as
// closes (reason disconnected), so that each member's grace starts now and
// it can reconnect through another process without losing its place or
// its host seat; then it ends the session in the store. Joins after Drain
// get stored heartbeat deadlines, as on a store without sessions.
//
// Close the sockets after Drain, with a close code that tells clients to
// reconnect at once (Rooms tells each Attachment's Sink End, as for any
// connection ended in a commit). Stop Run afterwards, not before. On a
// Service without a session Drain does nothing: report each socket's close
// with Disconnect instead. Lobbies whose transition fails are reported in
// the error, joined; the session is ended all the same, but then at its
// current deadline rather than now (no renewal succeeds any more): the
// other processes may have seen that deadline and judge the session alive
// until it, so the remaining connections end there, whoever judges them.
func (s *Service) Drain(ctx context.Context) error {
	l := s.live
	if l == nil {
		return nil
	}
	l.mu.Lock()
	id := l.id
	l.draining = true
	var lobbies []string
	for lid, hl := range l.lobbies {
		for _, g := range hl.gens {
			if g.session == id && !g.lost {
				lobbies = append(lobbies, lid)
				break
			}
		}
	}
	l.mu.Unlock()
	if id == "" {
		return nil
	}
	var errs []error
	// The store's index also names the lobbies of joins whose commit this
	// Service never learnt of (a write that failed after it committed).
	known := make(map[string]bool, len(lobbies))
	for _, lid := range lobbies {
		known[lid] = true
	}
	for after := ""; ; {
		ids, err := l.ss.SessionLobbies(ctx, id, after, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("lobby: lobbies of session %q: %w", id, err))
			break
		}
		for _, lid := range ids {
			if !known[lid] {
				known[lid] = true
				lobbies = append(lobbies, lid)
			}
		}
		if len(ids) < 64 {
			break
		}
		after = ids[len(ids)-1]
	}
	var mu sync.Mutex
	// latest is the latest time a drained lobby judged the session alive
	// at: the session must not end before it (a clock that stepped back
	// during the drain).
	var latest time.Time
	view := func(st *rules.State, _ uint64) {
		mu.Lock()
		if st.Updated.After(latest) {
			latest = st.Updated
		}
		mu.Unlock()
	}
	s.inParallel(len(lobbies), func(i int) {
		if _, err := s.transact(ctx, lobbies[i], txn{cmd: rules.Drain(id), internal: true, view: view}); err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("lobby %q: drain: %w", lobbies[i], err))
			mu.Unlock()
		}
	})
	end := s.clock.Now()
	if end.Before(latest) {
		end = latest
	}
	if len(errs) > 0 {
		// A lobby still holds connections of the session: moving its
		// deadline back would end them earlier for the processes that
		// read the store than for those that remember the deadline.
		l.mu.Lock()
		if end.Before(l.deadline) {
			end = l.deadline
		}
		l.mu.Unlock()
	}
	if err := l.ss.EndSession(ctx, id, end); err != nil {
		errs = append(errs, fmt.Errorf("lobby: end session: %w", err))
	}
	l.mu.Lock()
	if l.id == id {
		l.id = ""
	}
	l.given[id] = end
	l.mu.Unlock()
	return errors.Join(errs...)
}

// onLost registers f to be told of the generations of a session that
// ended under this Service.
func (l *liveness) onLost(f func(lobby string, ended []Ended)) {
	l.mu.Lock()
	l.lost = append(l.lost, f)
	l.mu.Unlock()
}

// pollHeads, for a store without change notifications, looks at the log
// heads of the lobbies this Service holds generations in: a lobby whose log
// moved past what this Service last read has its next heartbeat judged
// against the store (another process may have ended a generation there).
func (l *liveness) pollHeads(ctx context.Context) error {
	ids := l.heldLobbies()
	if len(ids) == 0 {
		return nil
	}
	heads, err := l.s.st.LogHeads(ctx, ids)
	if err != nil {
		return fmt.Errorf("lobby: log heads: %w", err)
	}
	for i, id := range ids {
		if i < len(heads) {
			l.heard(id, heads[i])
		}
	}
	return nil
}

// Session returns the ID of the session this Service's joins go through
// now: "" before Run has opened one, after Drain, on a store without
// sessions, or with WithSessionTTL(0). It is for logs and diagnostics.
func (s *Service) Session() string {
	if s.live == nil {
		return ""
	}
	return s.live.session(s.clock.Now())
}
