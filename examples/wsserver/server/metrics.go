package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics, in a registry of their own:
// the transport's (sockets, messages, rate limiting) here, the lobby's from
// the lobbyprom Collector that observes the Service (s.lobbyMetrics).
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
	// storeCalls counts the server's calls to its store by method (see
	// countingStore).
	storeCalls *prometheus.CounterVec
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
		storeCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lobbyhost_store_calls_total",
			Help: "Calls this process made to the lobby store, by method.",
		}, []string{"method"}),
	}
	m.reg.MustRegister(m.ticketsIssued, m.upgradesRefused, m.sockets, m.clientMessages,
		m.clientRefused, m.slowConsumers, m.typingDropped, m.framesThrottled, m.originsRefused, m.storeCalls,
		s.lobbyMetrics,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
