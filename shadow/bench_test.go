package shadow_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/shadow"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// The hot path is the heartbeat: compare the bare Service with the same
// Service behind a Shadow. Compare figures with benchstat.
func BenchmarkHeartbeat(b *testing.B) {
	ctx := context.Background()
	b.Run("bare", func(b *testing.B) {
		svc, err := lobby.NewService(memstore.New(), lobby.WithClock(clockwork.NewFakeClockAt(start)))
		if err != nil {
			b.Fatal(err)
		}
		res, err := svc.Join(ctx, "party-1", "ann", nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if hb, err := svc.Heartbeat(ctx, "party-1", "ann", res.Gen); err != nil || hb.Outcome != lobby.OutcomeApplied {
				b.Fatal(hb.Outcome, err)
			}
		}
	})
	b.Run("shadow", func(b *testing.B) {
		sh, err := shadow.New(memstore.New(), shadow.Config{Clock: clockwork.NewFakeClockAt(start)})
		if err != nil {
			b.Fatal(err)
		}
		res, err := sh.Join(ctx, "party-1", "ann", nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if hb, err := sh.Heartbeat(ctx, "party-1", "ann", res.Gen); err != nil || hb.Outcome != lobby.OutcomeApplied {
				b.Fatal(hb.Outcome, err)
			}
		}
	})
}

// A visible transition and the comparison after it: a player joins and
// leaves a lobby of four, then the legacy host is reported (shadow only).
func BenchmarkJoinLeave(b *testing.B) {
	ctx := context.Background()
	setup := func(b *testing.B, join func(p string) error) {
		for i := range 4 {
			if err := join(fmt.Sprintf("p%d", i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("bare", func(b *testing.B) {
		svc, err := lobby.NewService(memstore.New(), lobby.WithClock(clockwork.NewFakeClockAt(start)))
		if err != nil {
			b.Fatal(err)
		}
		setup(b, func(p string) error { _, err := svc.Join(ctx, "party-1", p, nil); return err })
		b.ReportAllocs()
		for b.Loop() {
			if _, err := svc.Join(ctx, "party-1", "eve", nil); err != nil {
				b.Fatal(err)
			}
			if _, err := svc.Leave(ctx, "party-1", "eve"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("shadow", func(b *testing.B) {
		clock := clockwork.NewFakeClockAt(start)
		sh, err := shadow.New(memstore.New(), shadow.Config{Clock: clock})
		if err != nil {
			b.Fatal(err)
		}
		setup(b, func(p string) error { _, err := sh.Join(ctx, "party-1", p, nil); return err })
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sh.Join(ctx, "party-1", "eve", nil); err != nil {
				b.Fatal(err)
			}
			if _, err := sh.ReportLegacyHost(ctx, "party-1", "p0", clock.Now()); err != nil {
				b.Fatal(err)
			}
			if _, err := sh.Leave(ctx, "party-1", "eve"); err != nil {
				b.Fatal(err)
			}
			if _, err := sh.ReportLegacyHost(ctx, "party-1", "p0", clock.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
