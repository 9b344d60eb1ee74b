package lobbyotel_test

import (
	"context"
	"fmt"

	"github.com/lobbyhost/lobbyhost/lobby"
	lobbyotel "github.com/lobbyhost/lobbyhost/observe/otel"
	"github.com/lobbyhost/lobbyhost/store/memstore"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A Service observed by lobbyotel: each command becomes a span inside the
// caller's trace (here the span of a request), and the command counts reach
// the meter. A real program passes its exporting providers, often
// otel.GetTracerProvider() and otel.GetMeterProvider(); this one records in
// memory to print what was recorded.
func Example() {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	obs, err := lobbyotel.New(tp, mp)
	if err != nil {
		panic(err)
	}
	defer obs.Close()
	svc, err := lobby.NewService(memstore.New(), lobby.WithObserver(obs))
	if err != nil {
		panic(err)
	}

	// A request handler's span, the parent of the commands' spans.
	ctx, request := tp.Tracer("server").Start(ctx, "POST /rooms/party-1/join")
	_, _ = svc.Join(ctx, "party-1", "alice", nil)
	_, _ = svc.Join(ctx, "party-1", "bob", nil)
	_, err = svc.TransferHost(ctx, "party-1", "bob", "alice") // bob is not the host
	fmt.Println("refused:", lobby.IsRefusal(err))
	request.End()

	for _, s := range spans.Ended() {
		if s.Parent().SpanID() != request.SpanContext().SpanID() {
			continue
		}
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		fmt.Printf("%s outcome=%s revision=%s refusal=%s status=%s\n",
			s.Name(), attrs["lobby.outcome"], attrs["lobby.revision"], attrs["lobby.refusal"], s.Status().Code)
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "lobby.host.changes" {
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if reason, _ := p.Attributes.Value(lobbyotel.KeyReason); p.Value > 0 {
					fmt.Printf("%s{lobby.reason=%s} %d\n", m.Name, reason.String(), p.Value)
				}
			}
		}
	}
	// Output:
	// refused: true
	// lobby.join outcome=applied revision=1 refusal= status=Unset
	// lobby.join outcome=applied revision=2 refusal= status=Unset
	// lobby.transfer_host outcome=refused revision= refusal=not_host status=Unset
	// lobby.host.changes{lobby.reason=joined} 1
}
