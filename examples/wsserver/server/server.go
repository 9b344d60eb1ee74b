package server

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lease"
	"github.com/lobbyhost/lobbyhost/lobby"
	lobbyprom "github.com/lobbyhost/lobbyhost/observe/prometheus"
	"github.com/lobbyhost/lobbyhost/store"
)

// commandTimeout bounds one lobby command issued on behalf of a socket.
const commandTimeout = 10 * time.Second

// httpHeaderSlop is how far net/http reads past http.Server.MaxHeaderBytes
// (its bufio slop) before it refuses a request's headers.
const httpHeaderSlop = 4096

// Server is the WebSocket lobby server. Create it with New, serve
// Handler with an http.Server, run Run for the lobby's background work, and
// call Shutdown before exiting.
type Server struct {
	cfg   Config
	clock clockwork.Clock
	log   *slog.Logger
	svc   *lobby.Service
	// rooms attaches every socket to its lobby: the lobby's changes reach
	// the socket (its client is the Sink), and its heartbeats and close
	// reach the lobby.
	rooms *lobby.Rooms
	// lobbyMetrics observes the Service and exports the lobby's metrics,
	// the grace advisor's proposal among them.
	lobbyMetrics *lobbyprom.Collector
	hub          *hub
	metrics      *metrics
	handler      http.Handler
	// st is Config.Store wrapped in the call counter of /metrics.
	st store.Store

	instance       string
	msgSeq         atomic.Uint64
	heartbeatEvery time.Duration

	running  atomic.Bool
	draining atomic.Bool
	conns    tracker
	// warm runs the lobby commands of socket goroutines (joins,
	// disconnects) on goroutines whose stacks have grown already.
	warm *warmPool
	// readBufs lends sockets the buffer a client message is read into,
	// for the time it is handled.
	readBufs sync.Pool
}

// tracker counts the sockets being served, so that Shutdown can wait for
// them; after close, add refuses new ones.
type tracker struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{}
}

func (t *tracker) add() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.n++
	return true
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.closed && t.n == 0 {
		close(t.idle)
	}
}

// close refuses further adds and returns a channel closed once none is
// left.
func (t *tracker) close() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		t.idle = make(chan struct{})
		if t.n == 0 {
			close(t.idle)
		}
	}
	return t.idle
}

// New returns a Server for cfg. It returns an error if cfg is invalid
// (see Config) or the lobby Service refuses its options.
func New(cfg Config) (*Server, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	var inst [5]byte
	if _, err := rand.Read(inst[:]); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		instance: strings.ToLower(base32.StdEncoding.EncodeToString(inst[:])),
	}
	s.lobbyMetrics = lobbyprom.New(
		lobbyprom.WithAdvisor(nil, graceAdviceQuantile),
		lobbyprom.WithAdvisorFeed(),
		lobbyprom.WithClassAdvice(func(q float64) []lobby.ClassAdvice { return s.svc.Advice(q) }, graceAdviceQuantile))
	s.warm = newWarmPool()
	s.readBufs.New = func() any {
		b := make([]byte, cfg.MaxMessageBytes+1)
		return &b
	}
	s.metrics = newMetrics(s)
	s.st = countStore(cfg.Store, s.metrics.storeCalls)
	s.hub = newHub(s)
	if len(cfg.AllowedOrigins) == 0 {
		cfg.Logger.Warn("no allowed origins: browsers cannot use this server (Config.AllowedOrigins)")
	}
	// A heartbeat is forwarded to the lobby at most once per period: a bit
	// less than the ping interval, so that every pong gets through, and at
	// most a third of the TTL, so that two lost heartbeats are survivable.
	period := cfg.PingInterval
	if ttl := cfg.Policy.HeartbeatTTL; ttl > 0 {
		period = min(period, ttl/3)
		if cfg.PingInterval >= ttl {
			cfg.Logger.Warn("pings are no more frequent than the heartbeat TTL: sockets stay alive only if clients send heartbeats",
				"ping_interval", cfg.PingInterval, "heartbeat_ttl", ttl)
		}
	}
	s.heartbeatEvery = period * 9 / 10
	opts := []lobby.Option{
		lobby.WithPolicy(cfg.Policy),
		lobby.WithClock(cfg.Clock),
		lobby.WithLogger(cfg.Logger),
		lobby.WithObserver(observer{s}),
		lobby.WithClientClass(s.hub.clientClass),
	}
	if cfg.PseudonymKey != nil {
		opts = append(opts, lobby.WithPseudonymKey(cfg.PseudonymKey))
	}
	svc, err := lobby.NewService(s.st, opts...)
	if err != nil {
		return nil, err
	}
	s.svc = svc
	if s.rooms, err = lobby.NewRooms(svc); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

