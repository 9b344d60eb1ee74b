package lobbyprom_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lobbyhost/lobbyhost/lobby"
	lobbyprom "github.com/lobbyhost/lobbyhost/observe/prometheus"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// A Collector registered on a registry and observing a Service. Serve the
// registry with promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).
func ExampleNew() {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))

	metrics := lobbyprom.New(lobbyprom.WithAdvisor(nil, 0.95), lobbyprom.WithAdvisorFeed())
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	svc, err := lobby.NewService(memstore.New(), lobby.WithClock(clock), lobby.WithObserver(metrics))
	if err != nil {
		panic(err)
	}

	ana, _ := svc.Join(ctx, "room-1", "ana", nil)
	svc.Join(ctx, "room-1", "bo", nil)
	svc.TransferHost(ctx, "room-1", "bo", "ana") // refused: bo is not the host
	svc.Disconnect(ctx, "room-1", "ana", ana.Gen)
	clock.Advance(2 * time.Second)
	svc.Join(ctx, "room-1", "ana", nil) // back within the grace, after 2 s (advice: 2 s rounded up to a bucket bound)

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		switch mf.GetName() {
		case "lobbyhost_commands_total", "lobbyhost_members_online", "lobbyhost_reconnects_within_grace_total",
			"lobbyhost_grace_advice_seconds":
			for _, m := range mf.GetMetric() {
				labels := ""
				for _, l := range m.GetLabel() {
					labels += " " + l.GetName() + "=" + l.GetValue()
				}
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				fmt.Printf("%s%s %.4g\n", mf.GetName(), labels, v)
			}
		}
	}
	// Output:
	// lobbyhost_commands_total operation=disconnect outcome=applied 1
	// lobbyhost_commands_total operation=join outcome=applied 3
	// lobbyhost_commands_total operation=transfer_host outcome=refused:not_host 1
	// lobbyhost_grace_advice_seconds 2.22
	// lobbyhost_members_online 2
	// lobbyhost_reconnects_within_grace_total 1
}
