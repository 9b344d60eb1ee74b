package lobby_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// TestAdvicePerClientClass: the Service measures returns and heartbeat
// gaps per class of client and proposes a grace and a heartbeat gap from
// them, without changing its policy.
func TestAdvicePerClientClass(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	class := func(_, player string) string {
		if strings.HasPrefix(player, "m-") {
			return "mobile"
		}
		return "desktop"
	}
	svc := newService(t, memstore.New(), clock, lobby.WithClientClass(class))
	gm := must(t)(svc.Join(ctx, "l", "m-1", nil)).Gen
	gd := must(t)(svc.Join(ctx, "l", "d-1", nil)).Gen
	gx := must(t)(svc.Join(ctx, "l", "m-2", nil)).Gen

	clock.Advance(4 * time.Second)
	must(t)(svc.Heartbeat(ctx, "l", "m-1", gm)) // 4 s after attach
	must(t)(svc.Disconnect(ctx, "l", "m-1", gm))
	must(t)(svc.Disconnect(ctx, "l", "d-1", gd))
	must(t)(svc.Disconnect(ctx, "l", "m-2", gx))
	clock.Advance(time.Second)
	if res := must(t)(svc.Join(ctx, "l", "d-1", nil)); res.Away != time.Second {
		t.Fatalf("desktop return: away %v, want 1s", res.Away)
	}
	clock.Advance(2 * time.Second)
	if res := must(t)(svc.Join(ctx, "l", "m-1", nil)); res.Away != 3*time.Second {
		t.Fatalf("mobile return: away %v, want 3s", res.Away)
	}
	clock.Advance(grace) // m-2's grace runs out
	if _, err := svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}

	adv := svc.Advice(1)
	if len(adv) != 2 || adv[0].Class != "desktop" || adv[1].Class != "mobile" {
		t.Fatalf("advice %+v, want desktop and mobile", adv)
	}
	d, m := adv[0], adv[1]
	if d.Grace.Returns != 1 || d.Grace.Expiries != 0 || d.Grace.Grace < time.Second || d.Grace.Grace > 1250*time.Millisecond {
		t.Errorf("desktop grace advice %+v, want 1 return of 1s (bucketed up to 25%%)", d.Grace)
	}
	if m.Grace.Returns != 1 || m.Grace.Expiries != 1 || m.Grace.Grace < 3*time.Second || m.Grace.Grace > 3750*time.Millisecond {
		t.Errorf("mobile grace advice %+v, want 1 return of 3s and 1 expiry", m.Grace)
	}
	if m.HeartbeatGap.Returns != 1 || m.HeartbeatGap.Grace < 4*time.Second || m.HeartbeatGap.Grace > 5*time.Second {
		t.Errorf("mobile heartbeat gap advice %+v, want one gap of 4s", m.HeartbeatGap)
	}
	if got := svc.Policy().Grace; got != grace {
		t.Errorf("policy grace %v after advice, want it unchanged at %v", got, grace)
	}
	if plain := newService(t, memstore.New(), clock); plain.Advice(1) != nil {
		t.Error("a Service without WithClientClass gives advice")
	}
}