// Service returns the lobby Service the server drives.
func (s *Server) Service() *lobby.Service { return s.svc }

// clientClassOf names the class of a client by its User-Agent, for the
// grace advice per class: browsers on phones and tablets reconnect after
// network switches and sleep, and may need a longer grace than desktops.
func clientClassOf(userAgent string) string {
	switch {
	case userAgent == "":
		return "unknown"
	case strings.Contains(userAgent, "Mobi") || strings.Contains(userAgent, "Android") || strings.Contains(userAgent, "iPhone"):
		return "mobile"
	}
	return "desktop"
}

// GraceAdviceByClass returns what the Service measured per client class:
// the grace covering 95% of the returns and the heartbeat gap covering 95%
// of the gaps (see lobby.Service.Advice). /metrics exports them as
// lobbyhost_class_grace_advice_seconds and
// lobbyhost_class_heartbeat_gap_seconds.
func (s *Server) GraceAdviceByClass() []lobby.ClassAdvice {
	return s.svc.Advice(graceAdviceQuantile)
}

// graceAdviceQuantile is the share of observed returns the grace advice on
// /metrics covers.
const graceAdviceQuantile = 0.95

// Counters returns the lobby counters the server exports on /metrics.
func (s *Server) Counters() lobby.CounterSnapshot { return s.lobbyMetrics.Counters() }

// GraceAdvice returns the grace advisor's proposal: the grace that would
// have covered 95% of the returns this process observed (see lease.Advisor).
// /metrics exports it as lobbyhost_grace_advice_seconds.
func (s *Server) GraceAdvice() lease.Advice {
	return s.lobbyMetrics.Advisor().Suggest(graceAdviceQuantile)
}

// Handler returns the server's HTTP handler: the ticket endpoint, the
// WebSocket endpoint (any path, with ?ticket=), the page, /healthz and
// /metrics. Serve it with the http.Server from HTTPServer, or one with
// timeouts at least as strict.
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPServer returns an http.Server for Handler with the Config's
// timeouts and header limit, so that a client cannot hold a connection by
// trickling headers or a body, or by idling. Upgraded sockets are exempt
// from the read timeout (they have pings and their own limits). Its error
// log goes to the Logger at debug level: net/http's messages name client
// addresses. Set Addr (or use Serve with a listener) and serve it.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		// net/http reads up to 4 KiB past its MaxHeaderBytes before it
		// refuses a request: ask it for that much less, so that headers
		// over Config.MaxHeaderBytes are refused (431).
		MaxHeaderBytes: s.cfg.MaxHeaderBytes - httpHeaderSlop,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// Run does the lobby's background work until ctx is done: expiries at their
