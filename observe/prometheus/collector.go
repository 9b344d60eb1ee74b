package lobbyprom

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lobbyhost/lobbyhost/lease"
	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
)

// Collector turns the observations of a lobby.Service into Prometheus
// metrics (see the package documentation for the list). Create it with
// [New]. It is safe for concurrent use; Observe is called on every
// command's goroutine, so it takes one short lock only when the command
// produced events.
type Collector struct {
	counters lobby.Counters
	commands *prometheus.CounterVec
	latency  *prometheus.HistogramVec

	advisor  *lease.Advisor
	quantile float64
	feed     bool
	buckets  []float64

	classAdvice   func(q float64) []lobby.ClassAdvice
	classQuantile float64

	mu      sync.Mutex
	lobbies map[string]*summary
	totals  census
	// dropped and droppedOld remember the revision at which a lobby was
	// emptied, so that an older event of it observed late does not bring
	// it back. Each scrape (or maxDropped entries) ages dropped into
	// droppedOld and forgets droppedOld.
	dropped, droppedOld map[string]uint64
}

// maxDropped bounds the remembered emptied lobbies between two scrapes.
const maxDropped = 4096

var (
	_ lobby.Observer       = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)

// census counts members by presence.
type census struct{ members, online, reconnecting int }

// summary is what the Collector keeps of one lobby: the revision of the
// newest event it applied, the counts that event showed, and (with the
// advisor feed) when each member in its grace lost its last connection.
type summary struct {
	revision uint64
	census   census
	away     map[string]time.Time
}

// Option configures a Collector.
type Option func(*Collector)

// DefaultQuantile is the share of returns the grace advice covers when
// WithAdvisorFeed is used without WithAdvisor.
const DefaultQuantile = 0.95

// WithAdvisor exports the proposal of a (lease.Advisor.Suggest(quantile))
// as lobbyhost_grace_advice_seconds, with the returns and expiries behind
// it. A nil a means an Advisor of the Collector's own (see
// [Collector.Advisor]). quantile is clamped as Suggest clamps it.
// Without WithAdvisorFeed, feeding a is the caller's business.
func WithAdvisor(a *lease.Advisor, quantile float64) Option {
	return func(c *Collector) {
		if a == nil {
			a = &lease.Advisor{}
		}
		c.advisor, c.quantile = a, quantile
	}
}

// WithAdvisorFeed feeds the advisor from the observed events (see the
// package documentation). Without WithAdvisor, the Collector uses an
// Advisor of its own and DefaultQuantile.
func WithAdvisorFeed() Option {
	return func(c *Collector) { c.feed = true }
}

// WithClassAdvice exports what a Service measured per client class (pass
// svc.Advice of a Service built with lobby.WithClientClass) for the share
// quantile of observations: lobbyhost_class_grace_advice_seconds{class},
// lobbyhost_class_heartbeat_gap_seconds{class}, and the returns, grace
// expiries and heartbeat timeouts behind them. Classes are the server's
// own few names, never player IDs.
func WithClassAdvice(advice func(q float64) []lobby.ClassAdvice, quantile float64) Option {
	return func(c *Collector) { c.classAdvice, c.classQuantile = advice, quantile }
}

// WithLatencyBuckets sets the upper bounds, in seconds, of the command
// duration histogram (default: 0.5 ms to 2.5 s). Empty keeps the default.
func WithLatencyBuckets(bounds ...float64) Option {
	return func(c *Collector) {
		if len(bounds) > 0 {
			c.buckets = append([]float64(nil), bounds...)
		}
	}
}

var defaultBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// New returns a Collector with no observations yet.
func New(opts ...Option) *Collector {
	c := &Collector{buckets: defaultBuckets, lobbies: map[string]*summary{}, dropped: map[string]uint64{}}
	for _, o := range opts {
		o(c)
	}
	if c.feed && c.advisor == nil {
		c.advisor, c.quantile = &lease.Advisor{}, DefaultQuantile
	}
	c.commands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lobbyhost_commands_total",
		Help: "Lobby commands handled, by operation and outcome.",
	}, []string{"operation", "outcome"})
	c.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lobbyhost_command_duration_seconds",
		Help:    "Time from a lobby command's call to its outcome, waiting for the lobby included.",
		Buckets: c.buckets,
	}, []string{"operation"})
	return c
}

