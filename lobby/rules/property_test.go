package rules

import (
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/lobbyhost/lobbyhost/succession"
)

var sprintf = fmt.Sprintf

func succCand(id string, m *refMember) succession.Candidate {
	return succession.Candidate{Player: id, JoinSeq: m.seq, Attrs: m.attrs}
}

var players = []string{"p-17", "p-23", "p-41", "p-62", "p-9"}

// schedStep is one command of a random schedule, with the time step before
// it. Generations are chosen when the step runs, from the generations issued
// so far (live or ended) or a never-issued one, so the same schedule picks
// the same generation in every run.
type schedStep struct {
	Op      Op
	Player  int
	To      int
	GenPick int // < 0: a never-issued generation; else index into issued
	Attrs   int // 0 nil, 1 player, 2 spectator, 3 empty
	Advance int // index into advances; -1 and -2: to the next deadline, or 1 ns before it
	Skew    bool
	// Actor, for Kick and Lock: 0 the server, 1 the current host (Player
	// if there is none), else Player.
	Actor     int
	Block     int // index into blocks
	Locked    bool
	Overrides int // index into overrideChoices
	// Session, for Join: 0 none, else the index+1 into sessionIDs of the
	// session to hold the new connection (none once that session ended).
	Session int
}

var sessionIDs = []string{"sess-a", "sess-b", "sess-c"}

// sessionPlan is what a schedule's sessions do: each ends at a fixed
// moment or never, and before that callers may know an earlier deadline
// (a session's deadline only moves forward, so any one seen still ahead of
// now proves it alive at now).
type sessionPlan struct {
	ends  map[string]time.Time     // the session's last deadline; absent: it never ends
	ahead map[string]time.Duration // how far ahead of the clock a caller's view of a live session lies
}

func drawSessionPlan(t *rapid.T) sessionPlan {
	sp := sessionPlan{ends: map[string]time.Time{}, ahead: map[string]time.Duration{}}
	for _, id := range sessionIDs {
		// Ends on whole seconds, often at the instant of another deadline
		// (the timing of joins, graces and TTLs is in seconds too).
		if e := rapid.SampledFrom([]int{-1, 1, 2, 3, 5, 8, 9, 10, 13, 16, 20, 30, 45}).Draw(t, "sessionEnd"); e >= 0 {
			sp.ends[id] = t0.Add(time.Duration(e) * time.Second)
		}
		sp.ahead[id] = time.Duration(rapid.IntRange(1, 20).Draw(t, "sessionAhead")) * time.Second
	}
	return sp
}

// deadlines returns the session deadlines a caller whose clock reads clock
// passes in: the last deadline of a session that has ended by then, a
// deadline still ahead of clock for one that has not (or nothing, now and
// then, for one that never ends).
func (sp sessionPlan) deadlines(clock time.Time) SessionDeadlines {
	if len(sp.ahead) == 0 {
		return nil
	}
	d := SessionDeadlines{}
	for _, id := range sessionIDs {
		end, ends := sp.ends[id]
		seen := clock.Add(sp.ahead[id])
		switch {
		case ends && !end.After(clock):
			d[id] = end
		case ends && end.Before(seen):
			d[id] = end
		case ends || sp.ahead[id]%(2*time.Second) == 0:
			d[id] = seen
		}
	}
	return d
}

// endedBy reports whether session id has ended at t.
func (sp sessionPlan) endedBy(id string, t time.Time) bool {
	end, ok := sp.ends[id]
	return ok && !end.After(t)
}

var blocks = []time.Duration{0, 3 * time.Second, 20 * time.Second, time.Minute}

var overrideChoices = []Overrides{
	{},
	Overrides{}.WithGrace(2 * time.Second),
	Overrides{}.WithHeartbeatTTL(0),
	Overrides{}.WithHeartbeatTTL(4 * time.Second),
	Overrides{}.WithMaxMembers(2),
	Overrides{}.WithMaxMembers(0),
	Overrides{}.WithMaxConnectionsPerPlayer(1),
	Overrides{}.WithMaxBlocks(1),
	Overrides{}.WithMaxBlocks(0),
	Overrides{}.WithGrace(3 * time.Second).WithHeartbeatTTL(5 * time.Second).WithMaxMembers(4).WithMaxConnectionsPerPlayer(2),
}

var advances = []time.Duration{0, 0, time.Second, time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 8 * time.Second, 15 * time.Second, time.Nanosecond, time.Millisecond}

