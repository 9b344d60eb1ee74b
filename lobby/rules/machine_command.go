package rules

import "time"

// Op names a command.
type Op uint8

// The operations. Tick is not a client command: it only applies due
// deadlines (the sweeper and snapshot reads use it).
const (
	OpJoin Op = iota + 1
	OpHeartbeat
	OpDisconnect
	OpExpireLease
	OpLeave
	OpTransferHost
	OpTick
	OpUpdate
	OpKick
	OpLock
	OpConfigure
	OpTimeOut
	OpDrain
)

var opNames = [...]string{
	OpJoin:         "join",
	OpHeartbeat:    "heartbeat",
	OpDisconnect:   "disconnect",
	OpExpireLease:  "expire_lease",
	OpLeave:        "leave",
	OpTransferHost: "transfer_host",
	OpTick:         "tick",
	OpUpdate:       "update",
	OpKick:         "kick",
	OpLock:         "lock",
	OpConfigure:    "configure",
	OpTimeOut:      "time_out",
	OpDrain:        "drain",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "Op(?)"
}

// Command is one input to [Machine.Apply]. Build it with the constructor of
// its operation (Join, Heartbeat, ...); fields an operation does not use are
// ignored. Commands never carry their own time, a join sequence or a host:
// the machine assigns those. The one kind of time a command may carry is an
// input the machine cannot know, the deadlines of the sessions holding the
// lobby's connections (SessionDeadlines).
type Command struct {
	Op Op
	// Player is the subject: the joining, heartbeating, disconnecting,
	// expiring, leaving or updated player, or the actor of TransferHost,
	// Kick and Lock ("" for the server, which Kick and Lock allow).
	Player string
	// Gen is the connection generation a Heartbeat, Disconnect or
	// ExpireLease is about.
	Gen uint64
	// To is the new host named by TransferHost, or the member Kick removes.
	To string
	// Attrs, for Join: when non-nil, they replace the member's attributes.
	// For Update they always replace them (nil or empty: none).
	Attrs map[string]string
	// Block, for Kick: how long the kicked player may not join again (0:
	// no block).
	Block time.Duration
	// Locked, for Lock: whether the lobby is to refuse new players.
	Locked bool
	// Overrides, for Configure: the lobby's whole new set of overrides.
	Overrides Overrides
	// ObservedAt, for ExpireLease: when the caller noticed the deadline.
	// For diagnostics only; it changes nothing.
	ObservedAt time.Time
	// Session, for Join: the session of the joining process, which then
	// holds the new connection ("" for none: the connection gets a stored
	// heartbeat deadline). Set it with [Command.WithSession]. For Drain:
	// the session whose connections end.
	Session string
	// SessionDeadlines, for every operation: the deadlines of the sessions
	// the lobby's connections are held by, as the caller knows them at the
	// command's time (nil: no session has ended). Set it with
	// [Command.WithSessionDeadlines].
	SessionDeadlines SessionDeadlines
}

// SessionDeadlines maps a session ID to its deadline, the moment the
// session's process stops vouching for its connections. It is an input to
// a transition, like its time: the machine never reads a store. Before a
// command is judged at now, every connection held by a session whose
// deadline D is at or before now ends at D, exactly as a connection whose
// stored heartbeat deadline passed at D: in (deadline, join sequence,
// player, generation) order with the lobby's other deadlines, the last
// connection of a member turning it reconnecting until D + grace (reason
// timed_out), the host seat passing to the successor eligible at D.
//
// A session missing from the map, or whose deadline is after now, is alive:
// only whether a deadline has passed at now matters, not how far ahead a
// live one lies, so a caller may pass any deadline it has seen that is
// still ahead (session deadlines only move forward). A deadline before the
// lobby's last transition time (the zero time included: a session its
// store no longer knows) counts as that time. The machine reads only the
// entries of sessions the lobby holds (see [State.Sessions]).
type SessionDeadlines map[string]time.Time

// WithSession returns the Join cmd with its new connection held by session
// (see [Command.Session]); "" leaves it with a stored heartbeat deadline.
// Other operations ignore it. A join through a session whose deadline, as
// the command's session deadlines give it, has passed at the join's time is
// refused with ErrSessionEnded (before any other rule).
func (cmd Command) WithSession(session string) Command {
	cmd.Session = session
	return cmd
}

// WithSessionDeadlines returns cmd judged with the session deadlines d
// (see [SessionDeadlines]). d is read, never kept or changed.
func (cmd Command) WithSessionDeadlines(d SessionDeadlines) Command {
	cmd.SessionDeadlines = d
	return cmd
}

