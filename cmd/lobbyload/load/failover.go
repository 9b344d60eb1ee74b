package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Drop is a way the tool ends a host's socket.
type Drop string

// The drop styles. Each is timed from the instant just before the tool's
// close call, so a server that is slow to answer a close handshake is not
// credited with the time its answer took.
const (
	// DropHandshake is a WebSocket close handshake (status 1000); the close
	// call returns once the server's close frame arrived.
	DropHandshake Drop = "handshake"
	// DropFIN closes the TCP connection without a close frame: the kernel
	// sends FIN, as when a client process ends.
	DropFIN Drop = "fin"
	// DropRST resets the TCP connection (linger 0) without a close frame:
	// the kernel sends RST, as when a network path fails.
	DropRST Drop = "rst"
)

// ErrUnknownDrop is returned for a drop style other than the three above.
var ErrUnknownDrop = errors.New("unknown drop style (have: handshake, fin, rst)")

// ParseDrops reads a comma-separated list of drop styles; it returns
// ErrUnknownDrop (wrapped) for a word that is not one.
func ParseDrops(s string) ([]Drop, error) {
	var out []Drop
	for _, f := range strings.Split(s, ",") {
		d := Drop(strings.TrimSpace(f))
		switch {
		case d == "":
		case d.valid():
			out = append(out, d)
		default:
			return nil, fmt.Errorf("%q: %w", d, ErrUnknownDrop)
		}
	}
	return out, nil
}

func (d Drop) valid() bool { return d == DropHandshake || d == DropFIN || d == DropRST }

// FailoverConfig configures the failover scenario.
type FailoverConfig struct {
	// Server is the base URL (http://host:port) of the server.
	Server string
	// Rooms and Players per room (defaults 2000 and 4).
	Rooms, Players int
	// Concurrency bounds the joins in flight (default 64).
	Concurrency int
	// CloseConcurrency bounds the host closes in flight (default: as
	// many as Concurrency). More makes a harsher burst: the server must
	// absorb the closes faster than it can commit them, and the delay of
	// the last rooms grows with its backlog.
	CloseConcurrency int
	// Burst drops every host at once: as many closes in flight as rooms,
	// all released together by one barrier once every closing goroutine is
	// ready (CloseConcurrency is ignored). It models a network blip that
	// drops many hosts at the same instant.
	Burst bool
	// Drops are the drop styles, taken by the rooms in turn (room i gets
	// Drops[i % len(Drops)]). Default: handshake and rst, or all three with
	// Burst.
	Drops []Drop
	// Grace is the server's grace: failover delays are measured from a
	// host's close plus Grace. Required.
	Grace time.Duration
	// Timeout is how long after its host's close a room may take to fail
	// over before it counts as never failing over (default Grace + 10s).
	Timeout time.Duration
	// PIDs of the server processes, for CPU and memory figures (optional).
	PIDs []int
	// Prefix starts every room ID (default: "fo-" and a random number).
	Prefix string
	// Label names the server in the report and the table (optional).
	Label string
	// Idle, if positive, holds every socket open and heartbeating this
	// long once the rooms are full, before the hosts drop, and reports the
	// server's store calls per second meanwhile (IdleStoreCalls).
	Idle time.Duration
	// Logf, if set, receives progress lines.
	Logf func(format string, args ...any)
}

