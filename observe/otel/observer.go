package lobbyotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
)

// ScopeName is the instrumentation scope of the Observer's tracer and meter.
const ScopeName = "github.com/lobbyhost/lobbyhost/observe/otel"

// The attribute keys of spans and metrics.
const (
	KeyLobby       = attribute.Key("lobby.id")
	KeyOp          = attribute.Key("lobby.op")
	KeyOutcome     = attribute.Key("lobby.outcome")
	KeyAttempts    = attribute.Key("lobby.attempts")
	KeyCommitted   = attribute.Key("lobby.committed")
	KeyRevision    = attribute.Key("lobby.revision")
	KeyRefusal     = attribute.Key("lobby.refusal")
	KeyReason      = attribute.Key("lobby.reason")
	KeyHostChanged = attribute.Key("lobby.host_changed")
	KeyErrorType   = attribute.Key("error.type")
)

// ops are the operation names by rules.Op; index 0 is for an operation this
// package does not know (a newer core's), so the label set stays closed.
var ops = [...]string{
	0:                    "unknown",
	rules.OpJoin:         rules.OpJoin.String(),
	rules.OpHeartbeat:    rules.OpHeartbeat.String(),
	rules.OpDisconnect:   rules.OpDisconnect.String(),
	rules.OpExpireLease:  rules.OpExpireLease.String(),
	rules.OpLeave:        rules.OpLeave.String(),
	rules.OpTransferHost: rules.OpTransferHost.String(),
	rules.OpTick:         rules.OpTick.String(),
	rules.OpUpdate:       rules.OpUpdate.String(),
	rules.OpKick:         rules.OpKick.String(),
	rules.OpLock:         rules.OpLock.String(),
	rules.OpConfigure:    rules.OpConfigure.String(),
	rules.OpTimeOut:      rules.OpTimeOut.String(),
	rules.OpDrain:        rules.OpDrain.String(),
}

// spanNames are the span names by ops' index.
var spanNames = func() (names [len(ops)]string) {
	for i, op := range ops {
		names[i] = "lobby." + op
	}
	return names
}()

func opIndex(op rules.Op) int {
	if int(op) < len(ops) {
		return int(op)
	}
	return 0
}

// outcomes are the lobby.outcome values: those of lobby.Outcome by its
// value, then a refusal and an error; index 0 is for an outcome this
// package does not know.
var outcomes = [...]string{
	0:                    "unknown",
	lobby.OutcomeApplied: lobby.OutcomeApplied.String(),
	lobby.OutcomeNoop:    lobby.OutcomeNoop.String(),
	lobby.OutcomeStale:   lobby.OutcomeStale.String(),
	lobby.OutcomeDone:    lobby.OutcomeDone.String(),
	lobby.OutcomeNotDue:  lobby.OutcomeNotDue.String(),
	outcomeRefused:       "refused",
	outcomeError:         "error",
}

const (
	outcomeRefused = lobby.OutcomeNotDue + 1 + iota
	outcomeError
)

func outcomeIndex(o lobby.Observation) int {
	switch {
	case o.Err == nil && int(o.Result.Outcome) < int(outcomeRefused):
		return int(o.Result.Outcome)
	case o.Err == nil:
		return 0
	case lobby.IsRefusal(o.Err):
		return int(outcomeRefused)
	default:
		return int(outcomeError)
	}
}

// Option configures an Observer.
type Option func(*config) error

type config struct {
	clock clockwork.Clock
}

// WithClock sets the clock whose reading ends each span (default: the real
// clock). Give it the clock the Service reads (lobby.WithClock), so that a
// span's start, its end less the observation's Duration, is on the same
// clock as the Duration.
func WithClock(clock clockwork.Clock) Option {
	return func(c *config) error {
		if clock == nil {
			return fmt.Errorf("%w: lobbyotel: nil clock", lobby.ErrInvalidOption)
		}
		c.clock = clock
		return nil
	}
}

