package main

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/shadow"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// dayStart is when the simulated day begins.
var dayStart = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// day configures the simulation.
type day struct {
	seed     uint64
	sessions int // game sessions over the day
	crashes  []time.Duration
}

var defaultDay = day{seed: 15, sessions: 240, crashes: []time.Duration{10*time.Hour + 30*time.Minute, 19*time.Hour + 10*time.Minute}}

// socket is one client connection, on one of two server processes.
type socket struct {
	player string
	gen    uint64
	proc   int
	closed bool // its close was reported (or its player left)
	dead   bool // its process crashed or its tab vanished: no heartbeats, no close
}

// session is one game lobby's life.
type session struct {
	id      string
	leg     *naive
	socks   []*socket
	current map[string]*socket // each player's newest socket
	gone    map[string]bool    // players who left or will not be back
	over    bool
}

// outcome is what a simulated day produced.
type outcome struct {
	report shadow.Report
	// stats counts the misfortunes of the day.
	stats map[string]int
	// causes lists the misfortunes each lobby had.
	causes map[string]map[string]bool
	// disagreements are all the disagreements, from the decision log.
	disagreements []disagreement
}

type disagreement struct{ lobby, class string }

// logged collects the lobby and class of every disagreement the Shadow
// logs.
type logged struct{ out *[]disagreement }

func (logged) Enabled(context.Context, slog.Level) bool { return true }
func (h logged) WithAttrs([]slog.Attr) slog.Handler     { return h }
func (h logged) WithGroup(string) slog.Handler          { return h }
func (h logged) Handle(_ context.Context, r slog.Record) error {
	var d disagreement
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "lobby":
			d.lobby = a.Value.String()
		case "class":
			d.class = a.Value.String()
		}
		return true
	})
	*h.out = append(*h.out, d)
	return nil
}

// sim drives the day's evidence through the naive logic and the Shadow.
type sim struct {
	ctx      context.Context
	rng      *rand.Rand
	clock    *clockwork.FakeClock
	sh       *shadow.Shadow
	queue    queue
	seq      int
	sessions []*session
	err      error
	stats    map[string]int
	causes   map[string]map[string]bool
}

// happened counts a misfortune and remembers that se had it.
func (s *sim) happened(se *session, what string) {
	s.stats[what]++
	if se == nil {
		return
	}
	if s.causes[se.id] == nil {
		s.causes[se.id] = map[string]bool{}
	}
	s.causes[se.id][what] = true
}

// simulate runs the day.
func simulate(d day) (outcome, error) {
	clock := clockwork.NewFakeClockAt(dayStart)
	var all []disagreement
	sh, err := shadow.New(memstore.New(), shadow.Config{Clock: clock, Samples: 3, Logger: slog.New(logged{&all})},
		lobby.WithPseudonymKey([]byte("examples/shadow: a fixed demo key")),
		lobby.WithClientClass(clientClass))
	if err != nil {
		return outcome{}, err
	}
	s := &sim{ctx: context.Background(), rng: rand.New(rand.NewPCG(d.seed, 0x5eed)), clock: clock, sh: sh,
		stats: map[string]int{}, causes: map[string]map[string]bool{}}
	for i := range d.sessions {
		at := time.Duration(s.rng.Int64N(int64(23 * time.Hour)))
		id := fmt.Sprintf("match-%03d", i+1)
		s.at(at, func() { s.startSession(id) })
	}
	for _, c := range d.crashes {
		s.at(c, func() { s.crash(s.rng.IntN(2)) })
	}
	for s.queue.Len() > 0 && s.err == nil {
		ev := heap.Pop(&s.queue).(*event)
		if now := clock.Now(); ev.at.After(now) {
			clock.Advance(ev.at.Sub(now))
		}
		ev.fn()
	}
	return outcome{report: sh.Report(), stats: s.stats, causes: s.causes, disagreements: all}, s.err
}

// at schedules fn at dayStart+d.
func (s *sim) at(d time.Duration, fn func()) { s.after(dayStart.Add(d), fn) }

// after schedules fn at t.
func (s *sim) after(t time.Time, fn func()) {
	s.seq++
	heap.Push(&s.queue, &event{at: t, seq: s.seq, fn: fn})
}

func (s *sim) in(d time.Duration, fn func()) { s.after(s.clock.Now().Add(d), fn) }

func (s *sim) fail(err error) {
	if s.err == nil && err != nil {
		s.err = err
	}
}

// secs returns a random duration in [lo, hi) seconds.
func (s *sim) secs(lo, hi int) time.Duration {
	return time.Duration(lo)*time.Second + time.Duration(s.rng.Int64N(int64(hi-lo)*int64(time.Second)))
}

// decide reports the legacy host after a piece of evidence.
func (s *sim) decide(se *session) {
	if _, err := s.sh.ReportLegacyHost(s.ctx, se.id, se.leg.host, s.clock.Now()); err != nil {
		s.fail(err)
	}
}

func (s *sim) startSession(id string) {
	se := &session{id: id, leg: newNaive(), current: map[string]*socket{}, gone: map[string]bool{}}
	s.sessions = append(s.sessions, se)
	n := 3 + s.rng.IntN(4)
	length := s.secs(5*60, 20*60)
	joinAt := time.Duration(0)
	for i := range n {
		p := fmt.Sprintf("%s-player-%d", id, i+1)
		joinAt += s.secs(1, 15)
		s.in(joinAt, func() { s.join(se, p) })
		s.plan(se, p, joinAt, length)
	}
	s.in(5*time.Second, func() { s.beatRound(se) })
	s.in(length, func() { s.endSession(se) })
}

