package lobby

import (
	"errors"

	"github.com/lobbyhost/lobbyhost/lobby/rules"
)

// The words of the Service's API. They are defined in package rules, the
// pure state machine the Service drives, and named here so that a game
// server reads one package; each is the very same type or value as its
// rules counterpart.

// Policy is a lobby's configuration: see [rules.Policy].
type Policy = rules.Policy

// DefaultPolicy returns the defaults: see [rules.DefaultPolicy].
func DefaultPolicy() Policy { return rules.DefaultPolicy() }

// Overrides are one lobby's own policy settings: see [rules.Overrides].
type Overrides = rules.Overrides

// OverrideField names one field of Overrides: see [rules.OverrideField].
type OverrideField = rules.OverrideField

// The fields of Overrides.
const (
	OverrideGrace                   = rules.OverrideGrace
	OverrideHeartbeatTTL            = rules.OverrideHeartbeatTTL
	OverrideMaxMembers              = rules.OverrideMaxMembers
	OverrideMaxConnectionsPerPlayer = rules.OverrideMaxConnectionsPerPlayer
	OverrideMaxBlocks               = rules.OverrideMaxBlocks
)

// Result is what a command did: see [rules.Result].
type Result = rules.Result

// Outcome classifies a command's result: see [rules.Outcome].
type Outcome = rules.Outcome

// The outcomes.
const (
	OutcomeApplied = rules.OutcomeApplied
	OutcomeNoop    = rules.OutcomeNoop
	OutcomeStale   = rules.OutcomeStale
	OutcomeDone    = rules.OutcomeDone
	OutcomeNotDue  = rules.OutcomeNotDue
)

// Event is one committed visible change: see [rules.Event].
type Event = rules.Event

// MemberView is a member as clients see it: see [rules.MemberView].
type MemberView = rules.MemberView

// Status is a member's presence: see [rules.Status].
type Status = rules.Status

// The statuses.
const (
	StatusOnline       = rules.StatusOnline
	StatusReconnecting = rules.StatusReconnecting
)

// Reason is why an event happened: see [rules.Reason].
type Reason = rules.Reason

// The reasons.
const (
	ReasonJoined          = rules.ReasonJoined
	ReasonReconnected     = rules.ReasonReconnected
	ReasonDisconnected    = rules.ReasonDisconnected
	ReasonTimedOut        = rules.ReasonTimedOut
	ReasonLeaseExpired    = rules.ReasonLeaseExpired
	ReasonLeft            = rules.ReasonLeft
	ReasonHostTransferred = rules.ReasonHostTransferred
	ReasonKicked          = rules.ReasonKicked
	ReasonUpdated         = rules.ReasonUpdated
	ReasonLocked          = rules.ReasonLocked
	ReasonUnlocked        = rules.ReasonUnlocked
	ReasonConfigured      = rules.ReasonConfigured
)

// Ended is a connection a commit ended: see [rules.Ended].
type Ended = rules.Ended

// EndCause is why a connection ended: see [rules.EndCause].
type EndCause = rules.EndCause

// The causes.
const (
	EndClosed     = rules.EndClosed
	EndTimedOut   = rules.EndTimedOut
	EndSuperseded = rules.EndSuperseded
	EndLeft       = rules.EndLeft
	EndKicked     = rules.EndKicked
)

// RefusalError is a rule's refusal of a command: see [rules.RefusalError].
type RefusalError = rules.RefusalError

// IsRefusal reports whether err is a rule's refusal of a command on the
// lobby's current state rather than bad input or a failure: see
// [rules.IsRefusal].
func IsRefusal(err error) bool { return rules.IsRefusal(err) }

// ValidateID reports whether id is usable as a lobby or player ID: 1 to
// MaxIDLen bytes of valid UTF-8, compared byte for byte and never
// normalised. The error wraps ErrInvalidID. A transport may call it before
// it spends anything on a request; every Service method checks it anyway.
func ValidateID(id string) error { return rules.ValidateID(id) }

// ServerActor is the actor of a command the server itself gives (Kick,
// Lock, Unlock) rather than a member: see [rules.ServerActor].
const ServerActor = rules.ServerActor

// Limits on identifiers, attributes and blocks.
const (
	MaxIDLen   = rules.MaxIDLen
	MaxAttrs   = rules.MaxAttrs
	MaxAttrLen = rules.MaxAttrLen
	MaxBlock   = rules.MaxBlock
	// DefaultMaxBlocks is the bound on blocks in force per lobby when the
	// policy names none; MaxBlocksLimit is the highest a policy may set.
	DefaultMaxBlocks = rules.DefaultMaxBlocks
	MaxBlocksLimit   = rules.MaxBlocksLimit
)

// Errors the Service returns, possibly wrapped: compare with errors.Is.
// A stale report (a heartbeat or close for a generation that already ended)
// is not an error; it is reported as [OutcomeStale]. See package rules for
// each one's meaning.
var (
	ErrInvalidID      = rules.ErrInvalidID
	ErrInvalidAttrs   = rules.ErrInvalidAttrs
	ErrInvalidPolicy  = rules.ErrInvalidPolicy
	ErrInvalidCommand = rules.ErrInvalidCommand
	ErrInvalidTime    = rules.ErrInvalidTime
	ErrLobbyFull      = rules.ErrLobbyFull
	ErrBlocked        = rules.ErrBlocked
	ErrLocked         = rules.ErrLocked
	ErrNotHost        = rules.ErrNotHost
	ErrNotMember      = rules.ErrNotMember
	ErrNotEligible    = rules.ErrNotEligible
	ErrCorrupt        = rules.ErrCorrupt
	ErrNotEmpty       = rules.ErrNotEmpty
	ErrTooManyBlocks  = rules.ErrTooManyBlocks
)

// ErrInvalidOption: a Service option or argument is unusable (a nil store,
// clock, publisher, logger or observer, a short pseudonym key, a
// non-positive interval or bound).
var ErrInvalidOption = errors.New("lobby: invalid option")