// Advisor returns the grace advisor the Collector exports, nil without
// WithAdvisor or WithAdvisorFeed.
func (c *Collector) Advisor() *lease.Advisor { return c.advisor }

// Counters returns the values of the lobby.Counters behind the counters
// this Collector exports.
func (c *Collector) Counters() lobby.CounterSnapshot { return c.counters.Snapshot() }

// Observe implements lobby.Observer.
func (c *Collector) Observe(ctx context.Context, o lobby.Observation) {
	c.counters.Observe(ctx, o)
	op := opLabel(o.Command.Op)
	c.commands.WithLabelValues(op, outcomeLabel(o)).Inc()
	c.latency.WithLabelValues(op).Observe(o.Duration.Seconds())
	if o.Err != nil || len(o.Result.Events) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range o.Result.Events {
		c.apply(e)
	}
}

// apply updates the summary of e's lobby. An event no newer than the one
// applied last is ignored: two commands on one lobby may be observed in
// the opposite order of their commits (the Observer runs after the lobby
// is released). That holds across the lobby's emptying for a scrape
// interval or two (see dropped).
func (c *Collector) apply(e lobby.Event) {
	s := c.lobbies[e.Lobby]
	if s == nil {
		if rev, ok := c.dropped[e.Lobby]; ok && e.Revision <= rev {
			return
		}
		if rev, ok := c.droppedOld[e.Lobby]; ok && e.Revision <= rev {
			return
		}
		s = &summary{}
	} else if e.Revision <= s.revision {
		return
	}
	s.revision = e.Revision
	var n census
	for _, m := range e.Members {
		n.members++
		switch m.Status {
		case lobby.StatusOnline:
			n.online++
		case lobby.StatusReconnecting:
			n.reconnecting++
		}
	}
	c.totals.members += n.members - s.census.members
	c.totals.online += n.online - s.census.online
	c.totals.reconnecting += n.reconnecting - s.census.reconnecting
	s.census = n
	if c.feed {
		c.feedAdvisor(s, e)
	}
	if n.members == 0 {
		delete(c.lobbies, e.Lobby)
		c.dropped[e.Lobby] = e.Revision
		if len(c.dropped) >= maxDropped {
			c.ageDropped()
		}
	} else {
		c.lobbies[e.Lobby] = s
	}
}

// ageDropped forgets the older generation of emptied lobbies.
func (c *Collector) ageDropped() {
	c.droppedOld, c.dropped = c.dropped, make(map[string]uint64, len(c.dropped))
}

// feedAdvisor records returns and expiries. A grace starts at the
// disconnected or timed_out event that shows its subject reconnecting; it
// ends as a return at the reconnected event that shows the subject online
// again, or as an expiry at its lease_expired event. A member that stops
// being listed as reconnecting in any other way (it left) is forgotten.
func (c *Collector) feedAdvisor(s *summary, e lobby.Event) {
	switch e.Reason {
	case lobby.ReasonDisconnected, lobby.ReasonTimedOut:
		if statusOf(e.Members, e.Subject) == lobby.StatusReconnecting {
			if s.away == nil {
				s.away = map[string]time.Time{}
			}
			s.away[e.Subject] = e.At
		}
	case lobby.ReasonReconnected:
		if since, ok := s.away[e.Subject]; ok && statusOf(e.Members, e.Subject) == lobby.StatusOnline {
			c.advisor.ObserveReturn(e.At.Sub(since))
		}
	case lobby.ReasonLeaseExpired:
		c.advisor.ObserveExpiry()
	}
	for p := range s.away {
		if statusOf(e.Members, p) != lobby.StatusReconnecting {
			delete(s.away, p)
		}
	}
}

// statusOf returns player's status in members, 0 if it is not listed.
func statusOf(members []lobby.MemberView, player string) lobby.Status {
	for _, m := range members {
		if m.Player == player {
			return m.Status
		}
	}
	return 0
}

