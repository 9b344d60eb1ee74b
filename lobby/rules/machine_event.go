package rules

import (
	"strconv"
	"time"
)

// Reason is the cause of a visible change.
type Reason string

// The reasons an event can carry.
const (
	// ReasonJoined: a new member joined (or, rarely, a further tab's new
	// attributes made a member eligible to fill an empty host seat).
	ReasonJoined Reason = "joined"
	// ReasonReconnected: a reconnecting member came back within its grace.
	ReasonReconnected Reason = "reconnected"
	// ReasonDisconnected: a member's last connection closed; it is
	// reconnecting.
	ReasonDisconnected Reason = "disconnected"
	// ReasonTimedOut: a member's last connection missed its heartbeat
	// deadline; it is reconnecting.
	ReasonTimedOut Reason = "timed_out"
	// ReasonLeaseExpired: a reconnecting member's grace ran out; it was
	// removed.
	ReasonLeaseExpired Reason = "lease_expired"
	// ReasonLeft: a member left on purpose.
	ReasonLeft Reason = "left"
	// ReasonHostTransferred: the host handed the role to the subject.
	ReasonHostTransferred Reason = "host_transferred"
	// ReasonKicked: the host or the server removed the subject.
	ReasonKicked Reason = "kicked"
	// ReasonUpdated: the subject's attributes changed (by Update, or by a
	// join of an online member that carried other attributes).
	ReasonUpdated Reason = "updated"
	// ReasonLocked and ReasonUnlocked: the lobby started or stopped
	// refusing new players. The subject is the host that did it, or ""
	// for the server.
	ReasonLocked   Reason = "locked"
	ReasonUnlocked Reason = "unlocked"
	// ReasonConfigured: the server replaced the lobby's overrides. The
	// subject is "".
	ReasonConfigured Reason = "configured"
)

// reasons is indexed by the reason's code in the binary encoding: append
// only, never reorder.
var reasons = []Reason{"", ReasonJoined, ReasonReconnected, ReasonDisconnected, ReasonTimedOut, ReasonLeaseExpired, ReasonLeft, ReasonHostTransferred,
	ReasonKicked, ReasonUpdated, ReasonLocked, ReasonUnlocked, ReasonConfigured}

// firstV3Reason is the code of the first reason format 2 cannot hold.
const firstV3Reason = 8

// subjectOptional reports whether an event of reason r may have no subject
// (a change the server made on the lobby itself).
func (r Reason) subjectOptional() bool {
	return r == ReasonLocked || r == ReasonUnlocked || r == ReasonConfigured
}

func reasonCode(r Reason) (byte, bool) {
	for i, x := range reasons {
		if i > 0 && x == r {
			return byte(i), true
		}
	}
	return 0, false
}

// MemberView is one member as clients see it. Its JSON form is described
// with [Event.MarshalJSON]; the field tags name the same fields for
// decoding.
type MemberView struct {
	Player  string `json:"player"`
	JoinSeq uint64 `json:"join_seq"`
	Status  Status `json:"status"`
	// Attrs are the member's attributes (nil: none). The map is the
	// view's own.
	Attrs map[string]string `json:"attrs"`
	// ReconnectDeadline is when a reconnecting member will be removed
	// unless it comes back, so a UI can count down; zero while online.
	ReconnectDeadline time.Time `json:"reconnect_deadline"`
}

