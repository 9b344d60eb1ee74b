package rules

import (
	"errors"
	"strconv"
)

// Errors returned by this package, possibly wrapped: compare with errors.Is.
// A stale report (a heartbeat or close for a generation that already ended)
// is not an error; it is reported as [OutcomeStale].
var (
	// ErrInvalidID: a lobby or player ID is empty, longer than MaxIDLen
	// bytes, or not valid UTF-8.
	ErrInvalidID = errors.New("lobby: invalid ID")
	// ErrInvalidAttrs: join attributes break the limits (MaxAttrs,
	// MaxAttrLen, valid UTF-8).
	ErrInvalidAttrs = errors.New("lobby: invalid attributes")
	// ErrInvalidPolicy: a policy value is out of range.
	ErrInvalidPolicy = errors.New("lobby: invalid policy")
	// ErrInvalidCommand: the command is malformed (an unknown operation, a
	// negative block).
	ErrInvalidCommand = errors.New("lobby: invalid command")
	// ErrInvalidTime: the transition time is outside the years 1700–2200,
	// which stored deadlines cannot represent.
	ErrInvalidTime = errors.New("lobby: time out of range")
	// ErrLobbyFull: a new player cannot join because the lobby has
	// MaxMembers members (reconnecting members count).
	ErrLobbyFull = errors.New("lobby: lobby is full")
	// ErrBlocked: a player that was kicked with a block tries to join
	// before the block ends.
	ErrBlocked = errors.New("lobby: player is blocked from this lobby")
	// ErrLocked: a new player cannot join because the lobby is locked
	// (members coming back and further tabs are still admitted).
	ErrLocked = errors.New("lobby: lobby is locked")
	// ErrNotHost: a host-only command came from a member who is not the
	// current host.
	ErrNotHost = errors.New("lobby: actor is not the host")
	// ErrNotMember: the command names a player who is not a member (the
	// new host of TransferHost, the target of Kick, the player of Update).
	ErrNotMember = errors.New("lobby: player is not a member")
	// ErrNotEligible: the named member may not host now (reconnecting, or
	// refused by the eligibility rule).
	ErrNotEligible = errors.New("lobby: player is not eligible to host")
	// ErrTooManyBlocks: a kick would add a block to a lobby that already
	// holds the policy's MaxBlocks blocks in force.
	ErrTooManyBlocks = errors.New("lobby: too many blocks in force")
	// ErrSessionEnded: a join names a session whose deadline, as the
	// command gives it, has passed at the join's time: that process no
	// longer speaks for its connections and may not attach more.
	ErrSessionEnded = errors.New("lobby: session ended")
	// ErrCorrupt: stored bytes do not decode to a valid lobby or event.
	ErrCorrupt = errors.New("lobby: corrupt record")
	// ErrNotEmpty: a lobby that still has members cannot be reclaimed.
	ErrNotEmpty = errors.New("lobby: lobby is not empty")
)

// refusals are the errors by which a rule refuses a command on the lobby's
// current state, as opposed to bad input or a failure. A refused command
// commits nothing.
var refusals = [...]error{ErrLobbyFull, ErrBlocked, ErrLocked, ErrNotHost, ErrNotMember, ErrNotEligible, ErrTooManyBlocks, ErrNotEmpty, ErrSessionEnded}

// IsRefusal reports whether err is a rule's refusal of a command on the
// lobby's current state (ErrLobbyFull, ErrBlocked, ErrLocked, ErrNotHost,
// ErrNotMember, ErrNotEligible, ErrTooManyBlocks, ErrNotEmpty,
// ErrSessionEnded) rather than bad input or a failure.
func IsRefusal(err error) bool {
	for _, target := range refusals {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// A RefusalError is a rule's refusal of a command on the lobby's current
// state. It wraps the rule's sentinel (errors.Is works with each of
// [IsRefusal]'s). Its message
// names the lobby and the rule but never a player: player IDs are personal
// data and error strings end up in logs. Code that needs the players reads
// the fields (errors.As).
type RefusalError struct {
	// Err is the rule's sentinel.
	Err error
	// Lobby is the lobby's ID.
	Lobby string
	// Player is the command's subject or actor (the joining or updated
	// player, the actor of TransferHost, Kick or Lock); Target is the player
	// a command names (the new host of TransferHost, the target of Kick).
	// Either may be empty.
	Player, Target string
	// Detail is a fact without player IDs ("3 members").
	Detail string
}

func (e *RefusalError) Error() string {
	msg := e.Err.Error() + ": lobby " + strconv.Quote(e.Lobby)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the rule's sentinel.
func (e *RefusalError) Unwrap() error { return e.Err }