func (cfg *FailoverConfig) defaults() error {
	if cfg.Server == "" || cfg.Grace <= 0 {
		return errors.New("failover needs a server and the server's grace")
	}
	if cfg.Rooms <= 0 {
		cfg.Rooms = 2000
	}
	if cfg.Players <= 1 {
		cfg.Players = 4
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.CloseConcurrency <= 0 {
		cfg.CloseConcurrency = cfg.Concurrency
	}
	if cfg.Burst {
		cfg.CloseConcurrency = cfg.Rooms
	}
	for _, d := range cfg.Drops {
		if !d.valid() {
			return fmt.Errorf("%q: %w", d, ErrUnknownDrop)
		}
	}
	if len(cfg.Drops) == 0 {
		cfg.Drops = []Drop{DropHandshake, DropRST}
		if cfg.Burst {
			cfg.Drops = []Drop{DropHandshake, DropFIN, DropRST}
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = cfg.Grace + 10*time.Second
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "fo-" + strconv.FormatUint(rand.Uint64()%1_000_000_000, 36) + "-"
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return nil
}

// fullState is the part of a lobby.state the failover scenario reads.
type fullState struct {
	Type      string        `json:"type"`
	Version   uint64        `json:"version"`
	HostID    *string       `json:"hostId"`
	PlayerIDs []string      `json:"playerIds"`
	Members   []memberState `json:"members"`
}

type memberState struct {
	UserID  string `json:"userId"`
	JoinSeq uint64 `json:"joinSeq"`
	Status  string `json:"status"`
}

// online reports whether user is a member of s with status "online".
func (s fullState) online(user string) bool {
	for _, m := range s.Members {
		if m.UserID == user {
			return m.Status == "online"
		}
	}
	return false
}

func (s fullState) host() string {
	if s.HostID == nil {
		return ""
	}
	return *s.HostID
}

// parseFullState returns the lobby.state in a message, if it is one.
func parseFullState(data []byte) (fullState, bool) {
	var s fullState
	if json.Unmarshal(data, &s) != nil || s.Type != "lobby.state" {
		return fullState{}, false
	}
	return s, true
}

// successor is the member of s, other than gone, with the lowest joinSeq.
func successor(s fullState, gone string) string {
	best, seq := "", uint64(0)
	for _, m := range s.Members {
		if m.UserID != gone && (best == "" || m.JoinSeq < seq) {
			best, seq = m.UserID, m.JoinSeq
		}
	}
	return best
}

// foRoom is one room of the scenario. mu guards everything below it.
type foRoom struct {
	id      string
	drop    Drop // how its host is dropped
	players []*foPlayer

	mu        sync.Mutex
	broken    bool // a join failed, or no full membership or host: left out of the failover
	latest    fullState
	oldHost   string // set just before the host's close
	successor string
	closedAt  time.Time
	failedAt  time.Time // first arrival of a new host on a remaining socket
	// noticedAt: first arrival, on a remaining socket, of a state showing
	// the old host no longer online (the server's disconnect commit).
	noticedAt  time.Time
	newHost    string
	failedOver chan struct{}
	seen       map[*foPlayer]uint64 // newest revision each socket received
}

// observe notes a state that arrived at p; it detects the failover.
func (r *foRoom) observe(p *foPlayer, s fullState, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.Version > r.latest.Version {
		r.latest = s
	}
	r.seen[p] = s.Version
	h := s.host()
	if r.oldHost == "" || p.user == r.oldHost {
		return
	}
	if r.noticedAt.IsZero() && !s.online(r.oldHost) {
		r.noticedAt = at
	}
	if r.failedAt.IsZero() && h != "" && h != r.oldHost {
		r.failedAt, r.newHost = at, h
		close(r.failedOver)
	}
}

// foPlayer is one socket. Its reader goroutine owns the fields below done
// until done is closed.
type foPlayer struct {
	room *foRoom
	user string

	joined              bool // conn is open (set before the reader starts)
	conn                *websocket.Conn
	raw                 *net.TCPConn
	joinLat, upgradeLat time.Duration
	joinedAt            time.Time
	full                chan struct{} // closed once it saw every player of the room
	done                chan struct{}

	last       uint64
	dups, ooo  int
	endedAt    time.Time // when its read failed (the socket ended)
	endErr     error
	lost       bool              // ended before the tool's teardown, not being a closed host (set by tally)
	hostAt     map[uint64]string // host by version received
	final      fullState
	fullClosed bool
}

// read reads the socket until it ends, checking revision order. A welcome
// that asks for heartbeats (heartbeatMs > 0) starts the socket's pinger,
// so the server does the per-socket heartbeat work it does for any client.
func (p *foPlayer) read(players int) {
	defer close(p.done)
	pinging := false
	for {
		_, data, err := p.conn.Read(context.Background())
		if err != nil {
			p.endedAt, p.endErr = time.Now(), err
			return
		}
		now := time.Now()
		s, ok := parseFullState(data)
		if !ok {
			if every := welcomeHeartbeat(data); every > 0 && !pinging {
				pinging = true
				go p.ping(every)
			}
			continue
		}
		switch {
		case s.Version == p.last:
			p.dups++
			continue
		case s.Version < p.last:
			p.ooo++
			continue
		}
		p.last, p.final = s.Version, s
		p.hostAt[s.Version] = s.host()
		if !p.fullClosed && len(s.PlayerIDs) >= players {
			p.fullClosed = true
			close(p.full)
		}
		p.room.observe(p, s, now)
	}
}

// welcomeHeartbeat returns the heartbeat interval a welcome message asks
// for, or 0 for any other message or one that asks for none.
func welcomeHeartbeat(data []byte) time.Duration {
	var w struct {
		Type        string `json:"type"`
		HeartbeatMs int64  `json:"heartbeatMs"`
	}
	if json.Unmarshal(data, &w) != nil || w.Type != "welcome" || w.HeartbeatMs <= 0 {
		return 0
	}
	return time.Duration(w.HeartbeatMs) * time.Millisecond
}

// pingMsg is the app-level heartbeat; the server answers {"type":"pong"}.
const pingMsg = `{"type":"ping"}`

// ping sends pingMsg every interval until the socket's reader ends or a
// write fails (the socket was closed).
func (p *foPlayer) ping(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		err := p.conn.Write(ctx, websocket.MessageText, []byte(pingMsg))
		cancel()
		if err != nil {
			return
		}
	}
}

// slotKey is the context key under which rawDialer's transport leaves the
// TCP connection it dialled.
type slotKey struct{}

// rawDialer opens sockets and keeps each one's TCP connection, so that a
// socket can be dropped without a close frame.
type rawDialer struct{ http *http.Client }

func newRawDialer() rawDialer {
	d := &net.Dialer{Timeout: 30 * time.Second}
	tr := &http.Transport{
		DisableKeepAlives: true, // every upgrade on a new connection of its own
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if slot, ok := ctx.Value(slotKey{}).(*net.Conn); ok && err == nil {
				*slot = c
			}
			return c, err
		},
	}
	return rawDialer{&http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// dial opens a socket with a ticket and returns it with its TCP connection.
func (d rawDialer) dial(ctx context.Context, base, ticket string) (*websocket.Conn, *net.TCPConn, error) {
	var raw net.Conn
	ctx = context.WithValue(ctx, slotKey{}, &raw)
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws?ticket="+url.QueryEscape(ticket),
		&websocket.DialOptions{HTTPClient: d.http})
	if err != nil {
		return nil, nil, err
	}
	conn.SetReadLimit(1 << 20)
	tcp, ok := raw.(*net.TCPConn)
	if !ok {
		conn.CloseNow()
		return nil, nil, fmt.Errorf("dial: no TCP connection captured (%T)", raw)
	}
	return conn, tcp, nil
}

// Failover runs the failover scenario and returns its report.
func Failover(ctx context.Context, c *Client, cfg FailoverConfig) (*FailoverReport, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	scenario := "failover"
	if cfg.Burst {
		scenario = "burst"
	}
	rep := &FailoverReport{Scenario: scenario, Drops: cfg.Drops, Label: cfg.Label, Server: cfg.Server, Rooms: cfg.Rooms,
		PlayersPerRoom: cfg.Players, Concurrency: cfg.Concurrency, CloseConcurrency: cfg.CloseConcurrency,
		GraceMs: ms(cfg.Grace), TimeoutMs: ms(cfg.Timeout)}
	rooms := makeRooms(cfg)
	defer func() {
		for _, r := range rooms {
			for _, p := range r.players {
				if p.conn != nil {
					p.conn.CloseNow()
				}
			}
		}
	}()
	start := time.Now()
	var res *resourceProbe
	if len(cfg.PIDs) > 0 {
		res = startProbe(cfg.PIDs, start)
	}

	errs := &errorSample{}
	phase := startPhase(res)
	rep.JoinSeconds = joinAll(ctx, c, newRawDialer(), cfg, rooms, errs)
	cfg.Logf("joins: %d rooms × %d players in %.1fs", cfg.Rooms, cfg.Players, rep.JoinSeconds)
	awaitFullMembership(ctx, rooms, errs)
	rep.JoinPhase = phase.end()
	if cfg.Idle > 0 {
		idle(ctx, c, cfg, rep, errs)
	}
	phase = startPhase(res)

	rep.CloseSeconds = closeHosts(ctx, cfg, rooms, errs)
	awaitFailover(ctx, cfg, rooms)
	rep.Unsettled = settle(ctx, rooms)
	rep.FailoverPhase = phase.end()
	if res != nil {
		rep.Resources = res.finish()
	}
	teardown := time.Now()
	for _, r := range rooms {
		for _, p := range r.players {
			if p.conn != nil {
				p.conn.CloseNow()
				<-p.done
			}
		}
	}
	tally(rep, cfg, rooms, teardown)
	rep.Errors, rep.ErrorCount = errs.list, errs.n
	if res != nil && rep.Players > 0 {
		rep.Resources.perPlayer(rep.Players)
	}
	return rep, nil
}

// makeRooms lays out the rooms: they take the drop styles in turn.
func makeRooms(cfg FailoverConfig) []*foRoom {
	rooms := make([]*foRoom, cfg.Rooms)
	for i := range rooms {
		r := &foRoom{id: cfg.Prefix + strconv.Itoa(i), drop: cfg.Drops[i%len(cfg.Drops)], failedOver: make(chan struct{}),
			seen: map[*foPlayer]uint64{}}
		for j := range cfg.Players {
			r.players = append(r.players, &foPlayer{room: r, user: fmt.Sprintf("p%d.%d", i, j),
				full: make(chan struct{}), done: make(chan struct{}), hostAt: map[uint64]string{}})
		}
		rooms[i] = r
	}
	return rooms
}

// joinAll joins every player, room after room, with cfg.Concurrency joins in
// flight, and returns the join phase's wall time in seconds.
func joinAll(ctx context.Context, c *Client, d rawDialer, cfg FailoverConfig, rooms []*foRoom, errs *errorSample) float64 {
	jobs := make(chan *foPlayer)
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Go(func() {
			for p := range jobs {
				if err := joinOne(ctx, c, d, cfg, p); err != nil {
					errs.add(err)
					p.room.mu.Lock()
					p.room.broken = true
					p.room.mu.Unlock()
				}
			}
		})
	}
	start := time.Now()
	for _, r := range rooms {
		for _, p := range r.players {
			jobs <- p
		}
	}
	close(jobs)
	wg.Wait()
	return time.Since(start).Seconds()
}

// joinOne gets a ticket and opens p's socket, timing both.
func joinOne(ctx context.Context, c *Client, d rawDialer, cfg FailoverConfig, p *foPlayer) error {
	t0 := time.Now()
	t, err := c.Ticket(ctx, cfg.Server, p.room.id, p.user)
	if err != nil {
		return err
	}
	t1 := time.Now()
	conn, raw, err := d.dial(ctx, cfg.Server, t)
	if err != nil {
		return fmt.Errorf("join %s in %s: %w", p.user, p.room.id, err)
	}
	t2 := time.Now()
	p.conn, p.raw, p.joined = conn, raw, true
	p.joinLat, p.upgradeLat, p.joinedAt = t2.Sub(t0), t2.Sub(t1), t2
	go p.read(cfg.Players)
	return nil
}

// fullMembershipWait bounds the wait for every socket to see its room full.
const fullMembershipWait = 60 * time.Second

// awaitFullMembership waits until every socket of every intact room has
// seen the room's full membership; rooms that do not get there are broken.
func awaitFullMembership(ctx context.Context, rooms []*foRoom, errs *errorSample) {
	deadline := time.NewTimer(fullMembershipWait)
	defer deadline.Stop()
	for _, r := range rooms {
		if r.isBroken() {
			continue
		}
		for _, p := range r.players {
			select {
			case <-p.full:
				continue
			case <-p.done:
			case <-deadline.C:
			case <-ctx.Done():
			}
			errs.add(fmt.Errorf("%s in %s never saw its room's %d players", p.user, r.id, len(r.players)))
			r.mu.Lock()
			r.broken = true
			r.mu.Unlock()
			break
		}
	}
}

func (r *foRoom) isBroken() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.broken
}

