package lobbyotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
)

// A store failure is an error: status Error with the error's class, never
// its message; a refusal (in TestALobbysLife) is an outcome with an unset
// status. A compare-and-set retry shows in the attempts, the span's length
// and the retries counter; a command whose context is done is observed, in
// the caller's trace.
func TestStoreFailureRetryAndCancel(t *testing.T) {
	r := newRig(t)
	ctx, parent := r.tp.Tracer("test").Start(context.Background(), "request")
	p := parent.SpanContext().SpanID().String()

	// The store fails; its message names the player, as I/O errors may.
	r.store.set(func(s *faultyStore) { s.fail = fmt.Errorf("connection reset while writing %s", alice) })
	if _, err := r.svc.Join(ctx, room, alice, nil); err == nil {
		t.Fatal("Join on a failing store succeeded")
	}
	// One lost compare-and-set, each write taking 2 ms.
	r.store.set(func(s *faultyStore) { s.fail, s.conflicts, s.latency = nil, 1, 2*time.Millisecond })
	if _, err := r.svc.Join(ctx, room, alice, nil); err != nil {
		t.Fatal(err)
	}
	r.store.set(func(s *faultyStore) { s.latency = 0 })
	// A context already cancelled.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.svc.Heartbeat(cancelled, room, alice, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Heartbeat with a cancelled context: %v, want context.Canceled", err)
	}
	parent.End()

	ms := time.Millisecond
	want := []span{
		{"lobby.join", p, map[string]string{
			"lobby.id": room, "lobby.op": "join", "lobby.outcome": "error", "lobby.attempts": "1",
			"lobby.committed": "false", "error.type": "other",
		}, "Error: other", 0, 0, nil},
		{"lobby.join", p, map[string]string{
			"lobby.id": room, "lobby.op": "join", "lobby.outcome": "applied", "lobby.attempts": "2",
			"lobby.committed": "true", "lobby.revision": "1",
		}, "Unset", 0, 4 * ms, ev("joined 1 host")},
		{"lobby.heartbeat", p, map[string]string{
			"lobby.id": room, "lobby.op": "heartbeat", "lobby.outcome": "error", "lobby.attempts": "1",
			"lobby.committed": "false", "error.type": "canceled",
		}, "Error: canceled", 4 * ms, 0, nil},
	}
	if diff := cmp.Diff(want, r.spansNow()); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}

	got := r.metrics(t)
	for k := range got { // the seed's counters are TestALobbysLife's
		if !isCommandMetric(k) {
			delete(got, k)
		}
	}
	wantMetrics := map[string]float64{
		"lobby.commands{lobby.op=join,lobby.outcome=error}":      1,
		"lobby.commands{lobby.op=join,lobby.outcome=applied}":    1,
		"lobby.commands{lobby.op=heartbeat,lobby.outcome=error}": 1,
		"lobby.command.duration_count{lobby.op=join}":            2,
		"lobby.command.duration_sum{lobby.op=join}":              0.004,
		"lobby.command.duration_count{lobby.op=heartbeat}":       1,
		"lobby.command.duration_sum{lobby.op=heartbeat}":         0,
		"lobby.command.retries{lobby.op=join}":                   1,
	}
	if diff := cmp.Diff(wantMetrics, got, cmp.Comparer(approx)); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

func isCommandMetric(name string) bool {
	for _, p := range []string{"lobby.commands{", "lobby.command."} {
		if len(name) >= len(p) && name[:len(p)] == p {
			return true
		}
	}
	return false
}

// approx compares sums of float seconds, which add up with rounding.
func approx(a, b float64) bool { return a == b || (a-b < 1e-12 && b-a < 1e-12) }

// The observation's own fields, one by one: the span ends when the
// observation arrives on the Observer's clock and starts its Duration
// earlier; an operation or outcome this package does not know is named
// "unknown", so the label sets stay closed.
func TestObserveDirectly(t *testing.T) {
	r := newRig(t)
	r.obs.Observe(context.Background(), lobby.Observation{
		Lobby: "l", Command: rules.Command{Op: rules.Op(99)}, Result: lobby.Result{Outcome: lobby.Outcome(42), Revision: 7},
		Attempts: 3, Committed: true, Duration: 250 * time.Millisecond,
	})
	r.obs.Observe(context.Background(), lobby.Observation{
		Lobby: "l", Command: rules.Leave("x"), Err: fmt.Errorf("wrapped: %w", lobby.ErrContention),
		Attempts: 32, Duration: -time.Second, // a clock stepped back: no negative span
	})
	want := []span{
		{"lobby.unknown", "", map[string]string{
			"lobby.id": "l", "lobby.op": "unknown", "lobby.outcome": "unknown", "lobby.attempts": "3",
			"lobby.committed": "true", "lobby.revision": "7",
		}, "Unset", -250 * time.Millisecond, 250 * time.Millisecond, nil},
		{"lobby.leave", "", map[string]string{
			"lobby.id": "l", "lobby.op": "leave", "lobby.outcome": "error", "lobby.attempts": "32",
			"lobby.committed": "false", "error.type": "contention",
		}, "Error: contention", 0, 0, nil},
	}
	if diff := cmp.Diff(want, r.spansNow()); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	got := r.metrics(t)
	for k := range got {
		if !isCommandMetric(k) {
			delete(got, k)
		}
	}
	wantMetrics := map[string]float64{
		"lobby.commands{lobby.op=unknown,lobby.outcome=unknown}": 1,
		"lobby.commands{lobby.op=leave,lobby.outcome=error}":     1,
		"lobby.command.duration_count{lobby.op=unknown}":         1,
		"lobby.command.duration_sum{lobby.op=unknown}":           0.25,
		"lobby.command.duration_count{lobby.op=leave}":           1,
		"lobby.command.duration_sum{lobby.op=leave}":             0,
		"lobby.command.retries{lobby.op=unknown}":                2,
		"lobby.command.retries{lobby.op=leave}":                  31,
	}
	if diff := cmp.Diff(wantMetrics, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}
