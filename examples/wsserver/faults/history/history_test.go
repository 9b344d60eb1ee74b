package history

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

var bounds = Bounds{Ghost: 5 * time.Second, StopServing: 5 * time.Second, Converge: 3 * time.Second}

func st(rev, term uint64, host string, sec float64, members ...Member) State {
	return State{Revision: rev, Term: term, Host: host, Members: members, At: at(sec)}
}

func on(id string) Member  { return Member{ID: id, Online: true} }
func off(id string) Member { return Member{ID: id} }

// good is a history that keeps every guarantee: ann hosts on process 0,
// bob watches from process 1; process 0 is cut from the store at 10 s,
// ann is shown reconnecting at 13 s, process 0 closes ann's socket at
// 14 s, the cut heals at 20 s and the lobby converges at 21 s.
func good() History {
	return History{
		Sockets: []Socket{
			{ID: 1, Lobby: "l", Player: "ann", Proc: 0, Opened: at(0), Closed: at(14), Code: 4013, States: []State{
				st(1, 1, "ann", 0, on("ann")),
				st(2, 1, "ann", 1, on("ann"), on("bob")),
			}},
			{ID: 2, Lobby: "l", Player: "bob", Proc: 1, Opened: at(1), States: []State{
				st(2, 1, "ann", 1, on("ann"), on("bob")),
				st(3, 1, "ann", 13, off("ann"), on("bob")),
				st(4, 2, "bob", 21, on("bob")),
			}},
			{ID: 3, Lobby: "l", Player: "cat", Proc: 2, Opened: at(22), States: []State{
				{Revision: 5, Term: 2, Host: "bob", Members: []Member{on("bob"), on("cat")}, Full: true, At: at(22)},
			}},
		},
		Actions: []Action{
			{Lobby: "l", Player: "ann", Term: 1, At: at(2), Accepted: true},
			{Lobby: "l", Player: "bob", Term: 2, At: at(21.5), Accepted: true},
			{Lobby: "l", Player: "ann", Term: 1, At: at(21.6), Accepted: false},
		},
		Outages:      []Outage{{Proc: 0, Kind: StoreCut, From: at(10), To: at(20)}},
		Convergences: []Convergence{{Lobby: "l", HealedAt: at(20), ConvergedAt: at(21)}},
		End:          at(30),
	}
}

func TestGoodHistoryPasses(t *testing.T) {
	r := Check(good(), bounds)
	if !r.OK() {
		t.Fatalf("violations on a good history: %v", r.Violations)
	}
	if r.Accepted != 2 || r.Refused != 1 {
		t.Errorf("accepted %d refused %d, want 2 and 1", r.Accepted, r.Refused)
	}
	if len(r.Ghosts) != 1 || r.WorstGhost != 3*time.Second || !r.Ghosts[0].Resolved {
		t.Errorf("ghosts %+v worst %v, want one resolved ghost of 3s", r.Ghosts, r.WorstGhost)
	}
	if r.WorstConverge != time.Second {
		t.Errorf("worst convergence %v, want 1s", r.WorstConverge)
	}
}

