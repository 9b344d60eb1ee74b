// Package lobbyprom exports what a lobby.Service does as Prometheus metrics:
// a [Collector] is both a lobby.Observer (pass it to lobby.WithObserver,
// alone or with others through lobby.Observers) and a prometheus.Collector
// (register it with a prometheus.Registry).
//
//	c := lobbyprom.New()
//	reg.MustRegister(c)
//	svc, err := lobby.NewService(st, lobby.WithObserver(c))
//
// It lives in a module of its own so that the lobbyhost core never imports
// the Prometheus client.
//
// # Metrics
//
//	metric                                       type       labels              meaning
//	lobbyhost_commands_total                     counter    operation, outcome  commands handled
//	lobbyhost_command_duration_seconds           histogram  operation           from the call to the outcome, waiting for the lobby included (Observation.Duration)
//	lobbyhost_cas_retries_total                  counter                        compare-and-set attempts beyond the first (Attempts-1)
//	lobbyhost_generations_timed_out_total        counter                        connection generations ended by their heartbeat deadline
//	lobbyhost_generations_superseded_total       counter                        generations ended by MaxConnectionsPerPlayer
//	lobbyhost_reconnect_deadlines_started_total  counter                        graces started (disconnected or timed_out)
//	lobbyhost_reconnects_within_grace_total      counter                        members back within their grace
//	lobbyhost_lease_expirations_total            counter                        graces that ran out (the member was removed)
//	lobbyhost_stale_events_total                 counter                        heartbeats and closes naming an ended generation
//	lobbyhost_host_changes_total                 counter    reason              changes of host, by the event's reason
//	lobbyhost_hostless_seconds_total             counter                        time lobbies had members but no eligible host, up to the last change observed
//	lobbyhost_lobbies                            gauge                          lobbies with members
//	lobbyhost_members                            gauge                          members of those lobbies
//	lobbyhost_members_online                     gauge                          members holding a live connection
//	lobbyhost_members_reconnecting               gauge                          members in their grace
//	lobbyhost_grace_advice_seconds               gauge                          the grace advisor's proposal (WithAdvisor)
//	lobbyhost_grace_advisor_returns_total        counter                        returns behind the proposal (WithAdvisor)
//	lobbyhost_grace_advisor_expiries_total       counter                        expiries the advisor recorded (WithAdvisor)
//
// Label values form small closed sets; lobby and player IDs are never
// labels.
//   - operation: join, heartbeat, disconnect, expire_lease, leave,
//     transfer_host, tick (the sweeper, Snapshot and Reclaim run ticks),
//     other.
//   - outcome: applied, noop, stale, not_due, done (lobby.Outcome);
//     refused:lobby_full, refused:not_host, refused:not_member,
//     refused:not_eligible, refused:not_empty (a rule's refusal, see
//     lobby.IsRefusal); invalid (bad attributes or time); contention (too
//     many compare-and-set conflicts, lobby.ErrContention); canceled (the
//     command's context ended); error (anything else: a store failure, a
//     corrupt record).
//   - reason: the lobby.Reason of the event that moved the host (joined,
//     reconnected, disconnected, timed_out, lease_expired, left,
//     host_transferred), other for a reason this package does not know.
//
// The counters from generations_timed_out to hostless_seconds are
// lobby.Counters, exported as they are.
//
// # What one process sees
//
// A Collector sees the commands of the Service it observes, and nothing
// else: with several processes on one store, sum counters across processes.
// The gauges come from the newest event of each lobby that this process
// committed (or caught up on): a per-lobby summary keyed by lobby ID,
// replaced by each later event and dropped when an event shows the lobby
// without members. A change another process commits is not seen until this
// process handles a command of that lobby, so with several processes the
// gauges are each process's view of the lobbies it served last, not a
// census; a lobby a peer emptied stays counted here until then.
//
// # The grace advisor
//
// [WithAdvisor] exports a lease.Advisor's proposal for a quantile of
// observed returns. [WithAdvisorFeed] also feeds it from the observed
// events: a return is the time from a member's disconnected or timed_out
// event to its reconnected event, both observed here (a member whose grace
// started on another process is not measured); each lease_expired event is
// an expiry. Feed an Advisor from one place only: if something else feeds
// it, do not ask for the feed.
//
// # Not here yet
//
// Effects-log lag per consumer, which the design lists, is not exported:
// the effects log it measures does not exist yet.
package lobbyprom
