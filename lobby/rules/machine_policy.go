package rules

import (
	"fmt"
	"time"

	"github.com/lobbyhost/lobbyhost/lease"
	"github.com/lobbyhost/lobbyhost/succession"
)

// Policy is a lobby's configuration. The server chooses it; clients never
// do. It is validated once, when a Machine or Service is built.
//
// A policy change (a new process with other values) applies to deadlines set
// after it; deadlines already stored keep the values they were set with.
//
// The zero Policy is not valid; start from [DefaultPolicy].
type Policy struct {
	// Grace is how long a member whose last connection ended stays listed,
	// reconnecting, before it is removed; the host keeps its role through
	// it. Default 8 s; must be positive and at most lease.MaxDuration.
	Grace time.Duration

	// HeartbeatTTL is how long a connection lives after it attached or last
	// heartbeated. Default 15 s (heartbeat about every 5 s). Zero disables
	// heartbeat deadlines: a connection then lives until its close is
	// reported, so a socket that vanished without a close (a crashed
	// process, a dead network path) keeps its player online indefinitely;
	// use zero only where the transport reliably reports every close. Must
	// not be negative or above lease.MaxDuration.
	HeartbeatTTL time.Duration

	// MaxMembers caps the members of a lobby, reconnecting ones included.
	// A new player joining a full lobby gets ErrLobbyFull; members coming
	// back are never refused. 0 means no cap.
	MaxMembers int

	// MaxConnectionsPerPlayer caps one player's live connections (tabs).
	// A join beyond the cap is still accepted: it ends the player's oldest
	// live connections (see [EndSuperseded]) so the transport can close
	// them. 0 means no cap.
	MaxConnectionsPerPlayer int

	// MaxBlocks bounds the blocks in force in one lobby (kicks' blocks
	// that have not ended). A kick that would add one beyond it is refused
	// with ErrTooManyBlocks; a kick without a block, or one that replaces
	// its target's own block in force, is never refused for it. Each block
	// costs room in the lobby's record and work whenever the set changes,
	// so the bound keeps one host from growing a lobby without limit. 0
	// means DefaultMaxBlocks; at most MaxBlocksLimit.
	MaxBlocks int

	// Succession picks the next host. The zero Rule makes every online
	// member eligible, earliest join first. Its functions must be pure: they
	// see only the member's stored data.
	Succession succession.Rule
}

// The bounds of Policy.MaxBlocks.
const (
	// DefaultMaxBlocks is the bound on blocks in force per lobby when the
	// policy names none.
	DefaultMaxBlocks = 1024
	// MaxBlocksLimit is the highest bound a policy may set.
	MaxBlocksLimit = 1 << 16
)

// DefaultPolicy returns the defaults: an 8 s grace, a 15 s heartbeat TTL (so
// clients should heartbeat about every 5 s), no member cap, unlimited tabs,
// at most DefaultMaxBlocks blocks in force per lobby, and every online
// member eligible to host, earliest join first.
func DefaultPolicy() Policy {
	return Policy{Grace: lease.DefaultGrace, HeartbeatTTL: lease.DefaultHeartbeatTTL, MaxBlocks: DefaultMaxBlocks}
}

// blockLimit is the bound on blocks in force: MaxBlocks, or the default.
func (p Policy) blockLimit() int {
	if p.MaxBlocks == 0 {
		return DefaultMaxBlocks
	}
	return p.MaxBlocks
}

// Validate reports whether p is usable. The error wraps ErrInvalidPolicy.
func (p Policy) Validate() error {
	if p.Grace <= 0 || p.Grace > lease.MaxDuration {
		return fmt.Errorf("%w: Grace must be in (0, %v], got %v", ErrInvalidPolicy, lease.MaxDuration, p.Grace)
	}
	if p.HeartbeatTTL < 0 || p.HeartbeatTTL > lease.MaxDuration {
		return fmt.Errorf("%w: HeartbeatTTL must be in [0, %v], got %v", ErrInvalidPolicy, lease.MaxDuration, p.HeartbeatTTL)
	}
	if p.MaxMembers < 0 {
		return fmt.Errorf("%w: MaxMembers must not be negative, got %d", ErrInvalidPolicy, p.MaxMembers)
	}
	if p.MaxConnectionsPerPlayer < 0 {
		return fmt.Errorf("%w: MaxConnectionsPerPlayer must not be negative, got %d", ErrInvalidPolicy, p.MaxConnectionsPerPlayer)
	}
	if p.MaxBlocks < 0 || p.MaxBlocks > MaxBlocksLimit {
		return fmt.Errorf("%w: MaxBlocks must be between 0 and %d, got %d", ErrInvalidPolicy, MaxBlocksLimit, p.MaxBlocks)
	}
	return nil
}

// OverrideField names one setting of [Overrides].
type OverrideField uint8

// The settings a lobby may override.
const (
	OverrideGrace OverrideField = 1 << iota
	OverrideHeartbeatTTL
	OverrideMaxMembers
	OverrideMaxConnectionsPerPlayer
	OverrideMaxBlocks

	// overrideV3 are the settings records and events of format 3 could
	// carry.
	overrideV3  = OverrideGrace | OverrideHeartbeatTTL | OverrideMaxMembers | OverrideMaxConnectionsPerPlayer
	overrideAll = overrideV3 | OverrideMaxBlocks
)