// Join admits player: a new member, a reconnecting member coming back, or a
// further connection (tab) of an online member. Non-nil attrs replace the
// member's attributes.
func Join(player string, attrs map[string]string) Command {
	return Command{Op: OpJoin, Player: player, Attrs: attrs}
}

// Heartbeat keeps generation gen of player alive.
func Heartbeat(player string, gen uint64) Command {
	return Command{Op: OpHeartbeat, Player: player, Gen: gen}
}

// Disconnect reports that generation gen of player closed.
func Disconnect(player string, gen uint64) Command {
	return Command{Op: OpDisconnect, Player: player, Gen: gen}
}

// TimeOut reports that generation gen of player went silent: the heartbeat
// deadline the process holding its socket keeps in memory (for a
// session-held connection, which stores none) has passed. Stamped with that
// deadline, it ends gen at the command's time (raised, like any command's,
// to the lobby's last transition time) with cause EndTimedOut; if it was the
// member's last connection, the member turns reconnecting (reason
// timed_out). A generation that is not live is stale. A live one ends
// whether or not a session holds it: the process holding a socket is the
// judge of its silence.
func TimeOut(player string, gen uint64) Command {
	return Command{Op: OpTimeOut, Player: player, Gen: gen}
}

// Drain ends, at the command's time, every live connection held by session:
// the process holding that session's sockets is shutting down on purpose
// and reports their closes at once, in one transition, rather than letting
// the session's deadline end them later. Each ends with cause EndClosed, in
// join-sequence order; every member whose last connection it was turns
// reconnecting (reason disconnected, one event each), so its grace starts
// now and it can come back through another process. The outcome is
// OutcomeApplied if it ended any connection, OutcomeNoop otherwise.
func Drain(session string) Command {
	return Command{Op: OpDrain, Session: session}
}

// ExpireLease asks for the deadline named by (player, gen) to be applied:
// the heartbeat deadline of generation gen, or the reconnect deadline of a
// member whose most recently attached generation is gen. observedAt is for
// diagnostics only.
func ExpireLease(player string, gen uint64, observedAt time.Time) Command {
	return Command{Op: OpExpireLease, Player: player, Gen: gen, ObservedAt: observedAt}
}

// Leave removes player now, with every connection and no grace.
func Leave(player string) Command {
	return Command{Op: OpLeave, Player: player}
}

// TransferHost makes to the host, if actor is the host now.
func TransferHost(actor, to string) Command {
	return Command{Op: OpTransferHost, Player: actor, To: to}
}

// Update replaces the whole attribute set of member player (nil or empty
// clears it) without touching its presence. It is a server-side command:
// clients do not choose their own attributes.
func Update(player string, attrs map[string]string) Command {
	return Command{Op: OpUpdate, Player: player, Attrs: attrs}
}

// Kick removes member target now, with every connection and no grace, and
// if block > 0 refuses its joins until block has passed. actor must be the
// host, or "" for the server (else ErrNotHost); target must be a member
// (else ErrNotMember); a block must not take the lobby's blocks in force
// beyond the policy's MaxBlocks (else ErrTooManyBlocks). A host kicking
// itself leaves.
func Kick(actor, target string, block time.Duration) Command {
	return Command{Op: OpKick, Player: actor, To: target, Block: block}
}

// Lock makes the lobby refuse new players. actor must be the host (also in
// its grace), or [ServerActor] for the server. Members coming back and
// further tabs are never refused for the lock. A lock the host set lasts
// while the lobby has members: the transition that removes the last member
// also unlocks the lobby, and its event shows it unlocked. A lock the
// server set stays until it is unlocked. Locking a locked lobby changes
// nothing (a host's lock stays a host's lock).
func Lock(actor string) Command {
	return Command{Op: OpLock, Player: actor, Locked: true}
}

// Unlock admits new players to the lobby again. actor must be the host
// (also in its grace), or [ServerActor] for the server. Unlocking an
// unlocked lobby changes nothing.
func Unlock(actor string) Command {
	return Command{Op: OpLock, Player: actor}
}

// ServerActor is the actor of a command the server itself gives (a kick, a
// lock) rather than a member: the empty ID, which no player can have.
const ServerActor = ""

// Configure replaces the lobby's overrides of the policy with o (the zero
// Overrides: back to the Service's policy). Values of settings o does not
// mark as set are ignored. It is a server-side command.
func Configure(o Overrides) Command {
	return Command{Op: OpConfigure, Overrides: o.normalized()}
}

// Tick applies the deadlines due at its time and nothing else.
func Tick() Command {
	return Command{Op: OpTick}
}
