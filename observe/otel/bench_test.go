package lobbyotel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
	lobbyotel "github.com/lobbyhost/lobbyhost/observe/otel"
)

// The Observer's cost per command, on the command's goroutine: with the
// SDK (every span sampled, no exporter) and with the API's no-op providers.
func BenchmarkObserve(b *testing.B) {
	heartbeat := lobby.Observation{
		Lobby: "party-1", Command: rules.Heartbeat("p", 3),
		Result:   lobby.Result{Outcome: lobby.OutcomeApplied, Revision: 12, Changed: true},
		Attempts: 1, Committed: true, Duration: 300 * time.Microsecond,
	}
	for _, tt := range []struct {
		name string
		tp   trace.TracerProvider
		mp   metric.MeterProvider
	}{
		{"sdk", sdktrace.NewTracerProvider(), sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))},
		{"noop", tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider()},
	} {
		b.Run(tt.name, func(b *testing.B) {
			ob, err := lobbyotel.New(tt.tp, tt.mp)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				ob.Observe(ctx, heartbeat)
			}
		})
	}
}
