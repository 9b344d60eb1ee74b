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
	r.players[1].joined, r.players[1].lost = true, true
	if why := r.splitBrain(); why != "" {
		t.Errorf("a socket the server closed early compared: %q", why)
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

// The failover delay splits at the first state a remaining socket gets
// that shows the old host offline: close → that state, and that state plus
// the grace → the new host. States the old host's own socket gets, and
// states from before the close, do not count.
func TestFailoverSplitsAtHostOffline(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	grace := 200 * time.Millisecond
	a, b := &foPlayer{user: "a", hostAt: map[uint64]string{}}, &foPlayer{user: "b", hostAt: map[uint64]string{}}
	r := &foRoom{id: "r", drop: DropHandshake, players: []*foPlayer{a, b}, seen: map[*foPlayer]uint64{}, failedOver: make(chan struct{}), successor: "b"}
	members := func(aStatus string) []memberState {
		return []memberState{{UserID: "a", JoinSeq: 1, Status: aStatus}, {UserID: "b", JoinSeq: 2, Status: "online"}}
	}
	r.observe(b, fullState{Version: 2, HostID: str("a"), Members: members("reconnecting")}, t0) // before the close
	r.oldHost, r.closedAt = "a", t0.Add(time.Millisecond)
	r.observe(a, fullState{Version: 3, HostID: str("a"), Members: members("reconnecting")}, t0.Add(2*time.Millisecond)) // the old host's own socket
	r.observe(b, fullState{Version: 3, HostID: str("a"), Members: members("reconnecting")}, t0.Add(5*time.Millisecond))
	r.observe(b, fullState{Version: 4, HostID: str("b"), Members: members("gone")[1:]}, t0.Add(5*time.Millisecond+grace+3*time.Millisecond))
	if !r.noticedAt.Equal(t0.Add(5*time.Millisecond)) || r.newHost != "b" {
		t.Fatalf("noticed at %v, new host %q; want t0+5ms, b", r.noticedAt.Sub(t0), r.newHost)
	}
	rep := &FailoverReport{}
	tally(rep, FailoverConfig{Grace: grace}, []*foRoom{r}, time.Time{})
	hs := rep.Handshake
	if hs.FailedOver != 1 || hs.Delay.P50Ms != 7 || hs.Noticed.P50Ms != 4 || hs.Expiry.P50Ms != 3 {
		t.Fatalf("handshake summary %+v; want delay 7 ms = noticed 4 ms + expiry 3 ms after the grace", hs)
	}
}

// When the disconnect's delivery lags so that the new host arrives less
// than the grace after it, the split gives the whole delay to the first
// part and counts the room as overlapped, rather than a negative second
// part; the parts always add up to the delay.
func TestSplitOverlapped(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	grace := 200 * time.Millisecond
	for _, tc := range []struct {
		name                   string
		noticed                time.Time
		delay, toNotice, after time.Duration
	}{
		{"in order", t0.Add(10 * time.Millisecond), 15 * time.Millisecond, 10 * time.Millisecond, 5 * time.Millisecond},
		{"overlapped", t0.Add(40 * time.Millisecond), 15 * time.Millisecond, 15 * time.Millisecond, 0},
		{"no offline state first", time.Time{}, 15 * time.Millisecond, 15 * time.Millisecond, 0},
	} {
		failed := t0.Add(grace + 15*time.Millisecond)
		d, n, e := split(t0, tc.noticed, failed, grace)
		if d != tc.delay || n != tc.toNotice || e != tc.after || n+e != d {
			t.Errorf("%s: split = %v, %v, %v; want %v, %v, %v", tc.name, d, n, e, tc.delay, tc.toNotice, tc.after)
		}
	}
}

func TestFormatCallsBusiestFirstWithTotal(t *testing.T) {
	got := formatCalls(map[string]float64{"Load": 0.5, "RenewSession": 0.2, "Write": 3, "Due": 0.5})
	if want := "Write 3.00, Due 0.50, Load 0.50, RenewSession 0.20, total 4.20"; got != want {
		t.Fatalf("formatCalls = %q, want %q", got, want)
	}
}
