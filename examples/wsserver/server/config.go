package server

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// Config configures a Server. The zero value of every field but
// Authenticator means its documented default.
type Config struct {
	// Store keeps the lobbies. Default: a new memstore.Store (one process,
	// nothing survives a restart).
	Store store.Store

	// Policy is the lobby policy. Only its zero fields are filled in, the
	// fields set are kept: a zero Grace means the durations were not set,
	// and Grace and HeartbeatTTL become lobby.DefaultPolicy's (to turn
	// heartbeat deadlines off, set a Grace and leave HeartbeatTTL zero); a
	// zero MaxMembers becomes DefaultMaxMembers (the server does not serve
	// rooms without a member cap: set a large one if you must); a zero
	// MaxConnectionsPerPlayer and Succession keep the lobby's meaning (no
	// tab cap, earliest join first); a deployment wants a tab cap
	// (DefaultMaxTabs says why; the command sets it).
	Policy lobby.Policy

	// Authenticator says who asks for a ticket. Required.
	Authenticator Authenticator

	// Clock drives the lobby Service, ticket expiry, pings, rate limits and
	// chat timestamps. Default: the real clock. Tests pass a fake one.
	Clock clockwork.Clock

	// Logger receives the server's log and the lobby's decision log.
	// Default: discard. Player IDs appear only as pseudonyms; IP addresses,
	// tickets and message contents never appear.
	Logger *slog.Logger

	// PseudonymKey keys the hash that turns player IDs into log pseudonyms
	// (lobby.WithPseudonymKey); at least 16 bytes. Default: a random key per
	// process, so pseudonyms do not match across processes or restarts.
	PseudonymKey []byte

	// Observer, if set, is told about every lobby command after the
	// server's own observer (metrics, reclaiming emptied lobbies). Sockets
	// are closed and updated through lobby.Rooms, not from here.
	Observer lobby.Observer

	// Tickets issues and redeems socket tickets. Default: MemoryTickets
	// with TicketTTL, TicketsPerUser and MaxTickets on Clock. A Tickets
	// that also has a Collect(now time.Time) method is collected on a
	// timer (every TicketTTL, at most every minute).
	Tickets Tickets
	// TicketTTL is the lifetime of a ticket from MemoryTickets. Default
	// DefaultTicketTTL (30 s).
	TicketTTL time.Duration
	// TicketsPerUser is how many unredeemed, unexpired tickets one user
	// may hold; more are refused with 429 too_many_tickets. Default
	// DefaultTicketsPerUser.
	TicketsPerUser int
	// MaxTickets bounds the tickets MemoryTickets remembers in all (issued
	// and not yet expired, redeemed or not); past it, each new ticket
	// makes an old one forgotten (see MemoryTickets), so a full table
	// refuses nobody.
	// Default DefaultMaxTickets.
	MaxTickets int

	// PingInterval is how often the server pings each socket; each pong is
	// a heartbeat. Default: a third of the policy's heartbeat TTL, or 20 s
	// when heartbeat deadlines are off (pings then only detect dead
	// sockets).
	PingInterval time.Duration
	// PingTimeout is how long a pong may take before the socket is closed
	// (ClosePingTimeout). Measured on the real clock. Default: PingInterval,
	// at most 15 s.
	PingTimeout time.Duration
	// WriteTimeout bounds one write to a socket, on the real clock.
	// Default 10 s.
	WriteTimeout time.Duration
	// CloseTimeout bounds a close the server initiates because something
	// went wrong (ping timeout, slow consumer, a write that failed): the
	// write in progress and the close frame carrying the close code get
	// this long, on the real clock, then the connection is cut. Default
	// 2 s.
	CloseTimeout time.Duration

	// SendQueue is how many messages may wait for one socket, those
	// being written included (what is queued goes out in one write per
	// batch). When it is half full, typing indicators for that socket are
	// dropped; when it is full, anything else closes the socket
	// (CloseSlowConsumer): a slow client never holds up the others.
	// Default 128, at least 8.
	SendQueue int
	// SendQueueBytes bounds the same messages by their size: a socket
	// whose waiting and in-flight messages would exceed it is closed with
	// CloseSlowConsumer, like one whose queue is full, and typing
	// indicators are dropped for it past half of it. Queued messages are
	// shared with the room's other sockets rather than copied, so this
	// bounds how far behind a socket may fall more than its memory.
	// Default DefaultSendQueueBytes (1 MiB); at least ChatHistoryBytes plus
	// 64 KiB, so that a socket can take the chat history it is sent on
	// attach along with the room's state.
	SendQueueBytes int

	// MaxMessageBytes is the largest client frame the server reads; larger
	// frames up to MaxFrameBytes are skipped and answered with a too_large
	// error. Default 16 KiB.
	MaxMessageBytes int
	// MaxFrameBytes is the largest frame the server tolerates at all; a
	// larger one closes the socket with status 1009. Default 4 ×
	// MaxMessageBytes.
	MaxFrameBytes int64
	// MaxChatBytes bounds the text of one chat message. Default 2000.
	MaxChatBytes int
	// ChatHistory is how many chat messages each room keeps and sends to
	// a socket when it attaches. Default 100.
	ChatHistory int
	// ChatHistoryBytes bounds the chat.history message a socket gets on
	// attach by its encoded size (JSON escaping and read receipts
	// included): past it the oldest messages are dropped from the
	// history. The message is encoded once per change of the history and
	// shared by every socket that attaches until the next one. Default
	// DefaultChatHistoryBytes (256 KiB); at least what one chat message
	// can take encoded with all its receipts (MaxChatBytes, IDs and
	// ReadersPerMessage at their largest, every byte escaped).
	ChatHistoryBytes int

	// ReadersPerMessage bounds the read receipts kept (and sent) per chat
	// message; later readers are not recorded. Default 64.
	ReadersPerMessage int

	// FrameRate and FrameBurst bound how many WebSocket frames per second
	// the server reads from one socket: every frame counts, pings, pongs,
	// close and continuation frames, binary and oversized ones included
	// (a token bucket, golang.org/x/time/rate, on Clock). Beyond it the
	// server stops reading that socket until the bucket refills: nothing is
	// refused and nothing is answered, the sender is just slowed down.
	// Defaults 50 and 100.
	FrameRate  float64
	FrameBurst int
	// MessageRate and MessageBurst bound how many data messages (text,
	// binary, oversized alike) per second one socket may send; excess
	// messages are dropped. The first dropped message of a burst is
	// answered with one rate_limited error, the rest of the burst is
	// dropped silently; a burst ends once the socket's budget has refilled
	// completely (MessageBurst / MessageRate seconds within the rate), so
	// a sender that stays over the rate gets one reply in all.
	// Defaults 20 and 40.
	MessageRate  float64
	MessageBurst int
	// TypingRate and TypingBurst bound typing.set messages further; excess
	// updates are refused like excess messages. Defaults 2 and 4.
	TypingRate  float64
	TypingBurst int
	// TypingTTL is how long a typing indicator lasts without a refresh, for
	// typing.state sent to sockets that attach. Default 6 s.
	TypingTTL time.Duration

	// AllowedOrigins lists the browser origins allowed to open sockets
	// and to ask for tickets (with CORS answers for those not served by
	// this server). Each entry is an origin as browsers send it,
	// scheme://host[:port], and may use path.Match wildcards
	// ("https://*.example.com"); entries are compared case-insensitively
	// with the request's Origin header, never with its Host header (which
	// a DNS-rebinding page controls). A request with an Origin header not
	// listed is refused with 403. Requests without one (non-browser
	// clients) are not affected. Empty: no browser may use the server;
	// the command fills in its listen address. Behind a proxy, list the
	// public origin(s) users load the page from.
	AllowedOrigins []string

	// MetricsHosts lists host names or IP addresses, besides loopback
	// ones ("localhost", 127.0.0.0/8, ::1), for which /metrics answers:
	// a request whose Host header (port aside) names any other host is
	// refused with 403, so that a page on a DNS-rebound name cannot read
	// the metrics. List the name or address your scraper uses. Entries
	// are compared case-insensitively, without port.
	MetricsHosts []string

	// Timeouts of the http.Server returned by HTTPServer: how long a
	// client may take to send the request headers, the whole request
	// (body included; sockets are exempt once upgraded), and how long an
	// idle keep-alive connection is kept. Defaults 5 s, 15 s and 60 s.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	// MaxHeaderBytes bounds request headers, the request line and the
	// blank line after them included: a request whose headers are longer
	// is refused with 431 (default 16 KiB, at least 8 KiB). MaxBodyBytes
	// bounds request bodies (default 4 KiB; no endpoint reads one).
	MaxHeaderBytes int
	MaxBodyBytes   int64

	// RoomLinger is how long a room's chat history is kept after its last
	// local socket detached. Default: the policy's grace plus one minute.
	RoomLinger time.Duration
}