// closeHosts closes the host of every intact room, cfg.CloseConcurrency
// at a time: every closing goroutine is started first and all are released
// together by one barrier, so with as many as rooms every close is issued at
// once. It returns the seconds from the barrier to the last close's return.
func closeHosts(ctx context.Context, cfg FailoverConfig, rooms []*foRoom, errs *errorSample) float64 {
	type job struct {
		r *foRoom
		p *foPlayer
	}
	var jobs []job
	for _, r := range rooms {
		if p := r.markClosing(); p != nil {
			jobs = append(jobs, job{r, p})
		}
	}
	queue := make(chan job, len(jobs))
	for _, j := range jobs {
		queue <- j
	}
	close(queue)
	barrier := make(chan struct{})
	var ready, wg sync.WaitGroup
	workers := min(cfg.CloseConcurrency, len(jobs))
	ready.Add(workers)
	for range workers {
		wg.Go(func() {
			ready.Done()
			<-barrier
			for j := range queue {
				if err := closeHost(ctx, j.r, j.p); err != nil {
					errs.add(err)
				}
			}
		})
	}
	ready.Wait()
	start := time.Now()
	close(barrier)
	wg.Wait()
	return time.Since(start).Seconds()
}

// markClosing picks the room's host (hostId of the newest state) and
// records it and the expected successor. It returns nil for a broken room
// or one without a host.
func (r *foRoom) markClosing() *foPlayer {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.latest.host()
	if r.broken || h == "" {
		r.broken = true
		return nil
	}
	for _, p := range r.players {
		if p.user == h {
			r.oldHost, r.successor = h, successor(r.latest, h)
			return p
		}
	}
	r.broken = true
	return nil
}