// deadlines, and listening to the store's change notifications, through
// which the sockets learn of other processes' commits. It returns nil
// when ctx is done, or an error if it cannot start (the lobby Service is
// already running, the store's notifications cannot be set up).
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return lobby.ErrRunning
	}
	defer s.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := s.svc.Run(ctx); err != nil {
			errc <- err
			cancel()
		}
	}()
	go func() { defer wg.Done(); s.janitor(ctx) }()
	go func() { defer wg.Done(); s.reclaimer(ctx) }()
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// Shutdown drains the server: it stops accepting sockets, ends every
// connection this process's lobby session holds at once (lobby.Service.Drain:
// one transition per lobby, each member whose last socket it was turning
// reconnecting, its grace starting now, the host keeping its seat), then
// ends the session and closes every socket with status 1001 (going away),
// which sends clients straight to another process. A socket whose
// connection stores its heartbeat deadline (no session) is reported closed
// as it goes. Shutdown waits for the sockets' handlers to finish, or
// returns ctx's error when ctx ends first. Call it before cancelling Run's
// context, so that the closes are committed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	done := s.conns.close()
	if err := s.svc.Drain(ctx); err != nil {
		s.log.Warn("drain incomplete; the rest of this process's connections end with its session", "err", err)
	}
	for _, c := range s.hub.allClients() {
		c.kick(websocket.StatusGoingAway, "server shutting down", false)
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, c := range s.hub.allClients() {
			c.kick(websocket.StatusGoingAway, "server shutting down", true)
		}
		return ctx.Err()
	}
}

// janitor forgets rooms without sockets after RoomLinger, typing
// indicators that ran out, and expired tickets.
func (s *Server) janitor(ctx context.Context) {
	t := s.clock.NewTicker(min(s.cfg.RoomLinger, time.Minute))
	defer t.Stop()
	collector, _ := s.cfg.Tickets.(interface{ Collect(now time.Time) })
	tt := s.clock.NewTicker(min(s.cfg.TicketTTL, time.Minute))
	defer tt.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			s.hub.sweep(s.clock.Now(), s.cfg.RoomLinger)
		case <-tt.Chan():
			if collector != nil {
				collector.Collect(s.clock.Now())
			}
		}
	}
}

// reclaimer deletes lobbies whose last member was removed, so that a
// server that sees many short-lived rooms does not keep them all. The store
// keeps a floor for each, so a room created again continues above every
// revision it had. A lobby someone joined in the meantime is left alone
// (lobby.ErrNotEmpty).
func (s *Server) reclaimer(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-s.hub.empty:
			err := s.svc.Reclaim(ctx, id)
			if err != nil && !errors.Is(err, lobby.ErrNotEmpty) && ctx.Err() == nil {
				s.log.Warn("reclaim failed", "room", id, "err", err)
			}
		}
	}
}

func (s *Server) nextMessageID() string {
	return fmt.Sprintf("%s-%d", s.instance, s.msgSeq.Add(1))
}

// pseudonym logs a player's pseudonym (lobby.Service.Pseudonym), worked
// out only if the record is logged.
type pseudonym struct {
	svc  *lobby.Service
	user string
}

// LogValue implements slog.LogValuer.
func (p pseudonym) LogValue() slog.Value { return slog.StringValue(p.svc.Pseudonym(p.user)) }

// observer feeds the lobby metrics, queues lobbies this process's commits
// left empty for reclaiming, and passes everything on to Config.Observer.
// Sockets learn of commits through lobby.Rooms (watch.go), not here:
// the observer sees only this process's commands.
type observer struct{ s *Server }

func (o observer) Observe(ctx context.Context, ob lobby.Observation) {
	o.s.lobbyMetrics.Observe(ctx, ob)
	if ev := ob.Result.Events; ob.Err == nil && ob.Committed && len(ev) > 0 && len(ev[len(ev)-1].Members) == 0 {
		// Every commit is observed by the process that made it, so each
		// emptied lobby is queued once, somewhere.
		select {
		case o.s.hub.empty <- ob.Lobby:
		default:
		}
	}
	if o.s.cfg.Observer != nil {
		o.s.cfg.Observer.Observe(ctx, ob)
	}
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rooms/{roomId}/socket-ticket", s.handleTicket)
	mux.HandleFunc("OPTIONS /rooms/{roomId}/socket-ticket", s.handlePreflight)
	mux.HandleFunc("GET /rooms/{roomId}", s.handleSnapshot)
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	mux.Handle("GET /metrics", s.metricsForHosts(s.metrics.handler()))
	mux.HandleFunc("GET /{$}", s.handleIndex)
	mux.Handle("GET /static/", staticHandler())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isUpgrade(r) || isSocketPath(r.URL.EscapedPath()) {
			s.handleSocket(w, r)
			return
		}
		if r.ContentLength > s.cfg.MaxBodyBytes {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "request bodies are not read")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		mux.ServeHTTP(w, r)
	})
}