// Event announces one visible change. Events of a lobby have consecutive
// revisions; each carries the whole member view, so a client that missed
// some can still render the newest one. [Event.MarshalJSON] gives its
// documented JSON form; the field tags name the same fields for decoding.
type Event struct {
	// Lobby is the lobby's ID.
	Lobby string `json:"lobby"`
	// Revision is the lobby revision after the change.
	Revision uint64 `json:"revision"`
	// Host is the host after the change, PrevHost before it ("" for none).
	// They differ exactly when the change moved the host.
	Host     string `json:"host"`
	PrevHost string `json:"previous_host"`
	// Term is the host term after the change: one more than the event
	// before it exactly when Host differs from PrevHost (see State.Term).
	Term uint64 `json:"term"`
	// Locked and Overrides are the lobby's lock and overrides after the
	// change.
	Locked    bool      `json:"locked"`
	Overrides Overrides `json:"overrides"`
	// Members is every member after the change, in join-sequence order.
	Members []MemberView `json:"members"`
	// Reason is the cause, Subject the player it concerns (for
	// host_transferred, the new host; for kicked, the removed member; for
	// locked and unlocked, the host that did it; "" for what the server
	// did to the lobby itself).
	Reason  Reason `json:"reason"`
	Subject string `json:"subject"`
	// At is when the change happened: the command's time, or for an expiry
	// its deadline.
	At time.Time `json:"at"`
}

// Outcome is what a command did.
type Outcome uint8

const (
	// OutcomeApplied: the command took effect (visibly or not).
	OutcomeApplied Outcome = iota + 1
	// OutcomeNoop: nothing to do (leaving a lobby one is not in,
	// transferring the host to oneself, a tick with nothing due, an Update,
	// Lock or Configure that asks for what is already stored).
	OutcomeNoop
	// OutcomeStale: the command names a generation or deadline that is
	// not (or no longer) live. Nothing changed beyond catching up; a
	// transport should tell the client to join again.
	OutcomeStale
	// OutcomeDone: ExpireLease applied the named deadline.
	OutcomeDone
	// OutcomeNotDue: ExpireLease named a deadline still in the future.
	OutcomeNotDue
)

var outcomeNames = [...]string{OutcomeApplied: "applied", OutcomeNoop: "noop", OutcomeStale: "stale", OutcomeDone: "done", OutcomeNotDue: "not_due"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && outcomeNames[o] != "" {
		return outcomeNames[o]
	}
	if o == 0 {
		return "none" // the zero Outcome: a Result that came with an error
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// EndCause says why a connection generation ended.
type EndCause uint8

const (
	// EndClosed: its close was reported (Disconnect).
	EndClosed EndCause = iota + 1
	// EndTimedOut: its heartbeat deadline passed.
	EndTimedOut
	// EndSuperseded: the player opened more connections than
	// MaxConnectionsPerPlayer allows and this was the oldest.
	EndSuperseded
	// EndLeft: its player left or was removed.
	EndLeft
	// EndKicked: its player was kicked.
	EndKicked
)

func (c EndCause) String() string {
	switch c {
	case EndClosed:
		return "closed"
	case EndTimedOut:
		return "timed_out"
	case EndSuperseded:
		return "superseded"
	case EndKicked:
		return "kicked"
	case EndLeft:
		return "left"
	}
	return "EndCause(?)"
}

// Ended names a connection generation that a transition ended. A transport
// should close the socket of any it still holds: later reports about it are
// stale.
type Ended struct {
	Player string
	Gen    uint64
	Cause  EndCause
	At     time.Time
}

// Result is what one transition produced.
type Result struct {
	// Outcome is what the command itself did.
	Outcome Outcome
	// Gen and JoinSeq, for an applied Join: the new connection's generation
	// and the member's join sequence.
	Gen, JoinSeq uint64
	// Ended lists the generations this transition ended, in order.
	Ended []Ended
	// Events are the visible changes, in revision order.
	Events []Event
	// Revision is the lobby's revision after the transition.
	Revision uint64
	// Changed reports whether the state changed and must be committed;
	// invisible changes (a heartbeat, a second tab) count.
	Changed bool
	// Away, for a Join that brought a reconnecting member back: how long
	// the member had been without a connection (its reconnect deadline
	// less the grace in force now, up to the join). Zero otherwise.
	Away time.Duration
	// Slack, for a Heartbeat on a live generation with a heartbeat
	// deadline: how long that deadline still had to run when the heartbeat
	// came. Zero otherwise.
	Slack time.Duration
}
