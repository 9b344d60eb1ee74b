package shadow

// Class is the likely cause of a disagreement between the legacy host and
// lobbyhost's host. The zero Class means the two agree.
type Class uint8

// The classes, checked in this order.
const (
	// StaleClose: the legacy logic acted on the close of a connection that
	// a newer generation of the same player had already replaced (a second
	// tab, or a reconnect that arrived before the old socket's close).
	// lobbyhost keeps that player, still online, as host.
	StaleClose Class = iota + 1
	// Grace: the legacy logic crowned a successor when the host's socket
	// closed; lobbyhost keeps the seat for the host's reconnect grace (the
	// host is reconnecting, or came back inside the grace). This is the
	// difference lobbyhost is designed to make.
	Grace
	// MissingHeartbeat: one side still counts a connection the other has
	// timed out: the legacy host's connections all missed their heartbeat
	// deadlines (a vanished tab, a crashed server process), or lobbyhost's
	// host timed out while the legacy logic moved on.
	MissingHeartbeat
	// Ordering: both hosts are online members (both sides agree who is
	// eligible) but the two logics order successors differently (the
	// legacy logic by socket, lobbyhost by join sequence).
	Ordering
	// Unexplained: none of the above fits: a defect on one side.
	Unexplained
)

// Classes lists every class in the order they are checked.
var Classes = []Class{StaleClose, Grace, MissingHeartbeat, Ordering, Unexplained}

const numClasses = int(Unexplained) + 1

var classNames = [numClasses]string{"agree", "stale_close", "grace", "missing_heartbeat", "ordering", "unexplained"}

// String returns the class's name as reports and logs show it.
func (c Class) String() string {
	if int(c) < numClasses {
		return classNames[c]
	}
	return "Class(?)"
}
