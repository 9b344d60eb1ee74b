package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Ticket errors, returned (possibly wrapped) by Tickets.Redeem and Issue.
var (
	// ErrTicketUnknown: no such ticket was issued (or it was forgotten
	// after it expired).
	ErrTicketUnknown = errors.New("server: unknown ticket")
	// ErrTicketUsed: the ticket was already redeemed once.
	ErrTicketUsed = errors.New("server: ticket already used")
	// ErrTicketExpired: the ticket's lifetime is over.
	ErrTicketExpired = errors.New("server: ticket expired")
	// ErrTooManyTickets: the issuer holds as many unredeemed tickets as it
	// may; try again later.
	ErrTooManyTickets = errors.New("server: too many outstanding tickets")
)

// Ticket is a one-time socket credential for one user in one room.
type Ticket struct {
	// Value is the secret the client presents as ?ticket=.
	Value string
	// Room and User are what the socket will be attached as.
	Room, User string
	// Expires is the first instant at which the ticket is refused.
	Expires time.Time
}

// Tickets issues and redeems socket tickets. Implementations must be safe
// for concurrent use. A ticket is redeemed at most once, ever: of two
// concurrent Redeem calls with the same value, at most one succeeds.
type Tickets interface {
	// Issue returns a new ticket for user in room.
	Issue(ctx context.Context, room, user string) (Ticket, error)
	// Redeem consumes the ticket with the given value and returns it.
	// It returns ErrTicketUnknown, ErrTicketUsed or ErrTicketExpired when
	// the ticket cannot be used; the ticket is consumed in every case.
	Redeem(ctx context.Context, value string) (Ticket, error)
}

// MemoryTickets is the in-memory Tickets of one process. Tickets live until
// their expiry, used or not, so that a reuse is reported as such; then they
// are forgotten. Memory is bounded by the issue rate times the TTL, and by
// the limit given to NewMemoryTickets.
type MemoryTickets struct {
	clock clockwork.Clock
	ttl   time.Duration
	limit int

	mu    sync.Mutex
	byVal map[string]*ticketEntry
	order []*ticketEntry // issue order, which is expiry order
}

type ticketEntry struct {
	t    Ticket
	used bool
}

var _ Tickets = (*MemoryTickets)(nil)

// DefaultTicketTTL is how long a ticket stays valid unless configured.
const DefaultTicketTTL = 30 * time.Second

// NewMemoryTickets returns an empty MemoryTickets whose tickets expire ttl
// after they are issued, judged by clock. At most limit tickets are kept
// (issued and not yet expired); a limit of 0 means 1<<20. It returns an
// error if ttl is not positive or limit negative.
func NewMemoryTickets(clock clockwork.Clock, ttl time.Duration, limit int) (*MemoryTickets, error) {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("server: ticket TTL must be positive, got %v", ttl)
	}
	if limit < 0 {
		return nil, fmt.Errorf("server: ticket limit must not be negative, got %d", limit)
	}
	if limit == 0 {
		limit = 1 << 20
	}
	return &MemoryTickets{clock: clock, ttl: ttl, limit: limit, byVal: map[string]*ticketEntry{}}, nil
}

// Issue returns a new ticket with 256 random bits, valid for the TTL.
// It returns ErrTooManyTickets when the limit is reached.
func (m *MemoryTickets) Issue(ctx context.Context, room, user string) (Ticket, error) {
	if err := ctx.Err(); err != nil {
		return Ticket{}, err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Ticket{}, fmt.Errorf("server: ticket randomness: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	m.prune(now)
	if len(m.order) >= m.limit {
		return Ticket{}, ErrTooManyTickets
	}
	t := Ticket{Value: base64.RawURLEncoding.EncodeToString(b[:]), Room: room, User: user, Expires: now.Add(m.ttl)}
	e := &ticketEntry{t: t}
	m.byVal[t.Value] = e
	m.order = append(m.order, e)
	return t, nil
}

// Redeem consumes the ticket. See Tickets.
func (m *MemoryTickets) Redeem(ctx context.Context, value string) (Ticket, error) {
	if err := ctx.Err(); err != nil {
		return Ticket{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	e, ok := m.byVal[value]
	switch {
	case !ok:
		return Ticket{}, ErrTicketUnknown
	case e.used:
		return Ticket{}, ErrTicketUsed
	case !now.Before(e.t.Expires):
		e.used = true
		return Ticket{}, ErrTicketExpired
	}
	e.used = true
	return e.t, nil
}

// Len returns how many tickets are remembered (issued and not yet pruned).
func (m *MemoryTickets) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.order)
}

// prune forgets tickets that expired before now. Tickets expire in issue
// order (one TTL for all, a clock that does not go backward), so the
// expired ones are a prefix of m.order.
func (m *MemoryTickets) prune(now time.Time) {
	i := 0
	for i < len(m.order) && !now.Before(m.order[i].t.Expires) {
		delete(m.byVal, m.order[i].t.Value)
		m.order[i] = nil
		i++
	}
	if i > 0 {
		m.order = m.order[i:]
		if cap(m.order) > 64 && len(m.order) < cap(m.order)/4 {
			m.order = append([]*ticketEntry(nil), m.order...)
		}
	}
}
