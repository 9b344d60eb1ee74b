package server

import (
	"net/http"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// metrics are the server's Prometheus metrics, in a registry of their own.
type metrics struct {
	reg *prometheus.Registry

	ticketsIssued   prometheus.Counter
	upgradesRefused *prometheus.CounterVec
	sockets         prometheus.Gauge
	clientMessages  *prometheus.CounterVec
	clientRefused   *prometheus.CounterVec
	slowConsumers   prometheus.Counter
	typingDropped   prometheus.Counter
	framesThrottled prometheus.Counter
	originsRefused  prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		ticketsIssued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wsserver_tickets_issued_total",
			Help: "Socket tickets issued.",
		}),
		upgradesRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsserver_upgrades_refused_total",
			Help: "Socket requests refused before attaching, by reason.",
		}, []string{"reason"}),
		sockets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "wsserver_sockets",
			Help: "Sockets attached to a lobby now.",
		}),
		clientMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsserver_client_messages_total",
			Help: "Well-formed client messages, by type.",
		}, []string{"type"}),
		clientRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsserver_client_messages_refused_total",
			Help: "Client messages refused, by error code.",
		}, []string{"code"}),
		slowConsumers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wsserver_slow_consumers_closed_total",
			Help: "Sockets closed because their send queue overflowed.",
		}),
		typingDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wsserver_typing_dropped_total",
			Help: "Typing indicators not sent to a socket whose queue was filling up.",
		}),
		framesThrottled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wsserver_frames_throttled_total",
			Help: "Times a socket's frame budget was spent and the server paused reading it.",
		}),
		originsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wsserver_origins_refused_total",
			Help: "Requests refused because their Origin is not allowed.",
		}),
	}
	m.reg.MustRegister(m.ticketsIssued, m.upgradesRefused, m.sockets, m.clientMessages,
		m.clientRefused, m.slowConsumers, m.typingDropped, m.framesThrottled, m.originsRefused,
		lobbyCollector{s.counters},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// lobbyCollector exports a lobby.Counters snapshot.
type lobbyCollector struct{ c *lobby.Counters }

var (
	descTimedOut = prometheus.NewDesc("lobbyhost_generations_timed_out_total",
		"Connection generations ended by their heartbeat deadline.", nil, nil)
	descSuperseded = prometheus.NewDesc("lobbyhost_generations_superseded_total",
		"Connection generations ended because the player opened more than the allowed connections.", nil, nil)
	descGraceStarted = prometheus.NewDesc("lobbyhost_reconnect_deadlines_started_total",
		"Reconnect deadlines (graces) started: a member's last connection closed or timed out.", nil, nil)
	descReconnected = prometheus.NewDesc("lobbyhost_reconnects_within_grace_total",
		"Members that came back within their grace.", nil, nil)
	descLeaseExpired = prometheus.NewDesc("lobbyhost_lease_expirations_total",
		"Graces that ran out; the member was removed.", nil, nil)
	descStale = prometheus.NewDesc("lobbyhost_stale_events_total",
		"Heartbeats and closes naming a connection generation that had already ended.", nil, nil)
	descRefused = prometheus.NewDesc("lobbyhost_commands_refused_total",
		"Commands refused by a lobby rule (full lobby, not the host, ...).", nil, nil)
	descConflicts = prometheus.NewDesc("lobbyhost_cas_conflicts_total",
		"Compare-and-set retries.", nil, nil)
	descHostChanges = prometheus.NewDesc("lobbyhost_host_changes_total",
		"Changes of host, by the reason of the change.", []string{"reason"}, nil)
	descHostless = prometheus.NewDesc("lobbyhost_hostless_seconds_total",
		"Time lobbies spent with members but no eligible host, up to the last change observed.", nil, nil)
)

func (lobbyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTimedOut, descSuperseded, descGraceStarted, descReconnected,
		descLeaseExpired, descStale, descRefused, descConflicts, descHostChanges, descHostless} {
		ch <- d
	}
}

func (l lobbyCollector) Collect(ch chan<- prometheus.Metric) {
	s := l.c.Snapshot()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	counter(descTimedOut, float64(s.TimedOut))
	counter(descSuperseded, float64(s.Superseded))
	counter(descGraceStarted, float64(s.GraceStarted))
	counter(descReconnected, float64(s.Reconnected))
	counter(descLeaseExpired, float64(s.LeaseExpired))
	counter(descStale, float64(s.Stale))
	counter(descRefused, float64(s.Refused))
	counter(descConflicts, float64(s.Conflicts))
	counter(descHostless, s.Hostless.Seconds())
	reasons := make([]string, 0, len(s.HostChanges))
	for r := range s.HostChanges {
		reasons = append(reasons, string(r))
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		counter(descHostChanges, float64(s.HostChanges[lobby.Reason(r)]), r)
	}
}