// closeHost stamps the room's close time, then closes p's socket the
// room's way: a close handshake, or a TCP close (FIN) or reset (RST)
// without a close frame. The stamp comes before the close call, so every
// delay counts from the client's close, never from the server's answer.
func closeHost(ctx context.Context, r *foRoom, p *foPlayer) error {
	r.mu.Lock()
	r.closedAt = time.Now()
	r.mu.Unlock()
	switch r.drop {
	case DropRST, DropFIN:
		if r.drop == DropRST {
			if err := p.raw.SetLinger(0); err != nil {
				return err
			}
		}
		err := p.raw.Close()
		p.conn.CloseNow()
		return err
	}
	err := p.conn.Close(websocket.StatusNormalClosure, "host leaves")
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("close handshake of %s in %s: %w", p.user, r.id, err)
	}
	return nil
}

// awaitFailover waits until every closed room has a new host on a remaining
// socket, or until cfg.Timeout after its close.
func awaitFailover(ctx context.Context, cfg FailoverConfig, rooms []*foRoom) {
	for _, r := range rooms {
		r.mu.Lock()
		closed, at := r.oldHost != "", r.closedAt
		r.mu.Unlock()
		if !closed {
			continue
		}
		wait := time.NewTimer(time.Until(at.Add(cfg.Timeout)))
		select {
		case <-r.failedOver:
		case <-wait.C:
		case <-ctx.Done():
		}
		wait.Stop()
	}
}