// plan picks one misfortune (or none) for a player during the session.
func (s *sim) plan(se *session, p string, joinAt, length time.Duration) {
	when := joinAt + s.secs(30, int((length-joinAt)/time.Second)-10)
	switch k := s.rng.IntN(100); {
	case k < 15: // flaky network: a close, back inside the grace
		s.in(when, func() {
			if sock := s.live(se, p); sock != nil {
				s.happened(se, "reconnect inside the grace")
				s.close(se, sock)
				s.in(s.secs(1, 6), func() { s.join(se, p) })
			}
		})
	case k < 27: // reconnect first, the old socket's close arrives late
		s.in(when, func() {
			if old := s.live(se, p); old != nil {
				s.happened(se, "late close after a reconnect")
				s.join(se, p)
				s.in(s.secs(1, 3), func() { s.close(se, old) })
			}
		})
	case k < 33: // the tab vanishes: no heartbeats, no close, no return
		s.in(when, func() {
			if sock := s.live(se, p); sock != nil {
				s.happened(se, "vanished tab")
				sock.dead = true
				se.gone[p] = true
			}
		})
	case k < 41: // closes the tab and does not come back
		s.in(when, func() {
			if sock := s.live(se, p); sock != nil {
				s.happened(se, "closed for good")
				se.gone[p] = true
				s.close(se, sock)
			}
		})
	case k < 51: // leaves the lobby on purpose
		s.in(when, func() {
			if s.live(se, p) != nil {
				s.happened(se, "left")
				s.leave(se, p)
			}
		})
	}
}

// live returns p's newest socket if it can still act.
func (s *sim) live(se *session, p string) *socket {
	sock := se.current[p]
	if se.over || se.gone[p] || sock == nil || sock.closed || sock.dead {
		return nil
	}
	return sock
}

func (s *sim) join(se *session, p string) {
	if se.over || se.gone[p] {
		return
	}
	res, err := s.sh.Join(s.ctx, se.id, p, nil)
	if err != nil {
		s.fail(err)
		return
	}
	sock := &socket{player: p, gen: res.Gen, proc: s.rng.IntN(2)}
	se.socks = append(se.socks, sock)
	se.current[p] = sock
	se.leg.open(p, res.Gen)
	s.decide(se)
}

func (s *sim) close(se *session, sock *socket) {
	if se.over || sock.closed || sock.dead {
		return
	}
	sock.closed = true
	if _, err := s.sh.Disconnect(s.ctx, se.id, sock.player, sock.gen); err != nil {
		s.fail(err)
		return
	}
	se.leg.close(sock.gen)
	s.decide(se)
}

func (s *sim) leave(se *session, p string) {
	se.gone[p] = true
	for _, sock := range se.socks {
		if sock.player == p {
			sock.closed = true
		}
	}
	if _, err := s.sh.Leave(s.ctx, se.id, p); err != nil {
		s.fail(err)
		return
	}
	se.leg.leave(p)
	s.decide(se)
}

// beatRound sends every live socket's heartbeat (clients beat every 5 s),
// then reports the legacy host: lobbyhost's own expiries are compared here.
func (s *sim) beatRound(se *session) {
	if se.over {
		return
	}
	for _, sock := range se.socks {
		if sock.closed || sock.dead {
			continue
		}
		if _, err := s.sh.Heartbeat(s.ctx, se.id, sock.player, sock.gen); err != nil {
			s.fail(err)
			return
		}
	}
	s.decide(se)
	s.in(5*time.Second, func() { s.beatRound(se) })
}

// crash kills a server process: its sockets stop and never close. Most of
// their clients reconnect to the other process a little later.
func (s *sim) crash(proc int) {
	s.happened(nil, "server crash")
	for _, se := range s.sessions {
		for _, sock := range se.socks {
			if se.over || sock.closed || sock.dead || sock.proc != proc {
				continue
			}
			sock.dead = true
			s.happened(se, "socket lost in a crash")
			if s.rng.IntN(5) == 0 {
				se.gone[sock.player] = true
				continue
			}
			p := sock.player
			s.in(s.secs(2, 40), func() {
				if se.current[p] == sock { // not back already
					s.join(se, p)
				}
			})
		}
	}
}

// endSession: the game is over; everyone still listed leaves.
func (s *sim) endSession(se *session) {
	for p := range se.current {
		se.gone[p] = false
	}
	players := make([]string, 0, len(se.current))
	for _, sock := range se.socks {
		if se.current[sock.player] == sock {
			players = append(players, sock.player)
		}
	}
	for _, p := range players {
		s.leave(se, p)
	}
	se.over = true
}

// event is one scheduled action; queue orders them by time, then by when
// they were scheduled, so the day is deterministic.
type event struct {
	at  time.Time
	seq int
	fn  func()
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// clientClass is the class of client the server names for the grace
// advice: here, by the parity of the player ID's last byte, standing for
// two platforms.
func clientClass(_, player string) string {
	if player == "" || player[len(player)-1]%2 == 0 {
		return "desktop"
	}
	return "mobile"
}