var opLabels = map[rules.Op]string{
	rules.OpJoin:         "join",
	rules.OpHeartbeat:    "heartbeat",
	rules.OpDisconnect:   "disconnect",
	rules.OpExpireLease:  "expire_lease",
	rules.OpLeave:        "leave",
	rules.OpTransferHost: "transfer_host",
	rules.OpTick:         "tick",
	rules.OpUpdate:       "update",
	rules.OpKick:         "kick",
	rules.OpLock:         "lock",
	rules.OpConfigure:    "configure",
	rules.OpTimeOut:      "time_out",
	rules.OpDrain:        "drain",
}

func opLabel(op rules.Op) string {
	if l, ok := opLabels[op]; ok {
		return l
	}
	return "other"
}

var outcomeLabels = map[lobby.Outcome]string{
	lobby.OutcomeApplied: "applied",
	lobby.OutcomeNoop:    "noop",
	lobby.OutcomeStale:   "stale",
	lobby.OutcomeNotDue:  "not_due",
	lobby.OutcomeDone:    "done",
}

// errorLabels map errors to outcome labels, checked in order.
var errorLabels = []struct {
	err   error
	label string
}{
	{lobby.ErrLobbyFull, "refused:lobby_full"},
	{lobby.ErrNotHost, "refused:not_host"},
	{lobby.ErrNotMember, "refused:not_member"},
	{lobby.ErrNotEligible, "refused:not_eligible"},
	{lobby.ErrNotEmpty, "refused:not_empty"},
	{lobby.ErrBlocked, "refused:blocked"},
	{lobby.ErrLocked, "refused:locked"},
	{lobby.ErrInvalidPolicy, "invalid"},
	{lobby.ErrInvalidID, "invalid"},
	{lobby.ErrInvalidAttrs, "invalid"},
	{lobby.ErrInvalidCommand, "invalid"},
	{lobby.ErrInvalidTime, "invalid"},
	{lobby.ErrContention, "contention"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "canceled"},
}

func outcomeLabel(o lobby.Observation) string {
	if o.Err != nil {
		for _, x := range errorLabels {
			if errors.Is(o.Err, x.err) {
				return x.label
			}
		}
		return "error"
	}
	if l, ok := outcomeLabels[o.Result.Outcome]; ok {
		return l
	}
	return "error"
}

var reasonLabels = map[lobby.Reason]bool{
	lobby.ReasonJoined: true, lobby.ReasonReconnected: true, lobby.ReasonDisconnected: true,
	lobby.ReasonTimedOut: true, lobby.ReasonLeaseExpired: true, lobby.ReasonLeft: true,
	lobby.ReasonHostTransferred: true, lobby.ReasonKicked: true, lobby.ReasonUpdated: true,
	lobby.ReasonLocked: true, lobby.ReasonUnlocked: true, lobby.ReasonConfigured: true,
}

var (
	descRetries      = counterDesc("lobbyhost_cas_retries_total", "Compare-and-set attempts beyond the first.")
	descTimedOut     = counterDesc("lobbyhost_generations_timed_out_total", "Connection generations ended by their heartbeat deadline.")
	descSuperseded   = counterDesc("lobbyhost_generations_superseded_total", "Connection generations ended because the player opened more than the allowed connections.")
	descGraceStarted = counterDesc("lobbyhost_reconnect_deadlines_started_total", "Reconnect deadlines (graces) started: a member's last connection closed or timed out.")
	descReconnected  = counterDesc("lobbyhost_reconnects_within_grace_total", "Members that came back within their grace.")
	descLeaseExpired = counterDesc("lobbyhost_lease_expirations_total", "Graces that ran out; the member was removed.")
	descStale        = counterDesc("lobbyhost_stale_events_total", "Heartbeats and closes naming a connection generation that had already ended.")
	descHostless     = counterDesc("lobbyhost_hostless_seconds_total", "Time lobbies spent with members but no eligible host, up to the last change observed.")
	descHostChanges  = prometheus.NewDesc("lobbyhost_host_changes_total", "Changes of host, by the reason of the change.", []string{"reason"}, nil)

	descLobbies      = prometheus.NewDesc("lobbyhost_lobbies", "Lobbies with members, as of the newest event this process observed of each.", nil, nil)
	descMembers      = prometheus.NewDesc("lobbyhost_members", "Members of those lobbies.", nil, nil)
	descOnline       = prometheus.NewDesc("lobbyhost_members_online", "Members holding a live connection.", nil, nil)
	descReconnecting = prometheus.NewDesc("lobbyhost_members_reconnecting", "Members in their grace, holding no live connection.", nil, nil)

	descAdvice   = prometheus.NewDesc("lobbyhost_grace_advice_seconds", "The grace advisor's proposal: the grace that covers the configured share of observed returns (0 before any).", nil, nil)
	descReturns  = counterDesc("lobbyhost_grace_advisor_returns_total", "Returns within the grace the grace advisor recorded.")
	descExpiries = counterDesc("lobbyhost_grace_advisor_expiries_total", "Graces that ran out, as the grace advisor recorded them.")

	descClassGrace    = prometheus.NewDesc("lobbyhost_class_grace_advice_seconds", "Per client class: the grace that covers the configured share of observed returns (0 before any).", []string{"class"}, nil)
	descClassGap      = prometheus.NewDesc("lobbyhost_class_heartbeat_gap_seconds", "Per client class: the configured share of observed gaps between a connection's heartbeats.", []string{"class"}, nil)
	descClassReturns  = prometheus.NewDesc("lobbyhost_class_returns_total", "Per client class: members that came back within their grace.", []string{"class"}, nil)
	descClassExpiries = prometheus.NewDesc("lobbyhost_class_grace_expiries_total", "Per client class: graces that ran out.", []string{"class"}, nil)
	descClassTimeouts = prometheus.NewDesc("lobbyhost_class_heartbeat_timeouts_total", "Per client class: connections that timed out.", []string{"class"}, nil)
)