func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// isSocketPath reports the paths known clients open sockets on, so that a
// plain GET there is told to upgrade instead of getting a 404.
func isSocketPath(p string) bool {
	switch p {
	case "/ws", "/socket":
		return true
	}
	room, rest, ok := roomFromPath(p)
	return ok && room != "" && (rest == "socket" || rest == "ws")
}

// roomFromPath splits an escaped path of the form /rooms/{roomId}[/rest]
// and returns the unescaped room ID and the rest.
func roomFromPath(escaped string) (room, rest string, ok bool) {
	after, found := strings.CutPrefix(escaped, "/rooms/")
	if !found {
		return "", "", false
	}
	seg, rest, _ := strings.Cut(after, "/")
	room, err := url.PathUnescape(seg)
	if err != nil {
		return seg, rest, true // an undecodable room never matches a ticket
	}
	return room, rest, true
}

type httpError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, httpError{Error: code, Message: msg})
}

// authenticate runs the Authenticator and checks the user ID; on failure it
// writes the response and returns false.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	user, err := s.cfg.Authenticator.Authenticate(r)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		writeError(w, http.StatusUnauthorized, "unauthenticated", "no authenticated user")
		return "", false
	case err != nil:
		s.log.Error("authenticator failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "authentication failed")
		return "", false
	case lobby.ValidateID(user) != nil:
		writeError(w, http.StatusBadRequest, "bad_user", "user ID must be 1 to 128 bytes of UTF-8")
		return "", false
	}
	return user, true
}

func (s *Server) pathRoom(w http.ResponseWriter, r *http.Request) (string, bool) {
	room := r.PathValue("roomId")
	if lobby.ValidateID(room) != nil {
		writeError(w, http.StatusBadRequest, "bad_room", "room ID must be 1 to 128 bytes of UTF-8")
		return "", false
	}
	return room, true
}

type ticketResponse struct {
	Ticket      string `json:"ticket"`
	RoomID      string `json:"roomId"`
	UserID      string `json:"userId"`
	ExpiresAt   string `json:"expiresAt"`
	ExpiresInMs int64  `json:"expiresInMs"`
}

