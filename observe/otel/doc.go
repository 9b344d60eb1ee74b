// Package lobbyotel reports the commands of a lobby.Service to
// OpenTelemetry: a span per command, in the caller's trace, and the
// Service's metrics through the OTel metric API.
//
// It is a module of its own (github.com/lobbyhost/lobbyhost/observe/otel),
// so the core lobbyhost module imports no OpenTelemetry package. Register
// the Observer [New] returns with [lobby.WithObserver]:
//
//	obs, err := lobbyotel.New(otel.GetTracerProvider(), otel.GetMeterProvider(),
//		lobbyotel.WithClock(clock)) // the clock the Service reads, if not the real one
//	svc, err := lobby.NewService(st, lobby.WithClock(clock), lobby.WithObserver(obs))
//
// # Spans
//
// Every command the Service handles (client commands, the sweeper's expiries,
// the catch-up of a Snapshot, which is the operation "tick") becomes one span
// named "lobby." followed by the operation ("lobby.join", "lobby.heartbeat",
// "lobby.disconnect", "lobby.expire_lease", "lobby.leave",
// "lobby.transfer_host", "lobby.tick"), a child of the span in the command's
// context. The Observer learns of a command only when its outcome is final,
// so the span is recorded afterwards: it ends when the observation arrives
// (on the clock of [WithClock], the real clock by default) and starts the
// observation's Duration earlier. Its attributes:
//
//   - lobby.id: the lobby ID;
//   - lobby.op: the operation, as in the span name;
//   - lobby.outcome: what the command did: "applied", "noop", "stale",
//     "done", "not_due" (see lobby.Outcome), "refused" for a rule's refusal
//     (lobby.IsRefusal), "error" for any other error;
//   - lobby.attempts: compare-and-set attempts (1 without contention);
//   - lobby.committed: whether a new version of the lobby was stored;
//   - lobby.revision: the lobby's revision after the command (not set on a
//     refusal or an error);
//   - lobby.refusal: for a refusal, which rule refused (see [ErrorClass]);
//   - error.type: for an error, its class (see [ErrorClass]).
//
// Each visible change the command made (a lobby.Event, including those of
// the deadlines it caught up on) is a span event "lobby.change" with
// lobby.reason (the event's reason), lobby.revision (the revision it
// created) and lobby.host_changed.
//
// A refusal is a normal outcome (a client asked for something the rules do
// not allow), so its span's status stays unset. An error sets the status to
// Error with the error's class as the description.
//
// # Metrics
//
// Instruments (the meter's scope is [ScopeName]; label values are the small
// closed sets above, never a lobby or player ID):
//
//   - lobby.commands (counter): commands by lobby.op and lobby.outcome;
//   - lobby.command.duration (histogram, seconds): command latency by
//     lobby.op, waiting for the lobby included;
//   - lobby.command.retries (counter): compare-and-set retries (attempts
//     after the first) by lobby.op;
//
// and, read from a [lobby.Counters] the Observer feeds, observable counters:
//
//   - lobby.connections.timed_out: connection generations ended by their
//     heartbeat deadline; lobby.connections.superseded, by
//     MaxConnectionsPerPlayer;
//   - lobby.graces.started: reconnect deadlines started;
//   - lobby.graces.reconnected: members back within their grace;
//   - lobby.graces.expired: graces that ran out (lease expirations);
//   - lobby.reports.stale: heartbeats and closes naming an ended connection;
//   - lobby.host.changes: changes of host by lobby.reason (the event
//     reason: joined, reconnected, disconnected, timed_out, lease_expired,
//     left, host_transferred);
//   - lobby.hostless.duration (seconds): time lobbies spent with members but
//     no host, counted when the spell ends.
//
// Like lobby.Counters, an Observer only sees the commands of the Service it
// observes: with several processes, the metrics backend sums them.
//
// # Privacy
//
// No attribute or status carries a player ID, join attributes or an error's
// message (error strings may name players): only the lobby ID, closed sets of
// names and numbers. An error is described by its class alone.
package lobbyotel