// Observer is a lobby.Observer that records a span and metrics for every
// command; see the package documentation for what it records. It is safe for
// concurrent use. Create it with New.
type Observer struct {
	tracer   trace.Tracer
	clock    clockwork.Clock
	counters lobby.Counters

	commands metric.Int64Counter
	duration metric.Float64Histogram
	retries  metric.Int64Counter
	reg      metric.Registration

	// Precomputed attribute sets, so that Observe allocates none for
	// metrics.
	byOp          [len(ops)]metric.MeasurementOption
	byOpAndResult [len(ops)][len(outcomes)]metric.MeasurementOption
}

var _ lobby.Observer = (*Observer)(nil)

// durationBuckets are the latency histogram's bounds in seconds: from
// 100 µs (an in-memory store) to 10 s (a store that is failing over).
var durationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// New returns an Observer recording spans with a tracer of tp and metrics
// with a meter of mp, both under [ScopeName]. For traces without metrics or
// the other way round, pass the OTel API's no-op provider
// (go.opentelemetry.io/otel/trace/noop, go.opentelemetry.io/otel/metric/noop).
// A nil provider or option is lobby.ErrInvalidOption; an instrument the
// meter refuses is returned as an error too.
//
// The observable counters are reported until Close.
func New(tp trace.TracerProvider, mp metric.MeterProvider, opts ...Option) (*Observer, error) {
	if tp == nil || mp == nil {
		return nil, fmt.Errorf("%w: lobbyotel: nil tracer or meter provider", lobby.ErrInvalidOption)
	}
	cfg := config{clock: clockwork.NewRealClock()}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: lobbyotel: nil option", lobby.ErrInvalidOption)
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	ob := &Observer{tracer: tp.Tracer(ScopeName), clock: cfg.clock}
	for op, name := range ops {
		ob.byOp[op] = metric.WithAttributeSet(attribute.NewSet(KeyOp.String(name)))
		for oc, outcome := range outcomes {
			ob.byOpAndResult[op][oc] = metric.WithAttributeSet(attribute.NewSet(KeyOp.String(name), KeyOutcome.String(outcome)))
		}
	}
	if err := ob.instruments(mp.Meter(ScopeName)); err != nil {
		return nil, err
	}
	return ob, nil
}

// Close stops reporting the observable counters (it unregisters their
// callback). Spans and the other metrics are still recorded for commands
// observed afterwards.
func (ob *Observer) Close() error {
	return ob.reg.Unregister()
}

// Observe implements lobby.Observer: it records the command's span, a child
// of the span in ctx, and its metrics.
func (ob *Observer) Observe(ctx context.Context, o lobby.Observation) {
	end := ob.clock.Now()
	op, oc := opIndex(o.Command.Op), outcomeIndex(o)
	ob.span(ctx, o, end, op, oc)

	ob.commands.Add(ctx, 1, ob.byOpAndResult[op][oc])
	ob.duration.Record(ctx, max(o.Duration, 0).Seconds(), ob.byOp[op])
	if o.Attempts > 1 {
		ob.retries.Add(ctx, int64(o.Attempts-1), ob.byOp[op])
	}
	ob.counters.Observe(ctx, o)
}

func (ob *Observer) span(ctx context.Context, o lobby.Observation, end time.Time, op, oc int) {
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs,
		KeyLobby.String(o.Lobby),
		KeyOp.String(ops[op]),
		KeyOutcome.String(outcomes[oc]),
		KeyAttempts.Int(o.Attempts),
		KeyCommitted.Bool(o.Committed),
	)
	switch {
	case o.Err == nil:
		attrs = append(attrs, KeyRevision.Int64(int64(min(o.Result.Revision, 1<<63-1))))
	case oc == int(outcomeRefused):
		attrs = append(attrs, KeyRefusal.String(ErrorClass(o.Err)))
	default:
		attrs = append(attrs, KeyErrorType.String(ErrorClass(o.Err)))
	}
	_, span := ob.tracer.Start(ctx, spanNames[op],
		trace.WithTimestamp(end.Add(-max(o.Duration, 0))),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
	if oc == int(outcomeError) {
		span.SetStatus(codes.Error, ErrorClass(o.Err))
	}
	if span.IsRecording() {
		for _, e := range o.Result.Events {
			span.AddEvent("lobby.change", trace.WithTimestamp(end), trace.WithAttributes(
				KeyReason.String(string(e.Reason)),
				KeyRevision.Int64(int64(min(e.Revision, 1<<63-1))),
				KeyHostChanged.Bool(e.Host != e.PrevHost),
			))
		}
	}
	span.End(trace.WithTimestamp(end))
}