// Each broken history must fail exactly the check it breaks.
func TestBrokenHistoriesFail(t *testing.T) {
	cases := []struct {
		name   string
		check  string
		break_ func(h *History)
	}{
		{"two hosts in one term", CheckHostPerTerm, func(h *History) {
			h.Sockets[1].States[2].Term = 1 // bob hosts in ann's term
			h.Actions[1].Term = 1           // keep the fence in step
		}},
		{"term goes back", CheckTermOrder, func(h *History) {
			h.Sockets[2].States[0].Term = 1
			h.Sockets[2].States[0].Host = "ann"
		}},
		{"skipped revision", CheckRevisions, func(h *History) {
			s := &h.Sockets[0]
			s.States[1] = h.Sockets[1].States[1] // 1, then 3
			s.States[1].At = at(1)
		}},
		{"revision repeated", CheckRevisions, func(h *History) {
			s := &h.Sockets[1]
			s.States = append(s.States, s.States[2])
		}},
		{"revision differs between sockets", CheckSameRevision, func(h *History) {
			h.Sockets[0].States[1].Members = []Member{on("ann"), off("bob")}
		}},
		{"fence accepts an older term", CheckFence, func(h *History) {
			h.Actions[2].Accepted = true
		}},
		{"a non-host acts", CheckFenceHost, func(h *History) {
			h.Actions[0].Player = "bob"
		}},
		{"ghost past the bound", CheckGhost, func(h *History) {
			h.Sockets[1].States[1].At = at(16) // ann shown online for 6 s
		}},
		{"ghost never resolved", CheckGhost, func(h *History) {
			h.Sockets[1].States[1].Members = []Member{on("ann"), on("bob")}
			h.Sockets[0].States[1].Members = []Member{on("ann"), on("bob")}
			h.Sockets[1].States[1].At = at(25)
		}},
		{"cut-off process keeps serving", CheckStopServing, func(h *History) {
			h.Sockets[0].Closed = time.Time{}
		}},
		{"paused process keeps serving after it wakes", CheckStopServing, func(h *History) {
			h.Outages[0].Kind = Pause
			h.Outages[0].To = at(18)
			h.Sockets[0].Closed = at(24)
		}},
		{"convergence too slow", CheckConverge, func(h *History) {
			h.Convergences[0].ConvergedAt = at(24)
		}},
		{"no convergence", CheckConverge, func(h *History) {
			h.Convergences[0].ConvergedAt = time.Time{}
			h.Convergences[0].Detail = "socket 2 at 3, lobby at 4"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := good()
			c.break_(&h)
			r := Check(h, bounds)
			if r.OK() {
				t.Fatalf("no violation; want %q", c.check)
			}
			for _, v := range r.Violations {
				if v.Check != c.check {
					t.Errorf("unexpected violation %v (want only %q)", v, c.check)
				}
			}
		})
	}
}

func TestShortOutagesAreNotJudged(t *testing.T) {
	h := good()
	h.Outages[0].To = at(12) // healed before either bound
	h.Sockets[0].Closed = time.Time{}
	h.Sockets[1].States[1].Members = []Member{on("ann"), on("bob")}
	h.Sockets[0].States[1].Members = []Member{on("ann"), on("bob")}
	h.Sockets[1].States[1].At = at(25)
	r := Check(h, bounds)
	if !r.OK() {
		t.Fatalf("violations for an outage shorter than the bounds: %v", r.Violations)
	}
	if len(r.Ghosts) != 1 || r.Ghosts[0].Resolved || r.Ghosts[0].For != 2*time.Second {
		t.Errorf("ghosts %+v: want one unresolved ghost lasting the 2 s outage", r.Ghosts)
	}
}

func TestRejoinElsewhereEndsGhost(t *testing.T) {
	h := good()
	h.Sockets[1].States[1].At = at(25) // shown gone only late...
	h.Sockets = append(h.Sockets, Socket{ID: 4, Lobby: "l", Player: "ann", Proc: 2, Opened: at(11),
		States: []State{{Revision: 3, Term: 1, Host: "ann", Members: []Member{on("ann"), on("bob")}, Full: true, At: at(11)}}})
	// ...but ann came back on process 2 one second after the cut. Revision
	// 3 now differs between sockets; drop the witness's copy of it.
	h.Sockets[1].States = []State{h.Sockets[1].States[0], h.Sockets[1].States[2]}
	h.Sockets[1].States[1].Full = true
	r := Check(h, bounds)
	if !r.OK() {
		t.Fatalf("violations: %v", r.Violations)
	}
	if r.WorstGhost != time.Second {
		t.Errorf("worst ghost %v, want 1s (the rejoin)", r.WorstGhost)
	}
}

func TestViolationNamesItsCheck(t *testing.T) {
	v := Violation{Check: CheckFence, Lobby: "l", Detail: "x"}
	if !strings.HasPrefix(v.String(), CheckFence) {
		t.Errorf("%q does not start with its check", v.String())
	}
}

func TestWitnessOnAProcessThatIsOutTooIsNotUsed(t *testing.T) {
	h := good()
	// bob's process is paused over the whole cut: what it shows (ann
	// online until 25 s) says nothing about the others.
	h.Sockets[1].States[1].At = at(25)
	// (bob, the other way round, has only ann's cut-off process to watch
	// him.)
	h.Outages = append(h.Outages, Outage{Proc: 1, Kind: Pause, From: at(9), To: at(24)})
	h.Sockets[1].Closed = at(25)
	r := Check(h, bounds)
	if !r.OK() || r.Unwitnessed != 2 || len(r.Ghosts) != 0 {
		t.Errorf("ghosts %+v, unwitnessed %d, violations %v: want ann and bob unwitnessed", r.Ghosts, r.Unwitnessed, r.Violations)
	}
}

