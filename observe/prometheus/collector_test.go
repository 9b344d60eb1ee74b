package lobbyprom

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/lobbyhost/lobbyhost/lease"
	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
	"github.com/lobbyhost/lobbyhost/store/memstore"
	"github.com/lobbyhost/lobbyhost/succession"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// env is a Service over memstore with a fake clock, observed by a
// Collector registered on a registry of its own.
type env struct {
	t     *testing.T
	ctx   context.Context
	clock *clockwork.FakeClock
	svc   *lobby.Service
	c     *Collector
	reg   *prometheus.Registry
}

func newEnv(t *testing.T, opts ...Option) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), clock: clockwork.NewFakeClockAt(t0), c: New(opts...), reg: prometheus.NewRegistry()}
	e.reg.MustRegister(e.c)
	svc, err := lobby.NewService(memstore.New(), lobby.WithClock(e.clock), lobby.WithObserver(e.c))
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e
}

// at sets the fake clock to t0+d.
func (e *env) at(d time.Duration) { e.clock.Advance(t0.Add(d).Sub(e.clock.Now())) }

func (e *env) must(res lobby.Result, err error) lobby.Result {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// values gathers reg into name{label="value",...} → value; a histogram
// gives its _count and _sum.
func values(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName() + labelString(m)
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[mf.GetName()+"_count"+labelString(m)] = float64(m.GetHistogram().GetSampleCount())
				out[mf.GetName()+"_sum"+labelString(m)] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func labelString(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// check compares the metrics named in want (a missing one counts as absent,
// not zero), and, for each metric family named by prefix in exhaustive,
// that no other series exists.
func check(t *testing.T, got, want map[string]float64, exhaustive ...string) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: missing, want %v", k, w)
		} else if g != w {
			t.Errorf("%s = %v, want %v", k, g, w)
		}
	}
	var extra []string
	for k := range got {
		if _, ok := want[k]; ok {
			continue
		}
		for _, p := range exhaustive {
			if strings.HasPrefix(k, p+"{") || k == p {
				extra = append(extra, fmt.Sprintf("%s = %v", k, got[k]))
			}
		}
	}
	sort.Strings(extra)
	for _, x := range extra {
		t.Errorf("unexpected series %s", x)
	}
}