func (c *Config) fill() error {
	if c.Authenticator == nil {
		return errors.New("server: Config.Authenticator is required")
	}
	if c.Store == nil {
		c.Store = memstore.New()
	}
	if c.Policy.Grace == 0 {
		def := lobby.DefaultPolicy()
		c.Policy.Grace = def.Grace
		if c.Policy.HeartbeatTTL == 0 {
			c.Policy.HeartbeatTTL = def.HeartbeatTTL
		}
	}
	if c.Policy.MaxMembers == 0 {
		c.Policy.MaxMembers = DefaultMaxMembers
	}
	if err := c.Policy.Validate(); err != nil {
		return err
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.TicketTTL == 0 {
		c.TicketTTL = DefaultTicketTTL
	}
	if c.TicketsPerUser == 0 {
		c.TicketsPerUser = DefaultTicketsPerUser
	}
	if c.MaxTickets == 0 {
		c.MaxTickets = DefaultMaxTickets
	}
	if c.Tickets == nil {
		t, err := NewMemoryTickets(c.Clock, c.TicketTTL, c.MaxTickets, c.TicketsPerUser)
		if err != nil {
			return err
		}
		c.Tickets = t
	}
	if c.PingInterval == 0 {
		c.PingInterval = 20 * time.Second
		if ttl := c.Policy.HeartbeatTTL; ttl > 0 {
			c.PingInterval = ttl / 3
		}
	}
	if c.PingTimeout == 0 {
		c.PingTimeout = min(c.PingInterval, 15*time.Second)
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 2 * time.Second
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = 5 * time.Second
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 15 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = time.Minute
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = 16 << 10
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 4 << 10
	}
	if c.ReadersPerMessage == 0 {
		c.ReadersPerMessage = 64
	}
	if c.FrameRate == 0 {
		c.FrameRate = 50
	}
	if c.FrameBurst == 0 {
		c.FrameBurst = 100
	}
	if c.SendQueue == 0 {
		c.SendQueue = 128
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 16 << 10
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = 4 * int64(c.MaxMessageBytes)
	}
	if c.MaxChatBytes == 0 {
		c.MaxChatBytes = 2000
	}
	if c.ChatHistory == 0 {
		c.ChatHistory = 100
	}
	if c.ChatHistoryBytes == 0 {
		c.ChatHistoryBytes = DefaultChatHistoryBytes
	}
	if c.SendQueueBytes == 0 {
		c.SendQueueBytes = DefaultSendQueueBytes
	}
	if c.MessageRate == 0 {
		c.MessageRate = 20
	}
	if c.MessageBurst == 0 {
		c.MessageBurst = 40
	}
	if c.TypingRate == 0 {
		c.TypingRate = 2
	}
	if c.TypingBurst == 0 {
		c.TypingBurst = 4
	}
	if c.TypingTTL == 0 {
		c.TypingTTL = 6 * time.Second
	}
	if c.RoomLinger == 0 {
		c.RoomLinger = c.Policy.Grace + time.Minute
	}
	switch {
	case c.PingInterval < 0, c.PingTimeout < 0, c.WriteTimeout < 0, c.CloseTimeout < 0, c.TicketTTL < 0,
		c.TypingTTL < 0, c.RoomLinger < 0,
		c.ReadHeaderTimeout < 0, c.ReadTimeout < 0, c.IdleTimeout < 0:
		return errors.New("server: durations must not be negative")
	case c.MaxHeaderBytes < 0 || c.MaxBodyBytes < 0 || c.ReadersPerMessage < 0 || c.TicketsPerUser < 0 || c.MaxTickets < 0:
		return errors.New("server: limits must not be negative")
	case c.MaxHeaderBytes < 8<<10:
		return fmt.Errorf("server: MaxHeaderBytes must be at least 8 KiB, got %d", c.MaxHeaderBytes)
	case c.SendQueue < 8:
		return fmt.Errorf("server: SendQueue must be at least 8, got %d", c.SendQueue)
	case c.MaxMessageBytes < 256:
		return fmt.Errorf("server: MaxMessageBytes must be at least 256, got %d", c.MaxMessageBytes)
	case c.MaxFrameBytes < int64(c.MaxMessageBytes):
		return errors.New("server: MaxFrameBytes must be at least MaxMessageBytes")
	case c.MaxChatBytes < 1 || c.MaxChatBytes > c.MaxMessageBytes:
		return errors.New("server: MaxChatBytes must be between 1 and MaxMessageBytes")
	case c.ChatHistory < 1:
		return errors.New("server: ChatHistory must be positive")
	case c.ReadersPerMessage > 1<<16:
		return errors.New("server: ReadersPerMessage must be at most 65536")
	case c.ChatHistoryBytes < maxEntryBytes(c.MaxChatBytes, c.ReadersPerMessage)+historyOverhead:
		return fmt.Errorf("server: ChatHistoryBytes must be at least %d (one chat message at its largest), got %d",
			maxEntryBytes(c.MaxChatBytes, c.ReadersPerMessage)+historyOverhead, c.ChatHistoryBytes)
	case c.SendQueueBytes < c.ChatHistoryBytes+64<<10:
		return fmt.Errorf("server: SendQueueBytes must be at least ChatHistoryBytes + 64 KiB (%d), got %d", c.ChatHistoryBytes+64<<10, c.SendQueueBytes)
	case c.MessageRate < 0 || c.MessageBurst < 1 || c.TypingRate < 0 || c.TypingBurst < 1 || c.FrameRate < 0 || c.FrameBurst < 1:
		return errors.New("server: rates must not be negative and bursts must be positive")
	case c.PseudonymKey != nil && len(c.PseudonymKey) < 16:
		return errors.New("server: PseudonymKey must be at least 16 bytes")
	}
	for _, h := range c.MetricsHosts {
		if err := checkMetricsHost(h); err != nil {
			return err
		}
	}
	for _, o := range c.AllowedOrigins {
		if err := checkOriginPattern(o); err != nil {
			return err
		}
	}
	return nil
}

// Defaults of Config.
const (
	// DefaultMaxMembers is the member cap of a room when the policy sets
	// none.
	DefaultMaxMembers = 64
	// DefaultTicketsPerUser is how many outstanding tickets one user may
	// hold.
	DefaultTicketsPerUser = 8
	// DefaultMaxTickets is how many tickets MemoryTickets remembers at
	// most.
	DefaultMaxTickets = 1 << 16
	// DefaultMaxTabs is the command's cap on one player's sockets
	// (lobby.Policy.MaxConnectionsPerPlayer): every socket costs the
	// server a goroutine, pings and heartbeat writes to the store, so
	// without a cap one user's tabs (or a script posing as them) can load
	// the process and its store as much as thousands of players. The
	// server package leaves a zero policy field uncapped; set it.
	DefaultMaxTabs = 4
	// DefaultChatHistoryBytes bounds a room's chat.history message.
	DefaultChatHistoryBytes = 256 << 10
	// DefaultSendQueueBytes bounds what may wait for one socket.
	DefaultSendQueueBytes = 1 << 20
)