func TestWitnessCountsUntilItsOwnProcessIsOut(t *testing.T) {
	// bob's process goes out at 12 s: ann shown gone at 13 s on it does
	// not count, and nobody else watched: unwitnessed. (So is bob, lost in
	// his own process's outage: his only witness, ann, is cut off.)
	h := good()
	h.Outages = append(h.Outages, Outage{Proc: 1, Kind: ClientCut, From: at(12), To: at(19)})
	r := Check(h, bounds)
	if r.Unwitnessed != 2 || len(r.Ghosts) != 0 {
		t.Errorf("ghosts %+v, unwitnessed %d: want ann and bob unwitnessed", r.Ghosts, r.Unwitnessed)
	}
	// bob's process goes out only at 14 s: ann shown gone at 13 s counts.
	h.Outages[1].From = at(14)
	r = Check(h, bounds)
	if r.Unwitnessed != 1 || len(r.Ghosts) != 1 || r.Ghosts[0].Player != "ann" || r.Ghosts[0].For != 3*time.Second {
		t.Errorf("ghosts %+v, unwitnessed %d: want one ghost of 3 s", r.Ghosts, r.Unwitnessed)
	}
}

func TestRejoinAfterTheHealIsNoWitness(t *testing.T) {
	// Nobody watched ann; her coming back long after the heal says nothing
	// about the outage.
	h := good()
	h.Sockets = h.Sockets[:1]
	h.Convergences = nil
	h.Actions = h.Actions[:1]
	h.Sockets = append(h.Sockets, Socket{ID: 9, Lobby: "l", Player: "ann", Proc: 2, Opened: at(27),
		States: []State{{Revision: 9, Term: 1, Host: "ann", Members: []Member{on("ann")}, Full: true, At: at(27)}}})
	r := Check(h, bounds)
	if r.Unwitnessed != 1 || len(r.Ghosts) != 0 {
		t.Errorf("ghosts %+v, unwitnessed %d, violations %v: want ann unwitnessed", r.Ghosts, r.Unwitnessed, r.Violations)
	}
}

func TestWitnessOpenedAfterTheFaultCounts(t *testing.T) {
	// Nobody watched from the start, but dan, joining on process 2 at
	// 11 s, was shown ann reconnecting at 12 s.
	h := good()
	h.Sockets = h.Sockets[:1]
	h.Convergences = nil
	h.Actions = h.Actions[:1]
	h.Sockets = append(h.Sockets, Socket{ID: 9, Lobby: "l", Player: "dan", Proc: 2, Opened: at(11), States: []State{
		{Revision: 3, Term: 1, Host: "ann", Members: []Member{on("ann"), on("dan")}, Full: true, At: at(11)},
		{Revision: 4, Term: 1, Host: "ann", Members: []Member{off("ann"), on("dan")}, At: at(12)},
	}})
	r := Check(h, bounds)
	if len(r.Ghosts) != 1 || r.Ghosts[0].For != 2*time.Second || !r.Ghosts[0].Resolved {
		t.Errorf("ghosts %+v, unwitnessed %d, violations %v: want one ghost of 2 s", r.Ghosts, r.Unwitnessed, r.Violations)
	}
}

func TestLateWitnessThatNeverSawTheMemberOnlineOnlyBoundsTheGhost(t *testing.T) {
	// Nobody watched ann; dan's first state, 8 s after the cut, already
	// shows her gone: she was gone by then, since when nobody knows.
	h := good()
	h.Sockets = h.Sockets[:1]
	h.Convergences = nil
	h.Actions = h.Actions[:1]
	late := Socket{ID: 9, Lobby: "l", Player: "dan", Proc: 2, Opened: at(18), States: []State{
		{Revision: 4, Term: 1, Host: "ann", Members: []Member{off("ann"), on("dan")}, Full: true, At: at(18)},
	}}
	h.Sockets = append(h.Sockets, late)
	r := Check(h, bounds)
	if !r.OK() || r.Unwitnessed != 1 || len(r.Ghosts) != 0 {
		t.Errorf("ghosts %+v, unwitnessed %d, violations %v: want ann unwitnessed", r.Ghosts, r.Unwitnessed, r.Violations)
	}
	// Within the bound, the late state bounds the ghost.
	h.Sockets[1].Opened, h.Sockets[1].States[0].At = at(14), at(14)
	r = Check(h, bounds)
	if !r.OK() || len(r.Ghosts) != 1 || r.Ghosts[0].For != 4*time.Second {
		t.Errorf("ghosts %+v, violations %v: want one ghost of at most 4 s", r.Ghosts, r.Violations)
	}
}
