package lobbyotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lobbyhost/lobbyhost/lobby"
	"go.opentelemetry.io/otel/trace"
)

const (
	room  = "party-1"
	alice = "player-alice-7f3a"
	bob   = "player-bob-91c2"
)

// lifeOfALobby drives a lobby through the real Service, from two joins to
// its last member's expiry (grace 8 s, heartbeat TTL 15 s), with the client
// commands in ctx and the Snapshot reads in a context without a span.
func lifeOfALobby(ctx context.Context, t *testing.T, r *rig) {
	t.Helper()
	at := func(d time.Duration) { r.clock.Advance(t0.Add(d).Sub(r.clock.Now())) }
	do := func(res lobby.Result, err error) lobby.Result {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	snapshot := func() {
		t.Helper()
		if _, err := r.svc.Snapshot(context.Background(), room); err != nil {
			t.Fatal(err)
		}
	}

	r.store.set(func(s *faultyStore) { s.latency = 2 * time.Millisecond })
	a1 := do(r.svc.Join(ctx, room, alice, nil)).Gen // host alice, rev 1; the write takes 2 ms
	r.store.set(func(s *faultyStore) { s.latency = 0 })
	b1 := do(r.svc.Join(ctx, room, bob, nil)).Gen // rev 2
	if _, err := r.svc.TransferHost(ctx, room, bob, alice); !errors.Is(err, lobby.ErrNotHost) {
		t.Fatalf("TransferHost by bob: %v, want ErrNotHost", err)
	}
	at(1 * time.Second)
	do(r.svc.Disconnect(ctx, room, bob, b1)) // bob reconnecting until 9 s: rev 3
	if got := do(r.svc.Disconnect(ctx, room, bob, b1)); got.Outcome != lobby.OutcomeStale {
		t.Fatalf("second close: %v, want stale", got.Outcome)
	}
	at(2 * time.Second)
	b2 := do(r.svc.Join(ctx, room, bob, nil)).Gen // reconnected: rev 4
	do(r.svc.Disconnect(ctx, room, alice, a1))    // alice (host) reconnecting until 10 s: rev 5
	at(3 * time.Second)
	do(r.svc.Disconnect(ctx, room, bob, b2)) // bob reconnecting until 11 s: rev 6
	at(10 * time.Second)
	snapshot() // alice's grace ran out, bob is not online: no host, rev 7
	at(10*time.Second + 500*time.Millisecond)
	do(r.svc.Join(ctx, room, bob, nil)) // reconnected and host after 0.5 s without one: rev 8
	at(40 * time.Second)
	snapshot() // bob timed out at 25.5 s (rev 9), his grace ran out at 33.5 s (rev 10)
}

// ev lists the span events "lobby.change <reason> <revision>[ host]".
func ev(changes ...string) []string {
	var out []string
	for _, c := range changes {
		out = append(out, "lobby.change "+c)
	}
	return out
}

// A lobby's life through the real Service: one span per command, a child of
// the caller's span when the context carries one (the Snapshot reads here
// are roots), with the command's attributes and its visible changes as
// events; a refusal is an outcome with an unset status. The metrics of every
// command and the seed's counters, exactly.
func TestALobbysLife(t *testing.T) {
	r := newRig(t)
	ctx, parent := r.tp.Tracer("test").Start(context.Background(), "request")
	lifeOfALobby(ctx, t, r)
	parent.End()

	p := parent.SpanContext().SpanID().String()
	attrs := func(op, outcome string, committed bool, revision int) map[string]string {
		return map[string]string{
			"lobby.id": room, "lobby.op": op, "lobby.outcome": outcome, "lobby.attempts": "1",
			"lobby.committed": fmt.Sprint(committed), "lobby.revision": fmt.Sprint(revision),
		}
	}
	refused := map[string]string{
		"lobby.id": room, "lobby.op": "transfer_host", "lobby.outcome": "refused", "lobby.attempts": "1",
		"lobby.committed": "false", "lobby.refusal": "not_host",
	}
	ms := time.Millisecond
	want := []span{
		{"lobby.join", p, attrs("join", "applied", true, 1), "Unset", 0, 2 * ms, ev("joined 1 host")},
		{"lobby.join", p, attrs("join", "applied", true, 2), "Unset", 2 * ms, 0, ev("joined 2")},
		{"lobby.transfer_host", p, refused, "Unset", 2 * ms, 0, nil},
		{"lobby.disconnect", p, attrs("disconnect", "applied", true, 3), "Unset", time.Second, 0, ev("disconnected 3")},
		{"lobby.disconnect", p, attrs("disconnect", "stale", false, 3), "Unset", time.Second, 0, nil},
		{"lobby.join", p, attrs("join", "applied", true, 4), "Unset", 2 * time.Second, 0, ev("reconnected 4")},
		{"lobby.disconnect", p, attrs("disconnect", "applied", true, 5), "Unset", 2 * time.Second, 0, ev("disconnected 5")},
		{"lobby.disconnect", p, attrs("disconnect", "applied", true, 6), "Unset", 3 * time.Second, 0, ev("disconnected 6")},
		{"lobby.tick", "", attrs("tick", "applied", true, 7), "Unset", 10 * time.Second, 0, ev("lease_expired 7 host")},
		{"lobby.join", p, attrs("join", "applied", true, 8), "Unset", 10500 * ms, 0, ev("reconnected 8 host")},
		{"lobby.tick", "", attrs("tick", "applied", true, 10), "Unset", 40 * time.Second, 0, ev("timed_out 9", "lease_expired 10 host")},
	}
	if diff := cmp.Diff(want, r.spansNow()); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	for _, s := range r.spans.Ended() {
		if s.SpanKind() != trace.SpanKindInternal {
			t.Errorf("%s: kind %v, want internal", s.Name(), s.SpanKind())
		}
		if s.Name() != "request" && s.Parent().IsValid() && s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("%s: trace %v, want the parent's %v", s.Name(), s.SpanContext().TraceID(), parent.SpanContext().TraceID())
		}
	}

	wantMetrics := map[string]float64{
		"lobby.commands{lobby.op=join,lobby.outcome=applied}":          4,
		"lobby.commands{lobby.op=transfer_host,lobby.outcome=refused}": 1,
		"lobby.commands{lobby.op=disconnect,lobby.outcome=applied}":    3,
		"lobby.commands{lobby.op=disconnect,lobby.outcome=stale}":      1,
		"lobby.commands{lobby.op=tick,lobby.outcome=applied}":          2,
		"lobby.command.duration_count{lobby.op=join}":                  4,
		"lobby.command.duration_sum{lobby.op=join}":                    0.002,
		"lobby.command.duration_count{lobby.op=transfer_host}":         1,
		"lobby.command.duration_sum{lobby.op=transfer_host}":           0,
		"lobby.command.duration_count{lobby.op=disconnect}":            4,
		"lobby.command.duration_sum{lobby.op=disconnect}":              0,
		"lobby.command.duration_count{lobby.op=tick}":                  2,
		"lobby.command.duration_sum{lobby.op=tick}":                    0,
		"lobby.connections.timed_out{}":                                1,
		"lobby.connections.superseded{}":                               0,
		"lobby.graces.started{}":                                       4,
		"lobby.graces.reconnected{}":                                   2,
		"lobby.graces.expired{}":                                       2,
		"lobby.reports.stale{}":                                        1,
		"lobby.host.changes{lobby.reason=joined}":                      1,
		"lobby.host.changes{lobby.reason=kicked}":                      0,
		"lobby.host.changes{lobby.reason=updated}":                     0,
		"lobby.host.changes{lobby.reason=reconnected}":                 1,
		"lobby.host.changes{lobby.reason=disconnected}":                0,
		"lobby.host.changes{lobby.reason=timed_out}":                   0,
		"lobby.host.changes{lobby.reason=lease_expired}":               2,
		"lobby.host.changes{lobby.reason=left}":                        0,
		"lobby.host.changes{lobby.reason=host_transferred}":            0,
		"lobby.hostless.duration{}":                                    0.5,
	}
	if diff := cmp.Diff(wantMetrics, r.metrics(t)); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}
