package lobby

import (
	"fmt"

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
	// Grace and HeartbeatTTL: see [lease.Policy]. Defaults 8 s and 15 s;
	// HeartbeatTTL 0 disables heartbeat deadlines.
	lease.Policy

	// MaxMembers caps the members of a lobby, reconnecting ones included.
	// A new player joining a full lobby gets ErrLobbyFull; members coming
	// back are never refused. 0 means no cap.
	MaxMembers int

	// MaxConnectionsPerPlayer caps one player's live connections (tabs).
	// A join beyond the cap is still accepted: it ends the player's oldest
	// live connections (see [EndSuperseded]) so the transport can close
	// them. 0 means no cap.
	MaxConnectionsPerPlayer int

	// Succession picks the next host. The zero Rule makes every online
	// member eligible, earliest join first. Its functions must be pure: they
	// see only the member's stored data.
	Succession succession.Rule
}

// DefaultPolicy returns the defaults: an 8 s grace, a 15 s heartbeat TTL (so
// clients should heartbeat about every 5 s), no member cap, unlimited tabs,
// and every online member eligible to host, earliest join first.
func DefaultPolicy() Policy {
	return Policy{Policy: lease.DefaultPolicy()}
}

// Validate reports whether p is usable. The error wraps ErrInvalidPolicy.
func (p Policy) Validate() error {
	if err := p.Policy.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	if p.MaxMembers < 0 {
		return fmt.Errorf("%w: MaxMembers must not be negative, got %d", ErrInvalidPolicy, p.MaxMembers)
	}
	if p.MaxConnectionsPerPlayer < 0 {
		return fmt.Errorf("%w: MaxConnectionsPerPlayer must not be negative, got %d", ErrInvalidPolicy, p.MaxConnectionsPerPlayer)
	}
	return nil
}
