package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// ErrTicketSignature: the ticket's signature does not match any of the
// keys: it was forged, altered, or signed with a key this process no
// longer accepts.
var ErrTicketSignature = errors.New("server: ticket signature does not match")

// MinTicketKeyBytes is the shortest key SignedTickets accepts.
const MinTicketKeyBytes = 32

// Redemptions records which tickets were redeemed, where every process of a
// deployment sees it, so that a ticket is used once across all of them.
// Implementations must be safe for concurrent use.
type Redemptions interface {
	// Claim records nonce as redeemed, to be remembered at least until
	// keep. It reports true if this call recorded it, false if it was
	// recorded before (by any process). Of two concurrent calls with one
	// nonce, at most one reports true.
	Claim(ctx context.Context, nonce []byte, keep time.Time) (bool, error)
}

// SignedTickets is a Tickets whose tickets every process holding one of its
// keys accepts: a ticket carries its room, user, expiry and a random nonce,
// signed with HMAC-SHA256. Issuing keeps no state; redeeming checks the
// signature, the expiry, and records the nonce in a Redemptions shared by
// the processes, so that the ticket is used once across all of them.
//
// Keys rotate: the first key signs, any key verifies. To replace a key,
// deploy [new, old] everywhere, wait one ticket TTL, then deploy [new].
//
// Issuing stores nothing (a redemption is stored only when an upgrade uses
// a ticket, until RedemptionSkew after its expiry), so there is no table a
// flood of ticket requests could fill, and no per-user cap on outstanding
// tickets as MemoryTickets has.
type SignedTickets struct {
	keys  [][]byte
	clock clockwork.Clock
	ttl   time.Duration
	used  Redemptions
}

var _ Tickets = (*SignedTickets)(nil)

// ticketVersion is the first byte of a ticket's body; a ticket of another
// layout is refused as unknown.
const ticketVersion = 1

// ticketNonceBytes is how many random bytes make a ticket unique.
const ticketNonceBytes = 16

// ticketMACContext separates ticket signatures from anything else the same
// key might sign.
const ticketMACContext = "lobbyhost wsserver socket ticket\x00"

// RedemptionSkew is how long past a ticket's expiry its redemption is kept,
// on top of the expiry: processes whose clocks disagree by less than this
// still refuse a replay.
const RedemptionSkew = time.Minute

// NewSignedTickets returns a SignedTickets that signs with keys[0],
// verifies with any of keys (each at least MinTicketKeyBytes long), issues
// tickets valid for ttl as judged by clock (nil: the real clock), and
// records redemptions in used. It returns an error if there is no key, a
// key is short, ttl is not positive or used is nil.
func NewSignedTickets(keys [][]byte, clock clockwork.Clock, ttl time.Duration, used Redemptions) (*SignedTickets, error) {
	if len(keys) == 0 {
		return nil, errors.New("server: signed tickets need at least one key")
	}
	ks := make([][]byte, len(keys))
	for i, k := range keys {
		if len(k) < MinTicketKeyBytes {
			return nil, fmt.Errorf("server: ticket key %d has %d bytes, want at least %d", i, len(k), MinTicketKeyBytes)
		}
		ks[i] = append([]byte(nil), k...)
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("server: ticket TTL must be positive, got %v", ttl)
	}
	if used == nil {
		return nil, errors.New("server: signed tickets need a Redemptions")
	}
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &SignedTickets{keys: ks, clock: clock, ttl: ttl, used: used}, nil
}

// body lays out what is signed: version, expiry (Unix milliseconds), nonce,
// then room and user, each after its length.
func ticketBody(expires time.Time, nonce []byte, room, user string) []byte {
	b := make([]byte, 0, 1+8+len(nonce)+2*binary.MaxVarintLen64+len(room)+len(user))
	b = append(b, ticketVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(expires.UnixMilli()))
	b = append(b, nonce...)
	b = binary.AppendUvarint(b, uint64(len(room)))
	b = append(b, room...)
	b = binary.AppendUvarint(b, uint64(len(user)))
	b = append(b, user...)
	return b
}

func ticketMAC(key, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ticketMACContext))
	m.Write(body)
	return m.Sum(nil)
}