func (s *Server) handleTicket(w http.ResponseWriter, r *http.Request) {
	if !s.checkOrigin(w, r) {
		return
	}
	user, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	room, ok := s.pathRoom(w, r)
	if !ok {
		return
	}
	if s.draining.Load() {
		writeError(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
		return
	}
	t, err := s.cfg.Tickets.Issue(r.Context(), room, user)
	switch {
	case errors.Is(err, ErrUserTickets):
		writeError(w, http.StatusTooManyRequests, "too_many_tickets", "too many unused tickets: use one or let them expire")
		return
	case errors.Is(err, ErrTooManyTickets):
		writeError(w, http.StatusServiceUnavailable, "too_many_tickets", "try again later")
		return
	case err != nil:
		s.log.Error("ticket issue failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "cannot issue a ticket")
		return
	}
	s.metrics.ticketsIssued.Inc()
	writeJSON(w, http.StatusCreated, ticketResponse{
		Ticket:      t.Value,
		RoomID:      t.Room,
		UserID:      t.User,
		ExpiresAt:   formatTime(t.Expires),
		ExpiresInMs: t.Expires.Sub(s.clock.Now()).Milliseconds(),
	})
}

// checkOriginPattern reports whether p is usable in Config.AllowedOrigins.
func checkOriginPattern(p string) error {
	scheme, host, ok := strings.Cut(p, "://")
	if !ok || scheme == "" || host == "" || strings.ContainsAny(host, "/?#") {
		return fmt.Errorf("server: AllowedOrigins entry %q is not scheme://host[:port]", p)
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("server: AllowedOrigins entry %q: %w", p, err)
	}
	return nil
}

// originAllowed reports whether a browser origin is in
// Config.AllowedOrigins. The request's Host plays no part: a page on a
// DNS-rebound name sends its own name in both.
func (s *Server) originAllowed(origin string) bool {
	o := strings.ToLower(origin)
	for _, p := range s.cfg.AllowedOrigins {
		if ok, _ := path.Match(strings.ToLower(p), o); ok {
			return true
		}
	}
	return false
}

// checkOrigin refuses (403) a request whose Origin header is not allowed,
// and answers CORS for an allowed one. Requests without an Origin header
// (non-browser clients, same-origin GETs) pass.
func (s *Server) checkOrigin(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if !s.originAllowed(origin) {
		s.metrics.originsRefused.Inc()
		writeError(w, http.StatusForbidden, "origin_forbidden", "this origin may not use the server")
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	return true
}

func (s *Server) handlePreflight(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Origin") == "" {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	if !s.checkOrigin(w, r) {
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "POST")
	h.Set("Access-Control-Allow-Headers", "Content-Type, "+DemoUserHeader+", Authorization")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	if !s.checkOrigin(w, r) {
		return
	}
	if _, ok := s.authenticate(w, r); !ok {
		return
	}
	room, ok := s.pathRoom(w, r)
	if !ok {
		return
	}
	snap, err := s.svc.Snapshot(r.Context(), room)
	if err != nil {
		s.log.Error("snapshot failed", "room", room, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "cannot read the lobby")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(encodeSnapshot(&snap, s.clock.Now()))
}

func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	switch {
	case s.draining.Load():
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting_down"})
	case !s.running.Load():
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_running"})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

// refuseUpgrade answers a socket request that will not be attached.
func (s *Server) refuseUpgrade(w http.ResponseWriter, status int, code, msg string) {
	s.metrics.upgradesRefused.WithLabelValues(code).Inc()
	s.log.Info("socket refused", "reason", code)
	if status == http.StatusUpgradeRequired {
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
	}
	writeError(w, status, code, msg)
}

func (s *Server) handleSocket(w http.ResponseWriter, r *http.Request) {
	if !s.conns.add() {
		s.refuseUpgrade(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
		return
	}
	// Once upgraded, the socket is served on a goroutine of its own and
	// this handler returns (handedOff), so that net/http's goroutine, with
	// the stack the request and the join grew, and its connection's
	// buffers and request are freed: only what the socket needs stays.
	handedOff := false
	defer func() {
		if !handedOff {
			s.conns.done()
		}
	}()
	if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin) {
		s.metrics.originsRefused.Inc()
		s.refuseUpgrade(w, http.StatusForbidden, "origin_forbidden", "this origin may not open sockets")
		return
	}
	q := r.URL.Query()
	value := q.Get("ticket")
	if value == "" {
		s.refuseUpgrade(w, http.StatusUnauthorized, "missing_ticket", "a ticket is required: POST /rooms/{roomId}/socket-ticket")
		return
	}
	if r.Method != http.MethodGet || !isUpgrade(r) {
		s.refuseUpgrade(w, http.StatusUpgradeRequired, "upgrade_required", "this is a WebSocket endpoint")
		return
	}
	t, err := s.cfg.Tickets.Redeem(r.Context(), value)
	switch {
	case errors.Is(err, ErrTicketUsed):
		s.refuseUpgrade(w, http.StatusUnauthorized, "ticket_used", "the ticket was already used")
		return
	case errors.Is(err, ErrTicketExpired):
		s.refuseUpgrade(w, http.StatusUnauthorized, "ticket_expired", "the ticket expired")
		return
	case errors.Is(err, ErrTicketUnknown):
		s.refuseUpgrade(w, http.StatusUnauthorized, "ticket_unknown", "unknown ticket")
		return
	case errors.Is(err, ErrTicketSignature):
		s.refuseUpgrade(w, http.StatusUnauthorized, "ticket_forged", "the ticket's signature does not match")
		return
	case err != nil:
		s.log.Error("ticket redeem failed", "err", err)
		s.refuseUpgrade(w, http.StatusInternalServerError, "internal", "cannot check the ticket")
		return
	}
	if room, _, ok := roomFromPath(r.URL.EscapedPath()); ok && room != t.Room {
		s.refuseUpgrade(w, http.StatusForbidden, "wrong_room", "the ticket is for another room")
		return
	}
	for _, k := range []string{"roomId", "room"} {
		if v := q.Get(k); v != "" && v != t.Room {
			s.refuseUpgrade(w, http.StatusForbidden, "wrong_room", "the ticket is for another room")
			return
		}
	}

	// Join first, answer 101 second: a client whose upgrade completed is a
	// member, so the order in which upgrades complete is the order of the
	// joins (and of succession). Accept checks the handshake before it
	// answers; the join runs only once it is about to answer 101. The
	// join attaches the socket to the lobby (lobby.Rooms): the lobby as
	// the join left it is the socket's first state, and every change
	// after it reaches the socket in order.
	c := newClient(s, t.Room, t.User)
	c.class = clientClassOf(r.UserAgent())
	defer func() {
		if !handedOff {
			c.stop()
		}
	}()
	c.room = s.hub.attach(t.Room, c)
	var joinErr error
	uw := &upgradeWriter{
		ResponseWriter: w,
		beforeUpgrade: func() {
			joinErr = s.join(c)
		},
		meter: func(conn net.Conn, buffered []byte) *frameMeter {
			return newFrameMeter(conn, buffered, newLimiter(s.clock, s.cfg.FrameRate, s.cfg.FrameBurst), s.metrics.framesThrottled.Inc)
		},
		writeTimeout: s.cfg.WriteTimeout,
	}
	// The origin was checked above, against AllowedOrigins alone.
	conn, err := websocket.Accept(uw, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		// Accept answered the request (400 for a bad handshake), or the
		// connection failed while switching protocols.
		s.metrics.upgradesRefused.WithLabelValues("handshake").Inc()
		s.log.Info("socket refused", "reason", "handshake")
		c.kick(websocket.StatusAbnormalClosure, "upgrade failed", true)
		c.room.detach(c, s.clock.Now())
		if att := c.attachment(); att != nil {
			// Undo the join: this generation never had a socket.
			ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
			_, err := att.Disconnect(ctx)
			cancel()
			if err != nil && !errors.Is(err, lobby.ErrDetached) {
				s.log.Warn("disconnect after a failed upgrade failed", "room", t.Room, "player", s.svc.Pseudonym(t.User), "gen", att.Gen(), "err", err)
			}
		}
		return
	}
	c.mu.Lock()
	c.conn, c.raw, c.out = conn, uw.conn, uw.out
	c.mu.Unlock()
	if !s.attachSocket(c, joinErr) {
		return
	}
	handedOff = true
	go func() {
		defer s.conns.done()
		defer c.stop()
		s.serve(c)
	}()
}

// join joins c's user to its lobby through the Server's Rooms, with c as
// the Sink: its Start records the Attachment and queues the socket's first
// lobby.state before any later change.
func (s *Server) join(c *client) error {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	var err error
	s.warm.run(func() { _, _, err = s.rooms.Join(ctx, c.roomID, c.user, nil, c) })
	if err != nil {
		return err
	}
	c.setLastBeat(s.clock.Now())
	return nil
}

// attachSocket starts an upgraded socket: its first state, the welcome,
// the chat history and typing, and its writer. It runs on the handler's
// goroutine, so that the goroutine serve runs on never grows the stack
// this takes. joinErr is the join's error: the socket is then told why and
// closed, and attachSocket returns false.
func (s *Server) attachSocket(c *client, joinErr error) bool {
	conn := c.conn
	conn.SetReadLimit(s.cfg.MaxFrameBytes)
	pseudo := pseudonym{s.svc, c.user}
	if joinErr != nil {
		code, status, reason := CodeInternal, websocket.StatusCode(websocket.StatusInternalError), "cannot join the lobby"
		switch {
		case errors.Is(joinErr, lobby.ErrLobbyFull):
			code, status, reason = CodeLobbyFull, CloseLobbyFull, "lobby full"
		case errors.Is(joinErr, lobby.ErrLocked):
			code, status, reason = CodeLobbyLocked, CloseLobbyLocked, "lobby locked"
		case errors.Is(joinErr, lobby.ErrBlocked):
			code, status, reason = CodeBlocked, CloseBlocked, "blocked by the host"
		default:
			s.log.Error("join failed", "room", c.roomID, "player", pseudo, "err", joinErr)
		}
		c.enqueue(encodeError(code, reason, ""))
		c.kick(status, reason, false)
		c.startServing()
		<-c.writerDone
		c.room.detach(c, s.clock.Now())
		return false
	}
	att := c.attachment()
	c.enqueue(mustJSON(welcomeMsg{
		Type:            TypeWelcome,
		RoomID:          c.roomID,
		UserID:          c.user,
		Connection:      att.Gen(),
		HeartbeatMs:     s.heartbeatEvery.Milliseconds(),
		GraceMs:         s.cfg.Policy.Grace.Milliseconds(),
		MaxMessageBytes: s.cfg.MaxMessageBytes,
		MaxChatBytes:    s.cfg.MaxChatBytes,
	}))
	c.room.ready(c, s.clock.Now())
	s.metrics.sockets.Inc()
	s.log.Info("socket attached", "room", c.roomID, "player", pseudo, "gen", att.Gen())

	c.startServing()
	return true
}

// serve reads an attached socket until it closes, then reports the close
// to the lobby and detaches the socket.
func (s *Server) serve(c *client) {
	att := c.attachment()
	gen := att.Gen()
	readErr := c.readLoop()

	// The socket is gone (a close frame, an EOF, a reset, a failed read)
	// or closing. The lobby learns of it at once: the writer's flush, the
	// close handshake and a ping waiting for its pong proceed meanwhile
	// and never delay the member's turn to reconnecting (and the grace).
	// A connection whose client is gone gets none of them: it is closed
	// here once the lobby knows (readEnded, drop).
	own := c.readEnded(readErr)
	c.pingCancel()
	pseudo := pseudonym{s.svc, c.user}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	var dres lobby.Result
	var err error
	s.warm.run(func() { dres, err = att.Disconnect(ctx) })
	cancel()
	if own {
		c.conn.CloseNow()
		close(c.writerDone)
	}
	<-c.writerDone
	c.room.detach(c, s.clock.Now())
	s.metrics.sockets.Dec()
	code, reason, _ := c.closeStatus()
	outcome := dres.Outcome.String()
	if errors.Is(err, lobby.ErrDetached) {
		// A commit ended the connection already (the close code says
		// why): there is nothing to report.
		err, outcome = nil, "ended"
	}
	if err != nil {
		s.log.Warn("disconnect failed", "room", c.roomID, "player", pseudo, "gen", gen, "err", err)
		return
	}
	if peer := websocket.CloseStatus(readErr); peer != -1 {
		code, reason = peer, "closed by the client"
	}
	s.log.Info("socket detached", "room", c.roomID, "player", pseudo, "gen", gen,
		"close_code", int(code), "close_reason", reason, "outcome", outcome)
}
