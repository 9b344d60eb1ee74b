// Package lobby decides who is in a lobby and who hosts it.
//
// [Service] is what a game server calls: it loads a lobby from a
// [store.Store], judges a command with the rules, and commits the result
// with a compare-and-set, retrying on conflict; its Run loop applies
// expiries at their deadlines, follows other processes' commits and relays
// committed events to a publisher. [Rooms] attaches sockets to lobbies.
// The rules themselves are a pure state machine in package
// [github.com/lobbyhost/lobbyhost/lobby/rules], which reads no clock and
// does no I/O, so every rule is tested by replaying commands at chosen
// times; this package names every type of the Service's API, so a game
// server needs only this one.
//
// # Effects and watching a lobby
//
// A commit changes more than the record: it has visible events and may end
// connections (a superseded tab, a timed-out socket). The Service writes
// both (rules.Effects) into the lobby's effects log in the same atomic write as
// the record, positioned by the record's version. Every process that holds
// sockets of a lobby follows it with [Service.Watch]: its own commits
// arrive at once, other processes' through the store's change
// notifications and one read of the log, always in version order, never
// twice and never with a gap (a watcher that falls behind the log's
// retention gets a snapshot instead). A process that serves no socket of a
// lobby reads nothing for it. Watching needs [Service.Run] running.
//
// [Rooms] is that fan-out for sockets: a transport attaches each socket
// with [Rooms.Join] and a [Sink], and gets the join's snapshot to render
// first, then every later change of the lobby in revision order, and an
// End when a commit anywhere ends the socket's connection (a newer tab, a
// kick, a timeout). One Watcher serves all of a lobby's sockets in this
// process, and a slow socket holds back nobody.
//
// The relay to a [Publisher] is a durable consumer of the same log:
// processes sharing its name split the lobbies, and each event is published
// at least once. It is for a message bus or an audit sink, not for sockets:
// a process sees only the lobbies it claims.
//
// # The model
//
// Players are identified by the host application; connections are not. Every
// accepted Join allocates a connection generation (a per-lobby number that
// only grows), and every later report about that connection names it, so a
// close that arrives after the player has reconnected names an old generation
// and changes nothing. A generation stays live while heartbeats keep pushing
// its deadline forward; when its deadline passes it ends exactly as if its
// socket had closed then, so a vanished socket cannot keep a player online.
//
// When a member's last live generation ends, the member is reconnecting for
// the policy's grace. Coming back within it keeps the member's join sequence
// and, for the host, the host role. When the grace runs out the member is
// removed, and if it was the host, the eligible member that comes first in
// the succession order (by default the lowest join sequence) becomes host in
// the same transition. Nobody eligible means no host, never a stale one.
//
// Every change a client can see (the host, a member joining, going
// reconnecting, coming back online, leaving or being kicked, a member's
// attributes, the lock, the lobby's overrides) increments the lobby's
// revision by exactly one and produces one [Event]. Heartbeats, extra tabs
// and stale reports change no revision. Events have a binary encoding for
// stores (rules.EncodeEvent) and a documented JSON form for clients
// ([Event.MarshalJSON]).
//
// # Commands of the host and of the server
//
// Besides the evidence a transport reports (Join, Heartbeat, Disconnect) and
// what players ask for (Leave), a lobby takes commands that only its host or
// the server may give. [Service.Kick] removes a member at once and may keep it out
// for a while (ErrBlocked); a lobby holds at most [Policy.MaxBlocks] blocks
// in force (ErrTooManyBlocks). [Service.Lock] makes the lobby refuse new players
// (ErrLocked) while members coming back and further tabs still get in; a
// lock the host set ends with the last member, so an emptied lobby is
// never left shut to everyone, while the server's lock stays until it is
// lifted.
// [Service.TransferHost] hands the role on. The server alone may [Service.Update] a member's
// attributes and [Service.Configure] the lobby: its own grace, heartbeat TTL, member
// cap, tab cap and bound on blocks, stored with it and winning over the
// Service's policy. A command the rules refuse commits nothing;
// [IsRefusal] tells refusals from bad input.
//
// # Time
//
// Deadlines are data, not timers. Before any command is judged, every
// deadline at or before its time is applied in order of (deadline, join
// sequence, player, generation), each as of its own deadline and with its own
// revision and event. So the outcome of a schedule of commands depends only
// on the commands and their times, never on when a sweeper happened to run.
// Each state remembers its last transition time; a command stamped earlier
// (a skewed clock in another process, a retried write) is applied at that
// time instead, so time never runs backward inside a lobby.
//
// # What revisions and host terms do and do not guarantee
//
// Revisions order what one lobby's clients see; a client that keeps the
// highest revision it applied (package revision) can never roll its view
// back. They do not fence actions in other systems. The host term does: it
// grows by one with every change of host and never otherwise, and never
// goes backward for a lobby ID. A system that accepts host-only actions
// keeps the highest term it has seen per lobby and refuses older ones, so a
// host replaced while it was partitioned cannot act on its stale view (see
// Example_fencing). lobbyhost itself does not stop such a host from acting
// elsewhere; it judges its own host-only commands against current state, as
// the rules do for TransferHost. Expiries happen at stored deadlines
// judged against the clock of whichever process runs the transition; with
// several processes, keep their clocks synchronised (NTP) and treat the grace
// as accurate only to within their skew.
//
// # Lobbies that clean up after themselves
//
// [Service.Reclaim] deletes an empty lobby's record, and [WithEmptyLobbyTTL]
// has the sweeper do it once a lobby has been empty for a while. A lobby
// created again under the same ID continues above every version, revision,
// host term, join sequence and generation issued before: the store keeps a
// floor (a tombstone while the lobby's log is retained, then one store-wide
// floor), and the Service starts the new lobby's counters on it and its
// clock at the reclaimed lobby's last transition time, which the store keeps
// too. Blocks in force do not keep a lobby from being reclaimed: the
// tombstone holds them, the store keeps it until the latest has ended, and
// a lobby created again starts with every block not yet ended. It starts
// unlocked and without overrides.
package lobby