// A lobby's story through one Service: joins, a refusal, a drop and a
// return, a stale heartbeat, and a catch-up in which the host's grace runs
// out (promoting the successor) and a silent member times out.
func TestStory(t *testing.T) {
	e := newEnv(t, WithAdvisorFeed())
	ctx := e.ctx
	alice := e.must(e.svc.Join(ctx, "room", "alice", nil))
	bob := e.must(e.svc.Join(ctx, "room", "bob", nil))
	e.must(e.svc.Join(ctx, "room", "carol", nil)) // never heartbeats: times out at 15 s

	e.at(1 * time.Second)
	if _, err := e.svc.TransferHost(ctx, "room", "bob", "carol"); !errors.Is(err, lobby.ErrNotHost) {
		t.Fatalf("transfer by a non-host: %v, want ErrNotHost", err)
	}
	e.at(2 * time.Second)
	e.must(e.svc.Disconnect(ctx, "room", "bob", bob.Gen))
	e.at(5 * time.Second)
	bob2 := e.must(e.svc.Join(ctx, "room", "bob", nil)) // back after 3 s
	if res := e.must(e.svc.Heartbeat(ctx, "room", "bob", bob.Gen)); res.Outcome != lobby.OutcomeStale {
		t.Fatalf("heartbeat on bob's ended generation: %v, want stale", res.Outcome)
	}
	e.at(6 * time.Second)
	e.must(e.svc.Heartbeat(ctx, "room", "alice", alice.Gen))
	e.must(e.svc.Heartbeat(ctx, "room", "bob", bob2.Gen))
	e.at(7 * time.Second)
	e.must(e.svc.Disconnect(ctx, "room", "alice", alice.Gen)) // grace until 15 s

	e.at(16 * time.Second)
	res := e.must(e.svc.Do(ctx, "room", rules.Tick()))
	var reasons []string
	for _, ev := range res.Events {
		reasons = append(reasons, string(ev.Reason)+":"+ev.Subject+":host="+ev.Host)
	}
	if got, want := strings.Join(reasons, " "), "lease_expired:alice:host=bob timed_out:carol:host=bob"; got != want {
		t.Fatalf("catch-up events: %s, want %s", got, want)
	}

	var ref lease.Advisor
	ref.ObserveReturn(3 * time.Second)
	advice := ref.Suggest(DefaultQuantile).Grace.Seconds()
	if advice < 3 || advice > 3.75 {
		t.Fatalf("reference advice %v s for one 3 s return", advice)
	}

	check(t, values(t, e.reg), map[string]float64{
		`lobbyhost_commands_total{operation="join",outcome="applied"}`:                   4,
		`lobbyhost_commands_total{operation="transfer_host",outcome="refused:not_host"}`: 1,
		`lobbyhost_commands_total{operation="disconnect",outcome="applied"}`:             2,
		`lobbyhost_commands_total{operation="heartbeat",outcome="stale"}`:                1,
		`lobbyhost_commands_total{operation="heartbeat",outcome="applied"}`:              2,
		`lobbyhost_commands_total{operation="tick",outcome="applied"}`:                   1,
		`lobbyhost_command_duration_seconds_count{operation="join"}`:                     4,
		`lobbyhost_command_duration_seconds_count{operation="transfer_host"}`:            1,
		`lobbyhost_command_duration_seconds_count{operation="disconnect"}`:               2,
		`lobbyhost_command_duration_seconds_count{operation="heartbeat"}`:                3,
		`lobbyhost_command_duration_seconds_count{operation="tick"}`:                     1,
		`lobbyhost_cas_retries_total`:                                                    0,
		`lobbyhost_generations_timed_out_total`:                                          1,
		`lobbyhost_generations_superseded_total`:                                         0,
		`lobbyhost_reconnect_deadlines_started_total`:                                    3,
		`lobbyhost_reconnects_within_grace_total`:                                        1,
		`lobbyhost_lease_expirations_total`:                                              1,
		`lobbyhost_stale_events_total`:                                                   1,
		`lobbyhost_host_changes_total{reason="joined"}`:                                  1,
		`lobbyhost_host_changes_total{reason="lease_expired"}`:                           1,
		`lobbyhost_hostless_seconds_total`:                                               0,
		`lobbyhost_lobbies`:                                                              1,
		`lobbyhost_members`:                                                              2, // bob, carol
		`lobbyhost_members_online`:                                                       1,
		`lobbyhost_members_reconnecting`:                                                 1,
		`lobbyhost_grace_advice_seconds`:                                                 advice,
		`lobbyhost_grace_advisor_returns_total`:                                          1,
		`lobbyhost_grace_advisor_expiries_total`:                                         1,
	}, "lobbyhost_commands_total", "lobbyhost_command_duration_seconds_count", "lobbyhost_host_changes_total")

	if s := e.c.Counters(); s.LeaseExpired != 1 || s.Reconnected != 1 || s.HostChanges[lobby.ReasonLeaseExpired] != 1 {
		t.Errorf("Counters() = %+v, want 1 lease expiry, 1 reconnect, 1 host change by lease_expired", s)
	}

	// The testutil view of the same registry agrees.
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(`
# HELP lobbyhost_members_reconnecting Members in their grace, holding no live connection.
# TYPE lobbyhost_members_reconnecting gauge
lobbyhost_members_reconnecting 1
# HELP lobbyhost_lease_expirations_total Graces that ran out; the member was removed.
# TYPE lobbyhost_lease_expirations_total counter
lobbyhost_lease_expirations_total 1
`), "lobbyhost_members_reconnecting", "lobbyhost_lease_expirations_total"); err != nil {
		t.Error(err)
	}
	if err := testutil.CollectAndCompare(e.c.commands, strings.NewReader(`
# HELP lobbyhost_commands_total Lobby commands handled, by operation and outcome.
# TYPE lobbyhost_commands_total counter
lobbyhost_commands_total{operation="disconnect",outcome="applied"} 2
lobbyhost_commands_total{operation="heartbeat",outcome="applied"} 2
lobbyhost_commands_total{operation="heartbeat",outcome="stale"} 1
lobbyhost_commands_total{operation="join",outcome="applied"} 4
lobbyhost_commands_total{operation="tick",outcome="applied"} 1
lobbyhost_commands_total{operation="transfer_host",outcome="refused:not_host"} 1
`)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(e.c, "lobbyhost_grace_advice_seconds"); n != 1 {
		t.Errorf("advice series: %d, want 1", n)
	}
}