// settleWait bounds the wait, after the failovers, for every remaining
// socket to receive its room's newest revision.
const settleWait = 5 * time.Second

// settle waits until the remaining sockets of every room have the newest
// revision any of them has, so that their final states can be compared.
// It returns how many sockets were still behind at settleWait.
func settle(ctx context.Context, rooms []*foRoom) int {
	behind := 0
	deadline := time.Now().Add(settleWait)
	for _, r := range rooms {
		r.mu.Lock()
		v, oldHost := r.latest.Version, r.oldHost
		r.mu.Unlock()
		for _, p := range r.players {
			if !p.joined || p.user == oldHost {
				continue
			}
			for p.lastSeenBelow(v) && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond) // polling the reader
			}
			if p.lastSeenBelow(v) {
				behind++
			}
		}
	}
	return behind
}

// lastSeenBelow reports whether p's newest revision is still below v
// (false once its reader has ended).
func (p *foPlayer) lastSeenBelow(v uint64) bool {
	select {
	case <-p.done:
		return false
	default:
	}
	p.room.mu.Lock()
	defer p.room.mu.Unlock()
	return p.room.seen[p] < v
}

// errorSample counts errors and keeps the first few.
type errorSample struct {
	mu   sync.Mutex
	n    int
	list []string
}

func (e *errorSample) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if len(e.list) < 10 {
		e.list = append(e.list, err.Error())
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// sortedMs returns d in milliseconds, ascending.
func sortedMs(d []time.Duration) []float64 {
	out := make([]float64, len(d))
	for i, x := range d {
		out[i] = ms(x)
	}
	sort.Float64s(out)
	return out
}