// instruments creates the metric instruments and registers the callback of
// the observable ones.
func (ob *Observer) instruments(m metric.Meter) error {
	var errs []error
	check := func(err error) { errs = append(errs, err) }
	var err error

	ob.commands, err = m.Int64Counter("lobby.commands", metric.WithUnit("{command}"),
		metric.WithDescription("Commands handled, by operation and outcome."))
	check(err)
	ob.duration, err = m.Float64Histogram("lobby.command.duration", metric.WithUnit("s"),
		metric.WithDescription("How long commands took, waiting for the lobby included, by operation."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	check(err)
	ob.retries, err = m.Int64Counter("lobby.command.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Compare-and-set attempts after the first, by operation."))
	check(err)

	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		check(err)
		return c
	}
	timedOut := counter("lobby.connections.timed_out", "{connection}", "Connection generations ended by their heartbeat deadline.")
	superseded := counter("lobby.connections.superseded", "{connection}", "Connection generations ended by MaxConnectionsPerPlayer.")
	graceStarted := counter("lobby.graces.started", "{grace}", "Reconnect deadlines started (a member's last connection closed or timed out).")
	reconnected := counter("lobby.graces.reconnected", "{grace}", "Members back within their grace.")
	expired := counter("lobby.graces.expired", "{grace}", "Graces that ran out (lease expirations).")
	stale := counter("lobby.reports.stale", "{report}", "Heartbeats and closes naming a connection that already ended.")
	hostChanges := counter("lobby.host.changes", "{change}", "Changes of host, by the reason of the change.")
	hostless, err := m.Float64ObservableCounter("lobby.hostless.duration", metric.WithUnit("s"),
		metric.WithDescription("Time lobbies spent with members but no host, counted when the spell ends."))
	check(err)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lobbyotel: %w", err)
	}

	byReason := make([]metric.ObserveOption, len(reasons))
	for i, r := range reasons {
		byReason[i] = metric.WithAttributeSet(attribute.NewSet(KeyReason.String(string(r))))
	}
	ob.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := ob.counters.Snapshot()
		o.ObserveInt64(timedOut, clamp(s.TimedOut))
		o.ObserveInt64(superseded, clamp(s.Superseded))
		o.ObserveInt64(graceStarted, clamp(s.GraceStarted))
		o.ObserveInt64(reconnected, clamp(s.Reconnected))
		o.ObserveInt64(expired, clamp(s.LeaseExpired))
		o.ObserveInt64(stale, clamp(s.Stale))
		for i, r := range reasons {
			o.ObserveInt64(hostChanges, clamp(s.HostChanges[r]), byReason[i])
		}
		o.ObserveFloat64(hostless, s.Hostless.Seconds())
		return nil
	}, timedOut, superseded, graceStarted, reconnected, expired, stale, hostChanges, hostless)
	if err != nil {
		return fmt.Errorf("lobbyotel: %w", err)
	}
	return nil
}

// reasons are the lobby.reason values of lobby.host.changes, each reported
// (zero included) so that every series exists from the start.
var reasons = []lobby.Reason{
	lobby.ReasonJoined, lobby.ReasonReconnected, lobby.ReasonDisconnected, lobby.ReasonTimedOut,
	lobby.ReasonLeaseExpired, lobby.ReasonLeft, lobby.ReasonHostTransferred, lobby.ReasonKicked,
	lobby.ReasonUpdated,
}

func clamp(n uint64) int64 { return int64(min(n, 1<<63-1)) }