func drawPolicy(t *rapid.T) Policy {
	p := DefaultPolicy()
	p.Grace = rapid.SampledFrom([]time.Duration{time.Second, 5 * time.Second, 8 * time.Second}).Draw(t, "grace")
	p.HeartbeatTTL = rapid.SampledFrom([]time.Duration{0, 3 * time.Second, 15 * time.Second}).Draw(t, "ttl")
	p.MaxMembers = rapid.SampledFrom([]int{0, 0, 3}).Draw(t, "maxMembers")
	p.MaxConnectionsPerPlayer = rapid.SampledFrom([]int{0, 0, 1, 2}).Draw(t, "maxConns")
	p.MaxBlocks = rapid.SampledFrom([]int{0, DefaultMaxBlocks, 1, 2}).Draw(t, "maxBlocks")
	if rapid.Bool().Draw(t, "spectatorRule") {
		p.Succession.Eligible = func(c succession.Candidate) bool { return c.Attrs["role"] != "spectator" }
	}
	if rapid.Bool().Draw(t, "reverseOrder") {
		// Latest joiner first: a custom order must be honoured too.
		p.Succession.Compare = func(a, b succession.Candidate) int { return -succession.DefaultCompare(a, b) }
	}
	return p
}

func drawSchedule(t *rapid.T) []schedStep {
	return drawScheduleOf(t, []Op{OpJoin, OpJoin, OpJoin, OpHeartbeat, OpHeartbeat, OpDisconnect, OpDisconnect, OpExpireLease, OpLeave, OpTransferHost, OpTick,
		OpUpdate, OpKick, OpKick, OpLock, OpLock, OpConfigure}, 0)
}

// drawSessionSchedule draws a schedule whose joins are held by sessions
// about half of the time, with time-outs of session-held generations.
func drawSessionSchedule(t *rapid.T) []schedStep {
	return drawScheduleOf(t, []Op{OpJoin, OpJoin, OpJoin, OpJoin, OpHeartbeat, OpHeartbeat, OpDisconnect, OpTimeOut, OpTimeOut, OpExpireLease, OpLeave,
		OpTransferHost, OpTick, OpTick, OpUpdate, OpKick, OpLock, OpConfigure, OpDrain}, len(sessionIDs))
}

// drawScheduleOf draws a schedule of the given operations; joins name one
// of the first sessions sessions, or none.
func drawScheduleOf(t *rapid.T, ops []Op, sessions int) []schedStep {
	return rapid.SliceOfN(rapid.Custom(func(t *rapid.T) schedStep {
		return schedStep{
			Op:        rapid.SampledFrom(ops).Draw(t, "op"),
			Player:    rapid.IntRange(0, len(players)-1).Draw(t, "player"),
			To:        rapid.IntRange(0, len(players)-1).Draw(t, "to"),
			GenPick:   rapid.IntRange(-1, 40).Draw(t, "gen"),
			Attrs:     rapid.IntRange(0, 3).Draw(t, "attrs"),
			Advance:   rapid.IntRange(-2, len(advances)-1).Draw(t, "advance"),
			Skew:      rapid.IntRange(0, 15).Draw(t, "skew") == 0,
			Actor:     rapid.IntRange(0, 2).Draw(t, "actor"),
			Block:     rapid.IntRange(0, len(blocks)-1).Draw(t, "block"),
			Locked:    rapid.IntRange(0, 1).Draw(t, "locked") == 1,
			Overrides: rapid.IntRange(0, len(overrideChoices)-1).Draw(t, "overrides"),
			Session:   rapid.IntRange(-sessions, sessions).Draw(t, "session"),
		}
	}), 1, 60).Draw(t, "schedule")
}

// schedRunner turns schedule steps into commands and times.
type schedRunner struct {
	m      *Machine
	s      *State
	clock  time.Time // the latest command time
	issued map[string][]uint64
	// sessions is what the schedule's sessions do (none by default).
	sessions sessionPlan
}

func newSchedRunner(m *Machine) *schedRunner {
	return &schedRunner{m: m, s: NewState("lobby-p", 0), clock: t0, issued: map[string][]uint64{}}
}

