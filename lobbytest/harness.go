// Package lobbytest is the Service-level conformance suite: the checks that
// a store.Store keeps lobby.Service correct when several processes share it,
// when a process dies, and when the store's server restarts, plus the
// Service benchmarks every adapter reports the same way.
//
// Package storetest checks a store method by method; this package checks
// what lobbyhost builds on top of it. An adapter calls both:
//
//	func TestService(t *testing.T)                { lobbytest.RunService(t, harness{}) }
//	func BenchmarkServiceHeartbeat(b *testing.B)  { lobbytest.BenchHeartbeat(b, harness{}) }
//	func BenchmarkServiceTransition(b *testing.B) { lobbytest.BenchTransition(b, harness{}) }
//
// A [Harness] hands the suite empty stores and second handles on them (what
// another process would open). Optional capabilities are found by type
// assertion on the harness, as testing/fstest does, and the checks that
// need one run only when it is there (a check that cannot apply to a store
// is not a test of it, so it is not reported as skipped either):
//
//   - [Restarter]: a store on a durable server of its own that the suite
//     may kill and start again under traffic;
//   - [VolatileRestarter]: the same on a server that comes back empty;
//   - [RoundTripCounter]: a store that reports the requests it sends to its
//     server, so that the suite can check that a steady heartbeat and a
//     visible transition through the Service are one round trip each.
//
// A store that offers store.Sessions also gets the session checks: a
// killed Service's connections end at its session's deadline on the
// others; a Service whose session ended before it could renew it (paused,
// or cut off from the store) gives its connections up and never writes on
// the old session's behalf again; a drain moves no host.
//
// Subtests have stable names (TwoServicesExpireHostOnce,
// KilledServiceLeases, WatchAcrossServices, StoreRestart/durable,
// StoreRestart/volatile, OneRoundTrip, Sessions/KilledHolder,
// Sessions/Paused, Sessions/CutOff, Sessions/Drain), so that one can run
// alone with -run. Checks that draw at random log a seed and replay it from
// LOBBYHOST_SEED (see storetest.Seed).
package lobbytest

import (
	"time"

	"testing"

	"github.com/lobbyhost/lobbyhost/store"
)

// Harness gives the suite stores to run Services on.
type Harness interface {
	// NewStore returns an empty store that no other call shares (its own
	// schema, key prefix or instance) and registers its cleanup with
	// t.Cleanup. It may call t.Skip or t.Fatal. The store keeps at least
	// MinRetention of effects log (the suite holds its relay back for
	// thousands of commits and then checks that nothing was lost).
	NewStore(t testing.TB) store.Store
	// Connect returns another handle on the data of s, one store obtained
	// from NewStore: what a second process would open (its own connections,
	// the same schema or prefix). An in-memory store returns s itself.
	Connect(t testing.TB, s store.Store) store.Store
}

// MinRetention is the least effects-log retention the stores of a Harness
// keep: more entries per lobby than the suite ever commits to one, for
// longer than it runs.
var MinRetention = store.Retention{Entries: 1 << 20, Age: time.Hour}

// Restarter is a Harness whose stores can live on a durable server of
// their own, which the suite kills under traffic and starts again: one that
// keeps every acknowledged write across a kill (PostgreSQL, Redis with
// appendfsync always).
type Restarter interface {
	Harness
	// Restartable returns an empty store on a durable server the suite
	// may stop and start, and that server. A harness that may not stop
	// its server now (say, a shared one without the command that stops
	// it) calls t.Skip saying why.
	Restartable(t *testing.T) (store.Store, Server)
}

// VolatileRestarter is a Harness whose stores can live on a server without
// persistence that comes back empty after a kill (Redis without an append
// log). A store whose server always keeps its writes has no such server:
// its harness does not implement this, and the check does not run.
type VolatileRestarter interface {
	Harness
	// RestartableVolatile returns an empty store on a server that loses
	// everything when killed, and that server. It may call t.Skip as
	// Restartable does.
	RestartableVolatile(t *testing.T) (store.Store, Server)
}

// Server is a store's server that a Restarter's test may stop and start.
type Server interface {
	// Kill stops the server at once, as a crash would, and returns when it
	// no longer serves.
	Kill(t *testing.T)
	// Start starts it again and returns when it serves.
	Start(t *testing.T)
}

// RoundTripCounter is a Harness that can count the requests a store sends
// to its server.
type RoundTripCounter interface {
	Harness
	// CountingStore returns an empty store and a function that returns the
	// round trips it made to its server since the previous call, each
	// described (a command, a statement) for failure messages.
	CountingStore(t *testing.T) (s store.Store, take func() []string)
}

// ErrorNamer is an optional capability of a Restarter or VolatileRestarter: every error its
// stores return for a failed server call contains StoreName()+": " (say
// "pgxstore: "), and the restart checks require it, so that an operator can
// tell which store failed.
type ErrorNamer interface {
	StoreName() string
}