func counterDesc(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.commands.Describe(ch)
	c.latency.Describe(ch)
	for _, d := range []*prometheus.Desc{descRetries, descTimedOut, descSuperseded, descGraceStarted,
		descReconnected, descLeaseExpired, descStale, descHostless, descHostChanges,
		descLobbies, descMembers, descOnline, descReconnecting} {
		ch <- d
	}
	if c.advisor != nil {
		ch <- descAdvice
		ch <- descReturns
		ch <- descExpiries
	}
	if c.classAdvice != nil {
		for _, d := range []*prometheus.Desc{descClassGrace, descClassGap, descClassReturns, descClassExpiries, descClassTimeouts} {
			ch <- d
		}
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.commands.Collect(ch)
	c.latency.Collect(ch)

	s := c.counters.Snapshot()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(descRetries, float64(s.Conflicts))
	counter(descTimedOut, float64(s.TimedOut))
	counter(descSuperseded, float64(s.Superseded))
	counter(descGraceStarted, float64(s.GraceStarted))
	counter(descReconnected, float64(s.Reconnected))
	counter(descLeaseExpired, float64(s.LeaseExpired))
	counter(descStale, float64(s.Stale))
	counter(descHostless, s.Hostless.Seconds())
	byReason := map[string]uint64{}
	for r, n := range s.HostChanges {
		l := string(r)
		if !reasonLabels[r] {
			l = "other"
		}
		byReason[l] += n
	}
	for l, n := range byReason {
		counter(descHostChanges, float64(n), l)
	}

	c.mu.Lock()
	lobbies, t := len(c.lobbies), c.totals
	c.ageDropped()
	c.mu.Unlock()
	gauge(descLobbies, float64(lobbies))
	gauge(descMembers, float64(t.members))
	gauge(descOnline, float64(t.online))
	gauge(descReconnecting, float64(t.reconnecting))

	if c.advisor != nil {
		adv := c.advisor.Suggest(c.quantile)
		gauge(descAdvice, adv.Grace.Seconds())
		counter(descReturns, float64(adv.Returns))
		counter(descExpiries, float64(adv.Expiries))
	}
	if c.classAdvice != nil {
		for _, a := range c.classAdvice(c.classQuantile) {
			ch <- prometheus.MustNewConstMetric(descClassGrace, prometheus.GaugeValue, a.Grace.Grace.Seconds(), a.Class)
			ch <- prometheus.MustNewConstMetric(descClassGap, prometheus.GaugeValue, a.HeartbeatGap.Grace.Seconds(), a.Class)
			counter(descClassReturns, float64(a.Grace.Returns), a.Class)
			counter(descClassExpiries, float64(a.Grace.Expiries), a.Class)
			counter(descClassTimeouts, float64(a.HeartbeatGap.Expiries), a.Class)
		}
	}
}
