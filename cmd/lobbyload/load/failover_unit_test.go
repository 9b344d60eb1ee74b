package load

import (
	"strings"
	"testing"
	"time"
)

func str(s string) *string { return &s }

func TestSuccessor(t *testing.T) {
	s := fullState{Members: []memberState{{UserID: "c", JoinSeq: 5}, {UserID: "a", JoinSeq: 2}, {UserID: "b", JoinSeq: 3}}}
	if got := successor(s, "a"); got != "b" {
		t.Errorf("successor without a = %q, want b (lowest joinSeq left)", got)
	}
	if got := successor(fullState{Members: []memberState{{UserID: "a", JoinSeq: 1}}}, "a"); got != "" {
		t.Errorf("successor of the only member = %q, want none", got)
	}
}

// Two sockets disagreeing on one revision's host, or remaining sockets
// ending on different hosts, are split-brain; the closed host's own view
// does not count for the final state.
func TestSplitBrain(t *testing.T) {
	player := func(user string, hostAt map[uint64]string, final string) *foPlayer {
		return &foPlayer{user: user, joined: true, hostAt: hostAt, final: fullState{HostID: str(final)}}
	}
	agree := &foRoom{oldHost: "a", players: []*foPlayer{
		player("a", map[uint64]string{1: "a", 2: "a"}, "a"),
		player("b", map[uint64]string{2: "a", 4: "b"}, "b"),
	}}
	if why := agree.splitBrain(); why != "" {
		t.Errorf("agreeing room: %s", why)
	}
	split := &foRoom{oldHost: "a", players: []*foPlayer{
		player("b", map[uint64]string{4: "b"}, "b"),
		player("c", map[uint64]string{4: "c"}, "c"),
	}}
	if why := split.splitBrain(); !strings.Contains(why, "revision 4") {
		t.Errorf("same revision, two hosts: %q", why)
	}
}

// Remaining sockets ending on different hosts are split-brain; sockets that
// never joined are not compared.
func TestSplitBrainFinalStates(t *testing.T) {
	r := &foRoom{oldHost: "a"}
	for _, u := range []string{"b", "c"} {
		r.players = append(r.players, &foPlayer{user: u, joined: true, hostAt: map[uint64]string{}, final: fullState{HostID: str(u)}})
	}
	if why := r.splitBrain(); !strings.Contains(why, "end with hosts") {
		t.Errorf("final hosts b and c: %q", why)
	}
	r.players[1].joined = false
	if why := r.splitBrain(); why != "" {
		t.Errorf("a socket that never joined compared: %q", why)
	}
}

func TestPerIntervalAndCDF(t *testing.T) {
	t0 := time.Unix(100, 0)
	got := perInterval([]time.Time{t0, t0.Add(50 * time.Millisecond), t0.Add(250 * time.Millisecond)}, t0, 100*time.Millisecond)
	if len(got) != 3 || got[0] != 2 || got[1] != 0 || got[2] != 1 {
		t.Errorf("perInterval = %v, want [2 0 1]", got)
	}
	pts := cdf([]float64{1, 2, 3, 4})
	if len(pts) != 4 || pts[0] != (point{1, 0.25}) || pts[3] != (point{4, 1}) {
		t.Errorf("cdf = %v", pts)
	}
	big := make([]float64, 10*maxCDFPoints+3)
	if pts := cdf(big); len(pts) > maxCDFPoints+2 || pts[len(pts)-1].y != 1 {
		t.Errorf("cdf of %d values: %d points ending at %v", len(big), len(pts), pts[len(pts)-1])
	}
}