// next returns the command and time of step st, computed from the state
// caught up to the current clock (so sweeper timing cannot change it).
func (r *schedRunner) next(st schedStep) (Command, time.Time) {
	now := r.clock
	switch {
	case st.Advance >= 0:
		now = now.Add(advances[st.Advance])
	default:
		view := r.s.Clone()
		if _, err := r.m.Apply(view, Tick().WithSessionDeadlines(r.sessions.deadlines(r.clock)), now); err != nil {
			panic(err)
		}
		d := view.NextDeadline()
		// Or the next end of a session the lobby holds.
		for _, id := range view.Sessions() {
			if end, ok := r.sessions.ends[id]; ok && end.After(now) && (d.IsZero() || end.Before(d)) {
				d = end
			}
		}
		if !d.IsZero() {
			now = d
			if st.Advance == -2 {
				now = d.Add(-time.Nanosecond)
			}
		}
	}
	if now.Before(r.clock) {
		now = r.clock
	}
	r.clock = now
	if st.Skew {
		// This command comes from a process whose clock is behind.
		now = now.Add(-2 * time.Second)
	}
	p := players[st.Player]
	gen := uint64(1000 + st.GenPick)
	if gens := r.issued[p]; st.GenPick >= 0 && len(gens) > 0 {
		gen = gens[st.GenPick%len(gens)]
	}
	var attrs map[string]string
	switch st.Attrs {
	case 1:
		attrs = map[string]string{"role": "player"}
	case 2:
		attrs = map[string]string{"role": "spectator"}
	case 3:
		attrs = map[string]string{}
	}
	actor := p
	switch st.Actor {
	case 0:
		actor = ""
	case 1:
		// The host the command will be judged against: the lobby caught
		// up to its time, whether or not a sweeper has stored that yet.
		view := r.s.Clone()
		if _, err := r.m.Apply(view, Tick().WithSessionDeadlines(r.sessions.deadlines(r.clock)), now); err != nil {
			panic(err)
		}
		if view.Host != "" {
			actor = view.Host
		}
	}
	var cmd Command
	switch st.Op {
	case OpJoin:
		cmd = Join(p, attrs)
		// A process joins through its session while the session lives
		// (by the unskewed clock, which is never behind the lobby's last
		// transition); now and then, one whose session has ended tries
		// anyway, and is refused.
		if st.Session > 0 && (st.Skew || !r.sessions.endedBy(sessionIDs[st.Session-1], r.clock)) {
			cmd = cmd.WithSession(sessionIDs[st.Session-1])
		}
	case OpHeartbeat:
		cmd = Heartbeat(p, gen)
	case OpDisconnect:
		cmd = Disconnect(p, gen)
	case OpTimeOut:
		cmd = TimeOut(p, gen)
	case OpDrain:
		cmd = Drain(sessionIDs[st.To%len(sessionIDs)])
	case OpExpireLease:
		cmd = ExpireLease(p, gen, now)
	case OpLeave:
		cmd = Leave(p)
	case OpTransferHost:
		cmd = TransferHost(p, players[st.To])
	case OpUpdate:
		cmd = Update(p, attrs)
	case OpKick:
		target := players[st.To]
		if st.Actor == 1 && st.Block == 0 {
			// Now and then the host names itself.
			target = actor
			if target == "" {
				target = p
			}
		}
		cmd = Kick(actor, target, blocks[st.Block])
	case OpLock:
		cmd = Unlock(actor)
		if st.Locked {
			cmd = Lock(actor)
		}
	case OpConfigure:
		cmd = Configure(overrideChoices[st.Overrides])
	default:
		cmd = Tick()
	}
	return cmd.WithSessionDeadlines(r.sessions.deadlines(r.clock)), now
}

func (r *schedRunner) record(cmd Command, res Result) {
	if cmd.Op == OpJoin {
		r.issued[cmd.Player] = append(r.issued[cmd.Player], res.Gen)
	}
}