// Overrides are one lobby's own values for some of the policy's settings.
// They are stored with the lobby and win over the policy of whichever
// Service runs it, also after that policy changes. A setting counts only
// when its bit is in Set, so an override can say "no member cap" (0) or
// "no heartbeat deadlines" (TTL 0) over a policy that has them. The zero
// Overrides sets nothing: the lobby follows the Service's policy.
//
// Build them with the With methods, which keep the value and its bit
// together. A setting whose bit is missing must hold its zero value;
// [Configure] clears such leftovers.
type Overrides struct {
	Grace                   time.Duration
	HeartbeatTTL            time.Duration
	MaxMembers              int
	MaxConnectionsPerPlayer int
	// MaxBlocks is the bound on blocks in force (0: DefaultMaxBlocks),
	// for a lobby that needs more or fewer than the policy allows.
	MaxBlocks int
	// Set says which of the settings above are overridden.
	Set OverrideField
}

// WithGrace returns o overriding the grace.
func (o Overrides) WithGrace(d time.Duration) Overrides {
	o.Grace, o.Set = d, o.Set|OverrideGrace
	return o
}

// WithHeartbeatTTL returns o overriding the heartbeat TTL (0: no heartbeat
// deadlines in this lobby).
func (o Overrides) WithHeartbeatTTL(d time.Duration) Overrides {
	o.HeartbeatTTL, o.Set = d, o.Set|OverrideHeartbeatTTL
	return o
}

// WithMaxMembers returns o overriding the member cap (0: no cap).
func (o Overrides) WithMaxMembers(n int) Overrides {
	o.MaxMembers, o.Set = n, o.Set|OverrideMaxMembers
	return o
}

// WithMaxConnectionsPerPlayer returns o overriding the tab cap (0: no cap).
func (o Overrides) WithMaxConnectionsPerPlayer(n int) Overrides {
	o.MaxConnectionsPerPlayer, o.Set = n, o.Set|OverrideMaxConnectionsPerPlayer
	return o
}

// WithMaxBlocks returns o overriding the bound on blocks in force (0:
// DefaultMaxBlocks).
func (o Overrides) WithMaxBlocks(n int) Overrides {
	o.MaxBlocks, o.Set = n, o.Set|OverrideMaxBlocks
	return o
}

// Has reports whether o overrides f.
func (o Overrides) Has(f OverrideField) bool { return o.Set&f != 0 }

// IsZero reports whether o overrides nothing.
func (o Overrides) IsZero() bool { return o == Overrides{} }

// Apply returns p with o's settings in place of its own.
func (o Overrides) Apply(p Policy) Policy {
	if o.Has(OverrideGrace) {
		p.Grace = o.Grace
	}
	if o.Has(OverrideHeartbeatTTL) {
		p.HeartbeatTTL = o.HeartbeatTTL
	}
	if o.Has(OverrideMaxMembers) {
		p.MaxMembers = o.MaxMembers
	}
	if o.Has(OverrideMaxConnectionsPerPlayer) {
		p.MaxConnectionsPerPlayer = o.MaxConnectionsPerPlayer
	}
	if o.Has(OverrideMaxBlocks) {
		p.MaxBlocks = o.MaxBlocks
	}
	return p
}

// normalized returns o with the values of settings it does not override
// cleared, so that equal overrides compare equal.
func (o Overrides) normalized() Overrides {
	return o.Apply(Policy{}).overridesFor(o.Set)
}

// overridesFor reads the settings named by set from p.
func (p Policy) overridesFor(set OverrideField) Overrides {
	o := Overrides{Set: set}
	if o.Has(OverrideGrace) {
		o.Grace = p.Grace
	}
	if o.Has(OverrideHeartbeatTTL) {
		o.HeartbeatTTL = p.HeartbeatTTL
	}
	if o.Has(OverrideMaxMembers) {
		o.MaxMembers = p.MaxMembers
	}
	if o.Has(OverrideMaxConnectionsPerPlayer) {
		o.MaxConnectionsPerPlayer = p.MaxConnectionsPerPlayer
	}
	if o.Has(OverrideMaxBlocks) {
		o.MaxBlocks = p.MaxBlocks
	}
	return o
}

// Validate reports whether o can be stored: it names only known settings,
// and every policy it is applied to stays valid (the settings are checked
// one by one, as [Policy.Validate] checks them, so a valid policy with o
// applied is always valid). The error wraps ErrInvalidPolicy.
func (o Overrides) Validate() error {
	if o.Set&^overrideAll != 0 {
		return fmt.Errorf("%w: unknown override bits %#x", ErrInvalidPolicy, uint8(o.Set&^overrideAll))
	}
	return o.Apply(DefaultPolicy()).Validate()
}

// lease returns p's two durations as the lease package's policy.
func (p Policy) lease() lease.Policy {
	return lease.Policy{Grace: p.Grace, HeartbeatTTL: p.HeartbeatTTL}
}