// The last member's departure drops the lobby from the gauges; a lobby with
// no host while it has members accrues hostless time.
func TestGaugesAndHostless(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx
	// Only members with the attribute "host"="yes" may host.
	p := lobby.DefaultPolicy()
	p.Succession.Eligible = func(m succession.Candidate) bool { return m.Attrs["host"] == "yes" }
	svc, err := lobby.NewService(memstore.New(), lobby.WithClock(e.clock), lobby.WithObserver(e.c), lobby.WithPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.must(svc.Join(ctx, "a", "hana", map[string]string{"host": "yes"}))
	e.must(svc.Join(ctx, "a", "ivo", nil))
	e.must(svc.Join(ctx, "b", "jun", map[string]string{"host": "yes"}))
	check(t, values(t, e.reg), map[string]float64{
		"lobbyhost_lobbies": 2, "lobbyhost_members": 3, "lobbyhost_members_online": 3, "lobbyhost_members_reconnecting": 0,
	})

	e.must(svc.Leave(ctx, "a", "hana")) // ivo may not host: no host from now
	e.at(10 * time.Second)
	e.must(svc.Join(ctx, "a", "kim", map[string]string{"host": "yes"})) // host again after 10 s
	e.must(svc.Leave(ctx, "b", "jun"))                                  // b is empty: dropped
	check(t, values(t, e.reg), map[string]float64{
		"lobbyhost_lobbies": 1, "lobbyhost_members": 2, "lobbyhost_members_online": 2, "lobbyhost_members_reconnecting": 0,
		"lobbyhost_hostless_seconds_total":              10,
		`lobbyhost_host_changes_total{reason="left"}`:   2, // hana's and jun's seats emptied
		`lobbyhost_host_changes_total{reason="joined"}`: 3,
	})
	e.must(svc.Leave(ctx, "a", "ivo"))
	e.must(svc.Leave(ctx, "a", "kim"))
	check(t, values(t, e.reg), map[string]float64{
		"lobbyhost_lobbies": 0, "lobbyhost_members": 0, "lobbyhost_members_online": 0, "lobbyhost_members_reconnecting": 0,
	})
	if n := len(e.c.lobbies); n != 0 {
		t.Errorf("%d lobby summaries kept after every lobby emptied", n)
	}
}

// Two Services on one store: the one whose cached copy is out of date
// conflicts once and retries.
func TestRetries(t *testing.T) {
	e := newEnv(t)
	st := memstore.New()
	a, err := lobby.NewService(st, lobby.WithClock(e.clock), lobby.WithObserver(e.c))
	if err != nil {
		t.Fatal(err)
	}
	b, err := lobby.NewService(st, lobby.WithClock(e.clock)) // unobserved
	if err != nil {
		t.Fatal(err)
	}
	e.must(a.Join(e.ctx, "r", "ana", nil)) // a caches version 1
	e.must(b.Join(e.ctx, "r", "ben", nil)) // b writes version 2
	e.must(a.Join(e.ctx, "r", "cy", nil))  // a writes against 1: conflict, reload, commit
	check(t, values(t, e.reg), map[string]float64{
		"lobbyhost_cas_retries_total":                                  1,
		`lobbyhost_commands_total{operation="join",outcome="applied"}`: 2,
		// a saw ana's join and then cy's, whose event lists ben too.
		"lobbyhost_members": 3,
	}, "lobbyhost_commands_total")
}

// Label values come from closed sets: no lobby or player ID ever appears in
// one, whatever the IDs and outcomes.
func TestNoIDInLabels(t *testing.T) {
	e := newEnv(t, WithAdvisorFeed())
	ctx := e.ctx
	p := lobby.DefaultPolicy()
	p.MaxMembers = 2
	svc, err := lobby.NewService(memstore.New(), lobby.WithClock(e.clock), lobby.WithObserver(e.c), lobby.WithPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"player-applied", "player-noop", "player-stale", "player-refused", "lobby-secret"}
	x := e.must(svc.Join(ctx, "lobby-secret", "player-applied", map[string]string{"k": "v"}))
	e.must(svc.Join(ctx, "lobby-secret", "player-stale", nil))
	e.must(svc.Leave(ctx, "lobby-secret", "player-noop"))
	svc.Join(ctx, "lobby-secret", "player-refused", nil)                       // full
	svc.TransferHost(ctx, "lobby-secret", "player-stale", "player-applied")    // not host
	svc.TransferHost(ctx, "lobby-secret", "player-applied", "player-refused")  // not a member
	svc.Join(ctx, "lobby-secret", "player-applied", map[string]string{"": ""}) // invalid attributes (may not reach the observer)
	e.must(svc.Disconnect(ctx, "lobby-secret", "player-applied", x.Gen))
	e.must(svc.Heartbeat(ctx, "lobby-secret", "player-applied", x.Gen))
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	svc.Join(canceled, "lobby-secret", "player-applied", nil)
	e.at(time.Minute)
	e.must(svc.Do(ctx, "lobby-secret", rules.Tick()))
	svc.Reclaim(ctx, "lobby-secret")

	allowed := map[string]map[string]bool{
		"operation": set("join", "heartbeat", "disconnect", "expire_lease", "leave", "transfer_host", "tick",
			"update", "kick", "lock", "configure", "other"),
		"outcome": set("applied", "noop", "stale", "not_due", "done", "refused:lobby_full", "refused:not_host",
			"refused:not_member", "refused:not_eligible", "refused:not_empty", "refused:blocked", "refused:locked",
			"invalid", "contention", "canceled", "error"),
		"reason": set("joined", "reconnected", "disconnected", "timed_out", "lease_expired", "left", "host_transferred",
			"kicked", "updated", "locked", "unlocked", "configured", "other"),
	}
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, id := range ids {
					if strings.Contains(l.GetValue(), id) {
						t.Errorf("%s{%s=%q} carries the ID %q", mf.GetName(), l.GetName(), l.GetValue(), id)
					}
				}
				if !allowed[l.GetName()][l.GetValue()] {
					t.Errorf("%s: label %s=%q outside its closed set", mf.GetName(), l.GetName(), l.GetValue())
				}
				seen[l.GetName()+"="+l.GetValue()] = true
			}
		}
	}
	// The scenario reached the outcomes it meant to, so the check above
	// looked at them.
	for _, want := range []string{"outcome=noop", "outcome=stale", "outcome=refused:lobby_full", "outcome=refused:not_host",
		"outcome=refused:not_member", "outcome=canceled", "reason=lease_expired"} {
		if !seen[want] {
			t.Errorf("no series with %s", want)
		}
	}
}

