package shadow_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/shadow"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

var start = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// rig is one lobby's transport: it reports each piece of evidence to the
// naive legacy logic and to the Shadow, then the legacy host.
type rig struct {
	t     *testing.T
	ctx   context.Context
	clock *clockwork.FakeClock
	st    store.Store
	sh    *shadow.Shadow
	id    string
	leg   *naive
	last  shadow.Decision
}

func newRig(t *testing.T, cfg shadow.Config) *rig {
	t.Helper()
	clock := clockwork.NewFakeClockAt(start)
	st := memstore.New()
	cfg.Clock = clock
	sh, err := shadow.New(st, cfg, lobby.WithPseudonymKey([]byte("0123456789abcdef-test")))
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, ctx: context.Background(), clock: clock, st: st, sh: sh, id: "party-1", leg: &naive{}}
}

func (r *rig) decide() shadow.Decision {
	r.t.Helper()
	d, err := r.sh.ReportLegacyHost(r.ctx, r.id, r.leg.host, r.clock.Now())
	if err != nil {
		r.t.Fatal(err)
	}
	r.last = d
	return d
}

func (r *rig) join(p string) uint64 {
	r.t.Helper()
	res, err := r.sh.Join(r.ctx, r.id, p, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	r.leg.open(p, res.Gen)
	r.decide()
	return res.Gen
}

func (r *rig) close(p string, gen uint64) {
	r.t.Helper()
	if _, err := r.sh.Disconnect(r.ctx, r.id, p, gen); err != nil {
		r.t.Fatal(err)
	}
	r.leg.close(p, gen)
	r.decide()
}

func (r *rig) leave(p string) {
	r.t.Helper()
	if _, err := r.sh.Leave(r.ctx, r.id, p); err != nil {
		r.t.Fatal(err)
	}
	r.leg.leave(p)
	r.decide()
}

func (r *rig) beat(p string, gen uint64) {
	r.t.Helper()
	if _, err := r.sh.Heartbeat(r.ctx, r.id, p, gen); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) advance(d time.Duration) { r.clock.Advance(d) }

// counts returns the report's count per class, by class name.
func counts(rep shadow.Report) map[string]uint64 {
	m := map[string]uint64{}
	for _, c := range rep.Classes {
		if c.Count > 0 {
			m[c.Class.String()] = c.Count
		}
	}
	return m
}

func wantCounts(t *testing.T, r *rig, want map[string]uint64) shadow.Report {
	t.Helper()
	rep := r.sh.Report()
	got := counts(rep)
	if len(got) != len(want) {
		t.Fatalf("counts = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("counts = %v, want %v", got, want)
		}
	}
	return rep
}

func TestAgreementRecordsNothing(t *testing.T) {
	r := newRig(t, shadow.Config{})
	r.join("ann")
	b := r.join("bob")
	r.join("cid")
	r.close("bob", b) // not the host: both keep ann
	r.leave("cid")
	if r.last.Class != 0 || r.last.Host != "ann" || r.last.Lobbyhost != "ann" {
		t.Fatalf("last decision = %+v, want agreement on ann", r.last)
	}
	rep := wantCounts(t, r, map[string]uint64{})
	if rep.Comparisons != 5 {
		t.Fatalf("comparisons = %d, want 5", rep.Comparisons)
	}
}

// The host's socket closes and it comes back inside the grace: the naive
// logic crowned bob at the close, lobbyhost kept ann. One disagreement,
// recorded once while it lasts.
func TestHostCloseInsideGraceIsGrace(t *testing.T) {
	r := newRig(t, shadow.Config{})
	a := r.join("ann")
	r.join("bob")
	r.close("ann", a)
	if r.last.Class != shadow.Grace || !r.last.Recorded || r.last.Legacy != "bob" || r.last.Lobbyhost != "ann" {
		t.Fatalf("after the host's close: %+v, want a recorded grace disagreement bob vs ann", r.last)
	}
	r.advance(3 * time.Second)
	r.join("ann")
	if r.last.Class != shadow.Grace || r.last.Recorded {
		t.Fatalf("after the reconnect: %+v, want the same grace disagreement, not recorded again", r.last)
	}
	wantCounts(t, r, map[string]uint64{"grace": 1})
}

// The host reconnects before its old socket's close arrives; the late
// close makes the naive logic crown bob although ann is online.
func TestLateCloseAfterReconnectIsStaleClose(t *testing.T) {
	r := newRig(t, shadow.Config{})
	a1 := r.join("ann")
	r.join("bob")
	r.join("ann") // the new socket, before the old one's close
	r.advance(time.Second)
	r.close("ann", a1)
	if r.last.Class != shadow.StaleClose || r.last.Legacy != "bob" || r.last.Lobbyhost != "ann" {
		t.Fatalf("after the late close: %+v, want stale_close bob vs ann", r.last)
	}
	wantCounts(t, r, map[string]uint64{"stale_close": 1})
}

// The host's tab vanishes without a close: the naive logic keeps it host
// forever; lobbyhost times it out, waits the grace and crowns bob.
func TestVanishedHostIsMissingHeartbeat(t *testing.T) {
	r := newRig(t, shadow.Config{})
	r.join("ann")
	b := r.join("bob")
	for range 6 { // 30 s of bob's heartbeats; ann sends none
		r.advance(5 * time.Second)
		r.beat("bob", b)
		r.decide()
	}
	if r.last.Class != shadow.MissingHeartbeat || r.last.Legacy != "ann" || r.last.Lobbyhost != "bob" {
		t.Fatalf("after ann's timeout and grace: %+v, want missing_heartbeat ann vs bob", r.last)
	}
	wantCounts(t, r, map[string]uint64{"missing_heartbeat": 1})
}

// bob reconnects (his new socket is now the newest); when the host leaves,
// the naive logic crowns the oldest socket (cid), lobbyhost the lowest join
// sequence (bob). Both online: an ordering difference.
func TestDifferentSuccessorIsOrdering(t *testing.T) {
	r := newRig(t, shadow.Config{})
	r.join("ann")
	b := r.join("bob")
	r.join("cid")
	r.close("bob", b)
	r.advance(2 * time.Second)
	r.join("bob")
	r.leave("ann")
	if r.last.Class != shadow.Ordering || r.last.Legacy != "cid" || r.last.Lobbyhost != "bob" {
		t.Fatalf("after the host left: %+v, want ordering cid vs bob", r.last)
	}
	wantCounts(t, r, map[string]uint64{"ordering": 1})
}

// A legacy host that is no member at all fits no known cause.
func TestGhostHostIsUnexplained(t *testing.T) {
	r := newRig(t, shadow.Config{})
	r.join("ann")
	r.leg.host = "zed"
	r.decide()
	if r.last.Class != shadow.Unexplained {
		t.Fatalf("decision = %+v, want unexplained", r.last)
	}
	wantCounts(t, r, map[string]uint64{"unexplained": 1})
}

// A disagreement that changes hosts is a new one; agreeing in between ends
// the first.
func TestEachNewPairIsRecorded(t *testing.T) {
	r := newRig(t, shadow.Config{})
	r.join("ann")
	r.leg.host = "zed"
	r.decide()
	r.decide()
	r.leg.host = "ann"
	r.decide()
	r.leg.host = "zed"
	r.decide()
	r.leg.host = "yan"
	r.decide()
	wantCounts(t, r, map[string]uint64{"unexplained": 3})
}

func TestReportsHoldPseudonymsOnly(t *testing.T) {
	var logged bytes.Buffer
	r := newRig(t, shadow.Config{Logger: slogTo(&logged)})
	r.id = `<script>alert("lobby")</script>`
	a := r.join("ann-raw-id")
	r.join("bob-raw-id")
	r.close("ann-raw-id", a)
	rep := r.sh.Report()
	var text, page bytes.Buffer
	if err := rep.WriteText(&text, true); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	pa, pb := r.sh.Service().Pseudonym("ann-raw-id"), r.sh.Service().Pseudonym("bob-raw-id")
	for name, out := range map[string]string{"text": text.String(), "html": page.String(), "log": logged.String()} {
		if strings.Contains(out, "raw-id") {
			t.Errorf("%s report contains a raw player ID:\n%s", name, out)
		}
		if !strings.Contains(out, pa) || !strings.Contains(out, pb) {
			t.Errorf("%s report lacks the pseudonyms %s and %s:\n%s", name, pa, pb, out)
		}
	}
	if strings.Contains(page.String(), "<script>") {
		t.Errorf("the HTML page does not escape the lobby ID:\n%s", page.String())
	}
	if !strings.Contains(page.String(), "&lt;script&gt;") {
		t.Errorf("the HTML page lacks the escaped lobby ID:\n%s", page.String())
	}
	if !strings.Contains(page.String(), `<tr class="disagreement"><td>2026-03-01 09:00:00.000000000</td><td>disagreement</td><td></td><td></td><td>`+pb+`</td><td>`+pa+`</td>`) {
		t.Errorf("the HTML timeline lacks the disagreement row (legacy %s, lobbyhost %s):\n%s", pb, pa, page.String())
	}
	if len(rep.Lobbies) != 1 || len(rep.Lobbies[0].Entries) == 0 {
		t.Fatalf("timelines = %+v, want one lobby's", rep.Lobbies)
	}
	if got := rep.Classes[1].Samples; len(got) != 1 || !strings.Contains(got[0], "class=grace") {
		t.Fatalf("grace samples = %q, want one line of class grace", got)
	}
}

func TestSamplesAreBounded(t *testing.T) {
	r := newRig(t, shadow.Config{Samples: 2})
	r.join("ann")
	for _, h := range []string{"v", "w", "x", "y"} {
		r.leg.host = h
		r.decide()
	}
	rep := wantCounts(t, r, map[string]uint64{"unexplained": 4})
	if got := len(rep.Classes[4].Samples); got != 2 {
		t.Fatalf("%d samples kept, want 2", got)
	}
}

func TestNewRefusesNegativeBounds(t *testing.T) {
	if _, err := shadow.New(memstore.New(), shadow.Config{Samples: -1}); err == nil {
		t.Fatal("New accepted Samples -1")
	}
}
