package lobby

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
)

var opNames = [...]string{
	OpJoin:         "join",
	OpHeartbeat:    "heartbeat",
	OpDisconnect:   "disconnect",
	OpExpireLease:  "expire_lease",
	OpLeave:        "leave",
	OpTransferHost: "transfer_host",
	OpTick:         "tick",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "Op(?)"
}

// Command is one input to [Machine.Apply]. Build it with the constructor of
// its operation (Join, Heartbeat, ...); fields an operation does not use are
// ignored. Commands never carry a time, a join sequence or a host: the
// machine assigns those.
type Command struct {
	Op Op
	// Player is the subject: the joining, heartbeating, disconnecting,
	// expiring or leaving player, or the actor of TransferHost.
	Player string
	// Gen is the connection generation a Heartbeat, Disconnect or
	// ExpireLease is about.
	Gen uint64
	// To is the new host named by TransferHost.
	To string
	// Attrs, for Join: when non-nil, they replace the member's attributes.
	Attrs map[string]string
	// ObservedAt, for ExpireLease: when the caller noticed the deadline.
	// For diagnostics only; it changes nothing.
	ObservedAt time.Time
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

// Tick applies the deadlines due at its time and nothing else.
func Tick() Command {
	return Command{Op: OpTick}
}