// TestMachineMatchesModel runs random schedules through the Machine and the
// naive reference model side by side, and checks the invariants after every
// command.
func TestMachineMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := drawPolicy(t)
		m, err := NewMachine(p)
		if err != nil {
			t.Fatal(err)
		}
		model := newRefModel(p, "lobby-p")
		run := newSchedRunner(m)
		sched := drawSchedule
		if rapid.Bool().Draw(t, "sessions") {
			run.sessions, sched = drawSessionPlan(t), drawSessionSchedule
		}
		for i, st := range sched(t) {
			cmd, now := run.next(st)
			before := run.s.Clone()
			res, err := m.Apply(run.s, cmd, now)
			saved := *model
			saved.members = cloneRefMembers(model.members)
			saved.blocks = maps.Clone(model.blocks)
			modelEvents, modelOut, refused := model.apply(cmd, now)
			if (refused == nil) != (err == nil) || (err != nil && !errors.Is(err, refused)) {
				t.Fatalf("step %d %v %q at %v: machine error %v, model refused with %v", i, cmd.Op, cmd.Player, now, err, refused)
			}
			if err != nil {
				if !IsRefusal(err) {
					t.Fatalf("step %d: %v refused with %v, which IsRefusal denies", i, cmd.Op, err)
				}
				// Refusals commit nothing: the model's catch-up is undone.
				*model = saved
				if diff := cmp.Diff(before, run.s, cmpState); diff != "" {
					t.Fatalf("step %d: refused %v changed the state:\n%s", i, cmd.Op, diff)
				}
				checkReplay(t, m, before, cmd, now, true)
				continue
			}
			run.record(cmd, res)
			if diff := cmp.Diff(modelEvents, res.Events, cmpState); diff != "" {
				t.Fatalf("step %d %v %q at %v: events differ from the model (-model +machine):\n%s", i, cmd.Op, cmd.Player, now, diff)
			}
			if res.Outcome != modelOut {
				t.Fatalf("step %d %v %q gen %d: outcome %v, model %v", i, cmd.Op, cmd.Player, cmd.Gen, res.Outcome, modelOut)
			}
			if diffs := model.diffState(run.s); len(diffs) > 0 {
				t.Fatalf("step %d %v %q: state differs from the model:\n%v", i, cmd.Op, cmd.Player, diffs)
			}
			checkInvariants(t, m, before, run.s, cmd, res, now)
			if cmd.Op != OpJoin {
				checkReplay(t, m, run.s, cmd, now, false)
			}
		}
	})
}

// cloneRefMembers deep-copies the model's members (the refusal path restores
// a snapshot the failed apply may have touched).
func cloneRefMembers(in map[string]*refMember) map[string]*refMember {
	out := make(map[string]*refMember, len(in))
	for k, v := range in {
		c := *v
		c.gens = map[uint64]time.Time{}
		for g, d := range v.gens {
			c.gens[g] = d
		}
		c.held = maps.Clone(v.held)
		out[k] = &c
	}
	return out
}

// checkInvariants checks the lobby invariants on one transition from before
// to after.
func checkInvariants(t *rapid.T, m *Machine, before, after *State, cmd Command, res Result, now time.Time) {
	t.Helper()
	if err := m.CheckTransition(before, after, cmd, res, now); err != nil {
		t.Fatal(err)
	}
}

// checkReplay applies cmd again at the same time: nothing may change. (A
// replayed TransferHost is refused, since the actor no longer hosts; a
// refusal changes nothing either.)
func checkReplay(t *rapid.T, m *Machine, s *State, cmd Command, now time.Time, refused bool) {
	t.Helper()
	again := s.Clone()
	res, err := m.Apply(again, cmd, now)
	if refused && err == nil {
		t.Fatalf("replayed refused %v was accepted", cmd.Op)
	}
	if err != nil {
		if diff := cmp.Diff(s, again, cmpState); diff != "" {
			t.Fatalf("replayed %v refused but changed the state:\n%s", cmd.Op, diff)
		}
		return
	}
	if res.Changed || len(res.Events) > 0 {
		t.Fatalf("replaying %v changed something: %+v", cmd.Op, res)
	}
}

