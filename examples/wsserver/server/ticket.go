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
	// ErrTooManyTickets: the issuer holds as many tickets as it may; try
	// again later. The server answers it with 503. MemoryTickets never
	// returns it (a full table sheds its oldest ticket); other Tickets
	// may.
	ErrTooManyTickets = errors.New("server: too many outstanding tickets")
	// ErrUserTickets: this user holds as many unredeemed tickets as one
	// user may; redeem one or wait for them to expire.
	ErrUserTickets = errors.New("server: too many outstanding tickets for this user")
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
// are forgotten (at the next Issue or Collect). Memory is bounded by the
// limit given to NewMemoryTickets, and one user's share by the per-user
// limit.
//
// A full table does not refuse anybody: a new ticket makes an old one
// forgotten (redeeming it then fails with ErrTicketUnknown). Among the
// oldest tickets, the first that was already redeemed, or that belongs to
// a user holding several unused ones, goes first; failing that, the
// oldest. Whoever fills the table (made-up users asking for tickets they
// never use) so mostly sheds their own tickets, and otherwise only
// shortens the life of those that sit unused longest: to take a ticket
// from a client that redeems it at once, a flood would have to issue the
// whole table in the moment between that client's two requests.
type MemoryTickets struct {
	clock   clockwork.Clock
	ttl     time.Duration
	limit   int
	perUser int

	mu     sync.Mutex
	byVal  map[string]*ticketEntry
	order  []*ticketEntry // issue order, which is expiry order
	unused map[string]int // user → tickets neither redeemed nor expired
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
// (issued and not yet expired; 0 means DefaultMaxTickets), and one user
// may hold at most perUser tickets neither redeemed nor expired (0 means
// DefaultTicketsPerUser). It returns an error if ttl is not positive or a
// limit negative.
func NewMemoryTickets(clock clockwork.Clock, ttl time.Duration, limit, perUser int) (*MemoryTickets, error) {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("server: ticket TTL must be positive, got %v", ttl)
	}
	if limit < 0 || perUser < 0 {
		return nil, fmt.Errorf("server: ticket limits must not be negative, got %d and %d", limit, perUser)
	}
	if limit == 0 {
		limit = DefaultMaxTickets
	}
	if perUser == 0 {
		perUser = DefaultTicketsPerUser
	}
	return &MemoryTickets{clock: clock, ttl: ttl, limit: limit, perUser: perUser,
		byVal: map[string]*ticketEntry{}, unused: map[string]int{}}, nil
}

// Issue returns a new ticket with 256 random bits, valid for the TTL.
// It returns ErrUserTickets when user holds its share of unredeemed
// tickets. When the overall limit is reached, the oldest ticket is
// forgotten to make room (see MemoryTickets); Issue never returns
// ErrTooManyTickets.
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
	if m.unused[user] >= m.perUser {
		return Ticket{}, ErrUserTickets
	}
	if len(m.order) >= m.limit {
		m.shed()
	}
	t := Ticket{Value: base64.RawURLEncoding.EncodeToString(b[:]), Room: room, User: user, Expires: now.Add(m.ttl)}
	e := &ticketEntry{t: t}
	m.byVal[t.Value] = e
	m.order = append(m.order, e)
	m.unused[user]++
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
		m.use(e)
		return Ticket{}, ErrTicketExpired
	}
	m.use(e)
	return e.t, nil
}

// shedWindow is how many of the oldest tickets a full table looks through
// for one to shed.
const shedWindow = 64

// shed forgets one ticket to make room: among the shedWindow oldest, the
// first that was redeemed already (forgetting it only changes how a reuse
// is refused) or whose user holds more than one unused ticket (a client
// that redeems its tickets holds one at a time); else the oldest.
func (m *MemoryTickets) shed() {
	victim := 0
	for i, e := range m.order[:min(len(m.order), shedWindow)] {
		if e.used || m.unused[e.t.User] > 1 {
			victim = i
			break
		}
	}
	e := m.order[victim]
	if !e.used {
		m.use(e)
	}
	delete(m.byVal, e.t.Value)
	// The ones before it move up by one: the order stays the issue order.
	copy(m.order[1:victim+1], m.order[:victim])
	m.order[0] = nil
	m.order = m.order[1:]
}

// use marks e redeemed and releases its place in its user's share.
func (m *MemoryTickets) use(e *ticketEntry) {
	e.used = true
	if n := m.unused[e.t.User] - 1; n > 0 {
		m.unused[e.t.User] = n
	} else {
		delete(m.unused, e.t.User)
	}
}

// Collect forgets the tickets that expired by now. The server calls it on
// a timer, so that memory is returned without waiting for the next Issue.
func (m *MemoryTickets) Collect(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prune(now)
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
		if !m.order[i].used {
			m.use(m.order[i])
		}
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
