package lobbyotel_test

import (
	"context"
	"errors"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
	lobbyotel "github.com/lobbyhost/lobbyhost/observe/otel"
)

func TestNewRefusesWhatItCannotUse(t *testing.T) {
	tp, mp := tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider()
	for _, tt := range []struct {
		name string
		new  func() (*lobbyotel.Observer, error)
	}{
		{"nil tracer provider", func() (*lobbyotel.Observer, error) { return lobbyotel.New(nil, mp) }},
		{"nil meter provider", func() (*lobbyotel.Observer, error) { return lobbyotel.New(tp, nil) }},
		{"nil clock", func() (*lobbyotel.Observer, error) { return lobbyotel.New(tp, mp, lobbyotel.WithClock(nil)) }},
		{"nil option", func() (*lobbyotel.Observer, error) { return lobbyotel.New(tp, mp, nil) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if ob, err := tt.new(); !errors.Is(err, lobby.ErrInvalidOption) || ob != nil {
				t.Errorf("New = %v, %v; want nil, lobby.ErrInvalidOption", ob, err)
			}
		})
	}
	ob, err := lobbyotel.New(tp, mp)
	if err != nil {
		t.Fatalf("New with no-op providers: %v", err)
	}
	ob.Observe(context.Background(), lobby.Observation{Lobby: "l", Command: rules.Tick()})
}

// After Close the seed's counters are no longer reported; the command
// metrics still are.
func TestCloseStopsTheObservableCounters(t *testing.T) {
	r := newRig(t)
	if _, err := r.svc.Join(context.Background(), room, alice, nil); err != nil {
		t.Fatal(err)
	}
	if got := r.metrics(t)["lobby.host.changes{lobby.reason=joined}"]; got != 1 {
		t.Fatalf("host changes by joined = %v before Close, want 1", got)
	}
	if err := r.obs.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Join(context.Background(), room, bob, nil); err != nil {
		t.Fatal(err)
	}
	got := r.metrics(t)
	for k := range got {
		if !isCommandMetric(k) {
			t.Errorf("%s reported after Close", k)
		}
	}
	if n := got["lobby.commands{lobby.op=join,lobby.outcome=applied}"]; n != 2 {
		t.Errorf("joins = %v after Close, want 2", n)
	}
}