// TestSweeperTimingDoesNotChangeOutcome runs each random schedule twice:
// once with no sweeper, once with Ticks and ExpireLease triggers at random
// moments between commands (never ahead of the next command's clock). The
// events, the outcomes of the commands and the final state must be
// identical. Half of the schedules hold connections in sessions that end at
// random moments: then the commands (time-outs of session-held generations
// among them) and the sweeps pass the session deadlines known at their
// time, and whoever applies an ended session first, the outcome is the
// same: a function of the commands, the session deadlines and their times.
func TestSweeperTimingDoesNotChangeOutcome(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := drawPolicy(t)
		m, err := NewMachine(p)
		if err != nil {
			t.Fatal(err)
		}
		var plan sessionPlan
		var sched []schedStep
		if rapid.Bool().Draw(t, "sessions") {
			plan, sched = drawSessionPlan(t), drawSessionSchedule(t)
		} else {
			sched = drawSchedule(t)
		}
		sweeps := rapid.SliceOfN(rapid.IntRange(0, 3), len(sched), len(sched)).Draw(t, "sweeps")
		fractions := rapid.SliceOfN(rapid.Float64Range(0, 1), len(sched), len(sched)).Draw(t, "fractions")

		type outcome struct {
			Op      Op
			Outcome Outcome
			Err     string
		}
		// The sweeper reads the same clock as the commands: it never runs
		// ahead of a later command's time. (A command from a process whose
		// clock lags is later than a sweep in real time but stamped
		// earlier; with skew, timing independence only holds up to it.)
		var times []time.Time
		run := func(withSweeper bool) ([]Event, []outcome, *State) {
			r := newSchedRunner(m)
			r.sessions = plan
			var events []Event
			var outs []outcome
			prev := r.clock
			for i, st := range sched {
				cmd, now := r.next(st)
				if !withSweeper {
					times = append(times, now)
				}
				limit := now
				if withSweeper {
					for _, later := range times[i:] {
						if later.Before(limit) {
							limit = later
						}
					}
				}
				if withSweeper && !limit.Before(prev) {
					for k := 0; k < sweeps[i]; k++ {
						at := prev.Add(time.Duration(fractions[i] * float64(limit.Sub(prev)) * float64(k+1) / float64(sweeps[i])))
						sweep := Tick()
						if k%2 == 1 && cmd.Player != "" {
							// An expiry worker naming some lease.
							sweep = ExpireLease(cmd.Player, cmd.Gen, at)
						}
						// It knows the session deadlines as of its own time.
						res, err := m.Apply(r.s, sweep.WithSessionDeadlines(plan.deadlines(at)), at)
						if err != nil {
							t.Fatalf("sweep at %v: %v", at, err)
						}
						events = append(events, res.Events...)
					}
				}
				if now.After(prev) {
					prev = now
				}
				res, err := m.Apply(r.s, cmd, now)
				o := outcome{Op: cmd.Op, Outcome: res.Outcome}
				if err != nil {
					o.Err = err.Error()
				} else {
					r.record(cmd, res)
				}
				if cmd.Op == OpExpireLease || cmd.Op == OpTick {
					// What a trigger reports depends on who got there
					// first; that is the one allowed difference.
					o.Outcome = 0
				}
				outs = append(outs, o)
				events = append(events, res.Events...)
			}
			res, err := m.Apply(r.s, Tick().WithSessionDeadlines(plan.deadlines(r.clock)), r.clock)
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, res.Events...)
			return events, outs, r.s
		}
		eventsA, outsA, finalA := run(false)
		eventsB, outsB, finalB := run(true)
		if diff := cmp.Diff(eventsA, eventsB, cmpState); diff != "" {
			t.Fatalf("events depend on sweeper timing (-unswept +swept):\n%s", diff)
		}
		if diff := cmp.Diff(outsA, outsB); diff != "" {
			t.Fatalf("outcomes depend on sweeper timing (-unswept +swept):\n%s", diff)
		}
		if diff := cmp.Diff(finalA, finalB, cmpState); diff != "" {
			t.Fatalf("final state depends on sweeper timing (-unswept +swept):\n%s", diff)
		}
	})
}

// TestSessionDeadlinesMeanNothingWithoutHeldConnections: in a lobby whose
// connections all store their heartbeat deadlines, session deadlines given
// as input (passed or not) change no event, outcome or state: Apply with
// or without them is the same function.
func TestSessionDeadlinesMeanNothingWithoutHeldConnections(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := drawPolicy(t)
		m, err := NewMachine(p)
		if err != nil {
			t.Fatal(err)
		}
		sched := drawSchedule(t)
		plan := drawSessionPlan(t)
		run := func(withDeadlines bool) ([]Result, []string, *State) {
			r := newSchedRunner(m)
			var results []Result
			var errs []string
			for _, st := range sched {
				cmd, now := r.next(st)
				if withDeadlines {
					cmd = cmd.WithSessionDeadlines(plan.deadlines(now))
				}
				res, err := m.Apply(r.s, cmd, now)
				if err != nil {
					errs = append(errs, err.Error())
					continue
				}
				r.record(cmd, res)
				results = append(results, res)
			}
			return results, errs, r.s
		}
		resA, errsA, finalA := run(false)
		resB, errsB, finalB := run(true)
		if diff := cmp.Diff(resA, resB, cmpState); diff != "" {
			t.Fatalf("results depend on session deadlines no connection is held by (-without +with):\n%s", diff)
		}
		if diff := cmp.Diff(errsA, errsB); diff != "" {
			t.Fatalf("refusals depend on session deadlines (-without +with):\n%s", diff)
		}
		if diff := cmp.Diff(finalA, finalB, cmpState); diff != "" {
			t.Fatalf("final state depends on session deadlines (-without +with):\n%s", diff)
		}
	})
}