// Issue returns a ticket for user in room, valid for the TTL. It fails only
// if ctx is done, an ID is invalid (lobby.ValidateID) or randomness fails.
func (s *SignedTickets) Issue(ctx context.Context, room, user string) (Ticket, error) {
	if err := ctx.Err(); err != nil {
		return Ticket{}, err
	}
	if err := lobby.ValidateID(room); err != nil {
		return Ticket{}, err
	}
	if err := lobby.ValidateID(user); err != nil {
		return Ticket{}, err
	}
	nonce := make([]byte, ticketNonceBytes)
	if _, err := rand.Read(nonce); err != nil {
		return Ticket{}, fmt.Errorf("server: ticket randomness: %w", err)
	}
	// Whole milliseconds: the expiry the ticket carries is the one it has.
	expires := s.clock.Now().Add(s.ttl).Truncate(time.Millisecond)
	body := ticketBody(expires, nonce, room, user)
	enc := base64.RawURLEncoding
	value := enc.EncodeToString(body) + "." + enc.EncodeToString(ticketMAC(s.keys[0], body))
	return Ticket{Value: value, Room: room, User: user, Expires: expires}, nil
}

// parseTicket splits a value into its body and signature and decodes the
// body. ok is false for anything that is not a ticket of this layout.
func parseTicket(value string) (body, mac []byte, t Ticket, nonce []byte, ok bool) {
	b64, sig, found := strings.Cut(value, ".")
	if !found || len(value) > 1024 {
		return nil, nil, Ticket{}, nil, false
	}
	enc := base64.RawURLEncoding
	body, err1 := enc.DecodeString(b64)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || len(mac) != sha256.Size || len(body) < 1+8+ticketNonceBytes || body[0] != ticketVersion {
		return nil, nil, Ticket{}, nil, false
	}
	ms := int64(binary.BigEndian.Uint64(body[1:9]))
	nonce = body[9 : 9+ticketNonceBytes]
	rest := body[9+ticketNonceBytes:]
	field := func() (string, bool) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return "", false
		}
		v := string(rest[k : k+int(n)])
		rest = rest[k+int(n):]
		return v, true
	}
	room, ok1 := field()
	user, ok2 := field()
	if !ok1 || !ok2 || len(rest) != 0 {
		return nil, nil, Ticket{}, nil, false
	}
	return body, mac, Ticket{Value: value, Room: room, User: user, Expires: time.UnixMilli(ms)}, nonce, true
}

// Redeem checks the ticket and records its redemption. It returns
// ErrTicketUnknown for a value that is not a ticket, ErrTicketSignature
// when no key signed it, ErrTicketExpired past its expiry and
// ErrTicketUsed when any process redeemed it before. An error of the
// Redemptions is returned wrapped (the ticket may or may not be spent).
func (s *SignedTickets) Redeem(ctx context.Context, value string) (Ticket, error) {
	if err := ctx.Err(); err != nil {
		return Ticket{}, err
	}
	body, mac, t, nonce, ok := parseTicket(value)
	if !ok {
		return Ticket{}, ErrTicketUnknown
	}
	signed := false
	for _, k := range s.keys {
		// hmac.Equal compares in constant time: how long the check takes
		// tells nothing about how much of a guessed signature was right.
		if hmac.Equal(mac, ticketMAC(k, body)) {
			signed = true
		}
	}
	if !signed {
		return Ticket{}, ErrTicketSignature
	}
	if !s.clock.Now().Before(t.Expires) {
		return Ticket{}, ErrTicketExpired
	}
	first, err := s.used.Claim(ctx, nonce, t.Expires.Add(RedemptionSkew))
	if err != nil {
		return Ticket{}, fmt.Errorf("server: recording the ticket's redemption: %w", err)
	}
	if !first {
		return Ticket{}, ErrTicketUsed
	}
	return t, nil
}

// Collect forgets redemptions whose tickets expired, if the Redemptions
// keeps them itself (MemoryRedemptions, PostgresRedemptions). The server
// calls it on a timer.
func (s *SignedTickets) Collect(now time.Time) {
	if c, ok := s.used.(interface{ Collect(now time.Time) }); ok {
		c.Collect(now)
	}
}

// MemoryRedemptions is the Redemptions of a single process: use it only
// when one process serves every socket. Records are forgotten at Collect
// once kept long enough.
type MemoryRedemptions struct {
	mu   sync.Mutex
	keep map[string]time.Time
}

var _ Redemptions = (*MemoryRedemptions)(nil)

// NewMemoryRedemptions returns an empty MemoryRedemptions.
func NewMemoryRedemptions() *MemoryRedemptions {
	return &MemoryRedemptions{keep: map[string]time.Time{}}
}

// Claim records nonce. See Redemptions.
func (m *MemoryRedemptions) Claim(ctx context.Context, nonce []byte, keep time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.keep[string(nonce)]; ok {
		return false, nil
	}
	m.keep[string(nonce)] = keep
	return true, nil
}

// Collect forgets the records kept until before now.
func (m *MemoryRedemptions) Collect(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, t := range m.keep {
		if t.Before(now) {
			delete(m.keep, k)
		}
	}
}

// Len returns how many redemptions are remembered.
func (m *MemoryRedemptions) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.keep)
}
