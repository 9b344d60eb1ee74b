package lobby

import (
	"errors"
	"fmt"
	"maps"
	"slices"
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
}

var blocks = []time.Duration{0, 3 * time.Second, 20 * time.Second, time.Minute}

var overrideChoices = []Overrides{
	{},
	Overrides{}.WithGrace(2 * time.Second),
	Overrides{}.WithHeartbeatTTL(0),
	Overrides{}.WithHeartbeatTTL(4 * time.Second),
	Overrides{}.WithMaxMembers(2),
	Overrides{}.WithMaxMembers(0),
	Overrides{}.WithMaxConnsPerPlayer(1),
	Overrides{}.WithMaxBlocks(1),
	Overrides{}.WithMaxBlocks(0),
	Overrides{}.WithGrace(3 * time.Second).WithHeartbeatTTL(5 * time.Second).WithMaxMembers(4).WithMaxConnsPerPlayer(2),
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
	ops := []Op{OpJoin, OpJoin, OpJoin, OpHeartbeat, OpHeartbeat, OpDisconnect, OpDisconnect, OpExpireLease, OpLeave, OpTransferHost, OpTick,
		OpUpdate, OpKick, OpKick, OpLock, OpLock, OpConfigure}
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
		}
	}), 1, 60).Draw(t, "schedule")
}

