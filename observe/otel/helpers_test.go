package lobbyotel_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/lobbyhost/lobbyhost/lobby"
	lobbyotel "github.com/lobbyhost/lobbyhost/observe/otel"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// rig is a Service over a memstore (behind a store whose faults a test
// injects) on a fake clock, observed by a lobbyotel.Observer that records
// into an in-memory span recorder and a manual metric reader.
type rig struct {
	clock  *clockwork.FakeClock
	store  *faultyStore
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	obs    *lobbyotel.Observer
	svc    *lobby.Service
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{clock: clockwork.NewFakeClockAt(t0), spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.store = &faultyStore{Store: memstore.New(), clock: r.clock}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		_ = r.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	var err error
	r.obs, err = lobbyotel.New(r.tp, mp, lobbyotel.WithClock(r.clock))
	if err != nil {
		t.Fatal(err)
	}
	pol := lobby.DefaultPolicy()
	pol.Grace, pol.HeartbeatTTL = 8*time.Second, 15*time.Second
	r.svc, err = lobby.NewService(r.store, lobby.WithClock(r.clock), lobby.WithPolicy(pol), lobby.WithObserver(r.obs))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// faultyStore fails or delays writes on demand. Its fields are set by the
// test between commands.
type faultyStore struct {
	store.Store
	clock *clockwork.FakeClock

	mu        sync.Mutex
	conflicts int           // the next writes that report store.ErrConflict
	fail      error         // returned by every write while set
	latency   time.Duration // the fake clock advances by it in each write
}

func (s *faultyStore) Write(ctx context.Context, w store.Write) error {
	s.mu.Lock()
	conflict, fail, latency := s.conflicts > 0, s.fail, s.latency
	if conflict {
		s.conflicts--
	}
	s.mu.Unlock()
	s.clock.Advance(latency)
	switch {
	case fail != nil:
		return fail
	case conflict:
		return store.ErrConflict
	}
	return s.Store.Write(ctx, w)
}

func (s *faultyStore) set(f func(s *faultyStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// span is what a test compares of a recorded span.
type span struct {
	Name     string
	Parent   string // the parent's span ID, "" for a root
	Attrs    map[string]string
	Status   string // "Unset", "Error: <description>"
	Start    time.Duration
	Duration time.Duration
	// Events are the span events: "name reason revision", then " host"
	// if the host changed.
	Events []string
}

// spans returns the spans recorded so far with a name starting "lobby.",
// in the order they ended, their start relative to t0.
func (r *rig) spansNow() []span {
	var out []span
	for _, s := range r.spans.Ended() {
		if !strings.HasPrefix(s.Name(), "lobby.") {
			continue
		}
		sp := span{
			Name:     s.Name(),
			Attrs:    map[string]string{},
			Status:   s.Status().Code.String(),
			Start:    s.StartTime().Sub(t0),
			Duration: s.EndTime().Sub(s.StartTime()),
		}
		if s.Parent().IsValid() {
			sp.Parent = s.Parent().SpanID().String()
		}
		if s.Status().Description != "" {
			sp.Status += ": " + s.Status().Description
		}
		for _, kv := range s.Attributes() {
			sp.Attrs[string(kv.Key)] = kv.Value.String()
		}
		for _, e := range s.Events() {
			set := attribute.NewSet(e.Attributes...)
			reason, _ := set.Value(lobbyotel.KeyReason)
			rev, _ := set.Value(lobbyotel.KeyRevision)
			ev := fmt.Sprintf("%s %s %s", e.Name, reason.String(), rev.String())
			if hc, _ := set.Value(lobbyotel.KeyHostChanged); hc.AsBool() {
				ev += " host"
			}
			if !e.Time.Equal(s.EndTime()) {
				ev += fmt.Sprintf(" at %v, not the span's end", e.Time.Sub(t0))
			}
			sp.Events = append(sp.Events, ev)
		}
		out = append(out, sp)
	}
	return out
}

// metrics collects the manual reader and flattens every data point into
// "name{k=v,...}" → value; a histogram gives name_count and name_sum.
func (r *rig) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != lobbyotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, lobbyotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s: not a cumulative monotonic sum", m.Name)
				}
				for _, p := range d.DataPoints {
					out[m.Name+labels(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Sum[float64]:
				if !d.IsMonotonic {
					t.Errorf("%s: not monotonic", m.Name)
				}
				for _, p := range d.DataPoints {
					out[m.Name+labels(p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name+"_count"+labels(p.Attributes)] = float64(p.Count)
					out[m.Name+"_sum"+labels(p.Attributes)] = p.Sum
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

func labels(s attribute.Set) string {
	var kv []string
	for _, a := range s.ToSlice() {
		kv = append(kv, fmt.Sprintf("%s=%s", a.Key, a.Value.String()))
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

// allLabels lists every attribute of every data point, for the privacy
// check.
func (r *rig) allLabels(t *testing.T) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []string
	add := func(s attribute.Set) { out = append(out, labels(s)) }
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					add(p.Attributes)
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					add(p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					add(p.Attributes)
				}
			}
		}
	}
	return out
}
