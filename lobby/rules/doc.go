// Package rules is the pure state machine under package lobby: the lobby
// state, the commands, the transition function and the binary codec of
// records, events and effects.
//
// A game server does not need this package: [lobby.Service] drives it and
// package lobby names every type its API uses. It is for those who build
// on the rules themselves: authors of a store adapter or a test harness
// that decodes records ([DecodeState]), a simulation that replays commands
// at chosen instants ([Machine.Apply], [Machine.CheckTransition]), or a
// driver other than the Service.
//
// [Machine.Apply] takes a [State], a [Command] and the time, updates the
// state and returns what the command did ([Result]) and the events clients
// should see. It reads no clock, does no I/O and keeps no state between
// calls, so every rule can be tested by replaying commands at chosen times;
// the compiler keeps it that way, since this package cannot reach the
// Service, a store or a clock.
//
// # Time
//
// Deadlines are data, not timers. Before any command is judged, every
// deadline at or before its time is applied in order of (deadline, join
// sequence, player, generation), each as of its own deadline and with its
// own revision and event. So the outcome of a schedule of commands depends
// only on the commands and their times, never on when a sweeper happened to
// run. Each state remembers its last transition time; a command stamped
// earlier (a skewed clock in another process, a retried write) is applied at
// that time instead, so time never runs backward inside a lobby.
//
// # Sessions
//
// A connection may be held by a session: the liveness record of the
// process that holds its socket ([Conn.Session], set by a Join given
// [Command.WithSession]). Such a connection stores no heartbeat deadline;
// its process keeps one in memory and reports its passing with [TimeOut].
// The deadlines of the sessions a lobby holds are an input of each
// transition ([SessionDeadlines], given with
// [Command.WithSessionDeadlines]), never read from a store: a session whose
// deadline has passed ends every connection it holds at that deadline, in
// the same order as the lobby's own deadlines. Without session deadlines,
// every session counts as alive.
//
// # Encodings
//
// [AppendState], [AppendEvent] and [AppendEffects] write versioned binary
// forms whose first byte names the format; the decoders read every earlier
// format and refuse anything else with [ErrCorrupt], including records that
// decode but break the lobby's invariants, and never panic on input.
package rules