// schedRunner turns schedule steps into commands and times.
type schedRunner struct {
	m      *Machine
	s      *State
	clock  time.Time // the latest command time
	issued map[string][]uint64
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
		if _, err := r.m.Apply(view, Tick(), now); err != nil {
			panic(err)
		}
		if d := view.NextDeadline(); !d.IsZero() {
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
		if _, err := r.m.Apply(view, Tick(), now); err != nil {
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
	case OpHeartbeat:
		cmd = Heartbeat(p, gen)
	case OpDisconnect:
		cmd = Disconnect(p, gen)
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
		cmd = Lock(actor, st.Locked)
	case OpConfigure:
		cmd = Configure(overrideChoices[st.Overrides])
	default:
		cmd = Tick()
	}
	return cmd, now
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
		for i, st := range drawSchedule(t) {
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
		out[k] = &c
	}
	return out
}

// checkInvariants checks the lobby invariants on one transition from before
// to after.
func checkInvariants(t *rapid.T, m *Machine, before, after *State, cmd Command, res Result, now time.Time) {
	t.Helper()
	if err := invariantErr(m, before, after, cmd, res, now); err != nil {
		t.Fatal(err)
	}
}

// invariantErr reports the first of the lobby invariants that the transition
// from before to after (by cmd at now, with result res) breaks.
func invariantErr(m *Machine, before, after *State, cmd Command, res Result, now time.Time) error {
	if err := after.Validate(); err != nil {
		return fmt.Errorf("%v: %v", cmd.Op, err)
	}
	if now.Before(before.Updated) {
		now = before.Updated
	}
	// The lobby the command was judged on: before, caught up to now.
	caught := before.Clone()
	if _, err := m.Apply(caught, Tick(), now); err != nil {
		return err
	}
	if err := admissionErr(m, caught, after, cmd, now); err != nil {
		return err
	}
	// 1. At rest, online exactly while holding a live generation; a
	// reconnecting member is listed until its deadline.
	for _, mem := range after.Members {
		for _, c := range mem.Conns {
			if !c.Deadline.IsZero() && !now.Before(c.Deadline) {
				return fmt.Errorf("%v: %s holds generation %d past its deadline %v at %v", cmd.Op, mem.Player, c.Gen, c.Deadline, now)
			}
		}
		if mem.Status() == StatusReconnecting && !now.Before(mem.ReconnectBy) {
			return fmt.Errorf("%v: %s listed past its reconnect deadline", cmd.Op, mem.Player)
		}
	}
	// 2. The host, if any, is a member (Validate) — and every event's host
	// is a member of that event's view.
	for _, e := range res.Events {
		if e.Host != "" && !slices.ContainsFunc(e.Members, func(v MemberView) bool { return v.Player == e.Host }) {
			return fmt.Errorf("event %d: host %q not in its member view", e.Revision, e.Host)
		}
	}
	// 3. An empty host seat means nobody is eligible.
	if after.Host == "" {
		for i := range after.Members {
			mem := &after.Members[i]
			if mem.liveAt(now) && m.p.Succession.IsEligible(mem.candidate()) {
				return fmt.Errorf("%v: no host while %s is eligible", cmd.Op, mem.Player)
			}
		}
	}
	// 4. One revision per visible change: each event differs visibly from
	// the one before; no event means no visible change.
	prevHost, prevView, prevTerm := before.Host, before.View(), before.Term
	prevLocked, prevOverrides := before.Locked, before.Overrides
	for _, e := range res.Events {
		// The host term moves by one exactly when the host does.
		wantTerm := prevTerm
		if e.Host != e.PrevHost {
			wantTerm++
		}
		if e.Term != wantTerm {
			return fmt.Errorf("event %d (%s): host %q → %q, term %d after %d", e.Revision, e.Reason, e.PrevHost, e.Host, e.Term, prevTerm)
		}
		prevTerm = e.Term
		if e.Host == prevHost && e.Locked == prevLocked && e.Overrides == prevOverrides && cmp.Equal(e.Members, prevView, cmpState) {
			return fmt.Errorf("event %d (%s) changes nothing visible", e.Revision, e.Reason)
		}
		if e.PrevHost != prevHost {
			return fmt.Errorf("event %d: previous host %q, want %q", e.Revision, e.PrevHost, prevHost)
		}
		prevHost, prevView, prevLocked, prevOverrides = e.Host, e.Members, e.Locked, e.Overrides
	}
	if after.Host != prevHost || after.Locked != prevLocked || after.Overrides != prevOverrides || !cmp.Equal(after.View(), prevView, cmpState) {
		return fmt.Errorf("%v: a visible change without an event", cmd.Op)
	}
	if after.Term != prevTerm {
		return fmt.Errorf("%v: host term %d after the events' %d", cmd.Op, after.Term, prevTerm)
	}
	if after.Revision != before.Revision+uint64(len(res.Events)) {
		return fmt.Errorf("%v: revision %d → %d with %d events", cmd.Op, before.Revision, after.Revision, len(res.Events))
	}
	// Joins allocate consecutively.
	if cmd.Op == OpJoin && (res.Gen != before.NextGen || after.NextGen != before.NextGen+1) {
		return fmt.Errorf("join: generation %d (next %d→%d)", res.Gen, before.NextGen, after.NextGen)
	}
	if cmd.Op != OpJoin && after.NextGen != before.NextGen {
		return fmt.Errorf("%v allocated a generation", cmd.Op)
	}
	// A stale report changes nothing beyond the catch-up.
	if res.Outcome == OutcomeStale {
		caught := before.Clone()
		if _, err := m.Apply(caught, Tick(), now); err != nil {
			return err
		}
		if diff := cmp.Diff(caught, after, cmpState); diff != "" {
			return fmt.Errorf("stale %v changed more than the catch-up:\n%s", cmd.Op, diff)
		}
	}
	return nil
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
// identical.
func TestSweeperTimingDoesNotChangeOutcome(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := drawPolicy(t)
		m, err := NewMachine(p)
		if err != nil {
			t.Fatal(err)
		}
		sched := drawSchedule(t)
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
						res, err := m.Apply(r.s, sweep, at)
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
			res, err := m.Apply(r.s, Tick(), r.clock)
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

// admissionErr checks the rules of the commands that admit, remove and
// reconfigure, on a transition from caught (the lobby caught up to the
// command's time) to after.
func admissionErr(m *Machine, caught, after *State, cmd Command, now time.Time) error {
	p := caught.Overrides.Apply(m.p)
	switch cmd.Op {
	case OpJoin:
		if caught.Member(cmd.Player) == nil {
			// A new player: never while blocked, never into a locked
			// lobby, never beyond the member cap in force.
			if end, ok := caught.Blocks.Until(cmd.Player); ok && now.Before(end) {
				return fmt.Errorf("join: blocked player %s admitted at %v, block ends %v", cmd.Player, now, end)
			}
			if caught.Locked {
				return fmt.Errorf("join: locked lobby admitted new player %s", cmd.Player)
			}
			if p.MaxMembers > 0 && len(caught.Members) >= p.MaxMembers {
				return fmt.Errorf("join: %s admitted to a lobby of %d members, cap %d", cmd.Player, len(caught.Members), p.MaxMembers)
			}
		}
		if n := p.MaxConnectionsPerPlayer; n > 0 {
			if mem := after.Member(cmd.Player); mem == nil || len(mem.Conns) > n {
				return fmt.Errorf("join: %s holds more than %d connections", cmd.Player, n)
			}
		}
		fallthrough
	case OpUpdate:
		// New attributes never move a current host.
		if caught.Host != "" && after.Host != caught.Host {
			return fmt.Errorf("%v of %s moved the host %q → %q", cmd.Op, cmd.Player, caught.Host, after.Host)
		}
		if mem := after.Member(cmd.Player); cmd.Op == OpUpdate && (mem == nil || !maps.Equal(mem.Attrs, cmd.Attrs) && len(mem.Attrs)+len(cmd.Attrs) > 0) {
			return fmt.Errorf("update of %s: attributes %v, want %v", cmd.Player, mem, cmd.Attrs)
		}
	case OpLock, OpConfigure:
		if after.Host != caught.Host || len(after.Members) != len(caught.Members) {
			return fmt.Errorf("%v changed the host or the members", cmd.Op)
		}
		if cmd.Op == OpLock && after.Locked != cmd.Locked {
			return fmt.Errorf("lock(%v) left the lobby locked=%v", cmd.Locked, after.Locked)
		}
		if cmd.Op == OpConfigure && after.Overrides != cmd.Overrides.normalized() {
			return fmt.Errorf("configure left overrides %+v", after.Overrides)
		}
	case OpKick:
		if after.Member(cmd.To) != nil {
			return fmt.Errorf("kick: %s is still a member", cmd.To)
		}
		if cmd.Player != "" && caught.Host != cmd.Player {
			return fmt.Errorf("kick by %s, who does not host", cmd.Player)
		}
		end, blocked := after.Blocks.Until(cmd.To)
		if want := cmd.Block > 0 && cmd.To != cmd.Player; blocked != want || (want && !end.Equal(now.Add(cmd.Block))) {
			return fmt.Errorf("kick of %s for %v: block %v (stored %v)", cmd.To, cmd.Block, end, blocked)
		}
	}
	// No member is blocked, and every stored block is still to end.
	for b := range after.Blocks.All() {
		if after.Member(b.Player) != nil || !b.Until.After(after.Updated) {
			return fmt.Errorf("%v: block of %s until %v (member %v, last transition %v)", cmd.Op, b.Player, b.Until, after.Member(b.Player) != nil, after.Updated)
		}
	}
	return nil
}