func set(xs ...string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// Observations built by hand: the outcome label of each error, the latency
// histogram's buckets, and the advisor feed's bookkeeping.
func TestObserveDirect(t *testing.T) {
	tests := []struct {
		name string
		o    lobby.Observation
		want string
	}{
		{"applied", lobby.Observation{Result: lobby.Result{Outcome: lobby.OutcomeApplied}}, "applied"},
		{"done", lobby.Observation{Result: lobby.Result{Outcome: lobby.OutcomeDone}}, "done"},
		{"not due", lobby.Observation{Result: lobby.Result{Outcome: lobby.OutcomeNotDue}}, "not_due"},
		{"zero outcome", lobby.Observation{}, "error"},
		{"wrapped refusal", lobby.Observation{Err: fmt.Errorf("x: %w", lobby.ErrNotEligible)}, "refused:not_eligible"},
		{"not empty", lobby.Observation{Err: lobby.ErrNotEmpty}, "refused:not_empty"},
		{"blocked", lobby.Observation{Err: lobby.ErrBlocked}, "refused:blocked"},
		{"locked", lobby.Observation{Err: lobby.ErrLocked}, "refused:locked"},
		{"invalid time", lobby.Observation{Err: lobby.ErrInvalidTime}, "invalid"},
		{"deadline", lobby.Observation{Err: context.DeadlineExceeded}, "canceled"},
		{"contention", lobby.Observation{Err: fmt.Errorf("%w: after 32 attempts", lobby.ErrContention)}, "contention"},
		{"store failure", lobby.Observation{Err: errors.New("connection reset")}, "error"},
		{"corrupt", lobby.Observation{Err: lobby.ErrCorrupt}, "error"},
	}
	for _, tt := range tests {
		if got := outcomeLabel(tt.o); got != tt.want {
			t.Errorf("%s: outcome label %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := opLabel(rules.Op(200)); got != "other" {
		t.Errorf("unknown op label %q, want other", got)
	}

	c := New(WithLatencyBuckets(0.001, 0.01, 0.1))
	for _, d := range []time.Duration{500 * time.Microsecond, 5 * time.Millisecond, 50 * time.Millisecond, time.Second} {
		c.Observe(context.Background(), lobby.Observation{Command: rules.Join("p", nil), Duration: d,
			Result: lobby.Result{Outcome: lobby.OutcomeApplied}})
	}
	if err := testutil.CollectAndCompare(c.latency, strings.NewReader(`
# HELP lobbyhost_command_duration_seconds Time from a lobby command's call to its outcome, waiting for the lobby included.
# TYPE lobbyhost_command_duration_seconds histogram
lobbyhost_command_duration_seconds_bucket{operation="join",le="0.001"} 1
lobbyhost_command_duration_seconds_bucket{operation="join",le="0.01"} 2
lobbyhost_command_duration_seconds_bucket{operation="join",le="0.1"} 3
lobbyhost_command_duration_seconds_bucket{operation="join",le="+Inf"} 4
lobbyhost_command_duration_seconds_sum{operation="join"} 1.0555
lobbyhost_command_duration_seconds_count{operation="join"} 4
`)); err != nil {
		t.Error(err)
	}
}

// The feed measures a return from the event that started the grace to the
// one that ended it, counts every lease_expired, and ignores returns whose
// start it never saw, events older than the lobby's newest and members that
// left during their grace.
func TestAdvisorFeed(t *testing.T) {
	var adv lease.Advisor
	c := New(WithAdvisor(&adv, 1), WithAdvisorFeed())
	if c.Advisor() != &adv {
		t.Fatal("Advisor() is not the advisor given")
	}
	on, away := lobby.StatusOnline, lobby.StatusReconnecting
	ev := func(rev uint64, at time.Duration, reason lobby.Reason, subject string, members ...any) lobby.Event {
		e := lobby.Event{Lobby: "l", Revision: rev, Reason: reason, Subject: subject, At: t0.Add(at)}
		for i := 0; i < len(members); i += 2 {
			e.Members = append(e.Members, lobby.MemberView{Player: members[i].(string), Status: members[i+1].(lobby.Status)})
		}
		return e
	}
	observe := func(events ...lobby.Event) {
		c.Observe(context.Background(), lobby.Observation{Lobby: "l", Command: rules.Tick(),
			Result: lobby.Result{Outcome: lobby.OutcomeApplied, Events: events}})
	}
	observe(ev(1, 0, lobby.ReasonJoined, "a", "a", on),
		ev(2, 0, lobby.ReasonJoined, "b", "a", on, "b", on),
		ev(3, 0, lobby.ReasonJoined, "d", "a", on, "b", on, "d", on))
	observe(ev(4, 1*time.Second, lobby.ReasonDisconnected, "a", "a", away, "b", on, "d", on))
	observe(ev(5, 2*time.Second, lobby.ReasonTimedOut, "b", "a", away, "b", away, "d", on))
	observe(ev(3, 0, lobby.ReasonJoined, "d", "a", on, "b", on, "d", on)) // out of order: ignored
	observe(ev(6, 3*time.Second, lobby.ReasonDisconnected, "d", "a", away, "b", away, "d", away))
	observe(ev(7, 5*time.Second, lobby.ReasonReconnected, "a", "a", on, "b", away, "d", away)) // 4 s
	observe(ev(8, 6*time.Second, lobby.ReasonLeft, "d", "a", on, "b", away))                   // d forgotten
	observe(ev(9, 10*time.Second, lobby.ReasonLeaseExpired, "b", "a", on))                     // expiry
	observe(ev(10, 11*time.Second, lobby.ReasonReconnected, "x", "a", on, "x", on))            // start not seen: no return

	got := adv.Suggest(1)
	if got.Returns != 1 || got.Expiries != 1 {
		t.Fatalf("advisor saw %d returns and %d expiries, want 1 and 1", got.Returns, got.Expiries)
	}
	var ref lease.Advisor
	ref.ObserveReturn(4 * time.Second)
	if want := ref.Suggest(1).Grace; got.Grace != want {
		t.Errorf("advice %v, want %v (one 4 s return)", got.Grace, want)
	}
	check(t, values(t, wrap(c)), map[string]float64{
		"lobbyhost_grace_advice_seconds":         ref.Suggest(1).Grace.Seconds(),
		"lobbyhost_grace_advisor_returns_total":  1,
		"lobbyhost_grace_advisor_expiries_total": 1,
		"lobbyhost_members":                      2,
		"lobbyhost_members_reconnecting":         0,
	})
	if s := c.lobbies["l"]; len(s.away) != 0 {
		t.Errorf("members still remembered as away: %v", s.away)
	}
}

// Without WithAdvisor, no advice is exported; WithAdvisorFeed alone brings
// an advisor of the Collector's own.
func TestAdvisorOptional(t *testing.T) {
	if got := testutil.CollectAndCount(New(), "lobbyhost_grace_advice_seconds"); got != 0 {
		t.Errorf("advice exported without WithAdvisor: %d series", got)
	}
	c := New(WithAdvisorFeed())
	if c.Advisor() == nil || c.quantile != DefaultQuantile {
		t.Errorf("WithAdvisorFeed alone: advisor %v, quantile %v", c.Advisor(), c.quantile)
	}
	if got := testutil.CollectAndCount(c, "lobbyhost_grace_advice_seconds"); got != 1 {
		t.Errorf("advice series with the feed: %d, want 1", got)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func wrap(c prometheus.Collector) prometheus.Gatherer {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return reg
}

// Commands on many lobbies at once, scraped while they run: the race
// detector watches the Collector's state, and the totals come out exact.
func TestConcurrent(t *testing.T) {
	e := newEnv(t)
	const lobbies, players = 8, 5
	done := make(chan struct{})
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		for {
			select {
			case <-done:
				return
			default:
				if _, err := e.reg.Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	errs := make(chan error, lobbies)
	for l := range lobbies {
		go func() {
			id := fmt.Sprintf("l%d", l)
			var err error
			for p := range players {
				if _, jerr := e.svc.Join(e.ctx, id, fmt.Sprintf("p%d", p), nil); jerr != nil {
					err = jerr
				}
			}
			if _, lerr := e.svc.Leave(e.ctx, id, "p0"); lerr != nil {
				err = lerr
			}
			errs <- err
		}()
	}
	for range lobbies {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(done)
	<-scraped
	check(t, values(t, e.reg), map[string]float64{
		`lobbyhost_commands_total{operation="join",outcome="applied"}`:  lobbies * players,
		`lobbyhost_commands_total{operation="leave",outcome="applied"}`: lobbies,
		"lobbyhost_lobbies":                             lobbies,
		"lobbyhost_members":                             lobbies * (players - 1),
		"lobbyhost_members_online":                      lobbies * (players - 1),
		`lobbyhost_host_changes_total{reason="joined"}`: lobbies,
		`lobbyhost_host_changes_total{reason="left"}`:   lobbies,
	})
}

func BenchmarkObserve(b *testing.B) {
	c := New(WithAdvisorFeed())
	ctx := context.Background()
	heartbeat := lobby.Observation{Lobby: "l", Command: rules.Heartbeat("p", 1), Attempts: 1,
		Duration: time.Millisecond, Result: lobby.Result{Outcome: lobby.OutcomeApplied, Changed: true}}
	members := []lobby.MemberView{{Player: "p", Status: lobby.StatusOnline}, {Player: "q", Status: lobby.StatusOnline}}
	b.Run("heartbeat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.Observe(ctx, heartbeat)
		}
	})
	b.Run("join_event", func(b *testing.B) {
		b.ReportAllocs()
		var rev uint64
		for b.Loop() {
			rev++
			c.Observe(ctx, lobby.Observation{Lobby: "l", Command: rules.Join("q", nil), Attempts: 1,
				Result: lobby.Result{Outcome: lobby.OutcomeApplied, Changed: true, Events: []lobby.Event{{
					Lobby: "l", Revision: rev, Host: "p", PrevHost: "p", Members: members, Reason: lobby.ReasonJoined, Subject: "q"}}}})
		}
	})
}

// An event observed after a newer one of the same lobby changes nothing,
// even when the newer one emptied the lobby; the memory of emptied lobbies
// lasts a scrape or two.
func TestLateEvent(t *testing.T) {
	c := New()
	observe := func(rev uint64, members ...string) {
		e := lobby.Event{Lobby: "l", Revision: rev, Reason: lobby.ReasonLeft}
		for _, m := range members {
			e.Members = append(e.Members, lobby.MemberView{Player: m, Status: lobby.StatusOnline})
		}
		c.Observe(context.Background(), lobby.Observation{Lobby: "l", Command: rules.Leave("x"),
			Result: lobby.Result{Outcome: lobby.OutcomeApplied, Events: []lobby.Event{e}}})
	}
	reg := wrap(c)
	observe(3, "a", "b")
	observe(5) // emptied
	observe(4, "a")
	check(t, values(t, reg), map[string]float64{"lobbyhost_lobbies": 0, "lobbyhost_members": 0})
	observe(4, "a") // still remembered after one scrape
	check(t, values(t, reg), map[string]float64{"lobbyhost_lobbies": 0, "lobbyhost_members": 0})
	values(t, reg)
	observe(6, "c") // the lobby used again
	check(t, values(t, reg), map[string]float64{"lobbyhost_lobbies": 1, "lobbyhost_members": 1})
	if len(c.dropped)+len(c.droppedOld) != 0 {
		t.Errorf("emptied lobbies remembered after three scrapes: %v %v", c.dropped, c.droppedOld)
	}
}

// TestClassAdvice: what a Service measured per client class is exported
// with the class as the only label.
func TestClassAdvice(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	class := func(_, player string) string {
		if strings.HasPrefix(player, "m-") {
			return "mobile"
		}
		return "desktop"
	}
	var svc *lobby.Service
	c := New(WithClassAdvice(func(q float64) []lobby.ClassAdvice { return svc.Advice(q) }, 1))
	svc, err := lobby.NewService(memstore.New(), lobby.WithClock(clock), lobby.WithObserver(c), lobby.WithClientClass(class))
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Join(ctx, "l", "m-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Disconnect(ctx, "l", "m-1", res.Gen); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	if _, err := svc.Join(ctx, "l", "m-1", nil); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	want := `
# HELP lobbyhost_class_returns_total Per client class: members that came back within their grace.
# TYPE lobbyhost_class_returns_total counter
lobbyhost_class_returns_total{class="mobile"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lobbyhost_class_returns_total"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "lobbyhost_class_grace_advice_seconds" {
			continue
		}
		g := mf.GetMetric()[0]
		if v := g.GetGauge().GetValue(); v < 2 || v > 2.5 || g.GetLabel()[0].GetValue() != "mobile" {
			t.Fatalf("class grace advice %v for %v, want 2 s (bucketed up to 25%%) for mobile", v, g.GetLabel())
		}
		return
	}
	t.Fatal("no lobbyhost_class_grace_advice_seconds")
}
